/* Lowering the nn ops. gelu, softmax, log_softmax and layer_norm become composite calls:
 * an HLO call with is_composite=true and the composite.* frontend attributes XLA prints,
 * whose callee is the decomposition. A backend may match the name and run one kernel, or
 * simply run the call; the reference evaluator does the latter. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "capture.h"
#include "hlo/hlo.h"

/* The lowest (or highest) value of dtype: the identity of max (or min). */
static hlo_instr *limit(hlo_comp *comp, hlo_dtype dtype, bool lowest, hlo_diag *diag) {
  if (hlo_dtype_is_float(dtype)) return cap_lower_scalar(comp, dtype, lowest ? -INFINITY : INFINITY, diag);
  unsigned char bytes[8] = {0};
  int bits = hlo_dtype_bits(dtype);
  uint64_t v;
  if (hlo_dtype_is_signed(dtype))
    v = lowest ? (uint64_t)1 << (bits - 1) : ((uint64_t)1 << (bits - 1)) - 1;
  else
    v = lowest ? 0 : bits == 64 ? UINT64_MAX : ((uint64_t)1 << bits) - 1;
  memcpy(bytes, &v, 8); /* little-endian: the low bytes come first */
  hlo_literal literal;
  memset(&literal, 0, sizeof literal);
  literal.shape = hlo_shape_scalar(dtype);
  literal.data = bytes;
  return hlo_build_constant(comp, &literal, diag);
}

static hlo_instr *reduce_with(hlo_comp *comp, hlo_instr *x, hlo_opcode op, hlo_instr *init, int count,
                              const int64_t *dims, hlo_diag *diag) {
  hlo_comp *reducer = init ? cap_lower_reducer(comp, op, x->shape.dtype, diag) : NULL;
  if (!reducer) return NULL;
  return hlo_build_reduce(comp, x, init, count, dims, reducer, diag);
}

/* x with the dims that a reduction removed put back, broadcast to dims. */
static hlo_instr *expand(hlo_comp *comp, hlo_instr *x, int rank, const int64_t *dims, int64_t mask, hlo_diag *diag) {
  int64_t mapping[HLO_MAX_RANK];
  int k = 0;
  for (int i = 0; i < rank; i++)
    if (!(mask >> i & 1)) mapping[k++] = i;
  return hlo_build_broadcast(comp, x, rank, dims, mapping, diag);
}

static hlo_instr *binary(hlo_comp *comp, hlo_opcode op, hlo_instr *a, hlo_instr *b, hlo_diag *diag) {
  return a && b ? hlo_build_binary(comp, op, a, b, diag) : NULL;
}

static hlo_instr *unary(hlo_comp *comp, hlo_opcode op, hlo_instr *a, hlo_diag *diag) {
  return a ? hlo_build_unary(comp, op, a, diag) : NULL;
}

static hlo_instr *full_like(hlo_comp *comp, const hlo_instr *x, double value, hlo_diag *diag) {
  return cap_lower_full(comp, x->shape.dtype, x->shape.rank, x->shape.dims, value, diag);
}

/* ---- composites ---- */

typedef struct composite {
  hlo_comp *callee;
  hlo_instr *params[3];
} composite;

static bool composite_begin(hlo_comp *comp, const char *name, int count, hlo_instr *const *operands, composite *c,
                            hlo_diag *diag) {
  c->callee = hlo_build_computation(comp->module, name, false);
  if (!c->callee) {
    hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory lowering %s", name);
    return false;
  }
  for (int i = 0; i < count; i++) {
    c->params[i] = hlo_build_parameter(c->callee, i, &operands[i]->shape, NULL, diag);
    if (!c->params[i]) return false;
  }
  return true;
}

