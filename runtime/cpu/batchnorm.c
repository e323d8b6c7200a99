/* batch-norm-training and batch-norm-grad on f32, the two ops that dominate a training step
 * after convolutions. Same formulas as the reference kernels (sums in double, each result
 * rounded once), but as typed loops over each feature's runs, features split over threads.
 * They make tuples, so they have the reference kernels' signature and run as such steps. */
#include <math.h>
#include <stdlib.h>

#include "kernel_internal.h"
#include "runtime/runtime.h"

/* Feature f's elements: runs of `stride` starting at (o * features + f) * stride, o < outer. */
typedef struct bn_job {
  const float *x, *scale, *offset, *mean_in, *var_in, *dy;
  float *y, *mean_out, *var_out, *grad_scale, *grad_offset;
  int64_t features, stride, outer;
  double epsilon;
} bn_job;

static void training_features(void *ctx, int64_t begin, int64_t end) {
  const bn_job *j = ctx;
  double m = (double)(j->outer * j->stride);
  for (int64_t f = begin; f < end; f++) {
    double sum = 0, sq = 0;
    for (int64_t o = 0; o < j->outer; o++) {
      const float *run = j->x + (o * j->features + f) * j->stride;
      for (int64_t s = 0; s < j->stride; s++) sum += run[s];
    }
    double mean = m > 0 ? sum / m : 0;
    for (int64_t o = 0; o < j->outer; o++) {
      const float *run = j->x + (o * j->features + f) * j->stride;
      for (int64_t s = 0; s < j->stride; s++) sq += (run[s] - mean) * (run[s] - mean);
    }
    double var = m > 0 ? sq / m : 0;
    double k = j->scale[f] / sqrt(var + j->epsilon), b = j->offset[f];
    for (int64_t o = 0; o < j->outer; o++) {
      const float *run = j->x + (o * j->features + f) * j->stride;
      float *out = j->y + (o * j->features + f) * j->stride;
      for (int64_t s = 0; s < j->stride; s++) out[s] = (float)(k * (run[s] - mean) + b);
    }
    j->mean_out[f] = (float)mean;
    j->var_out[f] = (float)var;
  }
}

static void grad_features(void *ctx, int64_t begin, int64_t end) {
  const bn_job *j = ctx;
  double m = j->outer * j->stride > 0 ? (double)(j->outer * j->stride) : 1.0;
  for (int64_t f = begin; f < end; f++) {
    double mu = j->mean_in[f], sum_dy = 0, sum_dy_xmu = 0;
    for (int64_t o = 0; o < j->outer; o++) {
      int64_t at = (o * j->features + f) * j->stride;
      for (int64_t s = 0; s < j->stride; s++) {
        double g = j->dy[at + s];
        sum_dy += g;
        sum_dy_xmu += g * (j->x[at + s] - mu);
      }
    }
    double v = j->var_in[f] + j->epsilon;
    double c = sum_dy_xmu / m / v, d = sum_dy / m, k = j->scale[f] / sqrt(v);
    for (int64_t o = 0; o < j->outer; o++) {
      int64_t at = (o * j->features + f) * j->stride;
      for (int64_t s = 0; s < j->stride; s++)
        j->y[at + s] = (float)(k * (j->dy[at + s] - d - c * (j->x[at + s] - mu)));
    }
    j->grad_scale[f] = (float)(sum_dy_xmu / sqrt(v));
    j->grad_offset[f] = (float)sum_dy;
  }
}

/* Computes into parts, the three result arrays. */
static void compute(const hlo_instr *instr, const rt_value *const *args, rt_value *const *parts) {
  bool grad = instr->opcode == HLO_OP_BATCH_NORM_GRAD;
  const rt_value *x = args[0];
  bn_job j = {.x = x->data, .scale = args[1]->data, .epsilon = (double)(float)instr->epsilon};
  j.features = x->shape.dims[instr->index];
  j.stride = 1;
  for (int d = (int)instr->index + 1; d < x->shape.rank; d++) j.stride *= x->shape.dims[d];
  j.outer = j.features > 0 && j.stride > 0 ? x->count / (j.features * j.stride) : 0;
  j.y = parts[0]->data;
  if (grad) {
    j.mean_in = args[2]->data;
    j.var_in = args[3]->data;
    j.dy = args[4]->data;
    j.grad_scale = parts[1]->data;
    j.grad_offset = parts[2]->data;
  } else {
    j.offset = args[2]->data;
    j.mean_out = parts[1]->data;
    j.var_out = parts[2]->data;
  }
  int64_t per_feature = j.outer * j.stride;
  int64_t grain = per_feature >= RT_CPU_GRAIN ? 1 : RT_CPU_GRAIN / (per_feature ? per_feature : 1);
  rt_parallel_for(j.features, grain, grad ? grad_features : training_features, &j);
}

/* The reference kernels' signature: a new tuple. */
static hlo_status run(rt_eval *eval, const hlo_instr *instr, rt_value *const *args, rt_value **out) {
  rt_value *parts[3];
  for (int i = 0; i < 3; i++) parts[i] = rt_value_new(&instr->shape.tuple[i]);
  if (!parts[0] || !parts[1] || !parts[2]) {
    for (int i = 0; i < 3; i++) rt_value_release(parts[i]);
    return hlo_diag_set(eval->diag, HLO_ERR_INTERNAL, "out of memory in %%%s", instr->name);
  }
  compute(instr, (const rt_value *const *)args, parts);
  *out = rt_value_new_tuple(3, parts);
  if (!*out) {
    for (int i = 0; i < 3; i++) rt_value_release(parts[i]);
    return hlo_diag_set(eval->diag, HLO_ERR_INTERNAL, "out of memory in %%%s", instr->name);
  }
  return HLO_OK;
}

/* The fast kernels' signature: out is a tuple of the three arrays, in planned buffers. */
static bool into_parts(const hlo_instr *instr, const rt_value *const *in, rt_value *out) {
  compute(instr, in, out->tuple);
  return true;
}

static bool handles(const hlo_instr *instr) {
  bool is_grad = instr->opcode == HLO_OP_BATCH_NORM_GRAD;
  if (instr->opcode != HLO_OP_BATCH_NORM_TRAINING && !is_grad) return false;
  if (instr->operand_count != (is_grad ? 5 : 3) || !hlo_shape_is_tuple(&instr->shape) || instr->shape.tuple_count != 3)
    return false;
  const hlo_shape *x = &instr->operands[0]->shape;
  if (x->dtype != HLO_F32 || instr->index < 0 || instr->index >= x->rank) return false;
  for (int k = 0; k < instr->operand_count; k++) {
    const hlo_shape *s = &instr->operands[k]->shape;
    if (s->dtype != HLO_F32 || hlo_shape_is_dynamic(s)) return false;
    bool vector = s->rank == 1 && s->dims[0] == x->dims[instr->index];
    bool whole = hlo_shape_equal(s, x);
    if (k == 0 || (is_grad && k == 4) ? !whole : !vector) return false;
  }
  for (int i = 0; i < 3; i++)
    if (instr->shape.tuple[i].dtype != HLO_F32) return false;
  return true;
}

rt_kernel rt_cpu_pick_batch_norm(const hlo_instr *instr) { return handles(instr) ? run : NULL; }

rt_cpu_kernel rt_cpu_pick_batch_norm_parts(const hlo_instr *instr) { return handles(instr) ? into_parts : NULL; }
