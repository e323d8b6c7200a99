/* latch's own Winograd F(4x4, 3x3) (runtime/cpu/wino.c), the AVX2 machines' 3x3 kernel, against
 * the reference evaluator (its fp64 result, by the accuracy rule). oneDNN is held to AVX2 (ONEDNN_MAX_CPU_ISA, set before its first
 * call) so that its layouts are nChw8c and wino.c runs on any x86 machine with AVX2, AVX-512
 * ones included. Each graph's plan is inspected and the kernel's runs counted, so no test
 * passes by the convolution quietly taking oneDNN's kernel: epilogues (bias, relu, an unfolded
 * batch norm, a residual, relu6), partial tiles, padding, NHWC, other feature counts, NaN
 * operands and overflowing transforms (oneDNN's kernel then, the reference's result), weights
 * transformed once per contents and again after an in-place write, a binding at another
 * batch size and a blob round trip. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_util.h"
#include "runtime/cpu/dnnl_internal.h"

static void count_wino(const rt_cpu_dnnl *d, void *ctx) { *(int *)ctx += d->wino; }

/* How many of text's DNNL steps run on wino.c. */
static int planned(const char *text) {
  hlo_module *module = parse_checked(text);
  hlo_diag diag = {0};
  rt_cpu_plan *plan = module ? rt_cpu_plan_build(module, NULL, &diag) : NULL;
  CHECK_MSG(plan != NULL || !module, "plan: %s", diag.message);
  int count = 0;
  for (int i = 0; plan && i < plan->step_count; i++)
    if (plan->steps[i].kind == RT_STEP_DNNL) count_wino(plan->steps[i].dnnl, &count);
  rt_cpu_plan_free(plan);
  hlo_module_free(module);
  return count;
}

/* got, text's result on args, within the accuracy rule (runtime/accuracy.c) of the reference
 * evaluator's fp64 result: Winograd rounds differently from a direct sum (about 1e-4 apart
 * on sums near 10 of 576 products), past cpu_agree's per-element 1e-4 where sums cancel. */
static void expect_accurate(int line, const char *text, rt_value **args, int n, const rt_value *got) {
  hlo_module *module = parse_checked(text);
  hlo_diag diag = {0};
  rt_value *declared = NULL, *fp64 = NULL;
  bool ran = module && rt_evaluate(module, args, n, &(rt_eval_options){.fp64 = false}, &declared, &diag) == HLO_OK &&
             rt_evaluate(module, args, n, &(rt_eval_options){.fp64 = true}, &fp64, &diag) == HLO_OK;
  rt_accuracy_verdict verdict = {0};
  CHECK_MSG(ran && got && rt_accuracy_compare(got, declared, fp64, RT_ACCURACY_DEFAULT_TOL, &verdict, &diag) == HLO_OK &&
                verdict.passed,
            "line %d: %s %s", line, verdict.message, diag.message);
  rt_value_release(declared);
  rt_value_release(fp64);
  hlo_module_free(module);
}

/* text planned with `steps` steps on wino.c, and within the accuracy rule on two seeds, each
 * run going through wino.c once per such step. */
static void expect_wino(int line, const char *text, int steps) {
  CHECK_MSG(planned(text) == steps, "line %d: %d steps on wino.c, want %d", line, planned(text), steps);
  hlo_module *module = parse_checked(text);
  if (!module) return;
  int n = module->entry->param_count;
  for (int seed = 1; seed <= 2; seed++) {
    hlo_diag diag = {0};
    rt_value *args[8] = {NULL};
    for (int i = 0; i < n && i < 8; i++)
      args[i] = rt_random_value(&module->entry->params[i]->shape, (uint64_t)seed, (uint64_t)i, &diag);
    int64_t runs = rt_cpu_wino_run_count();
    rt_value *got = run_on(&rt_backend_cpu, text, args, n, &diag);
    CHECK_MSG(rt_cpu_wino_run_count() - runs == steps, "line %d: %lld runs, want %d", line,
              (long long)(rt_cpu_wino_run_count() - runs), steps);
    expect_accurate(line, text, args, n, got);
    rt_value_release(got);
    for (int i = 0; i < n && i < 8; i++) rt_value_release(args[i]);
  }
  hlo_module_free(module);
}

static const char *relu_conv =
    "HloModule c\nENTRY e {\n x = f32[%1$d,64,28,28] parameter(0)\n w = f32[64,64,3,3] parameter(1)\n"
    " b = f32[64] parameter(2)\n c = f32[%1$d,64,28,28] convolution(x, w), window={size=3x3 pad=1_1x1_1}, "
    "dim_labels=bf01_oi01->bf01\n bb = f32[%1$d,64,28,28] broadcast(b), dimensions={1}\n"
    " a = f32[%1$d,64,28,28] add(c, bb)\n z = f32[] constant(0)\n zb = f32[%1$d,64,28,28] broadcast(z), dimensions={}\n"
    " ROOT y = f32[%1$d,64,28,28] maximum(a, zb)\n}\n";

static const char *relu_text(int batch) {
  static char text[1024];
  snprintf(text, sizeof text, relu_conv, batch);
  return text;
}

