/* Micro-benchmark of traced functions, written against latch.h only (the second half of
 * `latch bench --micro`):
 *   - guard evaluation per call (from latch_function_stats.guard_ns) for 1, 4 and 16 inputs;
 *   - dispatch overhead per call on a tiny graph (everything but the backend's execute, from
 *     latch_stats.execute_ns) for trace-once hits against trace-every on the same graph;
 *   - backend compiles and traces of an MLP batch sweep 1..64 under static and automatic,
 *     and what each other binding of the symbolic entry cost without a compile (template,
 *     lowering, and on the cpu backend binding the entry's executable to the new sizes).
 * Each figure is the best of ROUNDS rounds (the least disturbed by other processes on a
 * shared machine). guard_ns includes the two clock reads that time it; their cost is
 * printed too. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "latch.h"

enum { ROUNDS = 7 };

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static double best(const double *v, int n) {
  double m = v[0];
  for (int i = 1; i < n; i++) m = v[i] < m ? v[i] : m;
  return m;
}

/* out = in[0] + in[1] + ... + in[0] (so one input still makes a graph) */
static latch_status sum_inputs(void *user, latch_tensor *const *in, int n, latch_tensor **out, int on) {
  (void)user, (void)on;
  latch_tensor *acc = latch_retain(in[0]);
  for (int i = 1; i <= n; i++) {
    latch_tensor *next = latch_binary(LATCH_ADD, acc, in[i % n]);
    latch_release(acc);
    acc = next;
  }
  out[0] = acc;
  return LATCH_OK;
}

static latch_runtime *open_rt(void) {
  latch_options options;
  latch_options_init(&options);
  options.eager = false;
  return latch_open(&options);
}

/* Per-call figures for a function of `inputs` inputs of f32[4] in the given mode. */
static void measure(int inputs, latch_trace_mode mode, int calls, double *guard_ns, double *call_ns,
                    double *dispatch_ns) {
  latch_runtime *rt = open_rt();
  latch_function_options o;
  latch_function_options_init(&o);
  o.mode = mode;
  latch_function *f = latch_function_new_step(rt, sum_inputs, NULL, &o);
  latch_tensor *in[16];
  float data[4] = {1, 2, 3, 4};
  int64_t dims[1] = {4};
  for (int i = 0; i < inputs; i++) in[i] = latch_from_host(rt, LATCH_F32, 1, dims, data);
  latch_tensor *out = NULL;
  latch_call(f, in, inputs, NULL, 0, &out, 1); /* the trace */
  latch_release(out);
  double g[ROUNDS], c[ROUNDS], d[ROUNDS];
  for (int r = 0; r < ROUNDS; r++) {
    latch_function_stats s0, s1;
    latch_stats r0, r1;
    latch_function_get_stats(f, &s0);
    latch_get_stats(rt, &r0);
    uint64_t start = now_ns();
    for (int k = 0; k < calls; k++) {
      latch_call(f, in, inputs, NULL, 0, &out, 1);
      latch_release(out);
    }
    uint64_t elapsed = now_ns() - start;
    latch_function_get_stats(f, &s1);
    latch_get_stats(rt, &r1);
    g[r] = (double)(s1.guard_ns - s0.guard_ns) / calls;
    c[r] = (double)elapsed / calls;
    d[r] = (double)(elapsed - (r1.execute_ns - r0.execute_ns)) / calls;
  }
  *guard_ns = best(g, ROUNDS);
  *call_ns = best(c, ROUNDS);
  *dispatch_ns = best(d, ROUNDS);
  for (int i = 0; i < inputs; i++) latch_release(in[i]);
  latch_function_free(f);
  latch_close(rt);
}

typedef struct mlp {
  latch_tensor *w1, *w2;
} mlp;

static latch_status mlp_step(void *user, latch_tensor *const *in, int n, latch_tensor **out, int on) {
  (void)n, (void)on;
  mlp *m = user;
  latch_tensor *h = latch_matmul(in[0], m->w1), *r = latch_relu(h);
  out[0] = latch_matmul(r, m->w2);
  latch_release(h);
  latch_release(r);
  return LATCH_OK;
}