/* attributes: the MLIR dictionary XLA carries in composite.attributes, e.g. {dim = 1 : i64}. */
static hlo_instr *composite_end(hlo_comp *comp, composite *c, hlo_instr *result, const char *name,
                                const char *attributes, int count, hlo_instr *const *operands, hlo_diag *diag) {
  if (!result || hlo_comp_set_root(c->callee, result, diag) != HLO_OK) return NULL;
  hlo_instr *call = hlo_build_call(comp, c->callee, count, operands, diag);
  if (!call) return NULL;
  hlo_arena *arena = &comp->module->arena;
  char text[512];
  snprintf(text, sizeof text, "{composite.attributes=%s,composite.name=\"%s\",composite.version=\"1\"}", attributes,
           name);
  const char *composite_name = hlo_arena_strdup(arena, name), *value = hlo_arena_strdup(arena, text);
  hlo_raw_attr *attr = hlo_arena_alloc(arena, sizeof(hlo_raw_attr));
  if (!composite_name || !value || !attr) {
    hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory lowering %s", name);
    return NULL; /* the call stays behind unused; the module's failed flag is set */
  }
  call->is_composite = true;
  call->composite_name = composite_name;
  attr->name = "frontend_attributes";
  attr->value = value;
  call->raw_attrs = attr;
  call->raw_attr_count = 1;
  return call;
}

static hlo_instr *lower_softmax(hlo_comp *comp, const cap_node *node, hlo_instr *x, hlo_diag *diag) {
  bool log = node->sub == 1;
  const char *name = log ? "latch.log_softmax" : "latch.softmax";
  composite c;
  if (!composite_begin(comp, name, 1, &x, &c, diag)) return NULL;
  hlo_comp *f = c.callee;
  hlo_instr *p = c.params[0];
  int64_t dim = node->attrs[0], mask = (int64_t)1 << dim;
  int rank = p->shape.rank;
  const int64_t *dims = p->shape.dims;
  /* Subtracting the max keeps exp from overflowing; the result is the same. */
  hlo_instr *max =
      reduce_with(f, p, HLO_OP_MAXIMUM, cap_lower_scalar(f, p->shape.dtype, -INFINITY, diag), 1, &dim, diag);
  hlo_instr *shifted = binary(f, HLO_OP_SUBTRACT, p, max ? expand(f, max, rank, dims, mask, diag) : NULL, diag);
  hlo_instr *e = unary(f, HLO_OP_EXP, shifted, diag);
  hlo_instr *sum = e ? cap_lower_reduce(f, e, HLO_OP_ADD, 0, 1, &dim, diag) : NULL;
  hlo_instr *sums = sum ? expand(f, sum, rank, dims, mask, diag) : NULL;
  hlo_instr *result = log ? binary(f, HLO_OP_SUBTRACT, shifted, unary(f, HLO_OP_LOG, sums, diag), diag)
                          : binary(f, HLO_OP_DIVIDE, e, sums, diag);
  char attributes[64];
  snprintf(attributes, sizeof attributes, "{dim = %lld : i64}", (long long)dim);
  return composite_end(comp, &c, result, name, attributes, 1, &x, diag);
}

static hlo_instr *lower_gelu(hlo_comp *comp, const cap_node *node, hlo_instr *x, hlo_diag *diag) {
  bool approx = node->sub == 1;
  composite c;
  if (!composite_begin(comp, "latch.gelu", 1, &x, &c, diag)) return NULL;
  hlo_comp *f = c.callee;
  hlo_instr *p = c.params[0], *inner;
  if (approx) { /* tanh(sqrt(2/pi) * (x + 0.044715 x^3)) */
    hlo_instr *cube = binary(f, HLO_OP_MULTIPLY, binary(f, HLO_OP_MULTIPLY, p, p, diag), p, diag);
    hlo_instr *sum =
        binary(f, HLO_OP_ADD, p, binary(f, HLO_OP_MULTIPLY, cube, full_like(f, p, 0.044715, diag), diag), diag);
    inner =
        unary(f, HLO_OP_TANH, binary(f, HLO_OP_MULTIPLY, sum, full_like(f, p, sqrt(2.0 / M_PI), diag), diag), diag);
  } else { /* erf(x / sqrt(2)) */
    inner = unary(f, HLO_OP_ERF, binary(f, HLO_OP_MULTIPLY, p, full_like(f, p, M_SQRT1_2, diag), diag), diag);
  }
  hlo_instr *one_plus = binary(f, HLO_OP_ADD, inner, full_like(f, p, 1.0, diag), diag);
  hlo_instr *half_x = binary(f, HLO_OP_MULTIPLY, p, full_like(f, p, 0.5, diag), diag);
  hlo_instr *result = binary(f, HLO_OP_MULTIPLY, half_x, one_plus, diag);
  return composite_end(comp, &c, result, "latch.gelu",
                       approx ? "{approximate = \"tanh\"}" : "{approximate = \"none\"}", 1, &x, diag);
}

