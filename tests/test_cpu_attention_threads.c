/* One cpu executable with an attention step (runtime/cpu/attention.c) run from four threads
 * at once, each run checked against the reference evaluator's result: the step's blocks of
 * scores live on the stack of the thread running them, so runs share nothing but the
 * executable, and this runs clean under ThreadSanitizer (make tsan). The graph is a
 * projection-layout attention with a padding mask added and a causal mask selected.
 *
 * Then the other kernels of a transformer block the same way, in one graph: a layer norm
 * step whose result is stored as bf16 (layer_norm.c) and a batch of small f32 products as one
 * oneDNN matmul (dot.c's batched path on processors with AVX-512). A bf16 product whose
 * weight is kept widened or packed in each execute's arena is not run from several threads
 * here: under ThreadSanitizer it differed from the reference about once in thirty runs, with
 * no race reported, and the cause is not found yet (docs/cpu-backend.md, bf16). */
#include <pthread.h>
#include <stdio.h>

#include "diff_util.h"
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
  int arg_count;
  const rt_value *want;
  /* -1 when got agrees with want, else the first output that differs */
  int (*differs)(const rt_value *want, const rt_value *got);
  int failures, output; /* output: the first differing output seen */
} worker;

static void *work(void *arg) {
  worker *w = arg;
  for (int run = 0; run < RUNS; run++) {
    hlo_diag diag = {0};
    rt_value *got = NULL;
    int output = rt_backend_cpu.execute(w->exe, w->args, w->arg_count, &got, &diag) == HLO_OK ? w->differs(w->want, got) : 0;
    if (output >= 0 && w->failures++ == 0) w->output = output;
    rt_value_release(got);
  }
  return NULL;
}

/* exe run RUNS times on each of THREADS threads at once, every result agreeing with want. */
static void run_threads(rt_executable *exe, rt_value *const *args, int arg_count, const rt_value *want,
                        int (*differs)(const rt_value *, const rt_value *)) {
  worker workers[THREADS];
  pthread_t threads[THREADS];
  for (int i = 0; i < THREADS; i++) {
    workers[i] = (worker){.exe = exe, .args = args, .arg_count = arg_count, .want = want, .differs = differs};
    CHECK(pthread_create(&threads[i], NULL, work, &workers[i]) == 0);
  }
  for (int i = 0; i < THREADS; i++) {
    pthread_join(threads[i], NULL);
    CHECK_MSG(workers[i].failures == 0, "thread %d: %d runs differ from the reference (first in output %d)", i,
              workers[i].failures, workers[i].output);
  }
}

/* The attention graph's one output against the reference. */
static int attention_differs(const rt_value *want, const rt_value *got) { return cpu_agree(want, got) ? -1 : 0; }

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
  if (exe && want) run_threads(exe, args, 4, want, attention_differs);
  if (exe && want) CHECK_EQ_INT(rt_cpu_attention_run_count() - runs, THREADS * RUNS);
  if (exe) rt_backend_cpu.destroy(exe);
  rt_value_release(want);
  for (int i = 0; i < 4; i++) rt_value_release(args[i]);
}

/* A layer norm of x [40, 64] stored as bf16 (the step writes it) and a batch of six 20 x 32
 * by 32 x 20 products. */
static const char *const kernels_text =
    "HloModule k\n"
    "add_f32 {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] add(a, b)\n}\n"
    "ENTRY e {\n x = f32[40,64] parameter(0)\n g = f32[64] parameter(1)\n bias = f32[64] parameter(2)\n"
    " p = f32[6,20,32] parameter(3)\n q = f32[6,32,20] parameter(4)\n zero = f32[] constant(0)\n"
    " s = f32[40] reduce(x, zero), dimensions={1}, to_apply=add_f32\n"
    " c = f32[] constant(0.015625)\n cb = f32[40] broadcast(c), dimensions={}\n mean = f32[40] multiply(s, cb)\n"
    " meanb = f32[40,64] broadcast(mean), dimensions={0}\n d = f32[40,64] subtract(x, meanb)\n"
    " dd = f32[40,64] multiply(d, d)\n s2 = f32[40] reduce(dd, zero), dimensions={1}, to_apply=add_f32\n"
    " var = f32[40] multiply(s2, cb)\n eps = f32[] constant(1e-5)\n epsb = f32[40] broadcast(eps), dimensions={}\n"
    " ve = f32[40] add(var, epsb)\n inv = f32[40] rsqrt(ve)\n invb = f32[40,64] broadcast(inv), dimensions={0}\n"
    " y0 = f32[40,64] multiply(d, invb)\n gb = f32[40,64] broadcast(g), dimensions={1}\n"
    " y1 = f32[40,64] multiply(y0, gb)\n bb = f32[40,64] broadcast(bias), dimensions={1}\n"
    " y2 = f32[40,64] add(y1, bb)\n y = bf16[40,64] convert(y2)\n"
    " bd = f32[6,20,20] dot(p, q), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, "
    "rhs_contracting_dims={1}\n"
    " ROOT r = (bf16[40,64], f32[6,20,20]) tuple(y, bd)\n}\n";

/* The layer norm within one bf16 rounding (the step's f32 result and the graph's may round
 * to neighbours, 2^-7 apart at most), the products within summation order. */
static int kernels_differ(const rt_value *want, const rt_value *got) {
  if (!want || !got || got->shape.dtype != HLO_TUPLE || got->tuple_count != 2) return 0;
  int64_t first;
  if (elements_off(want->tuple[0], got->tuple[0], (diff_bound){.rel = 0x1p-7, .abs = 1e-6}, &first)) return 0;
  return cpu_agree(want->tuple[1], got->tuple[1]) ? -1 : 1;
}

static void test_kernels_threads(void) {
  rt_value *args[7];
  int n = random_args(kernels_text, 43, args);
  hlo_diag diag = {0};
  rt_value *want = run_on(&rt_backend_reference, kernels_text, args, n, &diag);
  CHECK_MSG(want != NULL, "reference: %s", diag.message);
  rt_executable *exe = compile_checked(kernels_text);
  int64_t norms = rt_cpu_layer_norm_run_count();
  if (exe && want) run_threads(exe, args, n, want, kernels_differ);
  if (exe && want) CHECK_EQ_INT(rt_cpu_layer_norm_run_count() - norms, THREADS * RUNS);
  if (exe) rt_backend_cpu.destroy(exe);
  rt_value_release(want);
  for (int i = 0; i < n; i++) rt_value_release(args[i]);
}

int main(void) {
  RUN(test_threads);
  RUN(test_kernels_threads);
  return TEST_REPORT();
}
