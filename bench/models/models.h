/* The zoo's models: one create function per architecture (bench/models/<name>.c). */
#ifndef BENCH_MODELS_H
#define BENCH_MODELS_H
#include "bench/layers.h"

latch_status bench_mlp_create(latch_runtime *rt, const bench_config *config, bench_instance *out);
latch_status bench_resnet18_create(latch_runtime *rt, const bench_config *config, bench_instance *out);
latch_status bench_resnet50_create(latch_runtime *rt, const bench_config *config, bench_instance *out);
latch_status bench_mobilenet_v2_create(latch_runtime *rt, const bench_config *config, bench_instance *out);
latch_status bench_squeezenet_create(latch_runtime *rt, const bench_config *config, bench_instance *out);
latch_status bench_alexnet_create(latch_runtime *rt, const bench_config *config, bench_instance *out);
latch_status bench_vgg16_create(latch_runtime *rt, const bench_config *config, bench_instance *out);
latch_status bench_bert_small_create(latch_runtime *rt, const bench_config *config, bench_instance *out);
latch_status bench_bert_base_create(latch_runtime *rt, const bench_config *config, bench_instance *out);
latch_status bench_vit_tiny_create(latch_runtime *rt, const bench_config *config, bench_instance *out);
latch_status bench_vit_b_16_create(latch_runtime *rt, const bench_config *config, bench_instance *out);
latch_status bench_gpt2_create(latch_runtime *rt, const bench_config *config, bench_instance *out);
latch_status bench_gpt2_small_create(latch_runtime *rt, const bench_config *config, bench_instance *out);
latch_status bench_gpt2_small_gen_create(latch_runtime *rt, const bench_config *config, bench_instance *out);
latch_status bench_train_mlp_create(latch_runtime *rt, const bench_config *config, bench_instance *out);
latch_status bench_train_cnn_create(latch_runtime *rt, const bench_config *config, bench_instance *out);

/* Shared by the models: checks a step's argument counts. */
latch_status bench_check_io(const char *model, int input_count, int want_inputs, latch_tensor **outputs,
                            int output_count, int want_outputs);
/* The end of a step: LATCH_OK when outputs[0..count) are good tensors, else the first
 * error (moved into bench_error). */
latch_status bench_step_result(const char *model, latch_tensor **outputs, int count);
/* The end of a create: the store's status, or the image input [batch, 3, size, size]
 * made or loaded into out->inputs[0]. */
latch_status bench_image_input(latch_runtime *rt, const bench_config *config, bench_instance *out, int channels);

#endif