/* w (the trailing dims of x, or x's channel dim when channel >= 0) converted and broadcast. */
static hlo_instr *spread(hlo_comp *comp, hlo_instr *w, const hlo_instr *x, int channel, hlo_diag *diag) {
  w = cap_lower_convert(comp, w, x->shape.dtype, diag);
  if (!w) return NULL;
  if (channel < 0) return cap_lower_broadcast(comp, w, x->shape.rank, x->shape.dims, diag);
  int64_t mapping = channel;
  return hlo_build_broadcast(comp, w, x->shape.rank, x->shape.dims, &mapping, diag);
}

static hlo_instr *lower_layer_norm(hlo_comp *comp, const cap_node *node, hlo_instr *const *in, hlo_diag *diag) {
  int count = node->operand_count;
  composite c;
  if (!composite_begin(comp, "latch.layer_norm", count, in, &c, diag)) return NULL;
  hlo_comp *f = c.callee;
  hlo_instr *p = c.params[0];
  int rank = p->shape.rank, k = (int)node->attrs[0];
  int64_t dims[HLO_MAX_RANK], mask = 0, n = 1;
  for (int i = 0; i < k; i++) {
    dims[i] = rank - k + i;
    mask |= (int64_t)1 << dims[i];
    n *= p->shape.dims[dims[i]];
  }
  hlo_instr *inv_n = cap_lower_scalar(f, p->shape.dtype, 1.0 / (double)(n ? n : 1), diag);
  hlo_instr *sum = cap_lower_reduce(f, p, HLO_OP_ADD, 0, k, dims, diag);
  hlo_instr *mean = sum && inv_n ? binary(f, HLO_OP_MULTIPLY, sum,
                                          cap_lower_broadcast(f, inv_n, sum->shape.rank, sum->shape.dims, diag), diag)
                                 : NULL;
  hlo_instr *centered =
      binary(f, HLO_OP_SUBTRACT, p, mean ? expand(f, mean, rank, p->shape.dims, mask, diag) : NULL, diag);
  hlo_instr *sq = binary(f, HLO_OP_MULTIPLY, centered, centered, diag);
  hlo_instr *sq_sum = sq ? cap_lower_reduce(f, sq, HLO_OP_ADD, 0, k, dims, diag) : NULL;
  hlo_instr *var = sq_sum ? binary(f, HLO_OP_MULTIPLY, sq_sum,
                                   cap_lower_broadcast(f, inv_n, sq_sum->shape.rank, sq_sum->shape.dims, diag), diag)
                          : NULL;
  hlo_instr *inv =
      var ? unary(f, HLO_OP_RSQRT, binary(f, HLO_OP_ADD, var, full_like(f, var, node->scalar[0], diag), diag), diag)
          : NULL;
  hlo_instr *y =
      binary(f, HLO_OP_MULTIPLY, centered, inv ? expand(f, inv, rank, p->shape.dims, mask, diag) : NULL, diag);
  int next = 1;
  if (y && node->attrs[1]) y = binary(f, HLO_OP_MULTIPLY, y, spread(f, c.params[next++], y, -1, diag), diag);
  if (y && node->attrs[2]) y = binary(f, HLO_OP_ADD, y, spread(f, c.params[next++], y, -1, diag), diag);
  char attributes[128];
  snprintf(attributes, sizeof attributes, "{epsilon = %.9e : f64, normalized_rank = %d : i64}", node->scalar[0], k);
  return composite_end(comp, &c, y, "latch.layer_norm", attributes, count, in, diag);
}

