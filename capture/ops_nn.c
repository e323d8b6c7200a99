/* Tracing the neural-network ops: matmul, conv2d, pooling, reductions, argmax, softmax,
 * normalizations, embedding. Shapes are checked here, with messages that name the op and
 * the shapes; lower_nn.c turns the nodes into HLO. */
#include <stdio.h>
#include <string.h>

#include "capture.h"

static bool is_float(const latch_tensor *t) { return hlo_dtype_is_float((hlo_dtype)t->node->dtype); }

static latch_tensor *need_float(const char *op, latch_tensor *x) {
  char s[128];
  return cap_error(x->rt, "%s: needs a floating-point tensor, got %s", op, cap_shape_text(x, s, sizeof s));
}

/* A product's node sub: CAP_PRODUCT_BF16 when its f32 operands are to be rounded to bf16
 * (precision.c), else 0. */
static int products_sub(const latch_runtime *rt, hlo_dtype dtype) {
  return dtype == HLO_F32 && cap_products_bf16(rt) ? CAP_PRODUCT_BF16 : 0;
}

latch_tensor *latch_matmul(latch_tensor *a, latch_tensor *b) {
  latch_tensor *in[2] = {a, b}, *bad;
  if ((bad = cap_poisoned("matmul", 2, in))) return bad;
  const cap_node *x = a->node, *y = b->node;
  char sa[128], sb[128];
  hlo_dtype dtype = cap_promote((hlo_dtype)x->dtype, (hlo_dtype)y->dtype);
  if (x->rank < 1 || y->rank < 1 || dtype == HLO_INVALID || dtype == HLO_PRED)
    return cap_error(a->rt, "matmul: cannot multiply %s by %s", cap_shape_text(a, sa, sizeof sa),
                     cap_shape_text(b, sb, sizeof sb));
  int64_t k_a = x->dims[x->rank - 1], k_b = y->rank == 1 ? y->dims[0] : y->dims[y->rank - 2];
  int batch_rank = 0;
  int64_t batch[HLO_MAX_RANK], dims[HLO_MAX_RANK];
  int ba = x->rank > 2 ? x->rank - 2 : 0, bb = y->rank > 2 ? y->rank - 2 : 0;
  if (k_a != k_b || !cap_broadcast_dims(ba, x->dims, bb, y->dims, &batch_rank, batch) ||
      batch_rank + 2 > HLO_MAX_RANK)
    return cap_error(a->rt, "matmul: shapes %s and %s do not fit (contracting %lld with %lld, or batch dims)",
                     cap_shape_text(a, sa, sizeof sa), cap_shape_text(b, sb, sizeof sb), (long long)k_a,
                     (long long)k_b);
  int rank = batch_rank;
  memcpy(dims, batch, sizeof(int64_t) * (size_t)batch_rank);
  if (x->rank > 1) dims[rank++] = x->dims[x->rank - 2];
  if (y->rank > 1) dims[rank++] = y->dims[y->rank - 1];
  return cap_traced(a->rt, cap_node_like(CAP_MATMUL, products_sub(a->rt, dtype), 2, in, 0, dtype, rank, dims));
}

static int64_t or_default(const int64_t *values, int i, int64_t fallback) {
  return values && values[i] ? values[i] : fallback;
}

latch_tensor *latch_conv2d(latch_tensor *x, latch_tensor *w, const latch_conv2d_params *p) {
  latch_tensor *in[2] = {x, w}, *bad;
  if ((bad = cap_poisoned("conv2d", 2, in))) return bad;
  const cap_node *a = x->node, *k = w->node;
  char sa[128], sb[128];
  int64_t stride[2], pad[2], dil[2], groups = p && p->groups ? p->groups : 1;
  for (int i = 0; i < 2; i++) {
    stride[i] = or_default(p ? p->stride : NULL, i, 1);
    pad[i] = p ? p->padding[i] : 0;
    dil[i] = or_default(p ? p->dilation : NULL, i, 1);
  }
  hlo_dtype dtype = cap_promote((hlo_dtype)a->dtype, (hlo_dtype)k->dtype);
  bool ok = a->rank == 4 && k->rank == 4 && hlo_dtype_is_float(dtype) && groups >= 1 && a->dims[1] % groups == 0 &&
            k->dims[0] % groups == 0 && k->dims[1] * groups == a->dims[1];
  int64_t dims[4] = {a->dims[0], k->dims[0], 0, 0};
  for (int i = 0; ok && i < 2; i++) {
    ok = stride[i] >= 1 && dil[i] >= 1 && pad[i] >= 0;
    int64_t span = dil[i] * (k->dims[2 + i] - 1) + 1, room = a->dims[2 + i] + 2 * pad[i];
    ok = ok && room >= span;
    dims[2 + i] = ok ? (room - span) / stride[i] + 1 : 0;
  }
  if (!ok)
    return cap_error(
        x->rt,
        "conv2d: input %s and weight %s do not fit (NCHW input, OIHW weight, groups %lld, stride %lldx%lld, "
        "padding %lldx%lld, dilation %lldx%lld)",
        cap_shape_text(x, sa, sizeof sa), cap_shape_text(w, sb, sizeof sb), (long long)groups, (long long)stride[0],
        (long long)stride[1], (long long)pad[0], (long long)pad[1], (long long)dil[0], (long long)dil[1]);
  cap_node *node = cap_node_like(CAP_CONV2D, products_sub(x->rt, dtype), 2, in, 7, dtype, 4, dims);
  if (node) {
    int64_t attrs[7] = {stride[0], stride[1], pad[0], pad[1], dil[0], dil[1], groups};
    memcpy(node->attrs, attrs, sizeof attrs);
  }
  return cap_traced(x->rt, node);
}

