/* The training steps' shared input: a seeded one-hot label batch. */
#ifndef BENCH_TRAIN_COMMON_H
#define BENCH_TRAIN_COMMON_H
#include <stdlib.h>

#include "bench/layers.h"

/* [batch, classes] one-hot, class of row i from a small LCG on seed. NULL on failure. */
static inline latch_tensor *bench_one_hot_labels(latch_runtime *rt, int64_t batch, int64_t classes, uint64_t seed) {
  float *data = calloc((size_t)(batch * classes), sizeof *data);
  if (!data) return NULL;
  uint64_t state = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (int64_t i = 0; i < batch; i++) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    data[i * classes + (int64_t)((state >> 33) % (uint64_t)classes)] = 1;
  }
  latch_tensor *t = latch_from_host(rt, LATCH_F32, 2, BENCH_DIMS(batch, classes), data);
  free(data);
  return t;
}

/* in's inputs become x (taken; NULL is a failure bench_input explained) and a one-hot
 * label batch of 10 classes for config's batch. */
static inline latch_status bench_train_inputs(bench_instance *in, latch_runtime *rt, const bench_config *config,
                                              latch_tensor *x) {
  if (!x) return LATCH_ERR_INPUT;
  latch_tensor *labels = bench_one_hot_labels(rt, config->batch, 10, config->seed + 2);
  if (!labels) {
    latch_release(x);
    return bench_set_error("out of memory"), LATCH_ERR_INTERNAL;
  }
  for (int i = 0; i < in->input_count; i++) latch_release(in->inputs[i]);
  in->inputs[0] = x;
  in->inputs[1] = labels;
  in->input_count = 2;
  in->batch = config->batch;
  return LATCH_OK;
}

#endif