static hlo_instr *lower_batch_norm(hlo_comp *comp, const cap_node *node, hlo_instr *const *in, hlo_diag *diag) {
  hlo_instr *x = in[0];
  hlo_instr *mean = spread(comp, in[1], x, 1, diag), *var = spread(comp, in[2], x, 1, diag);
  hlo_instr *inv = var ? unary(comp, HLO_OP_RSQRT,
                               binary(comp, HLO_OP_ADD, var, full_like(comp, var, node->scalar[0], diag), diag), diag)
                       : NULL;
  hlo_instr *y = binary(comp, HLO_OP_MULTIPLY, binary(comp, HLO_OP_SUBTRACT, x, mean, diag), inv, diag);
  int next = 3;
  if (y && node->attrs[0]) y = binary(comp, HLO_OP_MULTIPLY, y, spread(comp, in[next++], x, 1, diag), diag);
  if (y && node->attrs[1]) y = binary(comp, HLO_OP_ADD, y, spread(comp, in[next++], x, 1, diag), diag);
  return y;
}

/* The operands' type of a product: its own, or bf16 for an f32 product traced under the bf16
 * precision (the result stays f32: XLA's preferred element type). */
static hlo_dtype operand_dtype(const cap_node *node) {
  return node->sub == CAP_PRODUCT_BF16 ? HLO_BF16 : (hlo_dtype)node->dtype;
}

/* NumPy matmul: vectors become [1, K] / [K, 1], batch dims broadcast, then one dot with
 * batch dims, reshaped back when a vector's dim disappears. A matrix rhs (x @ W, a Linear
 * layer) is one dot without batch dims instead: x's batch dims are free dims of the lhs,
 * rows of one product, and W is read where it is (a broadcast to the batch would copy the
 * weight once per batch element, and the backend would multiply one element at a time). */
static hlo_instr *lower_matmul(hlo_comp *comp, const cap_node *node, hlo_instr *const *in, hlo_diag *diag) {
  hlo_dtype dtype = (hlo_dtype)node->dtype, operand_type = operand_dtype(node);
  hlo_instr *a = cap_lower_convert(comp, in[0], operand_type, diag),
            *b = a ? cap_lower_convert(comp, in[1], operand_type, diag) : NULL;
  if (!b) return NULL;
  if (a->shape.rank == 1) {
    int64_t d[2] = {1, a->shape.dims[0]};
    a = hlo_build_reshape(comp, a, 2, d, diag);
  }
  if (a && b->shape.rank == 1) {
    int64_t d[2] = {b->shape.dims[0], 1};
    b = hlo_build_reshape(comp, b, 2, d, diag);
  }
  if (!a || !b) return NULL;
  if (b->shape.rank == 2) { /* x @ W: x's batch dims are rows of one product, W read as it is */
    int64_t lc = a->shape.rank - 1, rc = 0;
    hlo_dot_dims dot = {{0, NULL}, {1, &lc}, {0, NULL}, {1, &rc}};
    hlo_instr *out = hlo_build_dot_to(comp, a, b, &dot, dtype, diag);
    if (out && (out->shape.rank != node->rank || memcmp(out->shape.dims, node->dims, sizeof(int64_t) * node->rank)))
      out = hlo_build_reshape(comp, out, node->rank, node->dims, diag);
    return out;
  }
  int batch_rank;
  int64_t batch[HLO_MAX_RANK];
  cap_broadcast_dims(a->shape.rank - 2, a->shape.dims, b->shape.rank - 2, b->shape.dims, &batch_rank, batch);
  int64_t da[HLO_MAX_RANK], db[HLO_MAX_RANK], batch_dims[HLO_MAX_RANK];
  for (int i = 0; i < batch_rank; i++) {
    da[i] = db[i] = batch[i];
    batch_dims[i] = i;
  }
  da[batch_rank] = a->shape.dims[a->shape.rank - 2];
  da[batch_rank + 1] = a->shape.dims[a->shape.rank - 1];
  db[batch_rank] = b->shape.dims[b->shape.rank - 2];
  db[batch_rank + 1] = b->shape.dims[b->shape.rank - 1];
  a = cap_lower_broadcast(comp, a, batch_rank + 2, da, diag);
  b = a ? cap_lower_broadcast(comp, b, batch_rank + 2, db, diag) : NULL;
  if (!b) return NULL;
  int64_t lc = batch_rank + 1, rc = batch_rank;
  hlo_dot_dims dot = {{batch_rank, batch_dims}, {1, &lc}, {batch_rank, batch_dims}, {1, &rc}};
  hlo_instr *out = hlo_build_dot_to(comp, a, b, &dot, dtype, diag);
  if (out && (out->shape.rank != node->rank || memcmp(out->shape.dims, node->dims, sizeof(int64_t) * node->rank)))
    out = hlo_build_reshape(comp, out, node->rank, node->dims, diag);
  return out;
}

