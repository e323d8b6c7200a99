/* One executable whose convolutions run on oneDNN, run from four threads at once: each run
 * must give the bytes one thread gets alone, which agree with the reference. The graph keeps
 * a blocked result between its two convolutions, absorbs a batch norm and a residual add as
 * post-ops and keeps its reordered weights in each arena with their stamps, so concurrent
 * runs share the primitives and nothing else. Then the same with the executable loaded from
 * its serialized form, whose primitives the first of the threads makes. Built under ThreadSanitizer by make tsan
 * (oneDNN's OpenMP team is one thread there: libgomp is not instrumented). */
#include <pthread.h>
#include <stdio.h>

#include "cpu_util.h"

enum { THREADS = 4, RUNS = 4, PARAMS = 8 };

static const char *const text =
    "HloModule t\nENTRY e {\n x = f32[2,8,14,14] parameter(0)\n w = f32[16,8,3,3] parameter(1)\n"
    " mean = f32[16] parameter(2)\n var = f32[16] parameter(3)\n gamma = f32[16] parameter(4)\n"
    " beta = f32[16] parameter(5)\n w2 = f32[16,16,3,3] parameter(6)\n bias = f32[16] parameter(7)\n"
    " c = f32[2,16,14,14] convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01\n"
    " bm = f32[2,16,14,14] broadcast(mean), dimensions={1}\n bv = f32[2,16,14,14] broadcast(var), dimensions={1}\n"
    " vv = f32[2,16,14,14] multiply(bv, bv)\n eps = f32[] constant(1e-05)\n be = f32[2,16,14,14] broadcast(eps), dimensions={}\n"
    " ve = f32[2,16,14,14] add(vv, be)\n r = f32[2,16,14,14] rsqrt(ve)\n s = f32[2,16,14,14] subtract(c, bm)\n"
    " n = f32[2,16,14,14] multiply(s, r)\n bg = f32[2,16,14,14] broadcast(gamma), dimensions={1}\n"
    " g = f32[2,16,14,14] multiply(n, bg)\n bb = f32[2,16,14,14] broadcast(beta), dimensions={1}\n"
    " a = f32[2,16,14,14] add(g, bb)\n zero = f32[] constant(0)\n z = f32[2,16,14,14] broadcast(zero), dimensions={}\n"
    " h = f32[2,16,14,14] maximum(a, z)\n"
    " c2 = f32[2,16,14,14] convolution(h, w2), window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01\n"
    " b2 = f32[2,16,14,14] broadcast(bias), dimensions={1}\n d2 = f32[2,16,14,14] add(c2, b2)\n"
    " t = f32[2,16,14,14] add(d2, h)\n ROOT y = f32[2,16,14,14] maximum(t, z)\n}\n";

typedef struct worker {
  rt_executable *exe;
  rt_value **args;
  const rt_value *want;
  int mismatches, failures;
} worker;

static void *work(void *arg) {
  worker *w = arg;
  for (int r = 0; r < RUNS; r++) {
    hlo_diag diag = {0};
    rt_value *got = NULL;
    if (rt_backend_cpu.execute(w->exe, w->args, PARAMS, &got, &diag) != HLO_OK) w->failures++;
    else if (memcmp(got->data, w->want->data, (size_t)hlo_shape_bytes(&got->shape)) != 0) w->mismatches++;
    rt_value_release(got);
  }
  return NULL;
}

/* Whether the threads run the executable compiled or the one loaded from its bytes. */
static bool loaded_runs;

static void test_four_threads(void) {
  hlo_module *module = parse_checked(text);
  rt_executable *exe = compile_checked(text);
  if (!module || !exe) {
    hlo_module_free(module);
    rt_backend_cpu.destroy(exe);
    return;
  }
  hlo_diag diag = {0};
  rt_value *args[PARAMS];
  for (int i = 0; i < PARAMS; i++) args[i] = rt_random_value(&module->entry->params[i]->shape, 7, (uint64_t)i, &diag);
  rt_value *alone = NULL;
  CHECK_MSG(rt_backend_cpu.execute(exe, args, PARAMS, &alone, &diag) == HLO_OK, "%s", diag.message);
  rt_value *want = run_on(&rt_backend_reference, text, args, PARAMS, &diag);
  CHECK(alone && want && cpu_agree(want, alone));
  /* loaded from its serialized form, the executable's first runs are these threads': the
   * first makes the oneDNN primitives from their descriptions while the others wait */
  void *bytes = NULL;
  size_t len = 0;
  rt_executable *loaded = loaded_runs && rt_backend_cpu.serialize(exe, &bytes, &len, &diag) == HLO_OK
                              ? rt_backend_cpu.deserialize(bytes, len, NULL, &diag)
                              : NULL;
  CHECK_MSG(!loaded_runs || loaded, "%s", diag.message);
  free(bytes);
  worker workers[THREADS];
  pthread_t threads[THREADS];
  for (int t = 0; alone && t < THREADS; t++) {
    workers[t] = (worker){.exe = loaded_runs ? loaded : exe, .args = args, .want = alone};
    CHECK(pthread_create(&threads[t], NULL, work, &workers[t]) == 0);
  }
  for (int t = 0; alone && t < THREADS; t++) {
    pthread_join(threads[t], NULL);
    CHECK_MSG(workers[t].failures == 0 && workers[t].mismatches == 0, "thread %d: %d failed runs, %d mismatches", t,
              workers[t].failures, workers[t].mismatches);
  }
  rt_value_release(alone);
  rt_value_release(want);
  for (int i = 0; i < PARAMS; i++) rt_value_release(args[i]);
  rt_backend_cpu.destroy(loaded);
  rt_backend_cpu.destroy(exe);
  hlo_module_free(module);
}

int main(void) {
  RUN(test_four_threads);
  loaded_runs = true;
  RUN(test_four_threads);
  return TEST_REPORT();
}
