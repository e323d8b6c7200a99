/* Simpler inputs, last: each parameter (largest first) is replaced in turn by values the
 * module makes itself, so the repro carries no data for it: a broadcast constant (zeros, ones,
 * then, for a float input with data, its mean), then a small seeded array for failures that
 * need values that vary (a wrong index or layout shows only then). The seeded array is a
 * generator written into the module, not data: element i (row-major) is
 * ((i * A + B) mod 7) - 3, the multiplier A in 1..6 and the offset B picked by the seed, so
 * the values are the small integers -3..3 (0..6 for unsigned types), every seven
 * consecutive elements distinct, and two parameters replaced this way differ. It is
 * computed in s32 (iota, multiply, add, remainder, subtract: exact on every backend), then
 * converted and reshaped, so the reference and the backend see the same values and a repro
 * stays one text file. A candidate is kept when it still fails the same way. For a compile
 * check only zeros are tried: the compile never sees values. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "minify_internal.h"
#include "hlo/hlo.h"

/* What replaces a parameter: a broadcast of value, or the seeded array of that seed. */
typedef struct simple_input {
  bool seeded;
  double value;
  int seed;
  const char *name; /* for the report: "zeros", "ones", "its mean", "a seeded array" */
} simple_input;

#define SEEDED_PERIOD 7
#define SEEDED_MAX_MULTIPLIER 6

static hlo_instr *broadcast_scalar(hlo_comp *entry, hlo_dtype dtype, double value, int rank, const int64_t *dims,
                                   hlo_diag *diag) {
  hlo_instr *leaf = hlo_build_constant_scalar(entry, dtype, value, diag);
  int64_t none[1] = {0};
  return leaf && rank > 0 ? hlo_build_broadcast(entry, leaf, rank, dims, none, diag) : leaf;
}

/* The multiplier of a seed: 1..6 are all coprime to the period, so no two consecutive
 * elements are equal; 3 first (-3, 0, 3, -1, 2, -2, 1). */
static int64_t seeded_multiplier(int seed) {
  static const int64_t multipliers[SEEDED_MAX_MULTIPLIER] = {3, 5, 2, 4, 6, 1};
  return multipliers[seed % SEEDED_MAX_MULTIPLIER];
}

/* The offset: 0 for the first six seeds (no add), then 1, 2, ... */
static int64_t seeded_offset(int seed) { return (seed / SEEDED_MAX_MULTIPLIER) % SEEDED_PERIOD; }

/* The seeded array for shape, built in entry; NULL with diag. */
static hlo_instr *seeded_array(hlo_comp *entry, const hlo_shape *shape, int seed, hlo_diag *diag) {
  int64_t n = hlo_shape_elements(shape);
  int64_t flat[1] = {n};
  hlo_instr *x = hlo_build_iota(entry, HLO_S32, 1, flat, 0, diag);
  hlo_instr *a = x ? broadcast_scalar(entry, HLO_S32, (double)seeded_multiplier(seed), 1, flat, diag) : NULL;
  x = a ? hlo_build_binary(entry, HLO_OP_MULTIPLY, x, a, diag) : NULL;
  if (x && seeded_offset(seed)) {
    hlo_instr *b = broadcast_scalar(entry, HLO_S32, (double)seeded_offset(seed), 1, flat, diag);
    x = b ? hlo_build_binary(entry, HLO_OP_ADD, x, b, diag) : NULL;
  }
  hlo_instr *m = x ? broadcast_scalar(entry, HLO_S32, SEEDED_PERIOD, 1, flat, diag) : NULL;
  x = m ? hlo_build_binary(entry, HLO_OP_REMAINDER, x, m, diag) : NULL;
  if (x && !hlo_dtype_is_unsigned(shape->dtype)) {
    hlo_instr *h = broadcast_scalar(entry, HLO_S32, SEEDED_PERIOD / 2, 1, flat, diag);
    x = h ? hlo_build_binary(entry, HLO_OP_SUBTRACT, x, h, diag) : NULL;
  }
  if (x && shape->dtype != HLO_S32) x = hlo_build_convert(entry, x, shape->dtype, diag);
  return x && shape->rank != 1 ? hlo_build_reshape(entry, x, shape->rank, shape->dims, diag) : x;
}

/* Whether the seeded array can stand for shape: an integer or float array of at least two
 * elements whose index times the multiplier fits s32. */
static bool seedable(const hlo_shape *shape) {
  hlo_dtype t = shape->dtype;
  bool numeric = hlo_dtype_is_float(t) || t == HLO_S8 || t == HLO_S16 || t == HLO_S32 || t == HLO_S64 ||
                 t == HLO_U8 || t == HLO_U16 || t == HLO_U32 || t == HLO_U64;
  int64_t n = hlo_shape_elements(shape);
  return numeric && !hlo_shape_is_dynamic(shape) && n >= 2 && n <= INT32_MAX / (SEEDED_MAX_MULTIPLIER + 1);
}

/* The current module with parameter p replaced as how says; NULL when it cannot be built.
 * The unused parameter is dropped by min_build, which renumbers the others. */
