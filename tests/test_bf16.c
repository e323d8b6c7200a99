/* bf16 on the cpu backend against values worked independently, on both of its paths: oneDNN's
 * bf16 matmul (where the processor has bf16 instructions; rt_cpu_bf16_use_native(1) makes a
 * test take it, and the count of its runs shows it did) and the products widened to f32
 * (rt_cpu_bf16_use_native(0): what a processor without them gets). Expected values are the
 * reference evaluator's in fp64 from the same bf16 inputs; a product's f32 sums may differ from
 * them by K * 2^-24 * sum |a_k b_k| (the f32 accumulation bound, the sum of magnitudes worked
 * in fp64 on |a| and |b|), a bf16 result by one more rounding (2^-8 relative).
 *
 * Then the bf16 precision through latch.h: f32 matmuls and convolutions traced under it equal
 * fp64 products of operands rounded to bf16 here (and are not the f32 products); a function's
 * own precision; the cache keys (an f32 graph's disk entry never serves the bf16 graph, nor
 * the other way); bad settings refused; LATCH_CHECK=accuracy passing a bf16 result and failing
 * an injected error larger than bf16's; and the note a compile prints once when the products
 * run widened.
 *
 * Prepacked weights: an f32 graph's products under the bf16 precision (a weight converted to
 * bf16, kept) read their weight packed in oneDNN's layout (or widened to f32, on the widened
 * path), packed once per weight version:
 * three executes pack it once, a weight written and touched is packed again, and each
 * execute's values are the fp64 reference's within the bounds above. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "diff_util.h"
#include "latch.h"
#include "runtime/cpu/exec_internal.h"
#include "test.h"

/* ---- the backend on bf16 modules ---- */

/* value with every float replaced by its magnitude (same type) */
static rt_value *magnitudes(const rt_value *v) {
  rt_value *copy = rt_value_copy(v);
  for (int64_t i = 0; copy && i < copy->count; i++) rt_set_f64(copy, i, fabs(rt_get_f64(v, i)));
  return copy;
}

static rt_value *evaluate(const hlo_module *module, rt_value **args, int n, bool fp64) {
  hlo_diag diag = {0};
  rt_value *out = NULL;
  hlo_status status = rt_evaluate(module, args, n, &(rt_eval_options){.fp64 = fp64}, &out, &diag);
  CHECK_MSG(status == HLO_OK, "reference: %s", diag.message);
  return status == HLO_OK ? out : NULL;
}

/* text (one product, root a single array, contraction k) on the cpu backend with native on or
 * off, within the bounds above of the fp64 reference; true when oneDNN's bf16 matmul ran. */
static bool check_product(int line, const char *text, int64_t k, int native, int seed) {
  hlo_module *module = parse_checked(text);
  if (!module) return false;
  rt_value *args[4] = {NULL}, *abs_args[4] = {NULL};
  hlo_diag diag = {0};
  int n = random_args(text, (uint64_t)seed, args);
  for (int i = 0; i < n; i++) abs_args[i] = magnitudes(args[i]);
  rt_value *want = evaluate(module, args, n, true), *sums = evaluate(module, abs_args, n, true);
  rt_cpu_bf16_use_native(native);
  int64_t before = rt_cpu_matmul_bf16_runs() + rt_cpu_conv_bf16_runs();
  rt_value *got = run_on(&rt_backend_cpu, text, args, n, &diag);
  bool on_dnnl = rt_cpu_matmul_bf16_runs() + rt_cpu_conv_bf16_runs() > before;
  rt_cpu_bf16_use_native(-1);
  CHECK_MSG(got != NULL, "line %d: cpu: %s", line, diag.message);
  bool bf16_result = module->entry->root->shape.dtype == HLO_BF16;
  int64_t first = -1;
  diff_bound bound = {.rel = bf16_result ? 0x1p-8 : 0, .abs = 1e-30, .per_sum = (double)k * 0x1p-24, .sums = sums};
  int64_t bad = sums ? elements_off(want, got, bound, &first) : 1;
  CHECK_MSG(bad == 0, "line %d (native %d): %lld elements off, first %lld", line, native, (long long)bad,
            (long long)first);
  rt_value_release(want);
  rt_value_release(sums);
  rt_value_release(got);
  for (int i = 0; i < n; i++) rt_value_release(args[i]), rt_value_release(abs_args[i]);
  hlo_module_free(module);
  return on_dnnl;
}

