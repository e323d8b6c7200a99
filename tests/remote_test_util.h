/* The program the remote-tier tests run, with outputs worked out independently: graph g is
 * relu(x * (g + 2) - 1) on x = [0, 0.25, 0.5, 1], on the reference backend. Header-only. */
#ifndef LATCH_REMOTE_TEST_UTIL_H
#define LATCH_REMOTE_TEST_UTIL_H
#include <stdio.h>
#include <string.h>

#include "latch.h"

static const float xs[4] = {0, 0.25f, 0.5f, 1};

/* relu(x * (g + 2) - 1), worked out here in double and rounded once to float. */
static inline float expected(int g, int i) {
  double v = (double)xs[i] * (g + 2) - 1;
  return (float)(v > 0 ? v : 0);
}

static inline latch_runtime *open_rt(const char *url, const char *dir, const char *secret) {
  latch_options options;
  latch_options_init(&options);
  options.backend = "reference";
  options.cache = dir ? "disk" : "memory";
  options.cache_dir = dir;
  options.cache_url = url;
  options.cache_secret = secret;
  latch_runtime *rt = latch_open(&options);
  if (!rt) fprintf(stderr, "latch_open: %s\n", latch_last_error());
  return rt;
}

/* Runs graph g; the number of wrong output values (4 when the run failed). */
static inline int run_graph(latch_runtime *rt, int g) {
  int64_t dims[1] = {4};
  latch_tensor *x = latch_from_host(rt, LATCH_F32, 1, dims, xs);
  latch_tensor *k = latch_scalar(rt, LATCH_F32, g + 2), *one = latch_scalar(rt, LATCH_F32, 1);
  latch_tensor *a = latch_binary(LATCH_MUL, x, k), *b = latch_binary(LATCH_SUB, a, one), *y = latch_relu(b);
  float out[4];
  int wrong = 4;
  if (latch_read(y, out, sizeof out) == LATCH_OK) {
    wrong = 0;
    for (int i = 0; i < 4; i++) wrong += out[i] != expected(g, i);
  }
  latch_tensor *all[] = {x, k, one, a, b, y};
  for (int i = 0; i < 6; i++) latch_release(all[i]);
  return wrong;
}

static inline latch_stats stats_of(latch_runtime *rt) {
  latch_stats s;
  latch_get_stats(rt, &s);
  return s;
}

/* Runs graphs [0, count) in a new runtime and closes it; the wrong values, and its stats. */
static inline int run_all(const char *url, const char *dir, const char *secret, int count, latch_stats *stats) {
  latch_runtime *rt = open_rt(url, dir, secret);
  if (!rt) return 4 * count;
  int wrong = 0;
  for (int g = 0; g < count; g++) wrong += run_graph(rt, g);
  *stats = stats_of(rt);
  latch_close(rt);
  return wrong;
}

#endif
