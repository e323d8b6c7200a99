/* The cpu backend's layer norm step (runtime/cpu/layer_norm_plan.c, layer_norm.c).
 *
 * Differential: the decompositions frontends emit (latch's lowering: the sum times 1/n, the
 * centred variance, rsqrt; PyTorch's: sums kept as [..., 1] and divided by n; flax's: the
 * mean of squares less the squared mean; a division by sqrt(var + eps)), with and without
 * the weight and the bias, over the last dim and over the last two, at row widths below, at
 * and past the kernel's lanes (2 to 1,000: at width 1 hlo/'s passes simplify the graph into
 * no layer norm); the reference evaluator runs the graph as written and the
 * step must agree within rounding, NaN where it has NaN (rows holding an inf or a NaN).
 * Rows far from zero (a mean a thousand deviations out) are checked against fp64 worked
 * here. Every instruction set variant gives the same bits.
 *
 * bf16: the forms in bf16 arithmetic (a bf16 graph's layer norm) and with x converted from
 * bf16 and the result converted back; one step that reads and writes bf16, against the
 * reference evaluator in fp64 within bf16's rounding of the result.
 *
 * Recognition: each such graph plans one layer norm step with its reductions inside, and
 * executing runs it; near misses (a mean scaled by another constant, the variance also a
 * result, a normalization over a leading dim) keep the graph's own steps and the
 * reference's values. A loaded executable finds the step again. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "diff_util.h"
#include "hlo/hlo.h"
#include "runtime/cpu/exec_internal.h"

enum { F_LATCH, F_TORCH, F_FLAX, F_SQRT, FORM_COUNT };
enum { WB_BOTH, WB_NONE, WB_WEIGHT, WB_BIAS };
/* the graph as written, near misses, and bf16 in and out: x a bf16 parameter converted to f32,
 * the result converted to bf16 */
enum { AS_WRITTEN, WRONG_MEAN, VAR_OUT, LEADING_DIM, BF16_IO };

/* Names of v's mean over the row into `out`: the form's way of taking a row's mean. */
static void mean_of(graph_text *t, const char *v, const char *out, int form, const char *x, const char *rows,
                    const char *reduced, const char *kept, double scale) {
  if (form == F_TORCH) { /* kept as [rows..., 1] and divided by n */
    emit(t, " %s_s = f32[%s] reduce(%s, zero), dimensions={%s}, to_apply=add_f32\n", out, rows, v, reduced);
    emit(t, " %s_r = f32[%s] reshape(%s_s)\n %s_n = f32[%s] broadcast(n), dimensions={}\n", out, kept, out, out, kept);
    emit(t, " %s = f32[%s] divide(%s_r, %s_n)\n", out, kept, out, out);
  } else {
    emit(t, " %s_s = f32[%s] reduce(%s, zero), dimensions={%s}, to_apply=add_f32\n", out, rows, v, reduced);
    emit(t, " %s_c = f32[] constant(%.9g)\n %s_cb = f32[%s] broadcast(%s_c), dimensions={}\n", out, scale, out, rows,
         out);
    emit(t, " %s = f32[%s] multiply(%s_s, %s_cb)\n", out, rows, out, out);
  }
  (void)x;
}

/* A layer norm of x f32[a, b, c] over its last k dims (k 1 or 2), in a form, with the weight
 * and bias wb; variant: a near miss. */