static hlo_module *replaced(min_ctx *ctx, int p, const simple_input *how, rt_value ***inputs, int *input_count) {
  hlo_diag diag;
  hlo_diag_clear(&diag);
  hlo_module *copy = hlo_module_clone(ctx->module, &diag);
  if (!copy) return NULL;
  hlo_comp *entry = copy->entry;
  hlo_instr *param = entry->params[p];
  const hlo_shape *shape = &param->shape;
  hlo_instr *leaf = how->seeded ? seeded_array(entry, shape, how->seed, &diag)
                                : broadcast_scalar(entry, shape->dtype, how->value, shape->rank, shape->dims, &diag);
  hlo_module *result = NULL;
  if (leaf) {
    hlo_replace_uses(entry, param, leaf);
    if (hlo_comp_sort(entry, &diag)) {
      min_disp *disp = hlo_calloc((size_t)entry->instr_count + 1, sizeof *disp);
      min_plan plan = {disp, NULL, 0};
      if (disp)
        result = min_build(copy, ctx->shapes_only ? NULL : ctx->inputs, NULL, &plan, inputs, input_count, &diag);
      free(disp);
    }
  }
  hlo_module_free(copy);
  return result;
}

static double mean(const rt_value *value) {
  double sum = 0;
  for (int64_t i = 0; i < value->count; i++) sum += rt_get_f64(value, i);
  return value->count ? sum / (double)value->count : 0;
}

/* One entry of the report's simpler inputs: "%x (f32[1,3]) by a seeded array, element i =
 * ((i * 3 + 0) mod 7) - 3". */
static void note_adopted(min_report *report, const char *name, const char *shape, hlo_dtype dtype,
                         const simple_input *how) {
  char *note = report->simpler_inputs;
  size_t used = strlen(note), size = sizeof report->simpler_inputs;
  char what[128];
  if (how->seeded)
    snprintf(what, sizeof what, "%s, element i = ((i * %lld + %d) mod %d) - %d", how->name,
             (long long)seeded_multiplier(how->seed), (int)seeded_offset(how->seed), SEEDED_PERIOD,
             hlo_dtype_is_unsigned(dtype) ? 0 : SEEDED_PERIOD / 2);
  else
    snprintf(what, sizeof what, "%s (%g)", how->name, how->value);
  if (used + 1 < size) snprintf(note + used, size - used, "%s%%%s (%s) by %s", used ? "; " : "", name, shape, what);
}

/* Tries the replacements for parameter p, simplest first; true when one was adopted. */
static bool simplify_param(min_ctx *ctx, int p) {
  const hlo_instr *param = ctx->module->entry->params[p];
  const hlo_shape *shape = &param->shape;
  if (!hlo_shape_is_array(shape) || !hlo_dtype_is_computable(shape->dtype)) return false;
  simple_input tries[4] = {{false, 0, 0, "zeros"}, {false, 1, 0, "ones"}};
  int count = ctx->shapes_only ? 1 : 2;
  const rt_value *input = ctx->shapes_only ? NULL : ctx->inputs[p];
  if (input && hlo_dtype_is_float(shape->dtype)) tries[count++] = (simple_input){false, mean(input), 0, "its mean"};
  if (!ctx->shapes_only && seedable(shape))
    tries[count++] = (simple_input){true, 0, ctx->report->seeded_inputs, "a seeded array"};
  /* Copied: the current module is replaced on a win. */
  char name[128], text[160];
  snprintf(name, sizeof name, "%s", param->name);
  hlo_shape_str(shape, text, sizeof text);
  hlo_dtype dtype = shape->dtype;
  for (int i = 0; i < count && !min_stopped(ctx); i++) {
    rt_value **inputs = NULL;
    int input_count = 0;
    hlo_module *candidate = replaced(ctx, p, &tries[i], &inputs, &input_count);
    if (!candidate) continue;
    bool smaller = min_input_bytes(candidate) < min_input_bytes(ctx->module);
    if (min_try_candidate(ctx, candidate, inputs, input_count, MIN_INPUTS, smaller)) {
      note_adopted(ctx->report, name, text, dtype, &tries[i]);
      ctx->report->seeded_inputs += tries[i].seeded;
      return true;
    }
  }
  return false;
}

static int by_bytes_desc(const void *a, const void *b) {
  double x = ((const double *)a)[0], y = ((const double *)b)[0];
  return x < y ? 1 : x > y ? -1 : 0;
}

bool min_strategy_inputs(min_ctx *ctx) {
  bool won = false;
  for (bool adopted = true; adopted && min_inputs_large(ctx) && !min_stopped(ctx);) {
    const hlo_comp *entry = ctx->module->entry;
    int n = entry->param_count;
    double (*order)[2] = hlo_calloc((size_t)n + 1, sizeof *order); /* {bytes, parameter} */
    if (!order) return won;
    for (int p = 0; p < n; p++) {
      order[p][0] = (double)hlo_shape_bytes(&entry->params[p]->shape);
      order[p][1] = p;
    }
    qsort(order, (size_t)n, sizeof *order, by_bytes_desc);
    adopted = false;
    /* after a win the parameters are renumbered: start over (tries repeated are memoized) */
    for (int i = 0; i < n && !adopted && !min_stopped(ctx); i++) adopted = simplify_param(ctx, (int)order[i][1]);
    free(order);
    won |= adopted;
  }
  return won;
}
