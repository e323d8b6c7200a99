/* Symbolic shape inference: the same shape rules as ops_*.c, over guard expressions. The op
 * has already checked its shapes with this call's sizes; here each check becomes a guard
 * (an equality two symbolic sizes needed, a divisibility a reshape needed, a bound a window
 * needed), so a later call with other sizes reuses the trace only when every check would
 * pass again. Duck sizing (equal input sizes share a symbol) makes most equalities free:
 * equal expressions need no guard. */
#include <string.h>

#include "capture.h"

static int64_t hint(cap_trace *t, const guard_expr *e) { return guard_set_hint(t->guards, e); }
static guard_expr constant(int64_t v) { return guard_expr_const(v); }

/* Specializes e to its value in this call. */
static guard_expr pin(cap_trace *t, guard_expr e) {
  int64_t v = hint(t, &e);
  if (!guard_expr_is_const(&e, NULL)) guard_set_compare(t->guards, e, GUARD_EQ, constant(v));
  return constant(v);
}

static void require_equal(cap_trace *t, guard_expr a, guard_expr b) {
  if (!guard_expr_equal(&a, &b)) guard_set_compare(t->guards, a, GUARD_EQ, b);
}

static guard_expr add(cap_trace *t, guard_expr a, guard_expr b) {
  guard_expr out;
  if (guard_expr_add(a, b, &out)) return out;
  int64_t v = hint(t, &a) + hint(t, &b);
  pin(t, a);
  pin(t, b);
  return constant(v);
}

static guard_expr scale(cap_trace *t, guard_expr a, int64_t k) {
  guard_expr out;
  if (guard_expr_scale(a, k, &out)) return out;
  guard_expr pinned = pin(t, a);
  return constant(hint(t, &pinned) * k);
}

static guard_expr mul(cap_trace *t, guard_expr a, guard_expr b) {
  guard_expr out;
  if (guard_expr_mul(a, b, &out)) return out;
  int64_t v = hint(t, &a) * hint(t, &b);
  pin(t, a);
  pin(t, b);
  return constant(v);
}

/* NumPy broadcasting over count operands into rank dims. */
static void broadcast(cap_trace *t, cap_node *node, int count, guard_expr *out) {
  int rank = node->rank;
  for (int i = 0; i < rank; i++) out[i] = constant(1);
  bool chosen[HLO_MAX_RANK] = {false};
  for (int k = 0; k < count; k++) {
    const cap_node *x = node->operands[k];
    guard_expr dims[HLO_MAX_RANK];
    cap_trace_node_dims(t, x, dims);
    for (int j = 0; j < x->rank; j++) {
      int i = rank - x->rank + j;
      if (x->dims[j] == 1) {
        pin(t, dims[j]); /* a size that stretched must stay 1 */
        continue;
      }
      if (!chosen[i]) out[i] = dims[j], chosen[i] = true;
      else require_equal(t, out[i], dims[j]);
    }
  }
}

static void matmul(cap_trace *t, cap_node *node, guard_expr *out) {
  const cap_node *a = node->operands[0], *b = node->operands[1];
  guard_expr A[HLO_MAX_RANK], B[HLO_MAX_RANK];
  cap_trace_node_dims(t, a, A);
  cap_trace_node_dims(t, b, B);
  require_equal(t, A[a->rank - 1], b->rank == 1 ? B[0] : B[b->rank - 2]);
  int ba = a->rank > 2 ? a->rank - 2 : 0, bb = b->rank > 2 ? b->rank - 2 : 0;
  int batch = ba > bb ? ba : bb, rank = 0;
  for (int i = 0; i < batch; i++) {
    int ia = i - (batch - ba), ib = i - (batch - bb);
    guard_expr dim = constant(1);
    bool chosen = false;
    const guard_expr *cand[2] = {ia >= 0 ? &A[ia] : NULL, ib >= 0 ? &B[ib] : NULL};
    int64_t sizes[2] = {ia >= 0 ? a->dims[ia] : 1, ib >= 0 ? b->dims[ib] : 1};
    for (int k = 0; k < 2; k++) {
      if (!cand[k]) continue;
      if (sizes[k] == 1) {
        pin(t, *cand[k]);
        continue;
      }
      if (!chosen) dim = *cand[k], chosen = true;
      else require_equal(t, dim, *cand[k]);
    }
    out[rank++] = dim;
  }
  if (a->rank > 1) out[rank++] = A[a->rank - 2];
  if (b->rank > 1) out[rank++] = B[b->rank - 1];
}