static graph_text ln_graph(int a, int b, int c, int k, int form, int wb, int variant) {
  graph_text t = {.len = 0};
  char x[64], rows[64], kept[64], reduced[16], lead[16], wdims[32], wmap[16];
  snprintf(x, sizeof x, "%d,%d,%d", a, b, c);
  int n = k == 1 ? c : b * c;
  bool leading = variant == LEADING_DIM; /* over dim 1 instead of 2 */
  if (k == 1 && !leading) {
    snprintf(rows, sizeof rows, "%d,%d", a, b), snprintf(kept, sizeof kept, "%d,%d,1", a, b);
    snprintf(reduced, sizeof reduced, "2"), snprintf(lead, sizeof lead, "0,1");
    snprintf(wdims, sizeof wdims, "%d", c), snprintf(wmap, sizeof wmap, "2");
  } else if (k == 1) {
    n = b;
    snprintf(rows, sizeof rows, "%d,%d", a, c), snprintf(kept, sizeof kept, "%d,1,%d", a, c);
    snprintf(reduced, sizeof reduced, "1"), snprintf(lead, sizeof lead, "0,2");
    snprintf(wdims, sizeof wdims, "%d", b), snprintf(wmap, sizeof wmap, "1");
  } else {
    snprintf(rows, sizeof rows, "%d", a), snprintf(kept, sizeof kept, "%d,1,1", a);
    snprintf(reduced, sizeof reduced, "1,2"), snprintf(lead, sizeof lead, "0");
    snprintf(wdims, sizeof wdims, "%d,%d", b, c), snprintf(wmap, sizeof wmap, "1,2");
  }
  /* PyTorch's statistics keep the reduced dims as size 1; HLO's broadcast takes them after a
   * reshape back to the rows */
  const char *stat = form == F_TORCH ? kept : rows, *map = lead;
  double scale = variant == WRONG_MEAN ? 0.5 / n : 1.0 / n;
  emit(&t, "HloModule ln\nadd_f32 {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] add(a, b)\n}\n");
  if (variant == BF16_IO) emit(&t, "ENTRY e {\n xb = bf16[%s] parameter(0)\n x = f32[%s] convert(xb)\n", x, x);
  else emit(&t, "ENTRY e {\n x = f32[%s] parameter(0)\n", x);
  if (wb == WB_BOTH || wb == WB_WEIGHT) emit(&t, " w = f32[%s] parameter(1)\n", wdims);
  if (wb == WB_BOTH || wb == WB_BIAS) emit(&t, " bias = f32[%s] parameter(%d)\n", wdims, wb == WB_BOTH ? 2 : 1);
  emit(&t, " zero = f32[] constant(0)\n n = f32[] constant(%d)\n eps = f32[] constant(1e-5)\n", n);
  mean_of(&t, "x", "mean", form, "x", rows, reduced, kept, scale);
  emit(&t, " meanr = f32[%s] reshape(mean)\n", rows);
  emit(&t, " meanb = f32[%s] broadcast(meanr), dimensions={%s}\n d = f32[%s] subtract(x, meanb)\n", x, map, x);
  if (form == F_FLAX) {
    emit(&t, " xx = f32[%s] multiply(x, x)\n", x);
    mean_of(&t, "xx", "msq", form, "x", rows, reduced, kept, 1.0 / n);
    emit(&t, " mm = f32[%s] multiply(mean, mean)\n var = f32[%s] subtract(msq, mm)\n", stat, stat);
  } else {
    emit(&t, " dd = f32[%s] multiply(d, d)\n", x);
    mean_of(&t, "dd", "var", form, "x", rows, reduced, kept, 1.0 / n);
  }
  emit(&t, " epsb = f32[%s] broadcast(eps), dimensions={}\n ve = f32[%s] add(var, epsb)\n", stat, stat);
  if (form == F_SQRT) {
    emit(&t, " sd = f32[%s] sqrt(ve)\n sdr = f32[%s] reshape(sd)\n", stat, rows);
    emit(&t, " sdb = f32[%s] broadcast(sdr), dimensions={%s}\n", x, map);
    emit(&t, " y0 = f32[%s] divide(d, sdb)\n", x);
  } else {
    emit(&t, " inv = f32[%s] rsqrt(ve)\n invr = f32[%s] reshape(inv)\n", stat, rows);
    emit(&t, " invb = f32[%s] broadcast(invr), dimensions={%s}\n", x, map);
    emit(&t, " y0 = f32[%s] multiply(d, invb)\n", x);
  }
  const char *y = "y0";
  if (wb == WB_BOTH || wb == WB_WEIGHT) {
    emit(&t, " wb = f32[%s] broadcast(w), dimensions={%s}\n y1 = f32[%s] multiply(wb, %s)\n", x, wmap, x, y);
    y = "y1";
  }
  if (wb == WB_BOTH || wb == WB_BIAS) {
    emit(&t, " bb = f32[%s] broadcast(bias), dimensions={%s}\n y2 = f32[%s] add(%s, bb)\n", x, wmap, x, y);
    y = "y2";
  }
  if (variant == VAR_OUT) emit(&t, " ROOT r = (f32[%s], f32[%s]) tuple(%s, var)\n}\n", x, stat, y);
  else if (variant == BF16_IO) emit(&t, " ROOT r = bf16[%s] convert(%s)\n}\n", x, y);
  else emit(&t, " ROOT r = f32[%s] copy(%s)\n}\n", x, y);
  return t;
}