static void test_epilogues(void) {
  expect_wino(__LINE__, relu_text(1), 1);
  /* a residual block's second convolution: batch norm unfolded (subtract, multiply by
   * rsqrt(var + eps), multiply, add), the residual, relu6 */
  const char *block =
      "HloModule c\nENTRY e {\n x = f32[1,64,28,28] parameter(0)\n w = f32[64,64,3,3] parameter(1)\n"
      " mean = f32[64] parameter(2)\n var = f32[64] parameter(3)\n gamma = f32[64] parameter(4)\n"
      " beta = f32[64] parameter(5)\n r = f32[1,64,28,28] parameter(6)\n"
      " c = f32[1,64,28,28] convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01\n"
      " bm = f32[1,64,28,28] broadcast(mean), dimensions={1}\n bv = f32[1,64,28,28] broadcast(var), dimensions={1}\n"
      " eps = f32[] constant(1e-05)\n be = f32[1,64,28,28] broadcast(eps), dimensions={}\n"
      " vv = f32[1,64,28,28] multiply(bv, bv)\n ve = f32[1,64,28,28] add(vv, be)\n rs = f32[1,64,28,28] rsqrt(ve)\n"
      " s = f32[1,64,28,28] subtract(c, bm)\n n = f32[1,64,28,28] multiply(s, rs)\n"
      " bg = f32[1,64,28,28] broadcast(gamma), dimensions={1}\n g = f32[1,64,28,28] multiply(n, bg)\n"
      " bb = f32[1,64,28,28] broadcast(beta), dimensions={1}\n b = f32[1,64,28,28] add(g, bb)\n"
      " sum = f32[1,64,28,28] add(b, r)\n zero = f32[] constant(0)\n six = f32[] constant(6)\n"
      " ROOT y = f32[1,64,28,28] clamp(zero, sum, six)\n}\n";
  expect_wino(__LINE__, block, 1);
}

static void test_shapes(void) {
  /* partial tiles (30x26), batch 2, 72 features out (a multiple of 8, not of 16) */
  expect_wino(__LINE__,
              "HloModule c\nENTRY e {\n x = f32[2,64,30,26] parameter(0)\n w = f32[72,64,3,3] parameter(1)\n"
              " ROOT y = f32[2,72,30,26] convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01\n}\n",
              1);
  /* no padding, and padding of 2 before and 0 after */
  expect_wino(__LINE__,
              "HloModule c\nENTRY e {\n x = f32[2,64,30,30] parameter(0)\n w = f32[64,64,3,3] parameter(1)\n"
              " ROOT y = f32[2,64,28,28] convolution(x, w), window={size=3x3}, dim_labels=bf01_oi01->bf01\n}\n",
              1);
  expect_wino(__LINE__,
              "HloModule c\nENTRY e {\n x = f32[2,64,28,28] parameter(0)\n w = f32[64,64,3,3] parameter(1)\n"
              " ROOT y = f32[2,64,28,28] convolution(x, w), window={size=3x3 pad=2_0x2_0}, dim_labels=bf01_oi01->bf01\n}\n",
              1);
  /* NHWC with HWIO weights: reordered in and out, the filters read through their strides */
  expect_wino(__LINE__,
              "HloModule c\nENTRY e {\n x = f32[1,28,28,64] parameter(0)\n w = f32[3,3,64,64] parameter(1)\n"
              " ROOT y = f32[1,28,28,64] convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f\n}\n",
              1);
  /* too few tiles for the channels (a 7x7 plane of 64): oneDNN's kernel */
  CHECK_EQ_INT(planned("HloModule c\nENTRY e {\n x = f32[1,64,7,7] parameter(0)\n w = f32[64,64,3,3] parameter(1)\n"
                       " ROOT y = f32[1,64,7,7] convolution(x, w), window={size=3x3 pad=1_1x1_1}, "
                       "dim_labels=bf01_oi01->bf01\n}\n"),
               0);
}

/* relu_text(batch) on exe within the accuracy rule on args, with want_runs runs of wino.c;
 * how many results are not finite. */
static int expect_args(int line, rt_executable *exe, int batch, rt_value **args, int64_t want_runs) {
  hlo_diag diag = {0};
  int64_t runs = rt_cpu_wino_run_count();
  rt_value *got = NULL;
  CHECK_MSG(rt_backend_cpu.execute(exe, args, 3, &got, &diag) == HLO_OK, "line %d: %s", line, diag.message);
  CHECK_MSG(rt_cpu_wino_run_count() - runs == want_runs, "line %d: %lld runs of wino.c, want %lld", line,
            (long long)(rt_cpu_wino_run_count() - runs), (long long)want_runs);
  expect_accurate(line, relu_text(batch), args, 3, got);
  int nonfinite = 0;
  for (int64_t i = 0; got && i < got->count; i++) nonfinite += !isfinite(((const float *)got->data)[i]);
  rt_value_release(got);
  return nonfinite;
}

static void seeded(int batch, uint64_t seed, rt_value **args) {
  hlo_module *module = parse_checked(relu_text(batch));
  hlo_diag diag = {0};
  for (int i = 0; i < 3; i++) args[i] = module ? rt_random_value(&module->entry->params[i]->shape, seed, (uint64_t)i, &diag) : NULL;
  hlo_module_free(module);
}

