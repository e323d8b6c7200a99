/* Simpler inputs, last: each parameter (largest first) is replaced in turn by a broadcast
 * constant, zeros then ones then (for a float input with data) its mean, so the repro
 * carries no data for it; a candidate is kept when it still fails the same way. For a
 * compile check only zeros are tried: the compile never sees values. */
#include <stdlib.h>

#include "minify_internal.h"
#include "hlo/hlo.h"

/* The current module with parameter p replaced by a broadcast of value; NULL when it cannot
 * be built. The unused parameter is dropped by min_build, which renumbers the others. */
static hlo_module *replaced(min_ctx *ctx, int p, double value, rt_value ***inputs, int *input_count) {
  hlo_diag diag;
  hlo_diag_clear(&diag);
  hlo_module *copy = hlo_module_clone(ctx->module, &diag);
  if (!copy) return NULL;
  hlo_comp *entry = copy->entry;
  hlo_instr *param = entry->params[p];
  const hlo_shape *shape = &param->shape;
  hlo_instr *leaf = hlo_build_constant_scalar(entry, shape->dtype, value, &diag);
  int64_t none[1] = {0};
  if (leaf && shape->rank > 0) leaf = hlo_build_broadcast(entry, leaf, shape->rank, shape->dims, none, &diag);
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

/* Tries the constants for parameter p; true when one was adopted. */
static bool simplify_param(min_ctx *ctx, int p) {
  const hlo_shape *shape = &ctx->module->entry->params[p]->shape;
  if (!hlo_shape_is_array(shape) || !hlo_dtype_is_computable(shape->dtype)) return false;
  double values[3] = {0, 1, 0};
  int count = ctx->shapes_only ? 1 : 2;
  const rt_value *input = ctx->shapes_only ? NULL : ctx->inputs[p];
  if (input && hlo_dtype_is_float(shape->dtype)) values[count++] = mean(input);
  for (int i = 0; i < count && !min_stopped(ctx); i++) {
    rt_value **inputs = NULL;
    int input_count = 0;
    hlo_module *candidate = replaced(ctx, p, values[i], &inputs, &input_count);
    if (!candidate) continue;
    bool smaller = min_input_bytes(candidate) < min_input_bytes(ctx->module);
    if (min_try_candidate(ctx, candidate, inputs, input_count, MIN_INPUTS, smaller)) return true;
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