/* The layer norm steps of text's plan after hlo/'s passes, and whether every reduce is inside
 * one. */
static int layer_norm_steps(const char *text, bool *reduces_inside) {
  hlo_module *module = parse_checked(text);
  if (!module) return -1;
  hlo_pass_run_all(module);
  hlo_diag diag = {0};
  rt_cpu_plan *plan = rt_cpu_plan_build(module, NULL, &diag);
  CHECK_MSG(plan != NULL, "plan: %s", diag.message);
  int count = 0;
  *reduces_inside = true;
  for (int i = 0; plan && i < plan->step_count; i++) {
    const rt_cpu_step *step = &plan->steps[i];
    count += step->kind == RT_STEP_ATTENTION && step->attention->layer_norm;
    if (step->instr->opcode == HLO_OP_REDUCE) *reduces_inside = *reduces_inside && step->kind == RT_STEP_INSIDE;
  }
  rt_cpu_plan_free(plan);
  hlo_module_free(module);
  return count;
}

/* text on the cpu backend against the reference evaluator with want_steps layer norm steps
 * planned and run; args released. */
static void check_graph(int line, const char *text, rt_value **args, int n, int want_steps) {
  bool reduces_inside = false;
  int steps = layer_norm_steps(text, &reduces_inside);
  CHECK_MSG(steps == want_steps, "line %d: %d layer norm steps, want %d\n%s", line, steps, want_steps, text);
  if (want_steps) CHECK_MSG(reduces_inside, "line %d: a reduce is computed outside the step", line);
  hlo_diag diag = {0};
  rt_value *want = run_on(&rt_backend_reference, text, args, n, &diag);
  CHECK_MSG(want != NULL, "line %d: reference: %s", line, diag.message);
  int64_t runs = rt_cpu_layer_norm_run_count();
  rt_value *got = run_on(&rt_backend_cpu, text, args, n, &diag);
  CHECK_MSG(got != NULL, "line %d: cpu: %s", line, diag.message);
  CHECK_MSG(rt_cpu_layer_norm_run_count() - runs == want_steps, "line %d: %lld layer norm runs, want %d", line,
            (long long)(rt_cpu_layer_norm_run_count() - runs), want_steps);
  CHECK_MSG(cpu_agree(want, got), "line %d: the cpu backend differs from the reference", line);
  rt_value_release(want);
  rt_value_release(got);
  for (int i = 0; i < n; i++) rt_value_release(args[i]);
}

static void test_forms(void) {
  static const int widths[] = {2, 7, 8, 33, 768, 1000};
  for (int form = 0; form < FORM_COUNT; form++)
    for (int wi = 0; wi < 6; wi++)
      for (int wb = WB_BOTH; wb <= WB_BIAS; wb++) {
        graph_text t = ln_graph(2, 3, widths[wi], 1, form, wb, AS_WRITTEN);
        rt_value *args[3];
        int n = random_args(t.s, (uint64_t)(form * 100 + wi * 10 + wb), args);
        check_graph(__LINE__, t.s, args, n, 1);
      }
  for (int form = 0; form < FORM_COUNT; form++) { /* over the last two dims */
    graph_text t = ln_graph(3, 4, 40, 2, form, form % 2 ? WB_NONE : WB_BOTH, AS_WRITTEN);
    rt_value *args[3];
    int n = random_args(t.s, (uint64_t)form + 7, args);
    check_graph(__LINE__, t.s, args, n, 1);
  }
}

/* Rows holding an inf or a NaN come out NaN in the graph and in the step. */
static void test_special(void) {
  graph_text t = ln_graph(1, 4, 33, 1, F_LATCH, WB_BOTH, AS_WRITTEN);
  rt_value *args[3];
  int n = random_args(t.s, 3, args);
  float *x = args[0]->data;
  x[5] = NAN;
  x[33 + 32] = INFINITY;
  x[66] = -INFINITY;
  check_graph(__LINE__, t.s, args, n, 1);
}

