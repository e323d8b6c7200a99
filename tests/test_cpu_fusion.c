/* Elementwise fusion in the cpu backend (runtime/cpu/fusion_groups.c, fusion_run.c).
 *
 * Differential: seeded random chains of f32 elementwise ops with broadcasts (scalar, row,
 * column, inner block, one that cannot fold), converts from pred and s32 and to pred,
 * reshapes, scalar constants, compare/select/clamp, values with several users, entry results
 * in the middle of a chain; inputs salted with NaN, infinities and signed zeros; sizes that
 * are empty, tiny, and odd multiples of nothing (bigger than a tile, so threads split them).
 * The reference evaluator computes the same f32 formulas one op at a time, so results must
 * agree exactly (NaN with NaN), but for graphs with erf, exp, logistic or tanh (plain
 * arithmetic here, libm's erff, expf and tanhf there): within 1e-5.
 *
 * The chains run again with each vector variant of the fused loops the processor has.
 *
 * Plan inspection: a chain becomes one step, its intermediates take no buffer, a value whose
 * users are all in one group joins it (GELU after a product), and nothing fuses across a
 * value read by two groups or a result of the entry. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "hlo/hlo.h"
#include "runtime/runtime.h"
#include "runtime/cpu/fusion_internal.h"
#include "rng_util.h"
#include "test.h"
#include "runtime/cpu/cpu.h"
#include "runtime/reference/reference.h"

enum { GRAPHS = 600, MAX_VALUES = 64 };

typedef struct text {
  char buf[16384];
  size_t len;
} text;

static void emit(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void emit(text *t, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(t->buf + t->len, sizeof t->buf - t->len, fmt, ap);
  va_end(ap);
  if (n > 0 && t->len + (size_t)n < sizeof t->buf) t->len += (size_t)n;
}

typedef struct gen {
  rng r;
  text t;
  int64_t d0, d1, d2;
  char shape[64];            /* f32[d0,d1,d2] without the type */
  char values[MAX_VALUES][8];/* f32 values of the main shape */
  int value_count;
  char preds[MAX_VALUES][8]; /* pred values of the main shape */
  int pred_count;
  int names;
} gen;

static const char *fresh(gen *g, char *name) {
  snprintf(name, 8, "v%d", g->names++);
  return name;
}

static const char *any_value(gen *g) { return g->values[g->value_count - 1 - pick(&g->r, g->value_count < 3 ? g->value_count : 3)]; }

/* An operand for a binary op: another value, or one of the broadcasts. */
static const char *second_operand(gen *g, char *name) {
  const char *dims = g->shape;
  switch (pick(&g->r, 9)) {
    case 0: emit(&g->t, " %s = f32[%s] broadcast(c), dimensions={}\n", fresh(g, name), dims); return name;
    case 1: emit(&g->t, " %s = f32[%s] broadcast(p2), dimensions={1}\n", fresh(g, name), dims); return name;
    case 2: emit(&g->t, " %s = f32[%s] broadcast(p3), dimensions={2}\n", fresh(g, name), dims); return name;
    case 3: emit(&g->t, " %s = f32[%s] broadcast(p4), dimensions={}\n", fresh(g, name), dims); return name;
    case 4: emit(&g->t, " %s = f32[%s] broadcast(p6), dimensions={0,1}\n", fresh(g, name), dims); return name;
    case 5: emit(&g->t, " %s = f32[%s] broadcast(p7), dimensions={1,2}\n", fresh(g, name), dims); return name;
    case 6: emit(&g->t, " %s = f32[%s] broadcast(p9), dimensions={0,2}\n", fresh(g, name), dims); return name;
    default: return g->values[pick(&g->r, g->value_count)];
  }
}

static void add_value(gen *g, const char *name) {
  if (g->value_count < MAX_VALUES) snprintf(g->values[g->value_count++], 8, "%s", name);
}

static void add_pred(gen *g, const char *name) {
  if (g->pred_count < MAX_VALUES) snprintf(g->preds[g->pred_count++], 8, "%s", name);
}

static const char *const unary_ops[] = {"exponential", "negate", "tanh", "logistic", "abs", "sqrt", "rsqrt", "log",
                                        "floor", "ceil", "sine", "cosine", "erf", "sign", "round-nearest-even",
                                        "exponential-minus-one", "log-plus-one", "round-nearest-afz"};
static const char *const binary_ops[] = {"add", "subtract", "multiply", "divide", "maximum", "minimum"};
static const char *const directions[] = {"EQ", "NE", "LT", "LE", "GT", "GE"};

