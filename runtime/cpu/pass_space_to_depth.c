/* A strided convolution over few input features rewritten as a stride-1 convolution over
 * the input's space-to-depth blocks (alexnet's stem: 11x11, stride 4, 3 features):
 *
 *   conv(x [N, C, H, W], w [O, C, KH, KW]), stride SH x SW, padding (lo, hi)
 *     -> conv(x' [N, C*SH*SW, HB, WB], w' [O, C*SH*SW, KH', KW']), stride 1, no padding
 *
 * with KH' = ceil(KH / SH), HB = OH + KH' - 1 blocks (the same along W), x' the padded input
 * cut into SH x SW blocks, each block's pixels moved into the features (c, dy, dx), and w'
 * the kernel padded with zeros to KH' * SH rows and cut the same way. Output pixel o reads
 * input rows o*SH .. o*SH + KH - 1, which are blocks o .. o + KH' - 1: the same products plus
 * products with the zeros, summed in another order, so not exact. Kernel libraries run a
 * stride-1 convolution over 48 features far better than a stride-4 one over 3 (oneDNN 2.6
 * has only its im2col kernel for alexnet's stem). The weight side (pad, reshapes, transpose
 * of a parameter) depends on the weight alone, which the cpu backend keeps from call to
 * call; the input side is one pad and one transpose per call.
 *
 * Only NCHW / OIHW (dim_labels bf01_oi01->bf01, as frontends write them), f32, 2 spatial
 * dims, no dilation, reversal, groups or negative padding, both strides at least 3, the
 * kernel at least the stride, C * SH * SW at most 64, and padding that the blocks cover. */
#include "exec_internal.h"
#include "hlo/hlo.h"

enum { MAX_BLOCK_FEATURES = 64, MIN_STRIDE = 3 };

static bool plain_f32(const hlo_instr *instr) {
  const hlo_shape *s = &instr->shape;
  return hlo_shape_is_array(s) && s->dtype == HLO_F32 && hlo_shape_is_default_layout(s) && !hlo_shape_is_dynamic(s);
}

static bool nchw(const hlo_conv_dims *d) {
  return d->spatial_count == 2 && d->input_batch == 0 && d->input_feature == 1 && d->input_spatial[0] == 2 &&
         d->input_spatial[1] == 3 && d->kernel_output_feature == 0 && d->kernel_input_feature == 1 &&
         d->kernel_spatial[0] == 2 && d->kernel_spatial[1] == 3 && d->output_batch == 0 && d->output_feature == 1 &&
         d->output_spatial[0] == 2 && d->output_spatial[1] == 3;
}

/* The blocks along one spatial dim: *blocks of the output's reach, *high the input's new
 * high padding; false when the window is not one to rewrite. */
static bool blocks_along(const hlo_window_dim *w, int64_t in, int64_t out, int64_t *taps, int64_t *blocks,
                         int64_t *high) {
  if (w->stride < MIN_STRIDE || w->size < w->stride || w->lhs_dilate != 1 || w->rhs_dilate != 1 || w->reversal ||
      w->pad_low < 0 || w->pad_high < 0)
    return false;
  *taps = (w->size + w->stride - 1) / w->stride;
  *blocks = out + *taps - 1;
  *high = *blocks * w->stride - w->pad_low - in;
  return *high >= 0;
}

static bool rewritable(const hlo_instr *conv) {
  if (conv->opcode != HLO_OP_CONVOLUTION || conv->operand_count != 2 || !conv->conv || !conv->window ||
      conv->feature_group_count != 1 || conv->batch_group_count != 1 || !nchw(conv->conv) || !plain_f32(conv) ||
      !plain_f32(conv->operands[0]) || !plain_f32(conv->operands[1]) || conv->window->rank != 2)
    return false;
  const hlo_window_dim *w = conv->window->dims;
  return conv->operands[0]->shape.dims[1] * w[0].stride * w[1].stride <= MAX_BLOCK_FEATURES;
}

