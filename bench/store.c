/* The weight store: a model's tensors by state_dict key, seeded or loaded from .npy files,
 * and bench's error message. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

static _Thread_local char error_text[1024];

void bench_set_error(const char *format, ...) {
  va_list ap;
  va_start(ap, format);
  vsnprintf(error_text, sizeof error_text, format, ap);
  va_end(ap);
}

const char *bench_error(void) { return error_text; }

latch_status bench_fail_tensor(const char *what, const latch_tensor *t) {
  const char *message = t ? latch_tensor_error(t) : NULL;
  bench_set_error("%s: %s", what, message ? message : latch_last_error());
  return t ? LATCH_ERR_INPUT : LATCH_ERR_INTERNAL;
}

void bench_store_init(bench_store *store, latch_runtime *rt, const bench_config *config) {
  memset(store, 0, sizeof *store);
  store->rt = rt;
  store->dir = config->weights;
  store->seed = config->seed;
}

latch_tensor *bench_keep(bench_store *store, latch_tensor *t) {
  if (!t) {
    if (store->status == LATCH_OK) bench_set_error("out of memory");
    store->status = LATCH_ERR_INTERNAL;
    return NULL;
  }
  if (store->count == BENCH_MAX_WEIGHTS) {
    latch_release(t);
    if (store->status == LATCH_OK) bench_set_error("a model holds more than %d tensors", BENCH_MAX_WEIGHTS);
    store->status = LATCH_ERR_INTERNAL;
    return NULL;
  }
  store->tensors[store->count++] = t;
  return t;
}

static void dims_text(int rank, const int64_t *dims, char *buffer, size_t size) {
  size_t at = (size_t)snprintf(buffer, size, "[");
  for (int i = 0; i < rank && at < size; i++)
    at += (size_t)snprintf(buffer + at, size - at, "%s%lld", i ? ", " : "", (long long)dims[i]);
  if (at < size) snprintf(buffer + at, size - at, "]");
}

/* The seed of a key: FNV-1a of the name mixed with the run's seed, so a weight's values do
 * not depend on the order the model makes its weights in. */