static void random_op(gen *g) {
  char name[8], other[8], mid[8];
  const char *dims = g->shape;
  switch (pick(&g->r, 10)) {
    case 0: case 1:
      emit(&g->t, " %s = f32[%s] %s(%s)\n", fresh(g, name), dims, unary_ops[pick(&g->r, 18)], any_value(g));
      add_value(g, name);
      break;
    case 2: case 3: case 4: {
      const char *x = any_value(g), *y = second_operand(g, other);
      bool swap = pick(&g->r, 2);
      emit(&g->t, " %s = f32[%s] %s(%s, %s)\n", fresh(g, name), dims, binary_ops[pick(&g->r, 6)], swap ? y : x,
           swap ? x : y);
      add_value(g, name);
      break;
    }
    case 5: {
      const char *x = any_value(g), *y = second_operand(g, other);
      emit(&g->t, " %s = pred[%s] compare(%s, %s), direction=%s\n", fresh(g, name), dims, x, y,
           directions[pick(&g->r, 6)]);
      add_pred(g, name);
      break;
    }
    case 6: {
      const char *p = pick(&g->r, 4) == 0 ? "p10" : g->preds[pick(&g->r, g->pred_count)];
      const char *x = any_value(g), *y = second_operand(g, other);
      emit(&g->t, " %s = f32[%s] select(%s, %s, %s)\n", fresh(g, name), dims, p, x, y);
      add_value(g, name);
      break;
    }
    case 7:
      emit(&g->t, " %s = f32[%s] clamp(p4, %s, c6)\n", fresh(g, name), dims, any_value(g));
      add_value(g, name);
      break;
    case 8:
      switch (pick(&g->r, 3)) {
        case 0: emit(&g->t, " %s = f32[%s] convert(%s)\n", fresh(g, name), dims, g->preds[pick(&g->r, g->pred_count)]); break;
        case 1: emit(&g->t, " %s = f32[%s] convert(p5)\n", fresh(g, name), dims); break;
        default:
          emit(&g->t, " %s = pred[%s] convert(%s)\n", fresh(g, mid), dims, any_value(g));
          add_pred(g, mid);
          emit(&g->t, " %s = f32[%s] convert(%s)\n", fresh(g, name), dims, mid);
          break;
      }
      add_value(g, name);
      break;
    default:
      emit(&g->t, " %s = f32[%lld,%lld] reshape(%s)\n", fresh(g, mid), (long long)(g->d0 * g->d1), (long long)g->d2,
           any_value(g));
      emit(&g->t, " %s = f32[%s] reshape(%s)\n", fresh(g, name), dims, mid);
      add_value(g, name);
      break;
  }
}

static int64_t random_dim(rng *r, bool large) {
  if (pick(r, 12) == 0) return 0;
  return large ? 5 + pick(r, 60) : 1 + pick(r, 5);
}

static void build(gen *g, uint64_t seed) {
  g->r.state = seed * 0x2545f4914f6cdd1du + 7;
  bool large = pick(&g->r, 3) == 0;
  g->d0 = random_dim(&g->r, large), g->d1 = random_dim(&g->r, large), g->d2 = random_dim(&g->r, large);
  snprintf(g->shape, sizeof g->shape, "%lld,%lld,%lld", (long long)g->d0, (long long)g->d1, (long long)g->d2);
  const char *s = g->shape;
  long long d0 = g->d0, d1 = g->d1, d2 = g->d2;
  emit(&g->t, "HloModule fused\n");
  static const char *const combiners[] = {"add", "maximum", "minimum", "multiply"};
  for (int i = 0; i < 4; i++)
    emit(&g->t, "%s {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] %s(a, b)\n}\n", combiners[i],
         combiners[i]);
  emit(&g->t, "ENTRY e {\n p0 = f32[%s] parameter(0)\n p1 = f32[%s] parameter(1)\n", s, s);
  emit(&g->t, " p2 = f32[%lld] parameter(2)\n p3 = f32[%lld] parameter(3)\n p4 = f32[] parameter(4)\n", d1, d2);
  emit(&g->t, " p5 = s32[%s] parameter(5)\n p6 = f32[%lld,%lld] parameter(6)\n p7 = f32[%lld,%lld] parameter(7)\n", s,
       d0, d1, d1, d2);
  emit(&g->t, " p8 = pred[%s] parameter(8)\n p9 = f32[%lld,%lld] parameter(9)\n p10 = pred[] parameter(10)\n", s, d0,
       d2);
  emit(&g->t, " c = f32[] constant(0.5)\n c6 = f32[] constant(6)\n");
  add_value(g, "p0");
  add_value(g, "p1");
  add_pred(g, "p8");
  int ops = 3 + pick(&g->r, 14);
  for (int i = 0; i < ops; i++) random_op(g);
  /* the last value, and sometimes one from the middle (a result inside a chain) or a pred */
  const char *last = g->values[g->value_count - 1];
  static const char *const reducers[] = {"add", "maximum", "minimum", "multiply"};
  switch (pick(&g->r, 5)) {
    case 3: /* innermost dims: the reduce absorbs the chain */
      emit(&g->t, " i = f32[] constant(%s)\n ROOT r = f32[%lld] reduce(%s, i), dimensions={1,2}, to_apply=%s\n}\n",
           pick(&g->r, 2) ? "0" : "-inf", d0, last, reducers[pick(&g->r, 4)]);
      break;
    case 4: /* outer dims: it does not */
      emit(&g->t, " i = f32[] constant(1)\n ROOT r = f32[%lld] reduce(%s, i), dimensions={0,1}, to_apply=%s\n}\n",
           d2, last, reducers[pick(&g->r, 4)]);
      break;
    case 0: emit(&g->t, " ROOT r = f32[%s] negate(%s)\n}\n", s, last); break;
    case 1:
      emit(&g->t, " ROOT r = (f32[%s], f32[%s]) tuple(%s, %s)\n}\n", s, s, last, g->values[pick(&g->r, g->value_count)]);
      break;
    default:
      emit(&g->t, " ROOT r = (f32[%s], pred[%s]) tuple(%s, %s)\n}\n", s, s, last, g->preds[g->pred_count - 1]);
      break;
  }
}