/* v [A, C, R*SH, S*SW] -> [A, C*SH*SW, R, S]: each SH x SW block's pixels into the features. */
static hlo_instr *to_depth(hlo_comp *comp, hlo_instr *v, int64_t sh, int64_t sw, hlo_diag *diag) {
  const int64_t *d = v->shape.dims;
  int64_t split[6] = {d[0], d[1], d[2] / sh, sh, d[3] / sw, sw};
  static const int64_t order[6] = {0, 1, 3, 5, 2, 4};
  int64_t joined[4] = {d[0], d[1] * sh * sw, d[2] / sh, d[3] / sw};
  hlo_instr *cut = hlo_build_reshape(comp, v, 6, split, diag);
  hlo_instr *moved = cut ? hlo_build_transpose(comp, cut, order, diag) : NULL;
  return moved ? hlo_build_reshape(comp, moved, 4, joined, diag) : NULL;
}

/* v padded with zeros: low[i] and high[i] on dim i. */
static hlo_instr *zero_pad(hlo_comp *comp, hlo_instr *v, const int64_t *low, const int64_t *high, hlo_diag *diag) {
  hlo_padding padding = {.rank = v->shape.rank};
  for (int i = 0; i < padding.rank; i++) padding.low[i] = low[i], padding.high[i] = high[i];
  hlo_instr *zero = hlo_build_constant_scalar(comp, HLO_F32, 0.0, diag);
  return zero ? hlo_build_pad(comp, v, zero, &padding, diag) : NULL;
}

/* The rewritten convolution, or NULL to leave conv as it is. */
static hlo_instr *rewrite(hlo_comp *comp, hlo_instr *conv, hlo_diag *diag) {
  hlo_instr *x = conv->operands[0], *w = conv->operands[1];
  const hlo_window_dim *win = conv->window->dims;
  int64_t taps[2], blocks[2], high[2];
  for (int i = 0; i < 2; i++)
    if (!blocks_along(&win[i], x->shape.dims[2 + i], conv->shape.dims[2 + i], &taps[i], &blocks[i], &high[i]))
      return NULL;
  int64_t sh = win[0].stride, sw = win[1].stride;
  int64_t x_low[4] = {0, 0, win[0].pad_low, win[1].pad_low}, x_high[4] = {0, 0, high[0], high[1]};
  int64_t w_low[4] = {0}, w_high[4] = {0, 0, taps[0] * sh - win[0].size, taps[1] * sw - win[1].size};
  hlo_instr *xp = zero_pad(comp, x, x_low, x_high, diag);
  hlo_instr *xd = xp ? to_depth(comp, xp, sh, sw, diag) : NULL;
  hlo_instr *wp = xd ? zero_pad(comp, w, w_low, w_high, diag) : NULL;
  hlo_instr *wd = wp ? to_depth(comp, wp, sh, sw, diag) : NULL;
  if (!wd) return NULL;
  hlo_window window = {.rank = 2};
  for (int i = 0; i < 2; i++) window.dims[i] = (hlo_window_dim){.size = taps[i], .stride = 1, .lhs_dilate = 1, .rhs_dilate = 1};
  hlo_instr *product = hlo_build_convolution(comp, xd, wd, &window, conv->conv, 1, 1, diag);
  if (!product || !hlo_shape_equal(&product->shape, &conv->shape)) return NULL;
  product->origin = conv->origin; /* binding takes its shape from the source's convolution */
  return product;
}

static int rewrite_comp(hlo_comp *comp) {
  int count = comp->instr_count, rewrites = 0;
  for (int i = 0; i < count; i++) {
    hlo_instr *conv = comp->instrs[i];
    if (!rewritable(conv) || !hlo_choice("space_to_depth", conv->name)) continue;
    hlo_diag diag;
    hlo_instr *product = rewrite(comp, conv, &diag);
    if (!product) continue;
    hlo_replace_uses(comp, conv, product);
    rewrites++;
  }
  hlo_diag diag;
  /* new instructions were appended after their users: sort them in (no cycle is made) */
  if (rewrites) hlo_comp_sort(comp, &diag);
  return rewrites;
}

int rt_cpu_pass_space_to_depth(hlo_module *module) {
  int rewrites = 0;
  for (int c = 0; c < module->comp_count; c++) rewrites += rewrite_comp(module->comps[c]);
  if (rewrites) {
    hlo_pass_cse(module);
    hlo_pass_dce(module);
  }
  return rewrites;
}