/* A 2-d convolution's labels: the input and the result hold batch and features at the
 * same dims, the kernel its input and output features at the dims given; the spatial dims
 * are 2 and 3 everywhere. */
static hlo_conv_dims dims_2d(int batch, int feature, int kernel_input_feature, int kernel_output_feature) {
  hlo_conv_dims dims;
  memset(&dims, 0, sizeof dims);
  dims.spatial_count = 2;
  dims.input_batch = dims.output_batch = batch;
  dims.input_feature = dims.output_feature = feature;
  dims.kernel_input_feature = kernel_input_feature, dims.kernel_output_feature = kernel_output_feature;
  for (int i = 0; i < 2; i++) dims.input_spatial[i] = dims.kernel_spatial[i] = dims.output_spatial[i] = 2 + i;
  return dims;
}

static hlo_instr *lower_conv2d(hlo_comp *comp, const cap_node *node, hlo_instr *const *in, hlo_diag *diag) {
  hlo_dtype dtype = (hlo_dtype)node->dtype, operand_type = operand_dtype(node);
  hlo_instr *x = cap_lower_convert(comp, in[0], operand_type, diag),
            *w = x ? cap_lower_convert(comp, in[1], operand_type, diag) : NULL;
  if (!w) return NULL;
  hlo_window window;
  memset(&window, 0, sizeof window);
  window.rank = 2;
  for (int i = 0; i < 2; i++) {
    hlo_window_dim *d = &window.dims[i];
    d->size = w->shape.dims[2 + i];
    d->stride = node->attrs[i];
    d->pad_low = d->pad_high = node->attrs[2 + i];
    d->lhs_dilate = 1;
    d->rhs_dilate = node->attrs[4 + i];
  }
  hlo_conv_dims dims = dims_2d(0, 1, 1, 0); /* bf01_oi01->bf01 */
  return hlo_build_convolution_to(comp, x, w, &window, &dims, node->attrs[6], 1, dtype, diag);
}

/* dx[h] = sum of g[oh] * w[kh] over oh * stride - pad + kh * dilation = h: the gradient
 * dilated by the stride, padded by the dilated kernel's extent less the forward's padding
 * (the high side up to the input's size), convolved with the kernel reversed and read with
 * its features swapped (bf01_io01->bf01). */