/* Seeded inputs with NaN, infinities and signed zeros mixed in. */
static void salt(rt_value *v, rng *r) {
  if (v->shape.dtype != HLO_F32) return;
  static const float specials[] = {NAN, INFINITY, -INFINITY, -0.0f, 0.0f, 1e30f, -1e-30f};
  float *data = v->data;
  for (int64_t i = 0; i < v->count; i++)
    if (pick(r, 16) == 0) data[i] = specials[pick(r, 7)];
}

/* got equals want within tol relative to 1 + |want| (0: exactly), NaN matching NaN; why says
 * where not. */
static bool close_values(const rt_value *want, const rt_value *got, double tol, char *why, size_t size) {
  if (want->shape.dtype == HLO_TUPLE) {
    for (int i = 0; i < want->tuple_count; i++)
      if (got->shape.dtype != HLO_TUPLE || !close_values(want->tuple[i], got->tuple[i], tol, why, size)) return false;
    return true;
  }
  if (!hlo_shape_equal(&want->shape, &got->shape)) {
    snprintf(why, size, "shapes differ");
    return false;
  }
  for (int64_t i = 0; i < want->count; i++) {
    double a = rt_get_f64(want, i), b = rt_get_f64(got, i);
    if (!(a == b || (isnan(a) && isnan(b)) || fabs(a - b) <= tol * (1 + fabs(a)))) {
      snprintf(why, size, "element %lld: reference %.9g, cpu %.9g", (long long)i, a, b);
      return false;
    }
  }
  return true;
}

static int fused_graphs, reduce_graphs;

static void run_graph(uint64_t seed) {
  gen g = {0};
  build(&g, seed);
  hlo_diag diag = {0};
  hlo_module *module = hlo_parse_module(g.t.buf, g.t.len, "fused", &diag);
  CHECK_MSG(module != NULL, "seed %llu: %s\n%s", (unsigned long long)seed, diag.message, g.t.buf);
  if (!module) return;
  rt_executable *ref = rt_backend_reference.compile(module, NULL, &diag);
  rt_executable *cpu = rt_backend_cpu.compile(module, NULL, &diag);
  CHECK_MSG(ref && cpu, "seed %llu: compile failed: %s", (unsigned long long)seed, diag.message);
  rt_value *args[11] = {0};
  rng salt_rng = {seed};
  for (int i = 0; i < 11; i++) {
    args[i] = rt_random_value(&module->entry->params[i]->shape, seed, (uint64_t)i, &diag);
    salt(args[i], &salt_rng);
  }
  rt_value *want = NULL, *got = NULL;
  hlo_status a = ref ? rt_backend_reference.execute(ref, args, 11, &want, &diag) : HLO_ERR_INTERNAL;
  CHECK_MSG(a == HLO_OK, "seed %llu: reference failed: %s", (unsigned long long)seed, diag.message);
  hlo_status b = cpu ? rt_backend_cpu.execute(cpu, args, 11, &got, &diag) : HLO_ERR_INTERNAL;
  CHECK_MSG(b == HLO_OK, "seed %llu: cpu failed: %s", (unsigned long long)seed, diag.message);
  char why[256] = "";
  /* f32 erf, exp and tanh are plain arithmetic on the cpu backend (erf_f32_internal.h,
   * within 7 ulps of libm's erff, which the reference calls; exp_f32_internal.h, within 1 ulp
   * of expf, which logistic calls too; tanh_f32_internal.h, within 2 of tanhf): graphs with
   * one agree to 1e-5, the rest exactly */
  bool approximated = strstr(g.t.buf, " erf(") || strstr(g.t.buf, " exponential(") ||
                      strstr(g.t.buf, " logistic(") || strstr(g.t.buf, " tanh(");
  bool same = a == HLO_OK && b == HLO_OK && close_values(want, got, approximated ? 1e-5 : 0, why, sizeof why);
  CHECK_MSG(same, "seed %llu: %s\n%s", (unsigned long long)seed, why, g.t.buf);
  /* count the graphs where fusion happened, so the test shows it exercised the fused path */
  rt_cpu_plan *plan = rt_cpu_plan_build(module, NULL, &diag);
  bool fused = false, tail = false;
  for (int i = 0; plan && i < plan->step_count; i++)
    if (plan->steps[i].kind == RT_STEP_FUSED) {
      fused = true;
      tail = tail || plan->steps[i].fusion->tail;
    }
  fused_graphs += fused;
  reduce_graphs += tail;
  rt_cpu_plan_free(plan);
  rt_value_release(want);
  rt_value_release(got);
  for (int i = 0; i < 11; i++) rt_value_release(args[i]);
  rt_backend_reference.destroy(ref);
  rt_backend_cpu.destroy(cpu);
  hlo_module_free(module);
}

static void test_random_chains(void) {
  const char *env = getenv("LATCH_FUSION_GRAPHS");
  int graphs = env ? atoi(env) : GRAPHS;
  for (int i = 0; i < graphs; i++) run_graph((uint64_t)i);
  printf("%d graphs compared, %d with fused steps, %d with a reduce absorbing its producers\n", graphs, fused_graphs,
         reduce_graphs);
  CHECK(fused_graphs >= graphs / 2);
  CHECK(reduce_graphs >= graphs / 10);
}

/* The same chains with the fused groups run by each vector variant this processor has
 * (runtime/cpu/fusion_run.c), a third of them each: every variant must agree with the reference
 * exactly, as the widest one above did. */