/* floor((size + 2 * pad - span) / stride) + 1, with size + 2 * pad >= span guarded. */
static guard_expr window_out(cap_trace *t, guard_expr size, int64_t pad, guard_expr span, int64_t stride) {
  guard_expr room = add(t, size, constant(2 * pad));
  guard_set_compare(t->guards, room, GUARD_GE, span);
  guard_expr numer = add(t, room, scale(t, span, -1));
  return add(t, guard_set_define_floor(t->guards, numer, stride), constant(1));
}

static void conv2d(cap_trace *t, cap_node *node, guard_expr *out) {
  guard_expr X[HLO_MAX_RANK], W[HLO_MAX_RANK];
  cap_trace_node_dims(t, node->operands[0], X);
  cap_trace_node_dims(t, node->operands[1], W);
  const int64_t *a = node->attrs; /* stride h w, pad h w, dilation h w, groups */
  require_equal(t, scale(t, W[1], a[6]), X[1]);
  out[0] = X[0];
  out[1] = W[0];
  for (int i = 0; i < 2; i++) {
    guard_expr span = add(t, scale(t, add(t, W[2 + i], constant(-1)), a[4 + i]), constant(1));
    out[2 + i] = window_out(t, X[2 + i], a[2 + i], span, a[i]);
  }
}

/* A convolution's input or weights gradient (CAP_CONV2D_INPUT_GRAD, _WEIGHT_GRAD): the batch
 * stays symbolic; the spatial sizes, which its window is worked out from, are pinned, and
 * the result's features are the operands'. */
static void conv2d_grad(cap_trace *t, cap_node *node, guard_expr *out) {
  guard_expr A[HLO_MAX_RANK], B[HLO_MAX_RANK];
  cap_trace_node_dims(t, node->operands[0], A);
  cap_trace_node_dims(t, node->operands[1], B);
  for (int i = 2; i < 4; i++) pin(t, A[i]), pin(t, B[i]);
  if (node->op == CAP_CONV2D_INPUT_GRAD) { /* grad [N, O, ..], w [O, C, ..] -> [N, C, H, W] */
    require_equal(t, A[1], B[0]);
    out[0] = A[0], out[1] = B[1];
  } else { /* x [N, C, ..], grad [N, O, ..] -> [O, C, KH, KW] */
    require_equal(t, A[0], B[0]);
    out[0] = B[1], out[1] = A[1];
  }
  out[2] = constant(node->dims[2]), out[3] = constant(node->dims[3]);
}

static void pool(cap_trace *t, cap_node *node, guard_expr *out) {
  guard_expr X[HLO_MAX_RANK];
  cap_trace_node_dims(t, node->operands[0], X);
  const int64_t *a = node->attrs; /* kernel h w, stride h w, pad h w */
  guard_expr pooled[4] = {X[0], X[1]};
  for (int i = 0; i < 2; i++) pooled[2 + i] = window_out(t, X[2 + i], a[4 + i], constant(a[i]), a[2 + i]);
  if (node->sub != 2) {
    memcpy(out, pooled, sizeof pooled);
    return;
  }
  /* a max pool's gradient: x's dims, the gradient's those of the pool */
  guard_expr G[HLO_MAX_RANK];
  cap_trace_node_dims(t, node->operands[1], G);
  for (int i = 0; i < 4; i++) {
    require_equal(t, G[i], pooled[i]);
    out[i] = X[i];
  }
}

