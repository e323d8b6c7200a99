/* The zoo's registry and the pieces every model shares. */
#include <string.h>

#include "bench/models/models.h"

/* Default batch and size are the short default run's (a 2-core machine, reference
 * backend): small images and sequences, so the whole default run stays under 2 minutes. */
static const bench_model models[] = {
    {"mlp", "784-512-512-10 ReLU MLP (input [B, 784])", bench_mlp_create, 8, 28, 28},
    {"resnet18", "torchvision resnet18, input [B, 3, S, S]", bench_resnet18_create, 1, 32, 32},
    {"resnet50", "torchvision resnet50", bench_resnet50_create, 1, 32, 32},
    {"mobilenet_v2", "torchvision mobilenet_v2", bench_mobilenet_v2_create, 1, 32, 32},
    {"squeezenet1_1", "torchvision squeezenet1_1", bench_squeezenet_create, 1, 32, 32},
    {"alexnet", "torchvision alexnet (S >= 63)", bench_alexnet_create, 1, 64, 63},
    {"vgg16", "torchvision vgg16 (S >= 32)", bench_vgg16_create, 1, 32, 32},
    {"bert_small", "BERT encoder, 4 layers, hidden 256, 4 heads; input token ids [B, S]", bench_bert_small_create, 1, 32, 8},
    {"bert_base", "BERT encoder, 12 layers, hidden 768, 12 heads", bench_bert_base_create, 1, 32, 8},
    {"vit_tiny", "ViT, patch 16, 4 layers, hidden 192, 3 heads (S a multiple of 16)", bench_vit_tiny_create, 1, 64, 32},
    {"vit_b_16", "torchvision vit_b_16 (12 layers, hidden 768, 12 heads)", bench_vit_b_16_create, 1, 64, 32},
    {"gpt2", "GPT-2-like decoder step, 4 layers, hidden 256, 4 heads, KV cache of S tokens growing by one per step",
     bench_gpt2_create, 1, 32, 8},
    {"gpt2_small", "GPT-2 small (12 layers, hidden 768, 12 heads) over S causal tokens; output the last hidden state",
     bench_gpt2_small_create, 1, 32, 8},
    {"gpt2_small_gen", "GPT-2 small decoder step on a KV cache of S tokens growing by one per step (generation)",
     bench_gpt2_small_gen_create, 1, 32, 8},
    {"train_mlp", "MLP training step: forward, hand-written backward, in-place SGD", bench_train_mlp_create, 8, 28, 28},
    {"train_cnn", "small CNN training step (2 conv layers), input [B, 1, S, S]", bench_train_cnn_create, 8, 16, 8},
};

const bench_model *bench_models(int *count) {
  *count = (int)(sizeof models / sizeof models[0]);
  return models;
}

const bench_model *bench_find_model(const char *name) {
  for (size_t i = 0; i < sizeof models / sizeof models[0]; i++)
    if (strcmp(models[i].name, name) == 0) return &models[i];
  return NULL;
}

/* Moves count new references into in's inputs, releasing the old ones. */
static void take_inputs(bench_instance *in, latch_tensor **inputs, int count) {
  for (int i = 0; i < in->input_count; i++) latch_release(in->inputs[i]);
  for (int i = 0; i < count; i++) in->inputs[i] = inputs[i];
  in->input_count = count;
}

latch_status bench_instance_inputs(bench_instance *in, const bench_model *model, latch_runtime *rt,
                                   const bench_config *config) {
  if (in->make_inputs) return in->make_inputs(in, rt, config);
  bench_instance spare;
  latch_status status = model->create(rt, config, &spare);
  if (status == LATCH_OK) {
    take_inputs(in, spare.inputs, spare.input_count);
    in->batch = spare.batch;
    spare.input_count = 0;
  }
  bench_instance_free(&spare);
  return status;
}

/* The image models' input: [batch, 3, size, size], uniform in [-1, 1). */
static latch_status rgb_inputs(bench_instance *in, latch_runtime *rt, const bench_config *config) {
  latch_tensor *x = bench_input(rt, config, LATCH_F32, 4, BENCH_DIMS(config->batch, 3, config->size, config->size), -1,
                                1, config->seed + 1);
  if (!x) return LATCH_ERR_INPUT;
  take_inputs(in, &x, 1);
  in->batch = config->batch;
  return LATCH_OK;
}

void bench_instance_free(bench_instance *instance) {
  for (int i = 0; i < instance->input_count; i++) latch_release(instance->inputs[i]);
  if (instance->model && instance->destroy) instance->destroy(instance->model);
  memset(instance, 0, sizeof *instance);
}

latch_status bench_check_io(const char *model, int input_count, int want_inputs, latch_tensor **outputs,
                            int output_count, int want_outputs) {
  if (input_count == want_inputs && output_count == want_outputs && outputs) return LATCH_OK;
  bench_set_error("%s: the step takes %d inputs and %d outputs, got %d and %d", model, want_inputs, want_outputs,
                  input_count, output_count);
  return LATCH_ERR_INPUT;
}

latch_status bench_step_result(const char *model, latch_tensor **outputs, int count) {
  for (int i = 0; i < count; i++) {
    if (!outputs[i]) return bench_set_error("%s: out of memory", model), LATCH_ERR_INTERNAL;
    if (latch_tensor_error(outputs[i])) return bench_fail_tensor(model, outputs[i]);
  }
  return LATCH_OK;
}

latch_status bench_image_input(latch_runtime *rt, const bench_config *config, bench_instance *out, int channels) {
  out->batch = config->batch;
  out->size = config->size;
  if (!out->output_name) out->output_name = "logits";
  if (!out->output_count) out->output_count = 1;
  bench_store *store = out->model; /* every model struct starts with its store */
  if (store->status != LATCH_OK) return store->status;
  if (channels == 3) {
    out->make_inputs = rgb_inputs;
    return rgb_inputs(out, rt, config);
  }
  out->inputs[0] = bench_input(rt, config, LATCH_F32, 4, BENCH_DIMS(config->batch, channels, config->size, config->size),
                               -1, 1, config->seed + 1);
  out->input_count = out->inputs[0] ? 1 : 0;
  return out->inputs[0] ? LATCH_OK : LATCH_ERR_INPUT;
}