static hlo_instr *lower_conv2d_input_grad(hlo_comp *comp, const cap_node *node, hlo_instr *const *in,
                                          hlo_diag *diag) {
  hlo_dtype dtype = (hlo_dtype)node->dtype, operand_type = operand_dtype(node);
  hlo_instr *g = cap_lower_convert(comp, in[0], operand_type, diag),
            *w = g ? cap_lower_convert(comp, in[1], operand_type, diag) : NULL;
  static const int64_t spatial[2] = {2, 3};
  hlo_instr *reversed = w ? hlo_build_reverse(comp, w, 2, spatial, diag) : NULL;
  if (!reversed) return NULL;
  hlo_window window;
  memset(&window, 0, sizeof window);
  window.rank = 2;
  for (int i = 0; i < 2; i++) {
    hlo_window_dim *d = &window.dims[i];
    int64_t stride = node->attrs[i], pad = node->attrs[2 + i], dil = node->attrs[4 + i];
    int64_t extent = dil * (w->shape.dims[2 + i] - 1), dilated = (g->shape.dims[2 + i] - 1) * stride + 1;
    d->size = w->shape.dims[2 + i];
    d->stride = 1;
    d->lhs_dilate = stride;
    d->rhs_dilate = dil;
    d->pad_low = extent - pad;
    d->pad_high = node->attrs[6 + i] - dilated + pad;
  }
  hlo_conv_dims dims = dims_2d(0, 1, 0, 1); /* bf01_io01->bf01 */
  return hlo_build_convolution_to(comp, g, reversed, &window, &dims, 1, 1, dtype, diag);
}

/* dw[o, c, kh] = sum of x[n, c, oh * stride - pad + kh * dilation] * g[n, o, oh] over n and oh:
 * x read with its batch as the features (fb01), g as the window (io01) dilated by the stride,
 * the window's stride the dilation, the high side padded so that exactly the kernel's taps
 * come out (less than the forward's padding when the forward read no source row past its
 * last window: down to 1 - stride), written [O, C, KH, KW] (fb01). */
static hlo_instr *lower_conv2d_weight_grad(hlo_comp *comp, const cap_node *node, hlo_instr *const *in,
                                           hlo_diag *diag) {
  hlo_dtype dtype = (hlo_dtype)node->dtype, operand_type = operand_dtype(node);
  hlo_instr *x = cap_lower_convert(comp, in[0], operand_type, diag),
            *g = x ? cap_lower_convert(comp, in[1], operand_type, diag) : NULL;
  if (!g) return NULL;
  hlo_window window;
  memset(&window, 0, sizeof window);
  window.rank = 2;
  for (int i = 0; i < 2; i++) {
    hlo_window_dim *d = &window.dims[i];
    int64_t stride = node->attrs[i], pad = node->attrs[2 + i], dil = node->attrs[4 + i], taps = node->attrs[6 + i];
    int64_t rows = g->shape.dims[2 + i];
    d->size = rows;
    d->stride = dil;
    d->lhs_dilate = 1;
    d->rhs_dilate = stride;
    d->pad_low = pad;
    d->pad_high = (taps - 1) * dil + (rows - 1) * stride + 1 - x->shape.dims[2 + i] - pad;
  }
  hlo_conv_dims dims = dims_2d(1, 0, 0, 1); /* fb01_io01->fb01 */
  return hlo_build_convolution_to(comp, x, g, &window, &dims, 1, 1, dtype, diag);
}