latch_tensor *latch_conv2d_input_grad(latch_tensor *grad, latch_tensor *w, const latch_conv2d_params *p,
                                      const int64_t input_size[2]) {
  latch_tensor *in[2] = {grad, w}, *bad;
  if ((bad = cap_poisoned("conv2d_input_grad", 2, in))) return bad;
  const cap_node *g = grad->node, *k = w->node;
  char sa[128], sb[128];
  int64_t attrs[8];
  hlo_dtype dtype = cap_promote((hlo_dtype)g->dtype, (hlo_dtype)k->dtype);
  bool ok = g->rank == 4 && k->rank == 4 && hlo_dtype_is_float(dtype) && g->dims[1] == k->dims[0] && input_size &&
            (!p || p->groups <= 1);
  for (int i = 0; ok && i < 2; i++) {
    int64_t stride = or_default(p ? p->stride : NULL, i, 1), pad = p ? p->padding[i] : 0;
    int64_t dil = or_default(p ? p->dilation : NULL, i, 1), size = input_size[i];
    int64_t span = dil * (k->dims[2 + i] - 1) + 1, room = size + 2 * pad;
    /* the forward's result size must be the gradient's */
    ok = stride >= 1 && dil >= 1 && pad >= 0 && pad <= span - 1 && size >= 1 && room >= span &&
         (room - span) / stride + 1 == g->dims[2 + i];
    attrs[i] = stride, attrs[2 + i] = pad, attrs[4 + i] = dil, attrs[6 + i] = size;
  }
  if (!ok)
    return cap_error(grad->rt,
                     "conv2d_input_grad: gradient %s and weight %s do not fit the input size given (NCHW gradient, "
                     "OIHW weight, groups 1, padding below the dilated kernel's extent)",
                     cap_shape_text(grad, sa, sizeof sa), cap_shape_text(w, sb, sizeof sb));
  int64_t dims[4] = {g->dims[0], k->dims[1], input_size[0], input_size[1]};
  cap_node *node = cap_node_like(CAP_CONV2D_INPUT_GRAD, products_sub(grad->rt, dtype), 2, in, 8, dtype, 4, dims);
  if (node) memcpy(node->attrs, attrs, sizeof attrs);
  return cap_traced(grad->rt, node);
}

latch_tensor *latch_conv2d_weight_grad(latch_tensor *x, latch_tensor *grad, const latch_conv2d_params *p,
                                       const int64_t kernel_size[2]) {
  latch_tensor *in[2] = {x, grad}, *bad;
  if ((bad = cap_poisoned("conv2d_weight_grad", 2, in))) return bad;
  const cap_node *a = x->node, *g = grad->node;
  char sa[128], sb[128];
  int64_t attrs[8];
  hlo_dtype dtype = cap_promote((hlo_dtype)a->dtype, (hlo_dtype)g->dtype);
  bool ok = a->rank == 4 && g->rank == 4 && hlo_dtype_is_float(dtype) && a->dims[0] == g->dims[0] && kernel_size &&
            (!p || p->groups <= 1);
  for (int i = 0; ok && i < 2; i++) {
    int64_t stride = or_default(p ? p->stride : NULL, i, 1), pad = p ? p->padding[i] : 0;
    int64_t dil = or_default(p ? p->dilation : NULL, i, 1), taps = kernel_size[i];
    int64_t span = dil * (taps - 1) + 1, room = a->dims[2 + i] + 2 * pad;
    /* the forward's result size must be the gradient's */
    ok = stride >= 1 && dil >= 1 && pad >= 0 && taps >= 1 && room >= span && (room - span) / stride + 1 == g->dims[2 + i];
    attrs[i] = stride, attrs[2 + i] = pad, attrs[4 + i] = dil, attrs[6 + i] = taps;
  }
  if (!ok)
    return cap_error(x->rt,
                     "conv2d_weight_grad: input %s and gradient %s do not fit the kernel size given (NCHW input "
                     "and gradient, groups 1)",
                     cap_shape_text(x, sa, sizeof sa), cap_shape_text(grad, sb, sizeof sb));
  int64_t dims[4] = {g->dims[1], a->dims[1], kernel_size[0], kernel_size[1]};
  cap_node *node = cap_node_like(CAP_CONV2D_WEIGHT_GRAD, products_sub(x->rt, dtype), 2, in, 8, dtype, 4, dims);
  if (node) memcpy(node->attrs, attrs, sizeof attrs);
  return cap_traced(x->rt, node);
}

