/* One cpu executable run from four threads at once: each run must give the result one
 * thread gets alone. Executables are immutable after compile and every run allocates its
 * own buffers, so this also runs clean under ThreadSanitizer (make tsan). The module mixes
 * fast kernels large enough to go parallel, a BLAS dot, buffers reused between steps, a
 * reference-path op (clamp) and a kept reduce of a parameter (b summed over its rows, kept
 * in whichever arena ran it, reused by later runs on any thread). */
#include <pthread.h>
#include <stdio.h>

#include "cpu_util.h"
#include "runtime/cpu/cpu.h"
#include "runtime/reference/reference.h"

enum { THREADS = 4, RUNS = 6 };

static const char *const text =
    "HloModule t\nadd {\n x = f32[] parameter(0)\n y = f32[] parameter(1)\n ROOT s = f32[] add(x, y)\n}\n"
    "ENTRY e {\n a = f32[64,300] parameter(0)\n b = f32[300,64] parameter(1)\n"
    " d = f32[64,64] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    " t = f32[64,64] tanh(d)\n e = f32[64,64] exponential(t)\n m = f32[64,64] multiply(e, t)\n"
    " lo = f32[] constant(-0.5)\n hi = f32[] constant(2)\n c = f32[64,64] clamp(lo, m, hi)\n"
    " z = f32[] constant(0)\n r = f32[64] reduce(c, z), dimensions={1}, to_apply=add\n"
    " big = f32[64,300] exponential(a)\n s = f32[64] reduce(big, z), dimensions={1}, to_apply=add\n"
    " k = f32[64] reduce(b, z), dimensions={0}, to_apply=add\n rk = f32[64] add(r, k)\n"
    " ROOT out = (f32[64], f32[64]) tuple(rk, s)\n}\n";

typedef struct worker {
  rt_executable *exe;
  rt_value *args[2];
  const rt_value *want;
  int mismatches, failures;
} worker;

static bool equal(const rt_value *a, const rt_value *b) {
  if (a->shape.dtype == HLO_TUPLE) {
    if (b->shape.dtype != HLO_TUPLE || a->tuple_count != b->tuple_count) return false;
    for (int i = 0; i < a->tuple_count; i++)
      if (!equal(a->tuple[i], b->tuple[i])) return false;
    return true;
  }
  return a->count == b->count && memcmp(a->data, b->data, (size_t)hlo_shape_bytes(&a->shape)) == 0;
}

static void *work(void *arg) {
  worker *w = arg;
  for (int r = 0; r < RUNS; r++) {
    hlo_diag diag = {0};
    rt_value *got = NULL;
    if (rt_backend_cpu.execute(w->exe, w->args, 2, &got, &diag) != HLO_OK) w->failures++;
    else if (!equal(got, w->want)) w->mismatches++;
    rt_value_release(got);
  }
  return NULL;
}

static void test_four_threads(void) {
  hlo_diag diag = {0};
  rt_executable *exe = compile_checked(text);
  if (!exe) return;
  rt_value *a = rt_value_new_array(HLO_F32, 2, (int64_t[]){64, 300});
  rt_value *b = rt_value_new_array(HLO_F32, 2, (int64_t[]){300, 64});
  for (int64_t i = 0; i < a->count; i++) rt_set_f64(a, i, (double)((i * 37) % 101) / 101.0 - 0.5);
  for (int64_t i = 0; i < b->count; i++) rt_set_f64(b, i, (double)((i * 53) % 97) / 970.0 - 0.05);
  rt_value *args[2] = {a, b};
  rt_value *want = NULL;
  CHECK_EQ_INT(rt_backend_cpu.execute(exe, args, 2, &want, &diag), HLO_OK);
  /* and the reference agrees with the single-threaded result */
  rt_value *ref = run_on(&rt_backend_reference, text, args, 2, &diag);
  CHECK(ref && want && ref->tuple_count == 2);
  for (int t = 0; ref && want && t < 2; t++)
    for (int64_t i = 0; i < ref->tuple[t]->count; i++)
      CHECK_NEAR(rt_get_f64(want->tuple[t], i), rt_get_f64(ref->tuple[t], i), 1e-4);
  worker workers[THREADS];
  pthread_t threads[THREADS];
  for (int i = 0; i < THREADS; i++) {
    workers[i] = (worker){.exe = exe, .args = {a, b}, .want = want};
    CHECK(pthread_create(&threads[i], NULL, work, &workers[i]) == 0);
  }
  for (int i = 0; i < THREADS; i++) {
    pthread_join(threads[i], NULL);
    CHECK_EQ_INT(workers[i].failures, 0);
    CHECK_EQ_INT(workers[i].mismatches, 0);
  }
  rt_value_release(ref);
  rt_value_release(want);
  rt_value_release(a);
  rt_value_release(b);
  rt_backend_cpu.destroy(exe);
}