static void sweep(latch_shape_policy shapes) {
  latch_runtime *rt = open_rt();
  float w[64 * 64];
  for (int i = 0; i < 64 * 64; i++) w[i] = (float)(i % 7) * 0.01f;
  mlp m = {latch_from_host(rt, LATCH_F32, 2, (int64_t[]){32, 64}, w), latch_from_host(rt, LATCH_F32, 2, (int64_t[]){64, 10}, w)};
  latch_function_options o;
  latch_function_options_init(&o);
  o.shapes = shapes;
  o.recompile_limit = 1000;
  latch_function *f = latch_function_new_step(rt, mlp_step, &m, &o);
  float *x = calloc(64 * 32, sizeof(float));
  uint64_t start = now_ns();
  for (int64_t b = 1; b <= 64; b++) {
    latch_tensor *in = latch_from_host(rt, LATCH_F32, 2, (int64_t[]){b, 32}, x), *out = NULL;
    latch_call(f, &in, 1, NULL, 0, &out, 1);
    latch_release(out);
    latch_release(in);
  }
  uint64_t elapsed = now_ns() - start;
  latch_function_stats s;
  latch_stats rs;
  latch_function_get_stats(f, &s);
  latch_get_stats(rt, &rs);
  printf("  %-9s traces %3llu  recompiles %3llu  backend compiles %3llu (%.2f ms)  specializations %llu  "
         "instantiations %llu (%.1f us each, no compile)  sweep %.2f ms\n",
         shapes == LATCH_SHAPES_STATIC ? "static" : "automatic", (unsigned long long)s.traces,
         (unsigned long long)s.recompiles, (unsigned long long)rs.compiles, (double)rs.compile_ns / 1e6,
         (unsigned long long)s.specializations, (unsigned long long)s.instantiations,
         s.instantiations ? (double)s.instantiate_ns / 1e3 / (double)s.instantiations : 0.0, (double)elapsed / 1e6);
  free(x);
  latch_function_free(f);
  latch_release(m.w1);
  latch_release(m.w2);
  latch_close(rt);
}

int bench_function_micro(void) {
  latch_options options;
  latch_options_init(&options);
  printf("latch traced functions, backend %s\n", options.backend);
  double clock_rounds[ROUNDS];
  uint64_t sink = 0;
  for (int r = 0; r < ROUNDS; r++) {
    uint64_t t0 = now_ns();
    for (int i = 0; i < 20000; i++) sink += now_ns();
    clock_rounds[r] = (double)(now_ns() - t0) / 20000;
  }
  printf("one clock read: %.1f ns%s\n", best(clock_rounds, ROUNDS), sink == 1 ? " " : "");
  printf("guard evaluation per call (trace-once hit; sampled, one clock read included):\n");
  int counts[3] = {1, 4, 16};
  for (int i = 0; i < 3; i++) {
    double g, c, d;
    measure(counts[i], LATCH_TRACE_ONCE, 20000, &g, &c, &d);
    printf("  %2d inputs: %7.1f ns (%.1f ns per input)\n", counts[i], g, g / counts[i]);
  }
  printf("dispatch overhead per call on a tiny graph (adds of f32[4]; call time minus backend execute):\n");
  for (int i = 0; i < 3; i++) {
    double g1, c1, d1, g2, c2, d2;
    measure(counts[i], LATCH_TRACE_ONCE, 20000, &g1, &c1, &d1);
    measure(counts[i], LATCH_TRACE_EVERY, 2000, &g2, &c2, &d2);
    printf("  %2d inputs: trace-once %8.0f ns (call %8.0f ns)   trace-every %8.0f ns (call %8.0f ns)   %.1fx\n",
           counts[i], d1, c1, d2, c2, d2 / d1);
  }
  printf("MLP batch sweep 1..64:\n");
  sweep(LATCH_SHAPES_STATIC);
  sweep(LATCH_SHAPES_AUTOMATIC);
  return 0;
}