static void test_random_chains_per_variant(void) {
  rt_cpu_isa widest = rt_cpu_isa_in_use();
  int ran = 0;
  for (int isa = 0; isa < RT_CPU_ISA_COUNT; isa++) {
    if (isa == (int)widest || !rt_cpu_use_isa((rt_cpu_isa)isa)) continue;
    CHECK(rt_cpu_isa_in_use() == (rt_cpu_isa)isa);
    for (int i = 0; i < GRAPHS / 3; i++) run_graph((uint64_t)i);
    printf("variant %s: %d graphs compared\n", rt_cpu_isa_name((rt_cpu_isa)isa), GRAPHS / 3);
    ran++;
  }
  CHECK(ran >= 1); /* the portable loops at least */
  CHECK(rt_cpu_use_isa(widest));
  CHECK(!rt_cpu_use_isa(RT_CPU_ISA_COUNT));
}

/* ---- plan inspection ---- */

static rt_cpu_plan *plan_with(const char *hlo, const rt_compile_options *options) {
  hlo_diag diag = {0};
  hlo_module *module = hlo_parse_module(hlo, strlen(hlo), "t", &diag);
  CHECK_MSG(module != NULL, "%s", diag.message);
  if (!module) return NULL;
  hlo_pass_run_all(module);
  rt_cpu_plan *plan = rt_cpu_plan_build(module, options, &diag);
  CHECK_MSG(plan != NULL, "%s", diag.message);
  hlo_module_free(module); /* the plan points into it: callers only read counts */
  return plan;
}

static rt_cpu_plan *plan_of(const char *hlo) { return plan_with(hlo, NULL); }

static int compare_products(const char *hlo, uint64_t seed, bool specials);

static int count_kind(const rt_cpu_plan *plan, rt_cpu_step_kind kind) {
  int n = 0;
  for (int i = 0; plan && i < plan->step_count; i++) n += plan->steps[i].kind == kind;
  return n;
}

/* Five elementwise ops and a folded bias broadcast become one step with no buffers. */
static void test_chain_is_one_step(void) {
  const char *hlo = "HloModule m\nENTRY e {\n x = f32[8,1000] parameter(0)\n b = f32[1000] parameter(1)\n"
                    " bb = f32[8,1000] broadcast(b), dimensions={1}\n a = f32[8,1000] add(x, bb)\n"
                    " m = f32[8,1000] multiply(a, a)\n t = f32[8,1000] tanh(m)\n n = f32[8,1000] negate(t)\n"
                    " ROOT r = f32[8,1000] exponential(n)\n}\n";
  rt_cpu_plan *plan = plan_of(hlo);
  CHECK_EQ_INT(count_kind(plan, RT_STEP_FUSED), 1);
  CHECK_EQ_INT(count_kind(plan, RT_STEP_INSIDE), 5); /* four members and the broadcast */
  CHECK_EQ_INT(count_kind(plan, RT_STEP_FAST), 0);
  CHECK_EQ_INT(plan ? plan->arena_bytes : -1, 0);
  if (plan) CHECK_EQ_INT(plan->steps[plan->step_count - 1].fusion->members, 5);
  rt_cpu_plan_free(plan);
}

/* A value whose users are all in one group joins it (computed once per tile, its tile kept
 * for its second reader); a result of the entry ends groups, and so does a value read by two
 * groups: both must exist in memory. */
static void test_shared_values(void) {
  const char *hlo = "HloModule m\nENTRY e {\n x = f32[100] parameter(0)\n a = f32[100] exponential(x)\n"
                    " b = f32[100] negate(a)\n c = f32[100] tanh(b)\n d = f32[100] add(b, c)\n"
                    " e = f32[100] sine(d)\n f = f32[100] cosine(e)\n g = f32[100] abs(f)\n"
                    " ROOT r = (f32[100], f32[100]) tuple(g, e)\n}\n";
  rt_cpu_plan *plan = plan_of(hlo);
  /* groups: {a, b, c, d, e} (b's two users are in it; e is a result), {f, g} */
  CHECK_EQ_INT(count_kind(plan, RT_STEP_FUSED), 2);
  CHECK_EQ_INT(count_kind(plan, RT_STEP_INSIDE), 5);
  rt_cpu_plan_free(plan);
  const char *split = "HloModule m\nENTRY e {\n x = f32[100] parameter(0)\n a = f32[100] exponential(x)\n"
                      " b1 = f32[100] negate(a)\n b2 = f32[100] sine(b1)\n c1 = f32[100] tanh(a)\n"
                      " c2 = f32[100] cosine(c1)\n ROOT r = (f32[100], f32[100]) tuple(b2, c2)\n}\n";
  plan = plan_of(split);
  /* groups {b1, b2} and {c1, c2}; a, read by both, is a plain step with a buffer */
  CHECK_EQ_INT(count_kind(plan, RT_STEP_FUSED), 2);
  CHECK_EQ_INT(count_kind(plan, RT_STEP_INSIDE), 2);
  CHECK(plan && plan->steps[1].kind == RT_STEP_FAST && plan->arena_bytes > 0);
  rt_cpu_plan_free(plan);
  compare_products(hlo, 3, true);
  compare_products(split, 4, true);
}

/* BERT's and ViT's Linear layer then GELU, whose input has two readers: one step, the
 * product's epilogue (bias and GELU on each block the product finishes), against the
 * reference. */