/* Each product on both paths: oneDNN's bf16 kernel runs exactly when asked for. */
static void check_both(int line, const char *text, int64_t k) {
  CHECK_MSG(check_product(line, text, k, 1, 1), "line %d: oneDNN's bf16 kernel did not run", line);
  CHECK_MSG(!check_product(line, text, k, 0, 2), "line %d: oneDNN's bf16 kernel ran when widened", line);
}

#define PRODUCT(head, body) "HloModule p\nENTRY e {\n" head "\n ROOT r = " body "\n}\n"

static void test_dots(void) {
  /* plain [m][k] x [k][n], bf16 result */
  check_both(__LINE__, PRODUCT(" a = bf16[33,70] parameter(0)\n b = bf16[70,19] parameter(1)",
                               "bf16[33,19] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}"), 70);
  /* a Linear layer's weight [n][k] by its transpose flag, f32 result (XLA's preferred type) */
  check_both(__LINE__, PRODUCT(" a = bf16[64,128] parameter(0)\n b = bf16[96,128] parameter(1)",
                               "f32[64,96] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={1}"), 128);
  /* a weight gradient's [k][m] lhs */
  check_both(__LINE__, PRODUCT(" a = bf16[40,24] parameter(0)\n b = bf16[40,17] parameter(1)",
                               "f32[24,17] dot(a, b), lhs_contracting_dims={0}, rhs_contracting_dims={0}"), 40);
  /* batched, as attention's scores: one call for the batch */
  check_both(__LINE__, PRODUCT(" a = bf16[6,20,32] parameter(0)\n b = bf16[6,20,32] parameter(1)",
                               "bf16[6,20,20] dot(a, b), lhs_batch_dims={0}, rhs_batch_dims={0}, "
                               "lhs_contracting_dims={2}, rhs_contracting_dims={2}"), 32);
  /* one row (batch-1 Linear) */
  check_both(__LINE__, PRODUCT(" a = bf16[1,300] parameter(0)\n b = bf16[300,50] parameter(1)",
                               "f32[1,50] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}"), 300);
  /* two contracting dims and a batch dim in the middle: the operands are copied into order */
  check_both(__LINE__, PRODUCT(" a = bf16[5,3,7,4] parameter(0)\n b = bf16[7,3,4,9] parameter(1)",
                               "bf16[3,5,9] dot(a, b), lhs_batch_dims={1}, rhs_batch_dims={1}, "
                               "lhs_contracting_dims={2,3}, rhs_contracting_dims={0,2}"), 28);
}

static void test_convolutions(void) {
  const char *nchw = PRODUCT(" x = bf16[2,8,9,9] parameter(0)\n w = bf16[12,8,3,3] parameter(1)",
                             "f32[2,12,9,9] convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01");
  const char *strided = PRODUCT(" x = bf16[1,16,15,15] parameter(0)\n w = bf16[16,4,3,3] parameter(1)",
                                "bf16[1,16,7,7] convolution(x, w), window={size=3x3 stride=2x2}, "
                                "dim_labels=bf01_oi01->bf01, feature_group_count=4");
  const char *nhwc = PRODUCT(" x = bf16[2,10,10,6] parameter(0)\n w = bf16[3,3,6,5] parameter(1)",
                             "f32[2,8,8,5] convolution(x, w), window={size=3x3}, dim_labels=b01f_01io->b01f");
  check_both(__LINE__, nchw, 72);
  check_both(__LINE__, strided, 36);
  check_both(__LINE__, nhwc, 54);
}

/* bf16 elementwise ops compute in f32 and round once: the cpu backend's values are the
 * reference's in declared types (exp and tanh within one bf16 rounding of them). */
