/* `latch bench --peak N`: the machine's product peak as latch reaches it, for the effective
 * GFLOP/s the comparisons print next to each model's. One f32 product of two N x N matrices
 * (2 N^3 flops), traced and synced through the runtime like any graph, so it runs on the
 * backend's own dot kernel and the kernel library behind it, with the runtime's thread
 * count (LATCH_THREADS); one untimed run first (the compile), then the median of `repeat`
 * wall times. Written against latch.h only. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench.h"

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* One product, synced; its wall ms, or a negative number with the error printed. */
static double one_product(latch_runtime *rt, latch_tensor *a, latch_tensor *b) {
  double start = now_ms();
  latch_tensor *y = latch_matmul(a, b);
  latch_status status = y ? latch_sync(rt) : LATCH_ERR_INTERNAL;
  double ms = now_ms() - start;
  latch_release(y);
  if (status != LATCH_OK) {
    fprintf(stderr, "latch bench --peak: the product failed: %s\n", latch_last_error());
    return -1;
  }
  return ms;
}

int bench_peak(int n, int repeat, const char *json_path) {
  latch_options options;
  latch_options_init(&options);
  latch_runtime *rt = latch_open(&options);
  if (!rt) {
    fprintf(stderr, "latch bench --peak: cannot open a runtime: %s\n", latch_last_error());
    return 1;
  }
  int64_t dims[2] = {n, n};
  latch_tensor *a = latch_rand_uniform(rt, LATCH_F32, 2, dims, -1, 1, 1);
  latch_tensor *b = latch_rand_uniform(rt, LATCH_F32, 2, dims, -1, 1, 2);
  double *samples = malloc(sizeof(double) * (size_t)repeat);
  bool ok = a && b && samples && one_product(rt, a, b) >= 0;
  for (int i = 0; ok && i < repeat; i++) ok = (samples[i] = one_product(rt, a, b)) >= 0;
  double median = ok ? bench_median(samples, repeat) : 0;
  double gflops = ok && median > 0 ? 2.0 * n * n * (double)n / (median * 1e6) : 0;
  if (ok) {
    printf("latch bench --peak: f32 product %dx%d by %dx%d, %s backend, threads %d (0: one per core): median %.3f ms "
           "over %d, %.1f GFLOP/s\n",
           n, n, n, n, options.backend ? options.backend : "default", options.threads, median, repeat, gflops);
    FILE *f = json_path ? fopen(json_path, "w") : NULL;
    if (json_path && !f) fprintf(stderr, "latch bench --peak: cannot write %s\n", json_path);
    if (f) {
      fprintf(f, "{\"latch_peak\": 1, \"n\": %d, \"threads\": %d, \"median_ms\": %.6f, \"gflops\": %.3f}\n", n,
              options.threads, median, gflops);
      ok = fclose(f) == 0;
    }
    ok = ok && (!json_path || f);
  }
  free(samples);
  latch_release(a);
  latch_release(b);
  latch_close(rt);
  return ok ? 0 : 1;
}