static guard_expr numel(cap_trace *t, const cap_node *x) {
  guard_expr X[HLO_MAX_RANK], n = constant(1);
  cap_trace_node_dims(t, x, X);
  for (int i = 0; i < x->rank; i++) n = mul(t, n, X[i]);
  return n;
}

static void reshape(cap_trace *t, cap_node *node, guard_expr *out) {
  guard_expr total = numel(t, node->operands[0]);
  const latch_size *sizes = cap_trace_reshape_sizes();
  int infer = cap_ctx_current()->reshape_infer - 1;
  if (sizes) {
    guard_expr product = constant(1);
    for (int i = 0; i < node->rank; i++) {
      out[i] = cap_trace_size_expr(t, sizes[i]);
      product = mul(t, product, out[i]);
    }
    require_equal(t, product, total);
    return;
  }
  int64_t known = 1;
  for (int i = 0; i < node->rank; i++) {
    out[i] = constant(node->dims[i]);
    if (i != infer) known *= node->dims[i];
  }
  if (infer >= 0 && known > 0) out[infer] = guard_set_define_quotient(t->guards, total, known);
  else require_equal(t, total, constant(hint(t, &total)));
}

static void reduce(cap_node *node, const guard_expr *X, guard_expr *out) {
  const cap_node *x = node->operands[0];
  int64_t mask = node->attrs[0];
  bool keep = node->attrs[1];
  if (node->op == CAP_ARGMAX) mask = (int64_t)1 << node->attrs[0];
  int rank = 0;
  for (int i = 0; i < x->rank; i++) {
    if (mask >> i & 1) {
      if (keep) out[rank++] = constant(1);
    } else {
      out[rank++] = X[i];
    }
  }
}

static void concat(cap_trace *t, cap_node *node, guard_expr *out) {
  int d = (int)node->attrs[0];
  cap_trace_node_dims(t, node->operands[0], out);
  for (int k = 1; k < node->operand_count; k++) {
    guard_expr Y[HLO_MAX_RANK];
    cap_trace_node_dims(t, node->operands[k], Y);
    for (int i = 0; i < node->rank; i++) {
      if (i == d) out[i] = add(t, out[i], Y[i]);
      else require_equal(t, out[i], Y[i]);
    }
  }
}