static void test_elementwise(void) {
  const char *text =
      "HloModule e\nENTRY e {\n a = bf16[4,300] parameter(0)\n b = bf16[4,300] parameter(1)\n"
      " s = bf16[4,300] add(a, b)\n m = bf16[4,300] multiply(s, a)\n x = bf16[4,300] exponential(m)\n"
      " t = bf16[4,300] tanh(x)\n f = f32[4,300] convert(t)\n g = f32[4,300] multiply(f, f)\n"
      " ROOT r = (bf16[4,300], bf16[4,300], f32[4,300]) tuple(m, t, g)\n}\n";
  hlo_module *module = parse_checked(text);
  if (!module) return;
  hlo_diag diag = {0};
  rt_value *args[2];
  random_args(text, 9, args);
  rt_value *want = evaluate(module, args, 2, false);
  rt_value *got = run_on(&rt_backend_cpu, text, args, 2, &diag);
  CHECK_MSG(got != NULL && want != NULL, "%s", diag.message);
  static const double rel[3] = {0, 0x1p-7, 0x1p-6}; /* m exact; t and g within bf16's rounding */
  for (int out = 0; got && want && out < 3; out++) {
    int64_t first, bad = elements_off(want->tuple[out], got->tuple[out], (diff_bound){.rel = rel[out]}, &first);
    CHECK_MSG(bad == 0, "output %d: %lld elements off, first %lld", out, (long long)bad, (long long)first);
  }
  rt_value_release(want);
  rt_value_release(got);
  rt_value_release(args[0]);
  rt_value_release(args[1]);
  hlo_module_free(module);
}

/* ---- the bf16 precision through latch.h ---- */

/* x rounded to bf16, to nearest even (x finite). */
static float bf16_round(float x) {
  uint32_t bits;
  memcpy(&bits, &x, sizeof bits);
  bits = (bits + 0x7FFFu + ((bits >> 16) & 1u)) & 0xFFFF0000u;
  memcpy(&x, &bits, sizeof x);
  return x;
}

enum { M = 24, K = 160, N = 40 };
static float a_data[M * K], b_data[K * N];

static void fill_operands(void) {
  uint64_t state = 12345;
  for (int i = 0; i < M * K + K * N; i++) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    float v = (float)((double)(state >> 11) / 9007199254740992.0 * 2 - 1);
    if (i < M * K) a_data[i] = v;
    else b_data[i - M * K] = v;
  }
}

/* got (M x N, from a x b) against the fp64 product of the operands rounded to bf16 (rounded)
 * or as they are; the largest distance over the f32 accumulation bound. */
static double product_error(const float *got, bool rounded) {
  double worst = 0;
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      double sum = 0, mags = 0;
      for (int q = 0; q < K; q++) {
        double x = rounded ? bf16_round(a_data[i * K + q]) : a_data[i * K + q];
        double y = rounded ? bf16_round(b_data[q * N + j]) : b_data[q * N + j];
        sum += x * y;
        mags += fabs(x * y);
      }
      double e = fabs(got[i * N + j] - sum) / (K * 0x1p-24 * mags + 1e-30);
      if (e > worst) worst = e;
    }
  return worst;
}

static char repro_dir[] = "/tmp/latch-bf16-repros-XXXXXX";

static latch_runtime *open_with(const char *precision, const char *cache_dir, const char *check, const char *fault) {
  latch_options o;
  latch_options_init(&o);
  o.backend = "cpu";
  o.precision = precision;
  if (cache_dir) o.cache = "disk", o.cache_dir = cache_dir;
  o.check = check;
  o.test_fault = fault;
  o.check_budget = 20;
  o.repro_dir = repro_dir;
  latch_runtime *rt = latch_open(&o);
  CHECK_MSG(rt != NULL, "latch_open: %s", latch_last_error());
  return rt;
}