/* Executables bound from one compiled graph share one kept arena, and with it the kept
 * weight (w * w, the same for every binding: kept_places.c hands it from one plan to
 * another): four threads each run a binding of its own (rows 61..64 of x @ (w * w), then
 * tanh) at once; each result must equal what its binding gives alone. */
static const char *bound_text(int rows) {
  static char text[512];
  snprintf(text, sizeof text,
           "HloModule b\nENTRY e {\n a = f32[%d,300] parameter(0)\n w = f32[300,64] parameter(1)\n"
           " b = f32[300,64] multiply(w, w)\n"
           " d = f32[%d,64] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
           " t = f32[%d,64] tanh(d)\n ROOT e = f32[%d,64] exponential(t)\n}\n",
           rows, rows, rows, rows);
  return text;
}

static void test_bound_family(void) {
  hlo_diag diag = {0};
  rt_executable *exe = compile_checked(bound_text(64));
  if (!exe) return;
  rt_value *b = rt_value_new_array(HLO_F32, 2, (int64_t[]){300, 64});
  for (int64_t i = 0; i < b->count; i++) rt_set_f64(b, i, (double)((i * 53) % 97) / 970.0 - 0.05);
  worker workers[THREADS];
  rt_executable *bound[THREADS] = {0};
  rt_value *wants[THREADS] = {0};
  for (int i = 0; i < THREADS; i++) {
    int rows = 61 + i;
    hlo_module *binding = parse_checked(bound_text(rows));
    bound[i] = binding ? rt_backend_cpu.bind(exe, binding, &diag) : NULL;
    hlo_module_free(binding);
    CHECK_MSG(bound[i] != NULL, "bind %d: %s", rows, diag.message);
    rt_value *a = rt_value_new_array(HLO_F32, 2, (int64_t[]){rows, 300});
    for (int64_t k = 0; k < a->count; k++) rt_set_f64(a, k, (double)((k * 37 + i) % 101) / 101.0 - 0.5);
    workers[i] = (worker){.exe = bound[i], .args = {a, b}};
    if (bound[i]) CHECK_EQ_INT(rt_backend_cpu.execute(bound[i], workers[i].args, 2, &wants[i], &diag), HLO_OK);
    workers[i].want = wants[i];
  }
  pthread_t threads[THREADS];
  bool all = true;
  for (int i = 0; i < THREADS; i++) all = all && bound[i] && wants[i];
  for (int i = 0; all && i < THREADS; i++) CHECK(pthread_create(&threads[i], NULL, work, &workers[i]) == 0);
  for (int i = 0; all && i < THREADS; i++) {
    pthread_join(threads[i], NULL);
    CHECK_EQ_INT(workers[i].failures, 0);
    CHECK_EQ_INT(workers[i].mismatches, 0);
  }
  for (int i = 0; i < THREADS; i++) {
    rt_value_release(wants[i]);
    rt_value_release(workers[i].args[0]);
    rt_backend_cpu.destroy(bound[i]);
  }
  rt_value_release(b);
  rt_backend_cpu.destroy(exe);
}

int main(void) {
  RUN(test_four_threads);
  RUN(test_bound_family);
  return TEST_REPORT();
}