/* Rows a thousand deviations from zero: the step against fp64 worked here. */
static void test_offset(void) {
  enum { ROWS = 4, C = 768 };
  graph_text t = ln_graph(1, ROWS, C, 1, F_LATCH, WB_NONE, AS_WRITTEN);
  rt_value *args[1];
  int n = random_args(t.s, 11, args);
  float *x = args[0]->data;
  for (int i = 0; i < ROWS * C; i++) x[i] = 1000.0f + x[i] * 0.5f;
  double want[ROWS * C];
  for (int r = 0; r < ROWS; r++) {
    double s = 0, ss = 0;
    for (int c = 0; c < C; c++) s += x[r * C + c];
    double mean = s / C;
    for (int c = 0; c < C; c++) ss += (x[r * C + c] - mean) * (x[r * C + c] - mean);
    double inv = 1 / sqrt(ss / C + (double)1e-5f);
    for (int c = 0; c < C; c++) want[r * C + c] = (x[r * C + c] - mean) * inv;
  }
  hlo_diag diag = {0};
  rt_value *got = run_on(&rt_backend_cpu, t.s, args, n, &diag);
  CHECK_MSG(got != NULL, "cpu: %s", diag.message);
  double worst = 0;
  for (int i = 0; got && i < ROWS * C; i++) {
    double e = fabs(((const float *)got->data)[i] - want[i]);
    if (e > worst) worst = e;
  }
  CHECK_MSG(worst < 1e-5, "largest difference from fp64 %g", worst);
  rt_value_release(got);
  rt_value_release(args[0]);
}

/* text on every instruction set variant the processor has: the same bits each time. */
static void check_variants(const char *text, uint64_t seed) {
  rt_value *args[3];
  int n = random_args(text, seed, args);
  rt_cpu_isa was = rt_cpu_isa_in_use();
  rt_value *first = NULL;
  for (int isa = 0; isa < RT_CPU_ISA_COUNT; isa++) {
    if (!rt_cpu_use_isa((rt_cpu_isa)isa)) continue;
    hlo_diag diag = {0};
    rt_value *got = run_on(&rt_backend_cpu, text, args, n, &diag);
    CHECK_MSG(got != NULL, "%s: %s", rt_cpu_isa_name((rt_cpu_isa)isa), diag.message);
    if (!first) first = got;
    else {
      size_t bytes = (size_t)got->count * hlo_dtype_size(got->shape.dtype);
      CHECK_MSG(got && memcmp(first->data, got->data, bytes) == 0, "%s differs", rt_cpu_isa_name((rt_cpu_isa)isa));
      rt_value_release(got);
    }
  }
  rt_cpu_use_isa(was);
  rt_value_release(first);
  for (int i = 0; i < n; i++) rt_value_release(args[i]);
}

/* Every instruction set variant gives the same bits, f32 and bf16 (in and out). */
static void test_variants(void) {
  graph_text t = ln_graph(2, 5, 777, 1, F_LATCH, WB_BOTH, AS_WRITTEN);
  check_variants(t.s, 5);
  t = ln_graph(2, 5, 777, 1, F_TORCH, WB_BOTH, BF16_IO);
  check_variants(t.s, 15);
}

/* ---- bf16 ---- */

/* t with every f32 made bf16: a bf16 graph's layer norm, its arithmetic and constants bf16
 * (as latch lowers one on bf16 tensors). */
static graph_text all_bf16(const graph_text *t) {
  graph_text out = {.len = 0};
  for (const char *p = t->s; *p;) {
    const char *hit = strstr(p, "f32");
    if (!hit) {
      emit(&out, "%s", p);
      break;
    }
    emit(&out, "%.*sbf16", (int)(hit - p), p);
    p = hit + 3;
  }
  return out;
}

/* text (bf16 in, bf16 out) plans one layer norm step, with every reduce and convert inside
 * it or the step itself, runs it once, and agrees with the reference evaluator in fp64 within
 * bound; args released. */