/* a x b on rt, read into out (M x N); the status */
static latch_status matmul_on(latch_runtime *rt, float *out) {
  latch_tensor *a = latch_from_host(rt, LATCH_F32, 2, (const int64_t[]){M, K}, a_data);
  latch_tensor *b = latch_from_host(rt, LATCH_F32, 2, (const int64_t[]){K, N}, b_data);
  latch_tensor *c = latch_matmul(a, b);
  latch_status status = latch_read(c, out, sizeof(float) * M * N);
  latch_release(a);
  latch_release(b);
  latch_release(c);
  return status;
}

static float got[M * N];

static void test_precision_matmul(void) {
  latch_runtime *rt = open_with("bf16", NULL, NULL, NULL);
  if (!rt) return;
  CHECK_EQ_INT(matmul_on(rt, got), LATCH_OK);
  CHECK_MSG(product_error(got, true) <= 1, "bf16 product off by %g bounds", product_error(got, true));
  CHECK_MSG(product_error(got, false) > 1, "the operands were not rounded");
  latch_close(rt);
  rt = open_with("f32", NULL, NULL, NULL);
  CHECK_EQ_INT(matmul_on(rt, got), LATCH_OK);
  CHECK_MSG(product_error(got, false) <= 1, "f32 product off by %g bounds", product_error(got, false));
  latch_close(rt);
}

/* A 3x3 convolution of 4 features into 2 under bf16, against fp64 sums of rounded operands. */
static void test_precision_conv(void) {
  latch_runtime *rt = open_with("bf16", NULL, NULL, NULL);
  if (!rt) return;
  enum { C = 4, H = 6, O = 2 };
  float x[C * H * H], w[O * C * 9], y[O * 4 * 4];
  for (int i = 0; i < C * H * H; i++) x[i] = a_data[i];
  for (int i = 0; i < O * C * 9; i++) w[i] = b_data[i];
  latch_tensor *tx = latch_from_host(rt, LATCH_F32, 4, (const int64_t[]){1, C, H, H}, x);
  latch_tensor *tw = latch_from_host(rt, LATCH_F32, 4, (const int64_t[]){O, C, 3, 3}, w);
  latch_tensor *ty = latch_conv2d(tx, tw, NULL);
  CHECK_EQ_INT(latch_read(ty, y, sizeof y), LATCH_OK);
  double worst_rounded = 0, worst_exact = 0;
  for (int o = 0; o < O; o++)
    for (int i = 0; i < 4; i++)
      for (int j = 0; j < 4; j++) {
        double r = 0, e = 0, mags = 0;
        for (int c = 0; c < C; c++)
          for (int u = 0; u < 3; u++)
            for (int v = 0; v < 3; v++) {
              float xv = x[(c * H + i + u) * H + j + v], wv = w[((o * C + c) * 3 + u) * 3 + v];
              r += (double)bf16_round(xv) * bf16_round(wv);
              e += (double)xv * wv;
              mags += fabs((double)xv * wv);
            }
        double g = y[(o * 4 + i) * 4 + j], bound = 36 * 0x1p-24 * mags + 1e-30;
        worst_rounded = fmax(worst_rounded, fabs(g - r) / bound);
        worst_exact = fmax(worst_exact, fabs(g - e) / bound);
      }
  CHECK_MSG(worst_rounded <= 1, "bf16 convolution off by %g bounds", worst_rounded);
  CHECK_MSG(worst_exact > 1, "the convolution's operands were not rounded");
  latch_release(tx);
  latch_release(tw);
  latch_release(ty);
  latch_close(rt);
}

static latch_status matmul_fn(void *user, latch_tensor *const *in, int n, const latch_static *statics,
                              int static_count, latch_tensor **out, int out_count) {
  (void)user, (void)n, (void)statics, (void)static_count, (void)out_count;
  out[0] = latch_matmul(in[0], in[1]);
  return LATCH_OK;
}