static void test_gelu_is_the_products_epilogue(void) {
  const char *hlo = "HloModule m\nENTRY e {\n x = f32[64,96] parameter(0)\n w = f32[96,200] parameter(1)\n"
                    " b = f32[200] parameter(2)\n d = f32[64,200] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
                    " bb = f32[64,200] broadcast(b), dimensions={1}\n y = f32[64,200] add(d, bb)\n"
                    " r = f32[64,200] reshape(y)\n c = f32[] constant(0.70710677)\n cb = f32[64,200] broadcast(c), dimensions={}\n"
                    " s = f32[64,200] multiply(r, cb)\n e = f32[64,200] erf(s)\n one = f32[] constant(1)\n"
                    " ob = f32[64,200] broadcast(one), dimensions={}\n p = f32[64,200] add(e, ob)\n"
                    " h = f32[] constant(0.5)\n hb = f32[64,200] broadcast(h), dimensions={}\n"
                    " xh = f32[64,200] multiply(r, hb)\n ROOT g = f32[64,200] multiply(xh, p)\n}\n";
  rt_cpu_plan *plan = plan_of(hlo);
  CHECK_EQ_INT(count_kind(plan, RT_STEP_FUSED), 1);
  CHECK_EQ_INT(count_kind(plan, RT_STEP_FAST), 0);
  const rt_cpu_step *last = plan ? &plan->steps[plan->step_count - 1] : NULL;
  /* the head's instruction went with the module plan_of freed: its kernel says it is the dot */
  CHECK(last && last->kind == RT_STEP_FUSED && last->fusion->head && rt_cpu_is_dot_kernel(last->fusion->head_kernel));
  rt_cpu_plan_free(plan);
  CHECK_EQ_INT(compare_products(hlo, 5, false), 1);
}

/* A chain feeding a reduce: unfused it needs one buffer (each op writes over the one before);
 * fused into the reduce it needs none (the reduce's step evaluates the chain tile by tile). */
static void test_arena_shrinks(void) {
  const char *hlo = "HloModule m\nadd {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] add(a, b)\n}\n"
                    "ENTRY e {\n x = f32[4096] parameter(0)\n a = f32[4096] exponential(x)\n b = f32[4096] negate(a)\n"
                    " c = f32[4096] tanh(b)\n d = f32[4096] multiply(c, x)\n z = f32[] constant(0)\n"
                    " ROOT r = f32[] reduce(d, z), dimensions={0}, to_apply=add\n}\n";
  const rt_compile_options no_fusion = {.no_fusion = true, .keep_arena_bytes = -1};
  rt_cpu_plan *unfused = plan_with(hlo, &no_fusion);
  rt_cpu_plan *fused = plan_of(hlo);
  CHECK_EQ_INT(unfused ? unfused->arena_bytes : -1, 4096 * 4);
  CHECK_EQ_INT(fused ? fused->arena_bytes : -1, 0);
  CHECK_EQ_INT(count_kind(fused, RT_STEP_FUSED), 1);
  CHECK_EQ_INT(count_kind(fused, RT_STEP_FAST), 0);
  rt_cpu_plan_free(unfused);
  rt_cpu_plan_free(fused);
}

/* ---- dot and convolution epilogues ---- */


/* Runs hlo on both backends with seeded inputs (the first salted with NaN and inf when
 * asked); sums may differ in order (BLAS), so within 1e-4. Returns the cpu plan's count of
 * fused steps with a head. */
/* Runs hlo on the reference and the cpu backend with seeded inputs and checks they agree;
 * specials salts input 0 with NaN, infinities and signed zeros, inf_weight makes input 1's
 * first element +inf. Returns the number of fused steps with a head (dot or convolution). */
static int compare_inputs(const char *hlo, uint64_t seed, bool specials, bool inf_weight);

static int compare_products(const char *hlo, uint64_t seed, bool specials) {
  return compare_inputs(hlo, seed, specials, false);
}

static int compare_inputs(const char *hlo, uint64_t seed, bool specials, bool inf_weight) {
  hlo_diag diag = {0};
  hlo_module *module = hlo_parse_module(hlo, strlen(hlo), "ep", &diag);
  CHECK_MSG(module != NULL, "%s\n%s", diag.message, hlo);
  if (!module) return 0;
  int n = module->entry->param_count;
  rt_value *args[8] = {0};
  rng r = {seed};
  for (int i = 0; i < n && i < 8; i++) {
    args[i] = rt_random_value(&module->entry->params[i]->shape, seed, (uint64_t)i, &diag);
    if (specials && i == 0) salt(args[i], &r);
    if (inf_weight && i == 1 && args[i]->count > 0) ((float *)args[i]->data)[0] = INFINITY;
  }
  rt_executable *ref = rt_backend_reference.compile(module, NULL, &diag);
  rt_executable *cpu = rt_backend_cpu.compile(module, NULL, &diag);
  rt_value *want = NULL, *got = NULL;
  CHECK(ref && rt_backend_reference.execute(ref, args, n, &want, &diag) == HLO_OK);
  CHECK_MSG(cpu && rt_backend_cpu.execute(cpu, args, n, &got, &diag) == HLO_OK, "%s", diag.message);
  char why[256] = "";
  CHECK_MSG(want && got && close_values(want, got, 1e-4, why, sizeof why), "seed %llu: %s\n%s",
            (unsigned long long)seed, why, hlo);
  int heads = 0;
  hlo_pass_run_all(module);
  rt_cpu_plan *plan = rt_cpu_plan_build(module, NULL, &diag);
  /* a product with its epilogue in one step: a fused group's head, or a convolution on oneDNN */
  for (int i = 0; plan && i < plan->step_count; i++)
    heads += (plan->steps[i].kind == RT_STEP_FUSED && plan->steps[i].fusion->head) || plan->steps[i].kind == RT_STEP_DNNL;
  rt_cpu_plan_free(plan);
  rt_value_release(want);
  rt_value_release(got);
  for (int i = 0; i < n; i++) rt_value_release(args[i]);
  rt_backend_reference.destroy(ref);
  rt_backend_cpu.destroy(cpu);
  hlo_module_free(module);
  return heads;
}