/* NaN in the source: oneDNN's kernel, the NaN where the reference has it (the relu keeps it).
 * Sources of +-3e37 with small weights: the direct sums are finite, Winograd's transforms
 * overflow; wino.c finds its result not finite, and oneDNN's kernel computes it. */
static void test_nonfinite(void) {
  rt_executable *exe = compile_checked(relu_text(1));
  rt_value *args[3];
  seeded(1, 5, args);
  if (!exe || !args[0]) return;
  float *x = args[0]->data, *w = args[1]->data;
  x[700] = NAN;
  rt_value_touch(args[0]);
  CHECK_MSG(expect_args(__LINE__, exe, 1, args, 0) > 0, "the NaN reaches the result");
  for (int64_t i = 0; i < args[0]->count; i++) x[i] = (i % 2 ? 3e37f : -3e37f) * (1 + (float)(i % 5) / 8);
  for (int64_t i = 0; i < args[1]->count; i++) w[i] = (float)((i * 37) % 11 - 5) * 2e-5f;
  rt_value_touch(args[0]);
  rt_value_touch(args[1]);
  CHECK_EQ_INT(expect_args(__LINE__, exe, 1, args, 1), 0);
  for (int i = 0; i < 3; i++) rt_value_release(args[i]);
  rt_backend_cpu.destroy(exe);
}

/* The filters are transformed on the first run, not on the next with the same stamp, again
 * after an in-place write; a binding at batch 3 runs wino.c too and agrees with the
 * reference; a blob round trip keeps the plan and the bits. */
static void test_weights_bindings_blobs(void) {
  rt_executable *exe = compile_checked(relu_text(1));
  rt_value *args[3], *big[3];
  seeded(1, 9, args);
  seeded(3, 10, big);
  if (!exe || !args[0] || !big[0]) return;
  for (int i = 1; i < 3; i++) {
    rt_value_release(big[i]);
    big[i] = rt_value_retain(args[i]);
  }
  int64_t reorders = rt_cpu_dnnl_weight_reorder_count();
  expect_args(__LINE__, exe, 1, args, 1);
  CHECK_EQ_INT(rt_cpu_dnnl_weight_reorder_count() - reorders, 1);
  expect_args(__LINE__, exe, 1, args, 1);
  CHECK_EQ_INT(rt_cpu_dnnl_weight_reorder_count() - reorders, 1);
  ((float *)args[1]->data)[5] = 0.75f;
  rt_value_touch(args[1]);
  expect_args(__LINE__, exe, 1, args, 1);
  CHECK_EQ_INT(rt_cpu_dnnl_weight_reorder_count() - reorders, 2);
  hlo_diag diag = {0};
  hlo_module *binding = parse_checked(relu_text(3));
  rt_executable *bound = binding ? rt_backend_cpu.bind(exe, binding, &diag) : NULL;
  hlo_module_free(binding);
  CHECK_MSG(bound != NULL, "bind: %s", diag.message);
  if (bound) {
    expect_args(__LINE__, bound, 3, big, 1);
    expect_args(__LINE__, exe, 1, args, 1);
    rt_backend_cpu.destroy(bound);
  }
  void *bytes = NULL;
  size_t len = 0;
  CHECK_MSG(rt_backend_cpu.serialize(exe, &bytes, &len, &diag) == HLO_OK, "serialize: %s", diag.message);
  rt_executable *loaded = bytes ? rt_backend_cpu.deserialize(bytes, len, NULL, &diag) : NULL;
  CHECK_MSG(loaded != NULL, "deserialize: %s", diag.message);
  if (loaded) {
    rt_value *a = NULL, *b = NULL;
    CHECK(rt_backend_cpu.execute(exe, args, 3, &a, &diag) == HLO_OK);
    int64_t runs = rt_cpu_wino_run_count();
    CHECK(rt_backend_cpu.execute(loaded, args, 3, &b, &diag) == HLO_OK);
    CHECK_EQ_INT(rt_cpu_wino_run_count() - runs, 1);
    CHECK_MSG(a && b && a->count == b->count && memcmp(a->data, b->data, (size_t)a->count * sizeof(float)) == 0,
              "the loaded executable's bits differ");
    rt_value_release(a);
    rt_value_release(b);
    rt_backend_cpu.destroy(loaded);
  }
  free(bytes);
  for (int i = 0; i < 3; i++) rt_value_release(args[i]), rt_value_release(big[i]);
  rt_backend_cpu.destroy(exe);
}

int main(void) {
  setenv("ONEDNN_MAX_CPU_ISA", "AVX2", 1); /* before oneDNN's first call */
  if (!__builtin_cpu_supports("avx2")) {
    printf("tests/test_cpu_wino.c: no AVX2 here: oneDNN's layouts are not nChw8c, nothing to test\n");
    return 0;
  }
  RUN(test_epilogues);
  RUN(test_shapes);
  RUN(test_nonfinite);
  RUN(test_weights_bindings_blobs);
  return TEST_REPORT();
}