static uint64_t key_seed(const char *key, uint64_t seed) {
  uint64_t h = 1469598103934665603ull ^ (seed * 0x9e3779b97f4a7c15ull);
  for (const char *c = key; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ull;
  return h;
}

static latch_tensor *load(bench_store *store, const char *key, int rank, const int64_t *dims) {
  char path[4096], want[256], got[256];
  snprintf(path, sizeof path, "%s/%s.npy", store->dir, key);
  dims_text(rank, dims, want, sizeof want);
  FILE *f = fopen(path, "rb");
  if (!f) {
    bench_set_error("weight %s: missing file %s (expected f32%s)", key, path, want);
    store->status = LATCH_ERR_INPUT;
    return NULL;
  }
  fclose(f);
  latch_tensor *t = latch_from_npy(store->rt, path);
  if (!t || latch_tensor_error(t)) {
    bench_set_error("weight %s: %s", key, t ? latch_tensor_error(t) : latch_last_error());
    latch_release(t);
    store->status = t ? LATCH_ERR_INPUT : LATCH_ERR_INTERNAL;
    return NULL;
  }
  bool fits = latch_rank(t) == rank && latch_tensor_dtype(t) == LATCH_F32;
  for (int i = 0; fits && i < rank; i++) fits = latch_dim(t, i) == dims[i];
  if (!fits) {
    int64_t have[LATCH_MAX_RANK];
    for (int i = 0; i < latch_rank(t); i++) have[i] = latch_dim(t, i);
    dims_text(latch_rank(t), have, got, sizeof got);
    bench_set_error("weight %s: %s holds %s%s, the model expects f32%s", key, path,
                    latch_dtype_name(latch_tensor_dtype(t)), got, want);
    latch_release(t);
    store->status = LATCH_ERR_INPUT;
    return NULL;
  }
  return t;
}

latch_tensor *bench_param(bench_store *store, const char *key, int rank, const int64_t *dims, bench_init init,
                          double scale) {
  if (store->status != LATCH_OK) return NULL;
  latch_tensor *t;
  if (store->dir) t = load(store, key, rank, dims);
  else if (init == BENCH_INIT_CONST) t = latch_full(store->rt, LATCH_F32, rank, dims, scale);
  else {
    double bound = init == BENCH_INIT_NORMAL ? scale * sqrt(3.0) : scale;
    t = latch_rand_uniform(store->rt, LATCH_F32, rank, dims, -bound, bound, key_seed(key, store->seed));
  }
  if (!t) return store->status == LATCH_OK ? bench_keep(store, NULL) : NULL;
  if (latch_tensor_error(t)) {
    bench_set_error("weight %s: %s", key, latch_tensor_error(t));
    latch_release(t);
    store->status = LATCH_ERR_INPUT;
    return NULL;
  }
  /* latch_full is a pending constant: make it a value now, so the model's graphs read it
   * as a parameter, as they read every other weight. */
  if (init == BENCH_INIT_CONST && !store->dir && !latch_data(t)) {
    bench_set_error("weight %s: %s", key, latch_last_error());
    latch_release(t);
    store->status = LATCH_ERR_INTERNAL;
    return NULL;
  }
  return bench_keep(store, t);
}

latch_tensor *bench_paramf(bench_store *store, int rank, const int64_t *dims, bench_init init, double scale,
                           const char *format, ...) {
  char key[512];
  va_list ap;
  va_start(ap, format);
  vsnprintf(key, sizeof key, format, ap);
  va_end(ap);
  return bench_param(store, key, rank, dims, init, scale);
}

latch_tensor *bench_store_replace(bench_store *store, latch_tensor *old, latch_tensor *next) {
  if (store->status != LATCH_OK || !old) {
    latch_release(next);
    return NULL;
  }
  if (!next || latch_tensor_error(next) || !latch_data(next)) {
    bench_set_error("repacking a weight: %s", next && latch_tensor_error(next) ? latch_tensor_error(next) : latch_last_error());
    latch_release(next);
    store->status = LATCH_ERR_INTERNAL;
    return NULL;
  }
  for (int i = 0; i < store->count; i++)
    if (store->tensors[i] == old) {
      latch_release(old);
      store->tensors[i] = next;
      return next;
    }
  return bench_keep(store, next);
}

void bench_store_free(bench_store *store) {
  while (store->count) latch_release(store->tensors[--store->count]);
}

latch_tensor *bench_input(latch_runtime *rt, const bench_config *config, latch_dtype dtype, int rank,
                          const int64_t *dims, double low, double high, uint64_t seed) {
  latch_tensor *t = config->input ? latch_from_npy(rt, config->input)
                                  : latch_rand_uniform(rt, dtype, rank, dims, low, high, seed);
  if (!t || latch_tensor_error(t)) {
    bench_set_error("input%s%s: %s", config->input ? " " : "", config->input ? config->input : "",
                    t ? latch_tensor_error(t) : latch_last_error());
    latch_release(t);
    return NULL;
  }
  latch_dtype have_dtype = latch_tensor_dtype(t);
  bool fits = latch_rank(t) == rank && have_dtype == dtype;
  for (int i = 0; fits && i < rank; i++) fits = latch_dim(t, i) == dims[i];
  if (fits) return t;
  char want[256], got[256];
  int64_t have[LATCH_MAX_RANK];
  int have_rank = latch_rank(t);
  for (int i = 0; i < have_rank; i++) have[i] = latch_dim(t, i);
  latch_release(t);
  dims_text(rank, dims, want, sizeof want);
  dims_text(have_rank, have, got, sizeof got);
  bench_set_error("input %s holds %s%s, the model expects %s%s (set --batch and --size to match)", config->input,
                  latch_dtype_name(have_dtype), got, latch_dtype_name(dtype), want);
  return NULL;
}