static const char *const epilogues[] = {
    /* bias and relu */
    " z = f32[] constant(0)\n zb = f32[%lld,%lld] broadcast(z), dimensions={}\n ROOT r = f32[%lld,%lld] maximum(a, zb)\n",
    /* tanh gelu */
    " h = f32[] constant(0.5)\n hb = f32[%lld,%lld] broadcast(h), dimensions={}\n"
    " t = f32[%lld,%lld] tanh(a)\n o = f32[%lld,%lld] add(t, hb)\n ROOT r = f32[%lld,%lld] multiply(a, o)\n",
    /* residual add */
    " ROOT r = f32[%lld,%lld] add(a, res)\n",
    /* the product is a result too: no head */
    " ROOT r = (f32[%lld,%lld], f32[%lld,%lld]) tuple(a, d)\n",
};

static void test_dot_epilogues(void) {
  static const int64_t ms[] = {1, 3, 70, 130}, ns[] = {1, 7, 300}, ks[] = {1, 5, 33};
  int heads = 0, cases = 0;
  for (int mi = 0; mi < 4; mi++)
    for (int ni = 0; ni < 3; ni++)
      for (int ki = 0; ki < 3; ki++)
        for (int e = 0; e < 4; e++) {
          long long m = ms[mi], n = ns[ni], k = ks[ki];
          bool transposed = (mi + ni + ki + e) % 2;
          char text[4096];
          int len = snprintf(text, sizeof text,
                             "HloModule ep\nENTRY e {\n x = f32[%lld,%lld] parameter(0)\n w = f32[%lld,%lld] parameter(1)\n"
                             " b = f32[%lld] parameter(2)\n res = f32[%lld,%lld] parameter(3)\n"
                             " d = f32[%lld,%lld] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={%d}\n"
                             " bb = f32[%lld,%lld] broadcast(b), dimensions={1}\n a = f32[%lld,%lld] add(d, bb)\n",
                             m, k, transposed ? n : k, transposed ? k : n, n, m, n, m, n, transposed ? 1 : 0, m, n, m, n);
          snprintf(text + len, sizeof text - (size_t)len, epilogues[e], m, n, m, n, m, n, m, n, m, n);
          strncat(text, "}\n", sizeof text - strlen(text) - 1);
          int got = compare_products(text, (uint64_t)(cases + 1), cases % 3 == 0);
          CHECK_MSG(got == (e == 3 ? 0 : 1), "%d heads in\n%s", got, text);
          heads += got;
          cases++;
        }
  /* short and wide: one row block split into column blocks across the threads (main asks
   * for two), every epilogue run per row of each block; a single row against a [k][n]
   * matrix of 2.2M elements is summed in blocks of k, the epilogue run after the sums */
  static const int64_t wide[][3] = {{33, 700, 64}, {2, 700, 800}, {64, 1000, 40}, {5, 301, 700}, {1, 1100, 2000}};
  for (int w = 0; w < 5; w++)
    for (int e = 0; e < 4; e++)
      for (int transposed = 0; transposed < 2; transposed++) {
        long long m = wide[w][0], n = wide[w][1], k = wide[w][2];
        char text[4096];
        int len = snprintf(text, sizeof text,
                           "HloModule ep\nENTRY e {\n x = f32[%lld,%lld] parameter(0)\n w = f32[%lld,%lld] parameter(1)\n"
                           " b = f32[%lld] parameter(2)\n res = f32[%lld,%lld] parameter(3)\n"
                           " d = f32[%lld,%lld] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={%d}\n"
                           " bb = f32[%lld,%lld] broadcast(b), dimensions={1}\n a = f32[%lld,%lld] add(d, bb)\n",
                           m, k, transposed ? n : k, transposed ? k : n, n, m, n, m, n, transposed, m, n, m, n);
        snprintf(text + len, sizeof text - (size_t)len, epilogues[e], m, n, m, n, m, n, m, n, m, n);
        strncat(text, "}\n", sizeof text - strlen(text) - 1);
        int got = compare_products(text, (uint64_t)(1000 + cases), false);
        CHECK_MSG(got == (e == 3 ? 0 : 1), "%d heads in\n%s", got, text);
        heads += got;
        cases++;
      }
  /* batched (attention scores): blocks of every batch, scaled and masked */
  for (int m = 1; m <= 70; m += 69) {
    char text[2048];
    snprintf(text, sizeof text,
             "HloModule ep\nENTRY e {\n x = f32[3,%d,9] parameter(0)\n w = f32[3,9,11] parameter(1)\n"
             " mask = f32[3,%d,11] parameter(2)\n"
             " d = f32[3,%d,11] dot(x, w), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_contracting_dims={1}\n"
             " c = f32[] constant(0.125)\n cb = f32[3,%d,11] broadcast(c), dimensions={}\n"
             " s = f32[3,%d,11] multiply(d, cb)\n ROOT r = f32[3,%d,11] add(s, mask)\n}\n",
             m, m, m, m, m, m);
    CHECK_EQ_INT(compare_products(text, (uint64_t)(500 + m), m == 1), 1);
  }
  printf("%d dot epilogue cases, %d fused with their dot\n", cases, heads);
}