static hlo_instr *lower_pool(hlo_comp *comp, const cap_node *node, hlo_instr *const *in, hlo_diag *diag) {
  bool avg = node->sub == 1;
  hlo_instr *x = in[0];
  hlo_window window;
  memset(&window, 0, sizeof window);
  window.rank = 4;
  for (int i = 0; i < 4; i++) {
    hlo_window_dim *d = &window.dims[i];
    d->size = d->stride = d->lhs_dilate = d->rhs_dilate = 1;
    if (i >= 2) {
      d->size = node->attrs[i - 2];
      d->stride = node->attrs[i];
      d->pad_low = d->pad_high = node->attrs[i + 2];
    }
  }
  hlo_dtype dtype = x->shape.dtype;
  if (node->sub == 2) { /* a max pool's gradient: the first maximum (>= keeps it) takes each window's */
    hlo_comp *select = hlo_shared_scalar_compare(comp->module, HLO_DIR_GE, dtype);
    hlo_comp *scatter = select ? cap_lower_reducer(comp, HLO_OP_ADD, dtype, diag) : NULL;
    hlo_instr *zero = scatter ? cap_lower_scalar(comp, dtype, 0, diag) : NULL;
    if (!select) hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory making a select computation");
    return zero ? hlo_build_select_and_scatter(comp, x, in[1], zero, &window, select, scatter, diag) : NULL;
  }
  hlo_opcode op = avg ? HLO_OP_ADD : HLO_OP_MAXIMUM;
  hlo_comp *reducer = cap_lower_reducer(comp, op, dtype, diag);
  hlo_instr *init = !reducer ? NULL : avg ? cap_lower_scalar(comp, dtype, 0, diag) : limit(comp, dtype, true, diag);
  if (!init) return NULL;
  hlo_instr *out = hlo_build_reduce_window(comp, x, init, &window, reducer, diag);
  if (!out || !avg) return out;
  return binary(comp, HLO_OP_DIVIDE, out, full_like(comp, out, (double)(node->attrs[0] * node->attrs[1]), diag),
                diag);
}

/* The element count of x's reduced dims, in out's type and shape: a mean's divisor. Read
 * from the dims when the graph runs (get-dimension-size), not written in as a constant, so
 * that an executable bound to other sizes divides by their count. The product is taken in
 * s64 and converted once, as the constant n was. */
static hlo_instr *reduced_count(hlo_comp *comp, hlo_instr *x, int count, const int64_t *dims, const hlo_instr *out,
                                hlo_diag *diag) {
  hlo_instr *n = NULL;
  for (int k = 0; k < count; k++) {
    hlo_instr *size = hlo_build_get_dimension_size(comp, x, dims[k], diag);
    size = size ? hlo_build_convert(comp, size, HLO_S64, diag) : NULL;
    n = k == 0 ? size : binary(comp, HLO_OP_MULTIPLY, n, size, diag);
  }
  n = n ? hlo_build_convert(comp, n, out->shape.dtype, diag) : NULL;
  return n ? cap_lower_broadcast(comp, n, out->shape.rank, out->shape.dims, diag) : NULL;
}

static hlo_instr *lower_reduce(hlo_comp *comp, const cap_node *node, hlo_instr *x, hlo_diag *diag) {
  hlo_dtype dtype = (hlo_dtype)node->dtype;
  x = cap_lower_convert(comp, x, dtype, diag);
  if (!x) return NULL;
  int64_t mask = node->attrs[0], dims[HLO_MAX_RANK], n = 1;
  int count = 0;
  for (int i = 0; i < x->shape.rank; i++)
    if (mask >> i & 1) {
      dims[count++] = i;
      n *= x->shape.dims[i];
    }
  hlo_instr *out;
  switch ((latch_reduce_op)node->sub) {
    case LATCH_RMAX:
      out = reduce_with(comp, x, HLO_OP_MAXIMUM, limit(comp, dtype, true, diag), count, dims, diag);
      break;
    case LATCH_RMIN:
      out = reduce_with(comp, x, HLO_OP_MINIMUM, limit(comp, dtype, false, diag), count, dims, diag);
      break;
    default: out = cap_lower_reduce(comp, x, HLO_OP_ADD, 0, count, dims, diag); break;
  }
  if (out && node->sub == LATCH_MEAN)
    out = binary(comp, HLO_OP_DIVIDE, out, count ? reduced_count(comp, x, count, dims, out, diag)
                                                 : full_like(comp, out, (double)n, diag), diag);
  if (out && node->attrs[1]) out = hlo_build_reshape(comp, out, node->rank, node->dims, diag);
  return out;
}

