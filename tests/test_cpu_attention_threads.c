/* One cpu executable with an attention step (runtime/cpu/attention.c) run from four threads
 * at once, each run checked against the reference evaluator's result: the step's blocks of
 * scores live on the stack of the thread running them, so runs share nothing but the
 * executable, and this runs clean under ThreadSanitizer (make tsan). The graph is a
 * projection-layout attention with a padding mask added and a causal mask selected. */
#include <pthread.h>
#include <stdio.h>

#include "cpu_util.h"
#include "runtime/cpu/exec_internal.h"

enum { THREADS = 4, RUNS = 3 };

static const char *const text =
    "HloModule t\n"
    "max_f32 {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT m = f32[] maximum(a, b)\n}\n"
    "add_f32 {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] add(a, b)\n}\n"
    "ENTRY e {\n q = f32[2,150,2,64] parameter(0)\n k = f32[2,150,2,64] parameter(1)\n"
    " v = f32[2,150,2,64] parameter(2)\n pad = f32[2,150] parameter(3)\n"
    " s = f32[2,2,150,150] dot(q, k), lhs_batch_dims={0,2}, lhs_contracting_dims={3}, rhs_batch_dims={0,2}, "
    "rhs_contracting_dims={3}\n"
    " c = f32[] constant(8)\n cb = f32[2,2,150,150] broadcast(c), dimensions={}\n"
    " x0 = f32[2,2,150,150] divide(s, cb)\n"
    " i0 = s32[150,150] iota(), iota_dimension=0\n i1 = s32[150,150] iota(), iota_dimension=1\n"
    " above = pred[150,150] compare(i1, i0), direction=GT\n"
    " ab = pred[2,2,150,150] broadcast(above), dimensions={2,3}\n ninf = f32[] constant(-inf)\n"
    " nb = f32[2,2,150,150] broadcast(ninf), dimensions={}\n x1 = f32[2,2,150,150] select(ab, nb, x0)\n"
    " pb = f32[2,2,150,150] broadcast(pad), dimensions={0,3}\n x = f32[2,2,150,150] add(x1, pb)\n"
    " mx = f32[2,2,150] reduce(x, ninf), dimensions={3}, to_apply=max_f32\n"
    " mxb = f32[2,2,150,150] broadcast(mx), dimensions={0,1,2}\n sh = f32[2,2,150,150] subtract(x, mxb)\n"
    " e = f32[2,2,150,150] exponential(sh)\n zero = f32[] constant(0)\n"
    " sm = f32[2,2,150] reduce(e, zero), dimensions={3}, to_apply=add_f32\n"
    " smb = f32[2,2,150,150] broadcast(sm), dimensions={0,1,2}\n p = f32[2,2,150,150] divide(e, smb)\n"
    " ROOT o = f32[2,2,150,64] dot(p, v), lhs_batch_dims={0,1}, lhs_contracting_dims={3}, rhs_batch_dims={0,2}, "
    "rhs_contracting_dims={1}\n}\n";

typedef struct worker {
  rt_executable *exe;
  rt_value *const *args;
  const rt_value *want;
  int failures;
} worker;

static void *work(void *arg) {
  worker *w = arg;
  for (int run = 0; run < RUNS; run++) {
    hlo_diag diag = {0};
    rt_value *got = NULL;
    if (rt_backend_cpu.execute(w->exe, w->args, 4, &got, &diag) != HLO_OK || !cpu_agree(w->want, got)) w->failures++;
    rt_value_release(got);
  }
  return NULL;
}

static void test_threads(void) {
  hlo_module *module = parse_checked(text);
  if (!module) return;
  rt_value *args[4];
  hlo_diag diag = {0};
  for (int i = 0; i < 4; i++) args[i] = rt_random_value(&module->entry->params[i]->shape, 41, (uint64_t)i, &diag);
  float *pad = args[3]->data;
  for (int j = 0; j < 300; j++) pad[j] = j % 150 >= 100 + 30 * (j / 150) ? -INFINITY : 0.0f; /* the last keys */
  hlo_module_free(module);
  rt_value *want = run_on(&rt_backend_reference, text, args, 4, &diag);
  CHECK_MSG(want != NULL, "reference: %s", diag.message);
  rt_executable *exe = compile_checked(text);
  int64_t runs = rt_cpu_attention_run_count();
  worker workers[THREADS];
  pthread_t threads[THREADS];
  for (int i = 0; exe && want && i < THREADS; i++) {
    workers[i] = (worker){.exe = exe, .args = args, .want = want};
    CHECK(pthread_create(&threads[i], NULL, work, &workers[i]) == 0);
  }
  for (int i = 0; exe && want && i < THREADS; i++) {
    pthread_join(threads[i], NULL);
    CHECK_MSG(workers[i].failures == 0, "thread %d: %d runs differ from the reference", i, workers[i].failures);
  }
  if (exe && want) CHECK_EQ_INT(rt_cpu_attention_run_count() - runs, THREADS * RUNS);
  if (exe) rt_backend_cpu.destroy(exe);
  rt_value_release(want);
  for (int i = 0; i < 4; i++) rt_value_release(args[i]);
}

int main(void) {
  RUN(test_threads);
  return TEST_REPORT();
}
