/* batch-norm-inference, batch-norm-training and batch-norm-grad, with the formulas of XLA's
 * operation semantics. Sums and products are taken in double and each result is rounded to
 * its element type once, at the end: more accurate than XLA's own expansion in the element
 * type, which is what a reference wants. epsilon is an f32 in XLA's instruction proto, so it
 * is rounded to f32 before use, as XLA does. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "reference.h"

/* Where the feature dimension sits in the operand: feature of flat index i is
 * (i / stride) % features. */
typedef struct feature_layout {
  int64_t features, stride, per_feature; /* per_feature: elements sharing one feature */
} feature_layout;

static int64_t feature_of(const feature_layout *layout, int64_t index) {
  return (index / layout->stride) % layout->features;
}

/* Checks the operand and the per-feature vectors args[first..first+count). */
static const char *check_args(const hlo_instr *instr, rt_value *const *args, int first, int count,
                              feature_layout *layout) {
  const rt_value *operand = args[0];
  if (operand->shape.dtype == HLO_TUPLE || !hlo_dtype_is_float(operand->shape.dtype))
    return "the operand must be a floating-point array";
  if (instr->index < 0 || instr->index >= operand->shape.rank) return "feature_index out of range";
  layout->features = operand->shape.dims[instr->index];
  layout->stride = 1;
  for (int d = (int)instr->index + 1; d < operand->shape.rank; d++) layout->stride *= operand->shape.dims[d];
  layout->per_feature = layout->features ? operand->count / layout->features : 0;
  for (int i = first; i < first + count; i++) {
    const rt_value *vector = args[i];
    if (vector->shape.dtype == HLO_TUPLE || vector->shape.rank != 1 || vector->shape.dims[0] != layout->features)
      return "scale, offset, mean and variance must be vectors as long as the feature dimension";
  }
  return NULL;
}

static double epsilon_of(const hlo_instr *instr) { return (double)(float)instr->epsilon; }

/* Per-feature mean and biased variance (two passes, for accuracy). */
static void moments(const rt_value *operand, const feature_layout *layout, double *mean, double *var) {
  for (int64_t f = 0; f < layout->features; f++) mean[f] = var[f] = 0;
  for (int64_t i = 0; i < operand->count; i++) mean[feature_of(layout, i)] += rt_get_f64(operand, i);
  for (int64_t f = 0; f < layout->features; f++) mean[f] /= (double)layout->per_feature;
  for (int64_t i = 0; i < operand->count; i++) {
    double centered = rt_get_f64(operand, i) - mean[feature_of(layout, i)];
    var[feature_of(layout, i)] += centered * centered;
  }
  for (int64_t f = 0; f < layout->features; f++) var[f] /= (double)layout->per_feature;
}

/* y = scale * (x - mean) / sqrt(var + epsilon) + offset, into a new output of shape. */
static rt_value *normalize(rt_eval *eval, const hlo_instr *instr, const hlo_shape *shape,
                           const rt_value *operand, const feature_layout *layout, const rt_value *scale,
                           const rt_value *offset, const double *mean, const double *var) {
  rt_value *y = rt_new_output(eval, instr, shape);
  if (!y) return NULL;
  if (y->count != operand->count) {
    rt_kernel_fail(eval, instr, HLO_ERR_INPUT, "result and operand differ in size");
    rt_value_release(y);
    return NULL;
  }
  double epsilon = epsilon_of(instr);
  for (int64_t i = 0; i < operand->count; i++) {
    int64_t f = feature_of(layout, i);
    double x = rt_get_f64(operand, i);
    rt_set_f64(y, i, rt_get_f64(scale, f) * (x - mean[f]) / sqrt(var[f] + epsilon) + rt_get_f64(offset, f));
  }
  return y;
}

/* A vector output filled from doubles. */
static rt_value *vector_output(rt_eval *eval, const hlo_instr *instr, const hlo_shape *shape,
                               const double *values, int64_t count) {
  rt_value *v = rt_new_output(eval, instr, shape);
  if (!v) return NULL;
  if (v->count != count) {
    rt_kernel_fail(eval, instr, HLO_ERR_INPUT, "a per-feature result is not as long as the feature dimension");
    rt_value_release(v);
    return NULL;
  }
  for (int64_t f = 0; f < count; f++) rt_set_f64(v, f, values[f]);
  return v;
}

/* Wraps three outputs as the result tuple, or releases them on failure. */
static hlo_status tuple3(rt_eval *eval, const hlo_instr *instr, rt_value **parts, rt_value **out) {
  hlo_status status = HLO_OK;
  for (int i = 0; i < 3; i++)
    if (!parts[i]) status = eval->diag->status != HLO_OK ? eval->diag->status : HLO_ERR_INTERNAL;
  if (status == HLO_OK) {
    *out = rt_value_new_tuple(3, parts);
    if (*out) return HLO_OK;
    status = rt_kernel_fail(eval, instr, HLO_ERR_INTERNAL, "out of memory");
  }
  for (int i = 0; i < 3; i++) rt_value_release(parts[i]);
  return status;
}

static bool tuple_of_three(const hlo_instr *instr) {
  return hlo_shape_is_tuple(&instr->shape) && instr->shape.tuple_count == 3;
}

