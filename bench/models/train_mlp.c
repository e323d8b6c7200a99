/* One training step of the zoo's MLP (784-512-512-10, ReLU): forward, softmax
 * cross-entropy, a hand-written backward pass and an in-place SGD update of every weight.
 * The output is the loss before the update. */
#include <stdlib.h>

#include "models.h"
#include "train_common.h"

#define LAYERS 3
#define LEARNING_RATE 0.05

typedef struct train_mlp {
  bench_store store;
  bench_linear_w fc[LAYERS];
} train_mlp;

static latch_status train_mlp_step(void *model, latch_tensor *const *inputs, int input_count, latch_tensor **outputs,
                                   int output_count) {
  latch_status status = bench_check_io("train_mlp", input_count, 2, outputs, output_count, 1);
  if (status != LATCH_OK) return status;
  train_mlp *m = model;
  latch_runtime *rt = m->store.rt;
  /* acts[l] is the input of layer l; pre[l] its output before the ReLU. */
  latch_tensor *acts[LAYERS] = {0}, *pre[LAYERS] = {0};
  acts[0] = latch_retain(inputs[0]);
  for (int l = 0; l < LAYERS; l++) {
    pre[l] = bench_linear(acts[l], &m->fc[l]);
    if (l + 1 < LAYERS) acts[l + 1] = latch_relu(pre[l]);
  }
  latch_tensor *g = NULL;
  outputs[0] = bench_cross_entropy(rt, pre[LAYERS - 1], inputs[1], &g);
  for (int l = LAYERS - 1; l >= 0 && status == LATCH_OK; l--) {
    latch_tensor *gt = latch_permute(g, (const int[]){1, 0});
    latch_tensor *dw = latch_matmul(gt, acts[l]); /* [out, in] */
    latch_release(gt);
    latch_tensor *db = latch_reduce(LATCH_SUM, g, 1, (const int[]){0}, false);
    if (l > 0) {
      /* The gradient flowing down uses this layer's weight before its update. */
      BENCH_THEN(g, latch_matmul(g, m->fc[l].weight));
      BENCH_THEN(g, bench_relu_grad(rt, g, pre[l - 1]));
    }
    status = bench_sgd(rt, m->fc[l].weight, dw, LEARNING_RATE);
    if (status == LATCH_OK) status = bench_sgd(rt, m->fc[l].bias, db, LEARNING_RATE);
    latch_release(dw), latch_release(db);
  }
  latch_release(g);
  for (int l = 0; l < LAYERS; l++) latch_release(acts[l]), latch_release(pre[l]);
  if (status != LATCH_OK) return status;
  return bench_step_result("train_mlp", outputs, 1);
}

static void train_mlp_free(void *model) {
  train_mlp *m = model;
  bench_store_free(&m->store);
  free(m);
}

/* Input [batch, 784] and its labels. */
static latch_status train_mlp_inputs(bench_instance *in, latch_runtime *rt, const bench_config *config) {
  return bench_train_inputs(in, rt, config,
                            bench_input(rt, config, LATCH_F32, 2, BENCH_DIMS(config->batch, 784), -1, 1, config->seed + 1));
}

latch_status bench_train_mlp_create(latch_runtime *rt, const bench_config *config, bench_instance *out) {
  train_mlp *m = calloc(1, sizeof *m);
  if (!m) return bench_set_error("out of memory"), LATCH_ERR_INTERNAL;
  *out = (bench_instance){.model = m, .step = train_mlp_step, .destroy = train_mlp_free, .output_count = 1,
                          .output_name = "loss", .batch = config->batch, .size = 28,
                          .make_inputs = train_mlp_inputs};
  bench_store *s = &m->store;
  bench_store_init(s, rt, config);
  s->trainable = true;
  m->fc[0] = bench_linear_make(s, "fc1", 784, 512, true);
  m->fc[1] = bench_linear_make(s, "fc2", 512, 512, true);
  m->fc[2] = bench_linear_make(s, "fc3", 512, 10, true);
  if (s->status != LATCH_OK) return s->status;
  return train_mlp_inputs(out, rt, config);
}