/* The pooled dims of a [N, C, H, W] and the pool's attrs (kernel, stride, padding); false
 * when they do not fit. */
static bool pooled(const cap_node *a, const int64_t kernel[2], const int64_t stride[2], const int64_t padding[2],
                   int64_t attrs[6], int64_t dims[4]) {
  bool ok = a->rank == 4 && kernel;
  for (int i = 0; ok && i < 4; i++) dims[i] = a->dims[i];
  for (int i = 0; ok && i < 2; i++) {
    int64_t k = kernel[i], st = stride ? stride[i] : k, p = padding ? padding[i] : 0;
    ok = k >= 1 && st >= 1 && p >= 0 && 2 * p <= k && a->dims[2 + i] + 2 * p >= k;
    dims[2 + i] = ok ? (a->dims[2 + i] + 2 * p - k) / st + 1 : 0;
    attrs[i] = k;
    attrs[2 + i] = st;
    attrs[4 + i] = p;
  }
  return ok;
}

static latch_tensor *pool(const char *op, int kind, latch_tensor *x, const int64_t kernel[2], const int64_t stride[2],
                          const int64_t padding[2]) {
  latch_tensor *bad = cap_poisoned(op, 1, &x);
  if (bad) return bad;
  const cap_node *a = x->node;
  char s[128];
  int64_t attrs[6], dims[4];
  if (!pooled(a, kernel, stride, padding, attrs, dims) || (kind == 0 ? a->dtype == HLO_PRED : !is_float(x)))
    return cap_error(x->rt,
                     "%s: input %s does not fit (NCHW %s input, kernel >= 1, stride >= 1, padding <= kernel/2)", op,
                     cap_shape_text(x, s, sizeof s), kind ? "floating-point" : "number");
  cap_node *node = cap_node_like(CAP_POOL, kind, 1, &x, 6, (hlo_dtype)a->dtype, 4, dims);
  if (node) memcpy(node->attrs, attrs, sizeof attrs);
  return cap_traced(x->rt, node);
}

latch_tensor *latch_max_pool2d(latch_tensor *x, const int64_t kernel[2], const int64_t stride[2],
                               const int64_t padding[2]) {
  return pool("max_pool2d", 0, x, kernel, stride, padding);
}

latch_tensor *latch_avg_pool2d(latch_tensor *x, const int64_t kernel[2], const int64_t stride[2],
                               const int64_t padding[2]) {
  return pool("avg_pool2d", 1, x, kernel, stride, padding);
}

latch_tensor *latch_max_pool2d_grad(latch_tensor *x, latch_tensor *grad, const int64_t kernel[2],
                                    const int64_t stride[2], const int64_t padding[2]) {
  latch_tensor *in[2] = {x, grad}, *bad;
  if ((bad = cap_poisoned("max_pool2d_grad", 2, in))) return bad;
  const cap_node *a = x->node, *g = grad->node;
  char s[128], sg[128];
  int64_t attrs[6], dims[4];
  bool ok = pooled(a, kernel, stride, padding, attrs, dims) && is_float(x) && g->dtype == a->dtype && g->rank == 4;
  for (int i = 0; ok && i < 4; i++) ok = g->dims[i] == dims[i];
  if (!ok)
    return cap_error(x->rt,
                     "max_pool2d_grad: input %s and gradient %s do not fit (NCHW floating-point input, the gradient "
                     "of its pooled shape and type, kernel >= 1, stride >= 1, padding <= kernel/2)",
                     cap_shape_text(x, s, sizeof s), cap_shape_text(grad, sg, sizeof sg));
  cap_node *node = cap_node_like(CAP_POOL, 2, 2, in, 6, (hlo_dtype)a->dtype, 4, a->dims);
  if (node) memcpy(node->attrs, attrs, sizeof attrs);
  return cap_traced(x->rt, node);
}