void cap_symbolic_infer(cap_trace *t, cap_node *node, guard_expr *out) {
  guard_expr X[HLO_MAX_RANK];
  const cap_node *x = node->operand_count ? node->operands[0] : NULL;
  if (x) cap_trace_node_dims(t, x, X);
  switch ((cap_op)node->op) {
  case CAP_UNARY: case CAP_CAST: case CAP_RELU: case CAP_GELU: case CAP_CLAMP: case CAP_SOFTMAX: case CAP_FLIP:
    memcpy(out, X, sizeof(guard_expr) * node->rank);
    return;
  case CAP_BINARY: case CAP_COMPARE: case CAP_WHERE:
    broadcast(t, node, node->operand_count, out);
    return;
  case CAP_MATMUL: matmul(t, node, out); return;
  case CAP_CONV2D: conv2d(t, node, out); return;
  case CAP_CONV2D_INPUT_GRAD: case CAP_CONV2D_WEIGHT_GRAD: conv2d_grad(t, node, out); return;
  case CAP_POOL: pool(t, node, out); return;
  case CAP_REDUCE: case CAP_ARGMAX: reduce(node, X, out); return;
  case CAP_LAYER_NORM: {
    int normalized = (int)node->attrs[0];
    for (int k = 1; k < node->operand_count; k++) {
      guard_expr P[HLO_MAX_RANK];
      cap_trace_node_dims(t, node->operands[k], P);
      for (int i = 0; i < normalized; i++) require_equal(t, P[i], X[x->rank - normalized + i]);
    }
    memcpy(out, X, sizeof(guard_expr) * node->rank);
    return;
  }
  case CAP_BATCH_NORM:
    for (int k = 1; k < node->operand_count; k++) {
      guard_expr P[HLO_MAX_RANK];
      cap_trace_node_dims(t, node->operands[k], P);
      require_equal(t, P[0], X[1]);
    }
    memcpy(out, X, sizeof(guard_expr) * node->rank);
    return;
  case CAP_EMBEDDING: {
    guard_expr I[HLO_MAX_RANK];
    cap_trace_node_dims(t, node->operands[1], I);
    memcpy(out, I, sizeof(guard_expr) * node->operands[1]->rank);
    out[node->rank - 1] = X[1];
    return;
  }
  case CAP_RESHAPE: reshape(t, node, out); return;
  case CAP_PERMUTE:
    for (int i = 0; i < node->rank; i++) out[i] = X[node->attrs[i]];
    return;
  case CAP_SLICE: {
    int d = (int)node->attrs[0];
    guard_expr *attrs = out + node->rank; /* the caller leaves room for the 4 attrs */
    memcpy(out, X, sizeof(guard_expr) * node->rank);
    for (int k = 0; k < 4; k++) attrs[k] = constant(node->attrs[k]);
    const latch_size *bounds = cap_trace_slice_sizes();
    if (bounds) {
      /* latch_slice_sized: start and stop are sizes, guarded to 0 <= start <= stop <= dim. */
      guard_expr start = cap_trace_size_expr(t, bounds[0]), stop = cap_trace_size_expr(t, bounds[1]);
      int64_t step = node->attrs[3];
      guard_set_compare(t->guards, start, GUARD_GE, constant(0));
      guard_set_compare(t->guards, stop, GUARD_GE, start);
      guard_set_compare(t->guards, stop, GUARD_LE, X[d]);
      attrs[1] = start;
      attrs[2] = stop;
      guard_expr span = add(t, add(t, stop, scale(t, start, -1)), constant(step - 1));
      out[d] = guard_set_define_floor(t->guards, span, step);
      return;
    }
    /* latch_slice: start and stop were clamped to this call's size: keep that size. */
    pin(t, X[d]);
    out[d] = constant(node->dims[d]);
    return;
  }
  case CAP_CONCAT: concat(t, node, out); return;
  case CAP_PAD:
    for (int i = 0; i < node->rank; i++) {
      out[i] = add(t, X[i], constant(node->attrs[i] + node->attrs[node->rank + i]));
      if (node->attrs[i] + node->attrs[node->rank + i] < 0) guard_set_compare(t->guards, out[i], GUARD_GE, constant(0));
    }
    return;
  case CAP_BROADCAST:
    for (int i = 0; i < node->rank; i++) out[i] = constant(node->dims[i]);
    for (int j = 0; j < x->rank; j++) {
      int i = node->rank - x->rank + j;
      require_equal(t, X[j], constant(x->dims[j] == 1 ? 1 : node->dims[i]));
    }
    return;
  case CAP_RNG_UNIFORM: {
    const cap_node *like = cap_ctx_current()->trace_like;
    if (like && like->rank == node->rank) cap_trace_node_dims(t, like, out);
    else for (int i = 0; i < node->rank; i++) out[i] = constant(node->dims[i]);
    return;
  }
  case CAP_CONST: case CAP_IOTA: case CAP_DATA:
  default:
    /* Sizes given as plain numbers; any operand's symbolic size is specialized. */
    for (int k = 0; k < node->operand_count; k++) {
      guard_expr P[HLO_MAX_RANK];
      cap_trace_node_dims(t, node->operands[k], P);
      for (int i = 0; i < node->operands[k]->rank; i++) pin(t, P[i]);
    }
    for (int i = 0; i < node->rank; i++) out[i] = constant(node->dims[i]);
    return;
  }
}
