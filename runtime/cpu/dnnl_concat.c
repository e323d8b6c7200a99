/* Concatenations along the channels between oneDNN steps, planned with them (dnnl_plan.c):
 * each operand is read in the layout it arrives in (a DNNL step's blocked result, or
 * row-major) and the result is written blocked when every reader takes that layout, so
 * squeezenet's Fire modules (two convolutions joined, then a convolution or a pool) cost no
 * reorder. Every operand holds whole blocks of channels (a multiple of 16), so in the blocked
 * layout an operand's part of each image is one contiguous run. */
#include <stdatomic.h>
#include <string.h>

#include "dnnl_internal.h"
#include "runtime/runtime.h"

bool rt_cpu_dnnl_concat_supported(const hlo_instr *instr) {
  if (instr->opcode != HLO_OP_CONCATENATE || instr->operand_count < 2 || instr->operand_count > RT_DNNL_MAX_INPUTS ||
      instr->dimensions.count != 1 || instr->dimensions.values[0] != 1)
    return false;
  const hlo_shape *y = &instr->shape;
  if (!hlo_shape_is_array(y) || y->dtype != HLO_F32 || y->rank != 4 || !hlo_shape_is_default_layout(y)) return false;
  for (int k = 0; k < instr->operand_count; k++) {
    const hlo_shape *x = &instr->operands[k]->shape;
    if (!hlo_shape_is_array(x) || x->dtype != HLO_F32 || x->rank != 4 || !hlo_shape_is_default_layout(x) ||
        x->dims[1] % 16 != 0)
      return false;
  }
  return true;
}

bool rt_cpu_dnnl_build_concat(rt_cpu_dnnl *d, const dnnl_memory_desc_t *const *arrive) {
  const hlo_instr *concat = d->concat;
  d->block = 0;
  for (int k = 0; k < concat->operand_count; k++) {
    d->operand_blocked[k] = arrive[k] != NULL;
    if (!arrive[k]) continue;
    int block = rt_cpu_dnnl_block_of(arrive[k], &concat->operands[k]->shape);
    if (!block || (d->block && block != d->block)) return false;
    d->block = block;
  }
  if (!d->block) return false; /* the planner makes one only with a blocked operand */
  if (!rt_cpu_dnnl_block_md(&d->out_md, &concat->shape, d->blocked_out ? d->block : 0)) return false;
  d->out_bytes = (int64_t)dnnl_memory_desc_get_size(&d->out_md);
  d->scratch_bytes = 0;
  return true;
}

typedef struct concat_job {
  const rt_cpu_dnnl *d;
  const rt_value *const *in;
  const bool *in_finite; /* operand k known to hold no inf or NaN: not checked */
  float *out;
  int64_t channels, plane; /* the result's channels; H * W */
  atomic_bool *nonfinite;  /* set when a value copied is inf or NaN */
} concat_job;

/* count floats from x to y, and whether they are all finite, in one pass that the compiler
 * vectorizes: a third faster than memcpy and then a scan of what it wrote, with the run in
 * the cache. */
static bool copy_finite(float *y, const float *x, int64_t count) {
  unsigned bad = 0;
  for (int64_t i = 0; i < count; i++) bad |= rt_cpu_nonfinite(y[i] = x[i]);
  return bad == 0;
}

/* Items are (image, operand) pairs: operand k's channels of image n, from its layout into the
 * result's. A block's B channels of one pixel are B consecutive floats. Each operand's values
 * are checked for inf and NaN as they are copied, unless known already, so the convolution
 * that reads the result need not scan it. */
static void concat_items(void *ctx, int64_t begin, int64_t end) {
  const concat_job *j = ctx;
  const hlo_instr *concat = j->d->concat;
  int64_t count = concat->operand_count, b = j->d->block, plane = j->plane;
  for (int64_t item = begin; item < end; item++) {
    int64_t n = item / count, k = item % count, first = 0;
    for (int64_t e = 0; e < k; e++) first += concat->operands[e]->shape.dims[1];
    int64_t channels = concat->operands[k]->shape.dims[1];
    const float *x = (const float *)j->in[k]->data + n * channels * plane;
    float *y = j->out + (n * j->channels + first) * plane; /* both layouts: channels come in whole blocks */
    bool in_blocked = j->d->operand_blocked[k], out_blocked = j->d->blocked_out, check = !j->in_finite[k];
    if (in_blocked == out_blocked) {
      if (!check)
        memcpy(y, x, (size_t)(channels * plane) * sizeof(float));
      else if (!copy_finite(y, x, channels * plane))
        atomic_store_explicit(j->nonfinite, true, memory_order_relaxed);
      continue;
    }
    for (int64_t c = 0; c < channels; c++) { /* channel c: a row-major plane, or every b-th float of a block */
      int64_t blocked_at = (c / b) * plane * b + c % b, plain_at = c * plane;
      if (out_blocked)
        for (int64_t p = 0; p < plane; p++) y[blocked_at + p * b] = x[plain_at + p];
      else
        for (int64_t p = 0; p < plane; p++) y[plain_at + p] = x[blocked_at + p * b];
    }
    /* the same values as x's run, in another order (a blocked run's padded lanes are zero) */
    if (check && !rt_cpu_finite_run(x, channels * plane)) atomic_store_explicit(j->nonfinite, true, memory_order_relaxed);
  }
}

hlo_status rt_cpu_dnnl_concat_step(const rt_cpu_dnnl *d, const rt_value *const *in, const bool *in_finite, void *out,
                                   bool *finite, hlo_diag *diag) {
  (void)diag;
  const hlo_shape *y = &d->concat->shape;
  atomic_bool nonfinite = false;
  concat_job j = {.d = d, .in = in, .in_finite = in_finite, .out = out, .channels = y->dims[1],
                  .plane = y->dims[2] * y->dims[3], .nonfinite = &nonfinite};
  int64_t items = y->dims[0] * d->concat->operand_count;
  int64_t per_item = y->dims[1] * j.plane / d->concat->operand_count;
  int64_t grain = RT_CPU_GRAIN / (per_item ? per_item : 1);
  rt_parallel_for(items, grain > 0 ? grain : 1, concat_items, &j);
  *finite = !atomic_load(&nonfinite);
  return HLO_OK;
}