/* A batch-1 convolution is one item: its gather and product are split over the threads,
 * by output features (64 outputs at 1x1 and 5x5 positions, gemv at 1 position) or by
 * positions (9x9 and 12x12 outputs), with a 1x1 window reading the plane as it is. */
static void test_batch1_conv_split(void) {
  static const int sizes[] = {1, 5, 9, 12};
  int cases = 0;
  for (int si = 0; si < 4; si++)
    for (int window = 1; window <= 3; window += 2) {
      long long c = 5, o = 64, s = sizes[si], pad = window / 2;
      char text[4096];
      snprintf(text, sizeof text,
               "HloModule ep\nENTRY e {\n x = f32[1,%lld,%lld,%lld] parameter(0)\n k = f32[%lld,%lld,%d,%d] parameter(1)\n"
               " b = f32[%lld] parameter(2)\n"
               " y = f32[1,%lld,%lld,%lld] convolution(x, k), window={size=%dx%d pad=%lld_%lldx%lld_%lld}, dim_labels=bf01_oi01->bf01\n"
               " bb = f32[1,%lld,%lld,%lld] broadcast(b), dimensions={1}\n"
               " ROOT a = f32[1,%lld,%lld,%lld] add(y, bb)\n}\n",
               c, s, s, o, c, window, window, o, o, s, s, window, window, pad, pad, pad, pad, o, s, s, o, s, s);
      CHECK_EQ_INT(compare_products(text, (uint64_t)(300 + cases), cases % 2 == 0), 1);
      cases++;
    }
}

/* A fused convolution whose outputs are not all finite: a padding zero times an infinite
 * weight is NaN in im2col's product but no term at all in the reference (which skips padded
 * taps), so the convolution is computed again by the reference kernel, and the epilogue must
 * run on that; an infinite input with finite weights gives non-finite outputs the kernel got
 * right. Batch 2 (items over threads) and batch 1 (one item split over threads), with relu
 * (maps -inf to 0) and a compare-and-select epilogue (maps NaN to 0, so a NaN the epilogue
 * saw before the check would vanish). */
static void test_conv_epilogue_nonfinite(void) {
  static const char *const tails[] = {
      " z = f32[] constant(0)\n zb = f32[%lld,8,5,5] broadcast(z), dimensions={}\n"
      " ROOT r = f32[%lld,8,5,5] maximum(a, zb)\n",
      " z = f32[] constant(0)\n zb = f32[%lld,8,5,5] broadcast(z), dimensions={}\n"
      " c = pred[%lld,8,5,5] compare(a, zb), direction=GT\n ROOT r = f32[%lld,8,5,5] select(c, a, zb)\n"};
  int cases = 0;
  for (long long batch = 1; batch <= 2; batch++)
    for (int t = 0; t < 2; t++)
      for (int inf_weight = 0; inf_weight < 2; inf_weight++) {
        char text[4096];
        int len = snprintf(text, sizeof text,
                           "HloModule ep\nENTRY e {\n x = f32[%lld,3,5,5] parameter(0)\n k = f32[8,3,3,3] parameter(1)\n"
                           " b = f32[8] parameter(2)\n"
                           " y = f32[%lld,8,5,5] convolution(x, k), window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01\n"
                           " bb = f32[%lld,8,5,5] broadcast(b), dimensions={1}\n a = f32[%lld,8,5,5] add(y, bb)\n",
                           batch, batch, batch, batch);
        snprintf(text + len, sizeof text - (size_t)len, tails[t], batch, batch, batch);
        strncat(text, "}\n", sizeof text - strlen(text) - 1);
        CHECK_EQ_INT(compare_inputs(text, (uint64_t)(700 + cases), !inf_weight, inf_weight), 1);
        cases++;
      }
}

static void test_conv_epilogues(void) {
  int cases = 0;
  for (int groups = 1; groups <= 2; groups++)
    for (int size = 1; size <= 9; size += 4)
      for (int relu = 0; relu < 2; relu++) {
        long long c = 4, o = 6, s = size, batch = 2;
        char text[4096];
        snprintf(text, sizeof text,
                 "HloModule ep\nENTRY e {\n x = f32[%lld,%lld,%lld,%lld] parameter(0)\n k = f32[%lld,%lld,3,3] parameter(1)\n"
                 " b = f32[%lld] parameter(2)\n"
                 " y = f32[%lld,%lld,%lld,%lld] convolution(x, k), window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01,"
                 " feature_group_count=%d\n"
                 " bb = f32[%lld,%lld,%lld,%lld] broadcast(b), dimensions={1}\n a = f32[%lld,%lld,%lld,%lld] add(y, bb)\n"
                 " z = f32[] constant(%s)\n zb = f32[%lld,%lld,%lld,%lld] broadcast(z), dimensions={}\n"
                 " ROOT r = f32[%lld,%lld,%lld,%lld] maximum(a, zb)\n}\n",
                 batch, c, s, s, o, c / groups, o, batch, o, s, s, groups, batch, o, s, s, batch, o, s, s,
                 relu ? "0" : "-inf", batch, o, s, s, batch, o, s, s);
        CHECK_EQ_INT(compare_products(text, (uint64_t)(100 + cases), cases % 2 == 0), 1);
        cases++;
      }
}

