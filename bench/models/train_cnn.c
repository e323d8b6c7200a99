/* One training step of a small CNN: conv 3x3 (1 -> 8) ReLU, 2x2 average pool, conv 3x3
 * (8 -> 16) ReLU, global average pool, linear to 10 classes; softmax cross-entropy, a
 * hand-written backward pass (conv gradients as convs) and in-place SGD. Input [B, 1, S, S]
 * with S even; the output is the loss before the update. */
#include <stdlib.h>

#include "models.h"
#include "train_common.h"

#define LEARNING_RATE 0.05

typedef struct train_cnn {
  bench_store store;
  bench_conv_w conv1, conv2;
  bench_linear_w fc;
  latch_tensor *flip; /* [9, 9] anti-diagonal: rotates 3x3 kernels */
} train_cnn;

static latch_status train_cnn_step(void *model, latch_tensor *const *inputs, int input_count, latch_tensor **outputs,
                                   int output_count) {
  latch_status status = bench_check_io("train_cnn", input_count, 2, outputs, output_count, 1);
  if (status != LATCH_OK) return status;
  train_cnn *m = model;
  latch_runtime *rt = m->store.rt;
  latch_tensor *x = inputs[0];
  /* The batch is never read (reshapes infer it as -1, broadcasts multiply by constants of
   * batch 1), so a traced step keeps it symbolic; h and w are the model's image size. */
  int64_t h = latch_dim(x, 2) / 2, w = latch_dim(x, 3) / 2;
  const int64_t two[2] = {2, 2};
  latch_tensor *z1 = bench_conv(x, &m->conv1);
  latch_tensor *a1 = latch_relu(z1);
  latch_tensor *p1 = latch_avg_pool2d(a1, two, two, NULL);
  latch_release(a1);
  latch_tensor *z2 = bench_conv(p1, &m->conv2);
  latch_tensor *a2 = latch_relu(z2);
  latch_tensor *feat = latch_reduce(LATCH_MEAN, a2, 2, (const int[]){2, 3}, false); /* [B, 16] */
  latch_release(a2);
  latch_tensor *logits = bench_linear(feat, &m->fc);
  latch_tensor *g = NULL;
  outputs[0] = bench_cross_entropy(rt, logits, inputs[1], &g);
  latch_release(logits);

  latch_tensor *gt = latch_permute(g, (const int[]){1, 0});
  latch_tensor *dfc = latch_matmul(gt, feat);
  latch_release(gt), latch_release(feat);
  latch_tensor *dfc_b = latch_reduce(LATCH_SUM, g, 1, (const int[]){0}, false);
  latch_tensor *dfeat = latch_matmul(g, m->fc.weight); /* [B, 16] */
  latch_release(g);
  /* The mean spreads its gradient evenly over the h x w cells. */
  BENCH_THEN(dfeat, latch_reshape(dfeat, 4, BENCH_DIMS(-1, 16, 1, 1)));
  latch_tensor *spread = latch_full(rt, LATCH_F32, 4, BENCH_DIMS(1, 1, h, w), 1.0 / (double)(h * w));
  latch_tensor *dz2 = latch_binary(LATCH_MUL, dfeat, spread);
  latch_release(dfeat), latch_release(spread);
  BENCH_THEN(dz2, bench_relu_grad(rt, dz2, z2));
  latch_release(z2);
  latch_tensor *dw2 = bench_conv_grad_weight(p1, dz2, 1);
  latch_tensor *db2 = latch_reduce(LATCH_SUM, dz2, 3, (const int[]){0, 2, 3}, false);
  latch_release(p1);
  latch_tensor *dp1 = bench_conv_grad_input(dz2, m->conv2.weight, m->flip, 1); /* [B, 8, h, w] */
  latch_release(dz2);
  /* The 2x2 average pool hands each input cell a quarter of its output's gradient. */
  BENCH_THEN(dp1, latch_reshape(dp1, 6, BENCH_DIMS(-1, 8, h, 1, w, 1)));
  latch_tensor *quarter = latch_full(rt, LATCH_F32, 6, BENCH_DIMS(1, 1, 1, 2, 1, 2), 0.25);
  BENCH_THEN(dp1, latch_binary(LATCH_MUL, dp1, quarter));
  latch_release(quarter);
  BENCH_THEN(dp1, latch_reshape(dp1, 4, BENCH_DIMS(-1, 8, 2 * h, 2 * w)));
  BENCH_THEN(dp1, bench_relu_grad(rt, dp1, z1));
  latch_release(z1);
  latch_tensor *dw1 = bench_conv_grad_weight(x, dp1, 1);
  latch_tensor *db1 = latch_reduce(LATCH_SUM, dp1, 3, (const int[]){0, 2, 3}, false);
  latch_release(dp1);

  latch_tensor *params[6] = {m->fc.weight, m->fc.bias, m->conv2.weight, m->conv2.bias, m->conv1.weight, m->conv1.bias};
  latch_tensor *grads[6] = {dfc, dfc_b, dw2, db2, dw1, db1};
  for (int i = 0; i < 6; i++) {
    if (status == LATCH_OK) status = bench_sgd(rt, params[i], grads[i], LEARNING_RATE);
    latch_release(grads[i]);
  }
  if (status != LATCH_OK) return status;
  return bench_step_result("train_cnn", outputs, 1);
}

static void train_cnn_free(void *model) {
  train_cnn *m = model;
  bench_store_free(&m->store);
  free(m);
}

/* Input [batch, 1, size, size] and its labels. */
static latch_status train_cnn_inputs(bench_instance *in, latch_runtime *rt, const bench_config *config) {
  const int64_t *dims = BENCH_DIMS(config->batch, 1, config->size, config->size);
  return bench_train_inputs(in, rt, config, bench_input(rt, config, LATCH_F32, 4, dims, -1, 1, config->seed + 1));
}

latch_status bench_train_cnn_create(latch_runtime *rt, const bench_config *config, bench_instance *out) {
  train_cnn *m = calloc(1, sizeof *m);
  if (!m) return bench_set_error("out of memory"), LATCH_ERR_INTERNAL;
  *out = (bench_instance){.model = m, .step = train_cnn_step, .destroy = train_cnn_free, .output_count = 1,
                          .output_name = "loss", .batch = config->batch, .size = config->size,
                          .make_inputs = train_cnn_inputs};
  bench_store *s = &m->store;
  bench_store_init(s, rt, config);
  s->trainable = true;
  if (config->size < 2 || config->size % 2)
    return bench_set_error("train_cnn: image size %d must be even and at least 2", config->size), LATCH_ERR_INPUT;
  m->conv1 = bench_conv_make(s, "conv1", 1, 8, 3, 1, 1, 1, true);
  m->conv2 = bench_conv_make(s, "conv2", 8, 16, 3, 1, 1, 1, true);
  m->fc = bench_linear_make(s, "fc", 16, 10, true);
  m->flip = bench_keep(s, bench_reverser(rt, 9));
  if (s->status != LATCH_OK) return s->status;
  return train_cnn_inputs(out, rt, config);
}