/* The reduced dims as a bit mask; false when one is out of range. */
static bool dim_mask(int count, const int *dims, int rank, int64_t *mask) {
  *mask = 0;
  if (count == 0) {
    *mask = ((int64_t)1 << rank) - 1;
    return true;
  }
  for (int i = 0; i < count; i++) {
    int d = dims ? cap_norm_dim(dims[i], rank) : -1;
    if (d < 0) return false;
    *mask |= (int64_t)1 << d;
  }
  return true;
}

/* The result dims of reducing mask, keeping reduced dims as 1 or dropping them. */
static int reduced_dims(const cap_node *x, int64_t mask, bool keepdim, int64_t *dims) {
  int rank = 0;
  for (int i = 0; i < x->rank; i++) {
    if (!(mask >> i & 1))
      dims[rank++] = x->dims[i];
    else if (keepdim)
      dims[rank++] = 1;
  }
  return rank;
}

latch_tensor *latch_reduce(latch_reduce_op op, latch_tensor *x, int count, const int *dims, bool keepdim) {
  static const char *const names[] = {"sum", "mean", "max", "min"};
  if ((unsigned)op > LATCH_RMIN) return cap_error(x ? x->rt : NULL, "reduce: unknown op %d", (int)op);
  const char *name = names[op];
  latch_tensor *bad = cap_poisoned(name, 1, &x);
  if (bad) return bad;
  int64_t mask;
  char s[128];
  if (count < 0 || !dim_mask(count, dims, x->node->rank, &mask))
    return cap_error(x->rt, "%s: dims out of range for %s", name, cap_shape_text(x, s, sizeof s));
  hlo_dtype dtype = (hlo_dtype)x->node->dtype;
  if (op == LATCH_MEAN && !is_float(x)) return need_float(name, x);
  if (dtype == HLO_PRED) {
    if (op != LATCH_SUM)
      return cap_error(x->rt, "%s: needs a number tensor, got %s", name, cap_shape_text(x, s, sizeof s));
    dtype = HLO_S64; /* counting trues */
  }
  int64_t out[HLO_MAX_RANK];
  int rank = reduced_dims(x->node, mask, keepdim, out);
  cap_node *node = cap_node_like(CAP_REDUCE, op, 1, &x, 2, dtype, rank, out);
  if (node) {
    node->attrs[0] = mask;
    node->attrs[1] = keepdim;
  }
  return cap_traced(x->rt, node);
}

latch_tensor *latch_argmax(latch_tensor *x, int dim, bool keepdim) {
  latch_tensor *bad = cap_poisoned("argmax", 1, &x);
  if (bad) return bad;
  char s[128];
  int d = cap_norm_dim(dim, x->node->rank);
  if (d < 0 || x->node->dtype == HLO_PRED || x->node->dims[d] == 0)
    return cap_error(x->rt, "argmax: dim %d of %s is out of range or empty, or the tensor is bool", dim,
                     cap_shape_text(x, s, sizeof s));
  int64_t out[HLO_MAX_RANK];
  int rank = reduced_dims(x->node, (int64_t)1 << d, keepdim, out);
  cap_node *node = cap_node_like(CAP_ARGMAX, 0, 1, &x, 2, HLO_S64, rank, out);
  if (node) {
    node->attrs[0] = d;
    node->attrs[1] = keepdim;
  }
  return cap_traced(x->rt, node);
}

static latch_tensor *softmax(const char *op, int log, latch_tensor *x, int dim) {
  latch_tensor *bad = cap_poisoned(op, 1, &x);
  if (bad) return bad;
  if (!is_float(x)) return need_float(op, x);
  char s[128];
  int d = cap_norm_dim(dim, x->node->rank);
  if (d < 0) return cap_error(x->rt, "%s: dim %d is out of range for %s", op, dim, cap_shape_text(x, s, sizeof s));
  cap_node *node = cap_node_like(CAP_SOFTMAX, log, 1, &x, 1, (hlo_dtype)x->node->dtype, x->node->rank, x->node->dims);
  if (node) node->attrs[0] = d;
  return cap_traced(x->rt, node);
}

latch_tensor *latch_softmax(latch_tensor *x, int dim) { return softmax("softmax", 0, x, dim); }
latch_tensor *latch_log_softmax(latch_tensor *x, int dim) { return softmax("log_softmax", 1, x, dim); }