/* A function's own precision on an f32 runtime, and the runtime's outside it. */
static void test_function_precision(void) {
  latch_runtime *rt = open_with(NULL, NULL, NULL, NULL);
  if (!rt) return;
  latch_function_options fo;
  latch_function_options_init(&fo);
  fo.precision = "bf16";
  latch_function *f = latch_function_new(rt, matmul_fn, NULL, &fo);
  CHECK_MSG(f != NULL, "%s", latch_last_error());
  latch_tensor *in[2] = {latch_from_host(rt, LATCH_F32, 2, (const int64_t[]){M, K}, a_data),
                         latch_from_host(rt, LATCH_F32, 2, (const int64_t[]){K, N}, b_data)};
  for (int call = 0; f && call < 2; call++) { /* a trace, then a hit */
    latch_tensor *out = NULL;
    CHECK_EQ_INT(latch_call(f, in, 2, NULL, 0, &out, 1), LATCH_OK);
    CHECK_EQ_INT(latch_read(out, got, sizeof got), LATCH_OK);
    CHECK_MSG(product_error(got, true) <= 1, "call %d: off by %g bounds", call, product_error(got, true));
    latch_release(out);
  }
  CHECK_EQ_INT(matmul_on(rt, got), LATCH_OK);
  CHECK_MSG(product_error(got, false) <= 1, "outside the function: off by %g bounds", product_error(got, false));
  fo.precision = "fp8";
  CHECK(latch_function_new(rt, matmul_fn, NULL, &fo) == NULL);
  CHECK(strstr(latch_last_error(), "fp8") != NULL);
  latch_release(in[0]);
  latch_release(in[1]);
  if (f) latch_function_free(f);
  latch_close(rt);
}

/* One disk cache: an f32 runtime compiles and saves; a bf16 one compiles its own (no load), a
 * second bf16 one loads that, and an f32 one loads the f32 entry: each with its own values. */
static void test_cache_keys(void) {
  char dir[] = "/tmp/latch-bf16-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  const char *order[4] = {"f32", "bf16", "bf16", "f32"};
  int compiles[4] = {1, 1, 0, 0}, loads[4] = {0, 0, 1, 1};
  for (int i = 0; i < 4; i++) {
    latch_runtime *rt = open_with(order[i], dir, NULL, NULL);
    if (!rt) continue;
    CHECK_EQ_INT(matmul_on(rt, got), LATCH_OK);
    bool bf16 = strcmp(order[i], "bf16") == 0;
    CHECK_MSG(product_error(got, bf16) <= 1 && product_error(got, !bf16) > 1, "run %d (%s): the other precision's values",
              i, order[i]);
    latch_stats s;
    latch_get_stats(rt, &s);
    CHECK_MSG(s.compiles == (uint64_t)compiles[i] && s.disk_loads == (uint64_t)loads[i],
              "run %d (%s): %llu compiles, %llu loads", i, order[i], (unsigned long long)s.compiles,
              (unsigned long long)s.disk_loads);
    latch_close(rt);
  }
  char command[128];
  snprintf(command, sizeof command, "rm -rf '%s'", dir);
  CHECK_EQ_INT(system(command), 0);
}

static void test_settings(void) {
  latch_options o;
  setenv("LATCH_PRECISION", "bf16", 1);
  CHECK_EQ_INT(latch_options_init(&o), LATCH_OK);
  CHECK(o.precision && strcmp(o.precision, "bf16") == 0);
  unsetenv("LATCH_PRECISION");
  CHECK_EQ_INT(latch_options_init(&o), LATCH_OK);
  CHECK(o.precision == NULL);
  o.precision = "half";
  CHECK(latch_open(&o) == NULL);
  CHECK(strstr(latch_last_error(), "precision 'half'") != NULL);
}

/* LATCH_CHECK=accuracy compares with the reference evaluator running the same graph, whose
 * products round their operands to bf16 too: bf16's own error passes, an error past it fails.
 * A dot's result scaled by 1 + 2^-9 is within it (the operands' rounding is 2^-8 each), but
 * fails the f32 graph's check; scaled by 1 + 2^-4 it fails both. */
