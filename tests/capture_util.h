/* Helpers for the capture tests: tensors from literals and value checks through latch.h. */
#ifndef CAPTURE_UTIL_H
#define CAPTURE_UTIL_H
#include <stdlib.h>

#include "latch.h"
#include "test.h"

static latch_runtime *util_rt;

/* Tensors the tests make inline (operands written into a call) are owned by this pool and
 * released by util_release_all, so the sanitizer build sees no leaks. */
static latch_tensor *util_pool[4096];
static int util_pool_count;

static inline latch_tensor *keep(latch_tensor *t) {
  if (util_pool_count < 4096) util_pool[util_pool_count++] = t;
  return t;
}

static inline void util_release_all(void) {
  while (util_pool_count) latch_release(util_pool[--util_pool_count]);
}

/* An f32 tensor of the given dims from doubles. */
static inline latch_tensor *tf(int rank, const int64_t *dims, const double *values) {
  int64_t n = 1;
  for (int i = 0; i < rank; i++) n *= dims[i];
  float *data = malloc(sizeof(float) * (size_t)(n ? n : 1));
  for (int64_t i = 0; i < n; i++) data[i] = (float)values[i];
  latch_tensor *t = latch_from_host(util_rt, LATCH_F32, rank, dims, data);
  free(data);
  return keep(t);
}

#define DIMS(...) ((const int64_t[]){__VA_ARGS__})
#define VALS(...) ((const double[]){__VA_ARGS__})
#define F32(rank, dims, ...) tf(rank, DIMS dims, VALS(__VA_ARGS__))

/* Reads t (syncing it) and compares with want[n] within tol; checks the dims when given. */
static inline void expect_values(latch_tensor *t, int64_t n, const double *want, double tol, int line) {
  if (!t) {
    CHECK_MSG(0, "line %d: NULL tensor", line);
    return;
  }
  CHECK_MSG(latch_tensor_error(t) == NULL, "line %d: error tensor: %s", line, latch_tensor_error(t));
  CHECK_MSG(latch_numel(t) == n, "line %d: %lld elements, want %lld", line, (long long)latch_numel(t), (long long)n);
  if (latch_numel(t) != n || latch_tensor_error(t)) return;
  double *got = malloc(sizeof(double) * (size_t)(n ? n : 1));
  latch_status status = latch_read_f64(t, got, n);
  CHECK_MSG(status == LATCH_OK, "line %d: read: %s", line, latch_last_error());
  for (int64_t i = 0; status == LATCH_OK && i < n; i++) {
    double g = got[i], w = want[i];
    int ok = (isnan(g) && isnan(w)) || g == w || fabs(g - w) <= tol * (1.0 + fabs(w));
    CHECK_MSG(ok, "line %d: element %lld: got %.9g, want %.9g", line, (long long)i, g, w);
  }
  free(got);
}

#define EXPECT(t, tol, ...)                                                               \
  do {                                                                                    \
    const double want_[] = {0, __VA_ARGS__};                                              \
    latch_tensor *t_ = (t);                                                               \
    expect_values(t_, (int64_t)(sizeof want_ / sizeof want_[0]) - 1, want_ + 1, tol, __LINE__);   \
    latch_release(t_);                                                                    \
  } while (0)

/* The dims of t equal dims[rank]. */
static inline int has_dims(const latch_tensor *t, int rank, const int64_t *dims) {
  if (latch_rank(t) != rank) return 0;
  for (int i = 0; i < rank; i++)
    if (latch_dim(t, i) != dims[i]) return 0;
  return 1;
}

#endif