/* p has exactly the trailing `rank` dims of x. */
static bool trailing_fit(const cap_node *x, const cap_node *p, int rank) {
  if (p->rank != rank) return false;
  for (int i = 0; i < rank; i++)
    if (p->dims[i] != x->dims[x->rank - rank + i]) return false;
  return true;
}

latch_tensor *latch_layer_norm(latch_tensor *x, int normalized_rank, latch_tensor *weight, latch_tensor *bias,
                               double eps) {
  latch_tensor *in[3] = {x, NULL, NULL}, *bad;
  int count = 1;
  if (weight) in[count++] = weight;
  if (bias) in[count++] = bias;
  if ((bad = cap_poisoned("layer_norm", count, in))) return bad;
  if (!is_float(x)) return need_float("layer_norm", x);
  char s[128], sw[128];
  if (normalized_rank < 1 || normalized_rank > x->node->rank)
    return cap_error(x->rt, "layer_norm: normalized_rank %d is out of range for %s", normalized_rank,
                     cap_shape_text(x, s, sizeof s));
  for (int i = 1; i < count; i++)
    if (!trailing_fit(x->node, in[i]->node, normalized_rank) || in[i]->node->dtype == HLO_PRED)
      return cap_error(x->rt, "layer_norm: %s %s does not match the last %d dims of %s",
                       in[i] == weight ? "weight" : "bias", cap_shape_text(in[i], sw, sizeof sw), normalized_rank,
                       cap_shape_text(x, s, sizeof s));
  if (!(eps >= 0)) return cap_error(x->rt, "layer_norm: eps %g must be non-negative", eps);
  cap_node *node =
      cap_node_like(CAP_LAYER_NORM, 0, count, in, 3, (hlo_dtype)x->node->dtype, x->node->rank, x->node->dims);
  if (node) {
    node->attrs[0] = normalized_rank;
    node->attrs[1] = weight != NULL;
    node->attrs[2] = bias != NULL;
    node->scalar[0] = eps;
  }
  return cap_traced(x->rt, node);
}

latch_tensor *latch_batch_norm(latch_tensor *x, latch_tensor *mean, latch_tensor *var, latch_tensor *weight,
                               latch_tensor *bias, double eps) {
  latch_tensor *in[5] = {x, mean, var, NULL, NULL}, *bad;
  int count = 3;
  if (weight) in[count++] = weight;
  if (bias) in[count++] = bias;
  if ((bad = cap_poisoned("batch_norm", count, in))) return bad;
  if (!is_float(x)) return need_float("batch_norm", x);
  char s[128], sp[128];
  if (x->node->rank < 2)
    return cap_error(x->rt, "batch_norm: needs [N, C, ...], got %s", cap_shape_text(x, s, sizeof s));
  for (int i = 1; i < count; i++) {
    const cap_node *p = in[i]->node;
    if (p->rank != 1 || p->dims[0] != x->node->dims[1] || p->dtype == HLO_PRED)
      return cap_error(x->rt, "batch_norm: parameter %s does not match the %lld channels of %s",
                       cap_shape_text(in[i], sp, sizeof sp), (long long)x->node->dims[1],
                       cap_shape_text(x, s, sizeof s));
  }
  if (!(eps >= 0)) return cap_error(x->rt, "batch_norm: eps %g must be non-negative", eps);
  cap_node *node =
      cap_node_like(CAP_BATCH_NORM, 0, count, in, 2, (hlo_dtype)x->node->dtype, x->node->rank, x->node->dims);
  if (node) {
    node->attrs[0] = weight != NULL;
    node->attrs[1] = bias != NULL;
    node->scalar[0] = eps;
  }
  return cap_traced(x->rt, node);
}

latch_tensor *latch_embedding(latch_tensor *table, latch_tensor *indices) {
  latch_tensor *in[2] = {table, indices}, *bad;
  if ((bad = cap_poisoned("embedding", 2, in))) return bad;
  char st[128], si[128];
  const cap_node *t = table->node, *ix = indices->node;
  if (t->rank != 2 || !hlo_dtype_is_integral((hlo_dtype)ix->dtype) || ix->rank + 1 > HLO_MAX_RANK)
    return cap_error(table->rt, "embedding: needs a [V, D] table and integer indices, got %s and %s",
                     cap_shape_text(table, st, sizeof st), cap_shape_text(indices, si, sizeof si));
  int64_t dims[HLO_MAX_RANK];
  memcpy(dims, ix->dims, sizeof(int64_t) * ix->rank);
  dims[ix->rank] = t->dims[1];
  return cap_traced(table->rt, cap_node_like(CAP_EMBEDDING, 0, 2, in, 0, (hlo_dtype)t->dtype, ix->rank + 1, dims));
}