static void check_bf16(int line, const char *text, rt_value **args, int n, diff_bound bound) {
  bool reduces_inside = false;
  int steps = layer_norm_steps(text, &reduces_inside);
  CHECK_MSG(steps == 1 && reduces_inside, "line %d: %d layer norm steps\n%s", line, steps, text);
  hlo_module *module = parse_checked(text);
  hlo_diag diag = {0};
  rt_value *want = NULL, *got = NULL;
  if (module && rt_evaluate(module, args, n, &(rt_eval_options){.fp64 = true}, &want, &diag) != HLO_OK)
    CHECK_MSG(false, "line %d: reference: %s", line, diag.message);
  int64_t runs = rt_cpu_layer_norm_run_count();
  got = run_on(&rt_backend_cpu, text, args, n, &diag);
  CHECK_MSG(got && got->shape.dtype == HLO_BF16, "line %d: cpu: %s", line, diag.message);
  CHECK_EQ_INT(rt_cpu_layer_norm_run_count() - runs, 1);
  int64_t first, off = elements_off(want, got, bound, &first);
  CHECK_MSG(off == 0, "line %d: %lld elements off, first %lld (%g, want %g)", line, (long long)off, (long long)first,
            first >= 0 ? rt_get_f64(got, first) : 0.0, first >= 0 ? rt_get_f64(want, first) : 0.0);
  rt_value_release(want);
  rt_value_release(got);
  hlo_module_free(module);
  for (int i = 0; i < n; i++) rt_value_release(args[i]);
}

/* Both bf16 kinds in each form, weight and bias or neither, widths below, at and past the
 * lanes and a run: the step reads bf16, computes in f32 (statistics in f64) and rounds its
 * result to bf16 once. Converted in and out, the graph's arithmetic is f32 and the fp64
 * reference differs from the step by that last rounding (2^-9 relative); in bf16 arithmetic
 * the graph's own constants (1/n, eps) are bf16 too, which moves the reference a few 2^-9
 * more. A NaN or an inf in a row makes it NaN in both. */
static void test_bf16(void) {
  static const int widths[] = {2, 7, 33, 768, 1000};
  for (int form = 0; form < FORM_COUNT; form++)
    for (int wi = 0; wi < 5; wi++)
      for (int io = 0; io < 2; io++) {
        int wb = (form + wi) % 2 ? WB_NONE : WB_BOTH;
        graph_text t = ln_graph(2, 3, widths[wi], 1, form, wb, io ? BF16_IO : AS_WRITTEN);
        if (!io) t = all_bf16(&t);
        rt_value *args[3];
        uint64_t seed = (uint64_t)(form * 100 + wi * 10 + io);
        int n = random_args(t.s, seed, args);
        if (wi == 2) { /* a NaN in row 1, an inf in row 4 */
          rt_set_f64(args[0], 33 + 5, NAN);
          rt_set_f64(args[0], 4 * 33 + 32, INFINITY);
        }
        diff_bound bound = io ? (diff_bound){.rel = 0x1p-8, .abs = 1e-6} : (diff_bound){.rel = 0x1p-7, .abs = 0x1p-8};
        check_bf16(__LINE__, t.s, args, n, bound);
      }
}

static void test_near_misses(void) {
  int variants[] = {WRONG_MEAN, VAR_OUT, LEADING_DIM};
  for (int i = 0; i < 3; i++) {
    graph_text t = ln_graph(2, 6, 9, 1, F_LATCH, WB_BOTH, variants[i]);
    rt_value *args[3];
    int n = random_args(t.s, (uint64_t)i + 20, args);
    check_graph(__LINE__, t.s, args, n, 0);
  }
}

/* Serialized and loaded, the executable finds its layer norm step again and runs it. */
static void test_loaded(void) {
  graph_text t = ln_graph(2, 7, 96, 1, F_TORCH, WB_BOTH, AS_WRITTEN);
  rt_value *args[3];
  int n = random_args(t.s, 9, args);
  check_loaded(t.s, args, n, rt_cpu_layer_norm_run_count);
  for (int i = 0; i < n; i++) rt_value_release(args[i]);
}

int main(void) {
  RUN(test_forms);
  RUN(test_special);
  RUN(test_offset);
  RUN(test_variants);
  RUN(test_bf16);
  RUN(test_near_misses);
  RUN(test_loaded);
  return TEST_REPORT();
}