RT_KERNEL(rt_kernel_batch_norm_inference) {
  feature_layout layout;
  const char *why = instr->operand_count != 5 ? "needs operand, scale, offset, mean and variance"
                                              : check_args(instr, args, 1, 4, &layout);
  if (!why && !hlo_shape_is_array(&instr->shape)) why = "the result must be an array";
  if (why) return rt_kernel_fail(eval, instr, HLO_ERR_INPUT, "%s", why);
  double *stats = hlo_malloc(sizeof(double) * (size_t)(2 * layout.features + 1));
  if (!stats) return rt_kernel_fail(eval, instr, HLO_ERR_INTERNAL, "out of memory");
  double *mean = stats, *var = stats + layout.features;
  for (int64_t f = 0; f < layout.features; f++) {
    mean[f] = rt_get_f64(args[3], f);
    var[f] = rt_get_f64(args[4], f);
  }
  *out = normalize(eval, instr, &instr->shape, args[0], &layout, args[1], args[2], mean, var);
  free(stats);
  return *out ? HLO_OK : eval->diag->status;
}

RT_KERNEL(rt_kernel_batch_norm_training) {
  feature_layout layout;
  const char *why = instr->operand_count != 3 ? "needs operand, scale and offset"
                                              : check_args(instr, args, 1, 2, &layout);
  if (!why && !tuple_of_three(instr)) why = "the result must be a tuple (output, mean, variance)";
  if (why) return rt_kernel_fail(eval, instr, HLO_ERR_INPUT, "%s", why);
  double *stats = hlo_malloc(sizeof(double) * (size_t)(2 * layout.features + 1));
  if (!stats) return rt_kernel_fail(eval, instr, HLO_ERR_INTERNAL, "out of memory");
  double *mean = stats, *var = stats + layout.features;
  moments(args[0], &layout, mean, var);
  rt_value *parts[3] = {0};
  parts[0] = normalize(eval, instr, &instr->shape.tuple[0], args[0], &layout, args[1], args[2], mean, var);
  if (parts[0]) parts[1] = vector_output(eval, instr, &instr->shape.tuple[1], mean, layout.features);
  if (parts[1]) parts[2] = vector_output(eval, instr, &instr->shape.tuple[2], var, layout.features);
  free(stats);
  return tuple3(eval, instr, parts, out);
}

/* With m elements per feature, mu, var the given moments and dy the incoming gradient:
 *   c = mean(dy * (x - mu)) / (var + eps),  d = mean(dy)
 *   grad_operand = scale / sqrt(var + eps) * (dy - d - c * (x - mu))
 *   grad_scale   = sum(dy * (x - mu)) / sqrt(var + eps)
 *   grad_offset  = sum(dy) */
RT_KERNEL(rt_kernel_batch_norm_grad) {
  feature_layout layout;
  const char *why = instr->operand_count != 5 ? "needs operand, scale, mean, variance and grad_output"
                                              : check_args(instr, args, 1, 3, &layout);
  const rt_value *operand = args[0], *scale = args[1], *mean = args[2], *var = args[3], *dy = args[4];
  if (!why && (dy->shape.dtype == HLO_TUPLE || dy->count != operand->count))
    why = "grad_output must have the operand's shape";
  if (!why && !tuple_of_three(instr)) why = "the result must be a tuple (grad_operand, grad_scale, grad_offset)";
  if (why) return rt_kernel_fail(eval, instr, HLO_ERR_INPUT, "%s", why);
  int64_t features = layout.features;
  double *sums = hlo_calloc((size_t)(2 * features + 1), sizeof(double));
  if (!sums) return rt_kernel_fail(eval, instr, HLO_ERR_INTERNAL, "out of memory");
  double *sum_dy = sums, *sum_dy_xmu = sums + features;
  double epsilon = epsilon_of(instr);
  for (int64_t i = 0; i < operand->count; i++) {
    int64_t f = feature_of(&layout, i);
    double g = rt_get_f64(dy, i);
    sum_dy[f] += g;
    sum_dy_xmu[f] += g * (rt_get_f64(operand, i) - rt_get_f64(mean, f));
  }
  rt_value *parts[3] = {0};
  parts[0] = rt_new_output(eval, instr, &instr->shape.tuple[0]);
  if (parts[0] && parts[0]->count != operand->count) {
    rt_kernel_fail(eval, instr, HLO_ERR_INPUT, "grad_operand differs in size from the operand");
    rt_value_release(parts[0]);
    parts[0] = NULL;
  }
  /* m == 0 leaves nothing to average; the means are then taken as 0, not 0/0. */
  double m = layout.per_feature > 0 ? (double)layout.per_feature : 1.0;
  for (int64_t i = 0; parts[0] && i < operand->count; i++) {
    int64_t f = feature_of(&layout, i);
    double v = rt_get_f64(var, f) + epsilon;
    double c = sum_dy_xmu[f] / m / v, d = sum_dy[f] / m;
    double xmu = rt_get_f64(operand, i) - rt_get_f64(mean, f);
    rt_set_f64(parts[0], i, rt_get_f64(scale, f) / sqrt(v) * (rt_get_f64(dy, i) - d - c * xmu));
  }
  for (int64_t f = 0; f < features; f++) sum_dy_xmu[f] /= sqrt(rt_get_f64(var, f) + epsilon);
  if (parts[0]) parts[1] = vector_output(eval, instr, &instr->shape.tuple[1], sum_dy_xmu, features);
  if (parts[1]) parts[2] = vector_output(eval, instr, &instr->shape.tuple[2], sum_dy, features);
  free(sums);
  return tuple3(eval, instr, parts, out);
}