static void test_accuracy_check(void) {
  struct {
    const char *precision, *fault;
    int failures;
  } cases[] = {
      {"bf16", NULL, 0}, {"bf16", "accuracy:dot:0.001953125", 0}, {"f32", "accuracy:dot:0.001953125", 1},
      {"bf16", "accuracy:dot:0.0625", 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    latch_runtime *rt = open_with(cases[i].precision, NULL, "accuracy", cases[i].fault);
    if (!rt) continue;
    CHECK_EQ_INT(matmul_on(rt, got), LATCH_OK);
    latch_stats s;
    latch_get_stats(rt, &s);
    CHECK_MSG(s.check_failures == (uint64_t)cases[i].failures, "case %zu (%s, %s): %llu failures", i,
              cases[i].precision, cases[i].fault ? cases[i].fault : "no fault", (unsigned long long)s.check_failures);
    latch_close(rt);
  }
}

/* The note on stderr: once per process, only where the products run widened. */
static int notes_while(int native, int compiles) {
  char path[] = "/tmp/latch-bf16-note-XXXXXX";
  int fd = mkstemp(path), saved = dup(2);
  fflush(stderr);
  dup2(fd, 2);
  rt_compile_options options = RT_COMPILE_OPTIONS_INIT;
  options.log_compiles = true;
  cpu_util_options = &options;
  rt_cpu_bf16_use_native(native);
  for (int i = 0; i < compiles; i++) {
    rt_executable *exe = compile_checked(
        PRODUCT(" a = bf16[8,8] parameter(0)", "f32[8,8] dot(a, a), lhs_contracting_dims={1}, rhs_contracting_dims={0}"));
    if (exe) rt_backend_cpu.destroy(exe);
  }
  rt_cpu_bf16_use_native(-1);
  cpu_util_options = NULL;
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  char text[4096] = "";
  FILE *f = fopen(path, "r");
  size_t len = f ? fread(text, 1, sizeof text - 1, f) : 0;
  text[len] = 0;
  if (f) fclose(f);
  close(fd);
  unlink(path);
  int count = 0;
  for (const char *at = text; (at = strstr(at, "bf16 products run converted to f32")); at++) count++;
  return count;
}

static void test_note_once(void) {
  CHECK_EQ_INT(notes_while(1, 2), 0);
  CHECK_EQ_INT(notes_while(0, 3), 1);
  CHECK_EQ_INT(notes_while(0, 1), 0); /* said already */
}

/* ---- prepacked weights ---- */

/* The steps of text's compiled plan that keep a product's rhs packed. */
static int packed_steps(const char *text) {
  hlo_module *module = parse_checked(text);
  if (!module) return -1;
  hlo_pass_run_all(module);
  hlo_diag diag = {0};
  rt_cpu_plan *plan = rt_cpu_plan_build(module, NULL, &diag);
  CHECK_MSG(plan != NULL, "plan: %s", diag.message);
  int count = 0;
  for (int i = 0; plan && i < plan->step_count; i++)
    count += rt_cpu_step_keeps_weights(&plan->steps[i]) && !plan->steps[i].dnnl;
  rt_cpu_plan_free(plan);
  hlo_module_free(module);
  return count;
}

/* exe on args within the bounds of check_product against the fp64 reference of module. */
static void check_execute(int line, const hlo_module *module, rt_executable *exe, rt_value **args, int n, int64_t k) {
  rt_value *abs_args[4] = {NULL};
  for (int i = 0; i < n; i++) abs_args[i] = magnitudes(args[i]);
  rt_value *want = evaluate(module, args, n, true), *sums = evaluate(module, abs_args, n, true), *got = NULL;
  hlo_diag diag = {0};
  CHECK_MSG(rt_backend_cpu.execute(exe, args, n, &got, &diag) == HLO_OK, "line %d: %s", line, diag.message);
  int64_t first;
  diff_bound bound = {.abs = 1e-30, .per_sum = (double)k * 0x1p-24, .sums = sums};
  int64_t bad = sums ? elements_off(want, got, bound, &first) : 1;
  CHECK_MSG(bad == 0, "line %d: %lld elements off", line, (long long)bad);
  rt_value_release(want);
  rt_value_release(sums);
  rt_value_release(got);
  for (int i = 0; i < n; i++) rt_value_release(abs_args[i]);
}

/* x [64, 256] by a weight stored [k][n] (transposed) or [n][k] (a Linear layer's, read by
 * the transpose flag), both converted to bf16 as the precision lowers them, a bias added. */
static void check_packed(int line, bool linear, int native) {
  char text[1024];
  snprintf(text, sizeof text,
           "HloModule p\nENTRY e {\n x = f32[64,256] parameter(0)\n w = f32[%s] parameter(1)\n"
           " b = f32[96] parameter(2)\n xb = bf16[64,256] convert(x)\n wb = bf16[%s] convert(w)\n"
           " d = f32[64,96] dot(xb, wb), lhs_contracting_dims={1}, rhs_contracting_dims={%d}\n"
           " bb = f32[64,96] broadcast(b), dimensions={1}\n ROOT r = f32[64,96] add(d, bb)\n}\n",
           linear ? "96,256" : "256,96", linear ? "96,256" : "256,96", linear ? 1 : 0);
  rt_cpu_bf16_use_native(native);
  int steps = packed_steps(text);
  /* on oneDNN's bf16 kernels the weight is read in a layout of their own; widened, as f32 */
  CHECK_MSG(steps == 1, "line %d (native %d): %d steps keep a packed weight", line, native, steps);
  hlo_module *module = parse_checked(text);
  rt_executable *exe = compile_checked(text);
  rt_value *args[3];
  /* x and w hold bf16 values, so the graph's converts are exact and the fp64 reference's
   * products are the ones the step multiplies */
  if (module) random_args(text, 31, args);
  for (int i = 0; module && i < 2; i++)
    for (int64_t e = 0; e < args[i]->count; e++) ((float *)args[i]->data)[e] = bf16_round(((float *)args[i]->data)[e]);
  int64_t packs = rt_cpu_dot_packs();
  for (int run = 0; exe && module && run < 3; run++) check_execute(line, module, exe, args, 3, 256);
  CHECK_MSG(rt_cpu_dot_packs() - packs == steps, "line %d: %lld packs for 3 executes", line,
            (long long)(rt_cpu_dot_packs() - packs));
  float *w = module ? args[1]->data : NULL;
  for (int64_t i = 0; w && i < args[1]->count; i++) w[i] = bf16_round(-0.5f * w[i] + 0.25f);
  if (module) rt_value_touch(args[1]);
  packs = rt_cpu_dot_packs();
  for (int run = 0; exe && module && run < 2; run++) check_execute(line, module, exe, args, 3, 256);
  CHECK_MSG(rt_cpu_dot_packs() - packs == steps, "line %d: %lld packs after the weight changed", line,
            (long long)(rt_cpu_dot_packs() - packs));
  rt_cpu_bf16_use_native(-1);
  for (int i = 0; module && i < 3; i++) rt_value_release(args[i]);
  if (exe) rt_backend_cpu.destroy(exe);
  hlo_module_free(module);
}

static void test_packed_weights(void) {
  rt_cpu_bf16_use_native(-1);
  bool has_bf16 = rt_cpu_bf16_native(); /* oneDNN's bf16 kernels where the processor has them */
  for (int native = has_bf16 ? 1 : 0; native >= 0; native--) {
    check_packed(__LINE__, false, native);
    check_packed(__LINE__, true, native);
  }
}

int main(void) {
  fill_operands();
  if (!mkdtemp(repro_dir)) return 1;
  RUN(test_dots);
  RUN(test_convolutions);
  RUN(test_elementwise);
  RUN(test_precision_matmul);
  RUN(test_precision_conv);
  RUN(test_function_precision);
  RUN(test_cache_keys);
  RUN(test_settings);
  RUN(test_accuracy_check);
  RUN(test_note_once);
  RUN(test_packed_weights);
  char command[128];
  snprintf(command, sizeof command, "rm -rf '%s'", repro_dir);
  CHECK_EQ_INT(system(command), 0);
  return TEST_REPORT();
}
