/* A max pool's gradient on f32 planes: select-and-scatter whose select keeps the current
 * element while it is >= the candidate (each window's first maximum in row-major order, the
 * element PyTorch's CPU max pool picks) and whose scatter adds, with a window over the last
 * two dims only (size 1, stride 1 and no padding elsewhere, no dilation).
 *
 * The reference walks every window in row-major order of the source, the window's in-bounds
 * taps in row-major order (padding skipped), and adds the source element into the selected
 * element of the output, which starts at the init value. Windows of different planes never
 * meet, so planes are split over the threads and each plane is walked in that order: the
 * same selections and the same sums, bit for bit. One pass where the graph as traced from
 * PyTorch (an index per window, compared per kernel offset) made several per offset. */
#include "kernel_internal.h"
#include "runtime/runtime.h"

typedef struct grad_job {
  const hlo_window_dim *wh, *ww;
  int64_t in_h, in_w, out_h, out_w;
  const float *x, *source;
  float *y, init;
} grad_job;

static void planes(void *ctx, int64_t begin, int64_t end) {
  const grad_job *j = ctx;
  int64_t in_plane = j->in_h * j->in_w, out_plane = j->out_h * j->out_w;
  for (int64_t p = begin; p < end; p++) {
    const float *x = j->x + p * in_plane, *source = j->source + p * out_plane;
    float *y = j->y + p * in_plane;
    for (int64_t i = 0; i < in_plane; i++) y[i] = j->init;
    for (int64_t oh = 0; oh < j->out_h; oh++) {
      int64_t top = oh * j->wh->stride - j->wh->pad_low;
      int64_t k0 = top < 0 ? -top : 0, k1 = j->in_h - top < j->wh->size ? j->in_h - top : j->wh->size;
      for (int64_t ow = 0; ow < j->out_w; ow++) {
        int64_t left = ow * j->ww->stride - j->ww->pad_low;
        int64_t l0 = left < 0 ? -left : 0, l1 = j->in_w - left < j->ww->size ? j->in_w - left : j->ww->size;
        if (k0 >= k1 || l0 >= l1) continue; /* a window wholly in padding selects nothing */
        int64_t selected = (top + k0) * j->in_w + left + l0;
        float best = x[selected];
        for (int64_t kh = k0; kh < k1; kh++)
          for (int64_t kw = kh == k0 ? l0 + 1 : l0; kw < l1; kw++) {
            int64_t at = (top + kh) * j->in_w + left + kw;
            if (!(best >= x[at])) selected = at, best = x[at]; /* a NaN on either side moves on */
          }
        y[selected] = y[selected] + source[oh * j->out_w + ow];
      }
    }
  }
}

static bool pool_grad_kernel(const hlo_instr *instr, const rt_value *const *in, rt_value *out) {
  const hlo_window *w = instr->window;
  int r = out->shape.rank;
  grad_job j = {.wh = &w->dims[r - 2], .ww = &w->dims[r - 1], .in_h = out->shape.dims[r - 2],
                .in_w = out->shape.dims[r - 1], .out_h = in[1]->shape.dims[r - 2], .out_w = in[1]->shape.dims[r - 1],
                .x = in[0]->data, .source = in[1]->data, .y = out->data, .init = *(const float *)in[2]->data};
  int64_t plane = j.in_h * j.in_w, count = plane ? out->count / plane : 0;
  int64_t per_plane = plane + j.out_h * j.out_w * w->dims[r - 2].size * w->dims[r - 1].size;
  int64_t grain = RT_CPU_GRAIN / (per_plane ? per_plane : 1);
  rt_parallel_for(count, grain > 0 ? grain : 1, planes, &j);
  return true;
}

/* (p0, p1) -> p0 >= p1 (or p1 <= p0) on f32 scalars. */
static bool keeps_first_maximum(const hlo_comp *select) {
  if (!select || select->param_count != 2 || !select->root) return false;
  const hlo_instr *root = select->root, *p0 = select->params[0], *p1 = select->params[1];
  if (root->opcode != HLO_OP_COMPARE || root->operand_count != 2 || !p0 || !p1) return false;
  if (root->compare_type != HLO_CMP_DEFAULT && root->compare_type != HLO_CMP_FLOAT) return false;
  if (p0->shape.rank != 0 || p1->shape.rank != 0 || p0->shape.dtype != HLO_F32 || p1->shape.dtype != HLO_F32)
    return false;
  return (root->direction == HLO_DIR_GE && root->operands[0] == p0 && root->operands[1] == p1) ||
         (root->direction == HLO_DIR_LE && root->operands[0] == p1 && root->operands[1] == p0);
}

rt_cpu_kernel rt_cpu_pick_pool_grad(const hlo_instr *instr) {
  if (instr->opcode != HLO_OP_SELECT_AND_SCATTER || instr->operand_count != 3 || instr->called_count != 2 ||
      !instr->window)
    return NULL;
  const hlo_shape *x = &instr->operands[0]->shape, *source = &instr->operands[1]->shape;
  const hlo_shape *init = &instr->operands[2]->shape;
  if (!hlo_shape_is_array(&instr->shape) || !hlo_shape_equal(&instr->shape, x) || x->dtype != HLO_F32 ||
      !hlo_shape_is_array(source) || source->dtype != HLO_F32 || source->rank != x->rank ||
      !hlo_shape_is_array(init) || init->dtype != HLO_F32 || init->rank != 0 || x->rank < 2 ||
      hlo_shape_is_dynamic(x) || hlo_shape_is_dynamic(source))
    return NULL;
  const hlo_window *w = instr->window;
  if (w->rank != x->rank) return NULL;
  for (int d = 0; d < w->rank; d++) {
    const hlo_window_dim *wd = &w->dims[d];
    if (wd->lhs_dilate != 1 || wd->rhs_dilate != 1 || wd->reversal || wd->size < 1 || wd->stride < 1 ||
        wd->pad_low < 0 || wd->pad_high < 0)
      return NULL;
    bool leading = d < w->rank - 2;
    if (leading && (wd->size != 1 || wd->stride != 1 || wd->pad_low != 0 || wd->pad_high != 0)) return NULL;
    int64_t padded = x->dims[d] + wd->pad_low + wd->pad_high;
    int64_t windows = padded >= wd->size ? (padded - wd->size) / wd->stride + 1 : 0;
    if (source->dims[d] != windows) return NULL; /* the verifier's rule, checked again: the kernel relies on it */
  }
  if (!keeps_first_maximum(instr->called[0]) || hlo_simple_reducer(instr->called[1]) != HLO_OP_ADD ||
      instr->called[1]->root->shape.dtype != HLO_F32)
    return NULL;
  return pool_grad_kernel;
}
