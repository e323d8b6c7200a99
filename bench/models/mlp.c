/* mlp: 784 -> 512 -> 512 -> 10 with ReLU; the keys are bench/torch_zoo.py's MLP (fc1, fc2, fc3). */
#include <stdlib.h>

#include "models.h"

typedef struct mlp {
  bench_store store;
  bench_linear_w fc1, fc2, fc3;
} mlp;

static latch_status mlp_step(void *model, latch_tensor *const *inputs, int input_count, latch_tensor **outputs,
                             int output_count) {
  latch_status status = bench_check_io("mlp", input_count, 1, outputs, output_count, 1);
  if (status != LATCH_OK) return status;
  mlp *m = model;
  latch_tensor *x = bench_flatten(inputs[0]);
  BENCH_THEN(x, bench_linear(x, &m->fc1));
  BENCH_THEN(x, latch_relu(x));
  BENCH_THEN(x, bench_linear(x, &m->fc2));
  BENCH_THEN(x, latch_relu(x));
  BENCH_THEN(x, bench_linear(x, &m->fc3));
  outputs[0] = x;
  return bench_step_result("mlp", outputs, 1);
}

static void mlp_free(void *model) {
  mlp *m = model;
  bench_store_free(&m->store);
  free(m);
}

/* Input [batch, 784], uniform in [-1, 1). */
static latch_status mlp_inputs(bench_instance *in, latch_runtime *rt, const bench_config *config) {
  latch_tensor *x = bench_input(rt, config, LATCH_F32, 2, BENCH_DIMS(config->batch, 784), -1, 1, config->seed + 1);
  if (!x) return LATCH_ERR_INPUT;
  latch_release(in->inputs[0]);
  in->inputs[0] = x;
  in->input_count = 1;
  in->batch = config->batch;
  return LATCH_OK;
}

latch_status bench_mlp_create(latch_runtime *rt, const bench_config *config, bench_instance *out) {
  mlp *m = calloc(1, sizeof *m);
  if (!m) return bench_set_error("out of memory"), LATCH_ERR_INTERNAL;
  bench_store_init(&m->store, rt, config);
  m->fc1 = bench_linear_make(&m->store, "fc1", 784, 512, true);
  m->fc2 = bench_linear_make(&m->store, "fc2", 512, 512, true);
  m->fc3 = bench_linear_make(&m->store, "fc3", 512, 10, true);
  *out = (bench_instance){.model = m, .step = mlp_step, .destroy = mlp_free, .output_count = 1, .output_name = "logits",
                          .make_inputs = mlp_inputs};
  out->batch = config->batch;
  out->size = 28;
  if (m->store.status != LATCH_OK) return m->store.status;
  return mlp_inputs(out, rt, config);
}
