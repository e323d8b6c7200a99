/* Helpers for the traced-function tests: runtimes, options, host tensors, reading values. */
#ifndef FUNCTION_UTIL_H
#define FUNCTION_UTIL_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "latch.h"
#include "test.h"

static inline latch_runtime *fu_open(void) {
  latch_options options;
  latch_options_init(&options);
  options.backend = "reference";
  options.eager = false;
  return latch_open(&options);
}

/* A runtime on the cpu backend, eager off, with the disk cache in dir. */
static inline latch_runtime *fu_open_disk(const char *dir) {
  latch_options options;
  latch_options_init(&options);
  options.backend = "cpu";
  options.eager = false;
  options.cache = "disk";
  options.cache_dir = dir;
  return latch_open(&options);
}

/* A runtime on backend with every other option at its default. */
static inline latch_runtime *fu_open_backend(const char *backend) {
  latch_options options;
  latch_options_init(&options);
  options.backend = backend;
  return latch_open(&options);
}

static inline latch_function_options fu_options(latch_trace_mode mode, latch_shape_policy shapes) {
  latch_function_options o;
  latch_function_options_init(&o);
  o.mode = mode;
  o.shapes = shapes;
  return o;
}

/* An f32 tensor [rank dims] with element i = scale * i + offset. */
static inline latch_tensor *fu_ramp(latch_runtime *rt, int rank, const int64_t *dims, double scale, double offset) {
  int64_t n = 1;
  for (int i = 0; i < rank; i++) n *= dims[i];
  float *data = malloc(sizeof(float) * (size_t)(n ? n : 1));
  for (int64_t i = 0; i < n; i++) data[i] = (float)(scale * (double)i + offset);
  latch_tensor *t = latch_from_host(rt, LATCH_F32, rank, dims, data);
  free(data);
  return t;
}

/* The values as doubles (malloc'd), or NULL. */
static inline double *fu_read(latch_tensor *t) {
  if (!t || latch_tensor_error(t)) return NULL;
  int64_t n = latch_numel(t);
  double *out = malloc(sizeof(double) * (size_t)(n ? n : 1));
  if (latch_read_f64(t, out, n) != LATCH_OK) {
    free(out);
    return NULL;
  }
  return out;
}

/* Largest |a - b| over two tensors of the same element count; INFINITY when unreadable. */
static inline double fu_max_diff(latch_tensor *a, latch_tensor *b) {
  if (!a || !b || latch_numel(a) != latch_numel(b)) return INFINITY;
  double *x = fu_read(a), *y = fu_read(b), worst = 0;
  if (!x || !y) worst = INFINITY;
  for (int64_t i = 0; x && y && i < latch_numel(a); i++) {
    double d = fabs(x[i] - y[i]);
    if (d > worst || d != d) worst = d != d ? INFINITY : d;
  }
  free(x);
  free(y);
  return worst;
}

/* stderr into a file while body runs; returns what was written (static buffer, 64 KB). */
static inline const char *fu_capture_stderr(void (*body)(void *), void *arg) {
  static char text[1 << 16];
  fflush(stderr);
  char path[] = "/tmp/latch_test_stderr_XXXXXX";
  int fd = mkstemp(path), saved = dup(2);
  dup2(fd, 2);
  body(arg);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  FILE *log = fopen(path, "r");
  size_t len = log ? fread(text, 1, sizeof text - 1, log) : 0;
  if (log) fclose(log);
  unlink(path);
  close(fd);
  text[len] = 0;
  return text;
}

#define FDIMS(...) ((const int64_t[]){__VA_ARGS__})

#endif