/* dot + bias + relu: one step, the product and the epilogue's intermediates take no buffer. */
static void test_dot_epilogue_is_one_step(void) {
  const char *hlo = "HloModule m\nENTRY e {\n x = f32[64,256] parameter(0)\n w = f32[256,512] parameter(1)\n"
                    " b = f32[512] parameter(2)\n d = f32[64,512] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
                    " bb = f32[64,512] broadcast(b), dimensions={1}\n a = f32[64,512] add(d, bb)\n"
                    " z = f32[] constant(0)\n zb = f32[64,512] broadcast(z), dimensions={}\n"
                    " ROOT r = f32[64,512] maximum(a, zb)\n}\n";
  rt_cpu_plan *plan = plan_of(hlo);
  CHECK_EQ_INT(count_kind(plan, RT_STEP_FUSED), 1);
  CHECK_EQ_INT(count_kind(plan, RT_STEP_FAST), 0);
  CHECK_EQ_INT(plan ? plan->arena_bytes : -1, 0);
  rt_cpu_plan_free(plan);
}

/* A broadcast adding only size-1 dims (a weight for a batch-1 batched matmul) is a view of
 * its operand, not a copy; the product still matches the reference. */
static void test_unit_broadcast_is_a_view(void) {
  const char *hlo = "HloModule m\nENTRY e {\n x = f32[1,4,3] parameter(0)\n w = f32[3,5] parameter(1)\n"
                    " wb = f32[1,3,5] broadcast(w), dimensions={1,2}\n"
                    " ROOT d = f32[1,4,5] dot(x, wb), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2},"
                    " rhs_contracting_dims={1}\n}\n";
  rt_cpu_plan *plan = plan_of(hlo);
  CHECK_EQ_INT(count_kind(plan, RT_STEP_ALIAS), 1);
  CHECK_EQ_INT(plan ? plan->arena_bytes : -1, 0);
  rt_cpu_plan_free(plan);
  compare_products(hlo, 9, false);
}

/* A batched matmul by a weight broadcast along the batch dims runs as one plain matmul on
 * the weight itself: no broadcast step is left, with an epilogue or without. */
static void test_shared_weight_dot(void) {
  int cases = 0;
  for (int transposed = 0; transposed < 2; transposed++)
    for (int two_batch = 0; two_batch < 2; two_batch++)
      for (int epilogue = 0; epilogue < 2; epilogue++)
        for (int m = 1; m <= 70; m += 23) {
          char batch[32], lhs[64], out[64], text[2048];
          snprintf(batch, sizeof batch, two_batch ? "2,3" : "4");
          snprintf(lhs, sizeof lhs, "%s,%d,6", batch, m);
          snprintf(out, sizeof out, "%s,%d,5", batch, m);
          const char *dims = two_batch ? "{0,1}" : "{0}";
          int nb = two_batch ? 2 : 1;
          int len = snprintf(text, sizeof text,
                             "HloModule sw\nENTRY e {\n x = f32[%s] parameter(0)\n w = f32[%s] parameter(1)\n"
                             " wb = f32[%s,%s] broadcast(w), dimensions={%d,%d}\n"
                             " d = f32[%s] dot(x, wb), lhs_batch_dims=%s, rhs_batch_dims=%s, lhs_contracting_dims={%d},"
                             " rhs_contracting_dims={%d}\n",
                             lhs, transposed ? "5,6" : "6,5", batch, transposed ? "5,6" : "6,5", nb, nb + 1, out, dims,
                             dims, nb + 1, transposed ? nb + 1 : nb);
          if (epilogue)
            snprintf(text + len, sizeof text - (size_t)len, " ROOT r = f32[%s] tanh(d)\n}\n", out);
          else
            snprintf(text + len, sizeof text - (size_t)len, " ROOT r = f32[%s] transpose(d), dimensions={%s}\n}\n", out,
                     two_batch ? "0,1,2,3" : "0,1,2");
          CHECK_EQ_INT(compare_products(text, (uint64_t)(700 + cases), cases % 2 == 0), 1);
          rt_cpu_plan *plan = plan_of(text);
          /* wb (step 2) is never computed: the dot reads w */
          CHECK_EQ_INT(plan ? (int)plan->steps[2].kind : -1, RT_STEP_INSIDE);
          rt_cpu_plan_free(plan);
          cases++;
        }
}

int main(void) {
  rt_parallel_request_threads(2); /* so that short, wide products are split over threads */
  RUN(test_shared_weight_dot);
  RUN(test_unit_broadcast_is_a_view);
  RUN(test_dot_epilogue_is_one_step);
  RUN(test_dot_epilogues);
  RUN(test_conv_epilogues);
  RUN(test_batch1_conv_split);
  RUN(test_conv_epilogue_nonfinite);
  RUN(test_chain_is_one_step);
  RUN(test_shared_values);
  RUN(test_gelu_is_the_products_epilogue);
  RUN(test_arena_shrinks);
  RUN(test_random_chains);
  RUN(test_random_chains_per_variant);
  return TEST_REPORT();
}
