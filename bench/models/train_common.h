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

#endif