/* The first index holding the max: compare with the broadcast max, keep matching indices,
 * take their minimum. */
static hlo_instr *lower_argmax(hlo_comp *comp, const cap_node *node, hlo_instr *x, hlo_diag *diag) {
  int64_t dim = node->attrs[0], mask = (int64_t)1 << dim;
  hlo_dtype dtype = x->shape.dtype;
  int rank = x->shape.rank;
  const int64_t *dims = x->shape.dims;
  hlo_instr *max = reduce_with(comp, x, HLO_OP_MAXIMUM, limit(comp, dtype, true, diag), 1, &dim, diag);
  hlo_instr *at_max =
      max ? hlo_build_compare(comp, HLO_DIR_EQ, x, expand(comp, max, rank, dims, mask, diag), diag) : NULL;
  hlo_instr *index = hlo_build_iota(comp, HLO_S64, rank, dims, dim, diag);
  hlo_instr *none = cap_lower_full(comp, HLO_S64, rank, dims, (double)dims[dim], diag);
  hlo_instr *picked = at_max && index && none ? hlo_build_select(comp, at_max, index, none, diag) : NULL;
  hlo_instr *out =
      picked ? reduce_with(comp, picked, HLO_OP_MINIMUM, limit(comp, HLO_S64, false, diag), 1, &dim, diag) : NULL;
  if (out && node->attrs[1]) out = hlo_build_reshape(comp, out, node->rank, node->dims, diag);
  return out;
}

static hlo_instr *lower_embedding(hlo_comp *comp, const cap_node *node, hlo_instr *const *in, hlo_diag *diag) {
  hlo_instr *table = in[0], *indices = in[1];
  int64_t offset = indices->shape.rank, zero = 0;
  hlo_gather_dims g;
  memset(&g, 0, sizeof g);
  g.offset_dims = (hlo_ints){1, &offset};
  g.collapsed_slice_dims = (hlo_ints){1, &zero};
  g.start_index_map = (hlo_ints){1, &zero};
  g.index_vector_dim = indices->shape.rank;
  int64_t sizes[2] = {1, table->shape.dims[1]};
  (void)node;
  return hlo_build_gather(comp, table, indices, &g, sizes, diag);
}

static hlo_instr *lower_relu(hlo_comp *comp, hlo_instr *x, hlo_diag *diag) {
  return binary(comp, HLO_OP_MAXIMUM, x, full_like(comp, x, 0, diag), diag);
}

hlo_instr *cap_lower_nn(hlo_comp *comp, const cap_node *node, hlo_instr *const *in, hlo_diag *diag) {
  switch ((cap_op)node->op) {
    case CAP_RELU: return lower_relu(comp, in[0], diag);
    case CAP_GELU: return lower_gelu(comp, node, in[0], diag);
    case CAP_MATMUL: return lower_matmul(comp, node, in, diag);
    case CAP_CONV2D: return lower_conv2d(comp, node, in, diag);
    case CAP_CONV2D_INPUT_GRAD: return lower_conv2d_input_grad(comp, node, in, diag);
    case CAP_CONV2D_WEIGHT_GRAD: return lower_conv2d_weight_grad(comp, node, in, diag);
    case CAP_POOL: return lower_pool(comp, node, in, diag);
    case CAP_REDUCE: return lower_reduce(comp, node, in[0], diag);
    case CAP_ARGMAX: return lower_argmax(comp, node, in[0], diag);
    case CAP_SOFTMAX: return lower_softmax(comp, node, in[0], diag);
    case CAP_LAYER_NORM: return lower_layer_norm(comp, node, in, diag);
    case CAP_BATCH_NORM: return lower_batch_norm(comp, node, in, diag);
    case CAP_EMBEDDING: return lower_embedding(comp, node, in, diag);
    default: hlo_diag_set(diag, HLO_ERR_INTERNAL, "lowering: unknown node op %d", node->op); return NULL;
  }
}
