/* `latch bench --peak N`: the machine's peak as latch reaches it, for the effective GFLOP/s
 * the comparisons print next to each model's. Two kernels, because a model's flops go to two
 * libraries: one f32 product of two N x N matrices (2 N^3 flops; the dot kernel, OpenBLAS
 * on AVX2) and one 3x3 convolution of 128 to 128 features over 56x56 at batch 8, padded
 * (oneDNN's kernels, as the models' convolutions); the peak is the better of the two. The
 * convolution adds its source back (a residual): it then stays on oneDNN's direct kernel,
 * which does every multiply it counts, where alone on AVX-512 it would run by Winograd, a
 * quarter of them, and report about 2x the machine's arithmetic (against the product's rate
 * on an AVX-512 machine). Each is traced and synced through the runtime like any graph, with the runtime's thread count
 * (LATCH_THREADS); one untimed run first (the compile), then the median of `repeat` wall
 * times. Beside it, the theoretical peak from the processor's report (cpu_peak.c), of every
 * core and of the cores the threads can use. Written against latch.h only. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench.h"

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

enum { CONV_BATCH = 8, CONV_FEATURES = 128, CONV_SIDE = 56 };

/* One product (conv false) or convolution of a and b, synced; its wall ms, or a negative
 * number with the error printed. */
static double one_run(latch_runtime *rt, latch_tensor *a, latch_tensor *b, bool conv) {
  latch_conv2d_params same = {.padding = {1, 1}};
  double start = now_ms();
  latch_tensor *c = conv ? latch_conv2d(a, b, &same) : NULL;
  latch_tensor *y = conv ? (c ? latch_binary(LATCH_ADD, c, a) : NULL) : latch_matmul(a, b);
  latch_release(c);
  latch_status status = y ? latch_sync(rt) : LATCH_ERR_INTERNAL;
  double ms = now_ms() - start;
  latch_release(y);
  if (status != LATCH_OK) {
    fprintf(stderr, "latch bench --peak: the %s failed: %s\n", conv ? "convolution" : "product", latch_last_error());
    return -1;
  }
  return ms;
}

/* The median ms of repeat runs of a and b after an untimed one; negative on failure. */
static double median_ms(latch_runtime *rt, latch_tensor *a, latch_tensor *b, bool conv, double *samples, int repeat) {
  if (!a || !b || one_run(rt, a, b, conv) < 0) return -1;
  for (int i = 0; i < repeat; i++)
    if ((samples[i] = one_run(rt, a, b, conv)) < 0) return -1;
  return bench_median(samples, repeat);
}

int bench_peak(int n, int repeat, const char *json_path) {
  latch_options options;
  latch_options_init(&options);
  latch_runtime *rt = latch_open(&options);
  if (!rt) {
    fprintf(stderr, "latch bench --peak: cannot open a runtime: %s\n", latch_last_error());
    return 1;
  }
  int64_t dims[2] = {n, n}, x_dims[4] = {CONV_BATCH, CONV_FEATURES, CONV_SIDE, CONV_SIDE},
          w_dims[4] = {CONV_FEATURES, CONV_FEATURES, 3, 3};
  latch_tensor *a = latch_rand_uniform(rt, LATCH_F32, 2, dims, -1, 1, 1);
  latch_tensor *b = latch_rand_uniform(rt, LATCH_F32, 2, dims, -1, 1, 2);
  latch_tensor *x = latch_rand_uniform(rt, LATCH_F32, 4, x_dims, -1, 1, 3);
  latch_tensor *w = latch_rand_uniform(rt, LATCH_F32, 4, w_dims, -0.05, 0.05, 4);
  double *samples = malloc(sizeof(double) * (size_t)repeat);
  double product_ms = samples ? median_ms(rt, a, b, false, samples, repeat) : -1;
  double conv_ms = product_ms > 0 ? median_ms(rt, x, w, true, samples, repeat) : -1;
  bool ok = product_ms > 0 && conv_ms > 0;
  double conv_flops = 2.0 * CONV_BATCH * CONV_FEATURES * CONV_FEATURES * 9.0 * CONV_SIDE * CONV_SIDE;
  double product_gflops = ok ? 2.0 * n * n * (double)n / (product_ms * 1e6) : 0;
  double conv_gflops = ok ? conv_flops / (conv_ms * 1e6) : 0;
  double gflops = product_gflops > conv_gflops ? product_gflops : conv_gflops;
  bench_cpu_peak_info cpu;
  bool known = bench_cpu_peak("/proc/cpuinfo", &cpu);
  int used = options.threads > 0 && options.threads < cpu.cores ? options.threads : cpu.cores;
  double used_gflops = known ? cpu.gflops * used / cpu.cores : 0;
  if (ok) {
    printf("latch bench --peak: %s backend, threads %d (0: one per core): f32 product %dx%d by %dx%d median %.3f ms, "
           "%.1f GFLOP/s; 3x3 convolution %d to %d features, %dx%d, batch %d median %.3f ms, %.1f GFLOP/s "
           "(over %d each); peak %.1f GFLOP/s\n",
           options.backend ? options.backend : "default", options.threads, n, n, n, n, product_ms, product_gflops,
           CONV_FEATURES, CONV_FEATURES, CONV_SIDE, CONV_SIDE, CONV_BATCH, conv_ms, conv_gflops, repeat, gflops);
    if (known)
      printf("theoretical peak: %d cores x %.0f MHz x %d flops per cycle (2 x %d f32 lanes x %d FMA units, assumed) = "
             "%.1f GFLOP/s; %.1f GFLOP/s on the %d core%s the threads use (measured: %.0f%% of it)\n",
             cpu.cores, cpu.mhz, cpu.flops_per_cycle, cpu.lanes, cpu.fma_units, cpu.gflops, used_gflops, used,
             used == 1 ? "" : "s", 100 * gflops / used_gflops);
    else
      printf("theoretical peak: unknown (no cpu MHz, or neither avx512f nor avx2 with fma, in /proc/cpuinfo)\n");
    FILE *f = json_path ? fopen(json_path, "w") : NULL;
    if (json_path && !f) fprintf(stderr, "latch bench --peak: cannot write %s\n", json_path);
    if (f) {
      fprintf(f,
              "{\"latch_peak\": 1, \"n\": %d, \"threads\": %d, \"median_ms\": %.6f, \"product_gflops\": %.3f, "
              "\"conv_median_ms\": %.6f, \"conv_gflops\": %.3f, \"gflops\": %.3f",
              n, options.threads, product_ms, product_gflops, conv_ms, conv_gflops, gflops);
      if (known)
        fprintf(f,
                ", \"theoretical\": {\"cores\": %d, \"mhz\": %.3f, \"lanes\": %d, \"fma_units\": %d, "
                "\"flops_per_cycle\": %d, \"gflops\": %.3f, \"cores_used\": %d, \"gflops_used\": %.3f}",
                cpu.cores, cpu.mhz, cpu.lanes, cpu.fma_units, cpu.flops_per_cycle, cpu.gflops, used, used_gflops);
      fprintf(f, "}\n");
      ok = fclose(f) == 0;
    }
    ok = ok && (!json_path || f);
  }
  free(samples);
  latch_release(a);
  latch_release(b);
  latch_release(x);
  latch_release(w);
  latch_close(rt);
  return ok ? 0 : 1;
}
