/* Tracing shape ops: reshape, permute, slice, concat, pad, broadcast_to. */
#include <stdio.h>
#include <string.h>

#include "capture.h"

static const char *dims_text(int rank, const int64_t *dims, char *buffer, int size) {
  int at = snprintf(buffer, (size_t)size, "[");
  for (int i = 0; i < rank && at < size; i++)
    at += snprintf(buffer + at, (size_t)(size - at), "%s%lld", i ? "," : "", (long long)dims[i]);
  if (at < size) snprintf(buffer + at, (size_t)(size - at), "]");
  return buffer;
}

latch_tensor *latch_reshape(latch_tensor *x, int rank, const int64_t *dims) {
  latch_tensor *bad = cap_poisoned("reshape", 1, &x);
  if (bad) return bad;
  char s[128], d[256];
  if (rank < 0 || rank > HLO_MAX_RANK || (rank && !dims))
    return cap_error(x->rt, "reshape: rank %d is out of range", rank);
  int64_t out[HLO_MAX_RANK], known = 1, total = 1;
  for (int i = 0; i < x->node->rank; i++) total *= x->node->dims[i]; /* not latch_numel: no guard */
  int infer = -1;
  for (int i = 0; i < rank; i++) {
    out[i] = dims[i];
    if (dims[i] == -1 && infer < 0)
      infer = i;
    else if (dims[i] < 0)
      return cap_error(x->rt, "reshape: bad dims %s for %s", dims_text(rank, dims, d, sizeof d),
                       cap_shape_text(x, s, sizeof s));
    else
      known *= dims[i];
  }
  if (infer >= 0) {
    if (known == 0 || total % known)
      return cap_error(x->rt, "reshape: cannot infer -1 in %s for %s", dims_text(rank, dims, d, sizeof d),
                       cap_shape_text(x, s, sizeof s));
    out[infer] = total / known;
    known = total;
  }
  if (known != total)
    return cap_error(x->rt, "reshape: %s has %lld elements, dims %s have %lld", cap_shape_text(x, s, sizeof s),
                     (long long)total, dims_text(rank, dims, d, sizeof d), (long long)known);
  cap_ctx *ctx = cap_ctx_current();
  ctx->reshape_infer = infer + 1; /* the trace's symbolic rule needs to know which dim was -1 */
  latch_tensor *result = cap_traced(x->rt, cap_node_like(CAP_RESHAPE, 0, 1, &x, 0, (hlo_dtype)x->node->dtype, rank, out));
  ctx->reshape_infer = 0;
  return result;
}

latch_tensor *latch_permute(latch_tensor *x, const int *perm) {
  latch_tensor *bad = cap_poisoned("permute", 1, &x);
  if (bad) return bad;
  int rank = x->node->rank;
  int64_t dims[HLO_MAX_RANK];
  bool used[HLO_MAX_RANK] = {false};
  char s[128];
  for (int i = 0; i < rank; i++) {
    int p = perm ? cap_norm_dim(perm[i], rank) : -1;
    if (p < 0 || used[p])
      return cap_error(x->rt, "permute: not a permutation of the dims of %s", cap_shape_text(x, s, sizeof s));
    used[p] = true;
    dims[i] = x->node->dims[p];
  }
  cap_node *node = cap_node_like(CAP_PERMUTE, 0, 1, &x, rank, (hlo_dtype)x->node->dtype, rank, dims);
  for (int i = 0; node && i < rank; i++) node->attrs[i] = cap_norm_dim(perm[i], rank);
  return cap_traced(x->rt, node);
}

latch_tensor *latch_flip(latch_tensor *x, int count, const int *dims) {
  latch_tensor *bad = cap_poisoned("flip", 1, &x);
  if (bad) return bad;
  int rank = x->node->rank;
  int64_t mask = 0;
  char s[128];
  if (count < 0 || (count > 0 && !dims))
    return cap_error(x->rt, "flip: %d dims given for %s", count, cap_shape_text(x, s, sizeof s));
  for (int i = 0; i < count; i++) {
    int d = cap_norm_dim(dims[i], rank);
    if (d < 0) return cap_error(x->rt, "flip: dim %d is out of range for %s", dims[i], cap_shape_text(x, s, sizeof s));
    if (mask & ((int64_t)1 << d))
      return cap_error(x->rt, "flip: dim %d is given twice for %s", dims[i], cap_shape_text(x, s, sizeof s));
    mask |= (int64_t)1 << d;
  }
  cap_node *node = cap_node_like(CAP_FLIP, 0, 1, &x, 1, (hlo_dtype)x->node->dtype, rank, x->node->dims);
  if (node) node->attrs[0] = mask;
  return cap_traced(x->rt, node);
}

latch_tensor *latch_slice(latch_tensor *x, int dim, int64_t start, int64_t stop, int64_t step) {
  latch_tensor *bad = cap_poisoned("slice", 1, &x);
  if (bad) return bad;
  char s[128];
  int d = cap_norm_dim(dim, x->node->rank);
  if (d < 0) return cap_error(x->rt, "slice: dim %d is out of range for %s", dim, cap_shape_text(x, s, sizeof s));
  if (step < 1) return cap_error(x->rt, "slice: step %lld must be at least 1", (long long)step);
  int64_t size = x->node->dims[d];
  if (start < 0) start += size;
  if (stop < 0) stop += size;
  start = start < 0 ? 0 : start > size ? size : start;
  stop = stop < start ? start : stop > size ? size : stop;
  int64_t dims[HLO_MAX_RANK];
  memcpy(dims, x->node->dims, sizeof(int64_t) * x->node->rank);
  dims[d] = (stop - start + step - 1) / step;
  cap_node *node = cap_node_like(CAP_SLICE, 0, 1, &x, 4, (hlo_dtype)x->node->dtype, x->node->rank, dims);
  if (node) {
    node->attrs[0] = d;
    node->attrs[1] = start;
    node->attrs[2] = stop;
    node->attrs[3] = step;
  }
  return cap_traced(x->rt, node);
}

latch_tensor *latch_concat(int count, latch_tensor *const *xs, int dim) {
  if (count < 1 || !xs) return cap_error(NULL, "concat: needs at least one tensor");
  latch_tensor *bad = cap_poisoned("concat", count, xs);
  if (bad) return bad;
  const cap_node *first = xs[0]->node;
  char s[128], s2[128];
  int d = cap_norm_dim(dim, first->rank);
  if (d < 0)
    return cap_error(xs[0]->rt, "concat: dim %d is out of range for %s", dim, cap_shape_text(xs[0], s, sizeof s));
  int64_t dims[HLO_MAX_RANK];
  memcpy(dims, first->dims, sizeof(int64_t) * first->rank);
  hlo_dtype dtype = (hlo_dtype)first->dtype;
  for (int i = 1; i < count; i++) {
    const cap_node *n = xs[i]->node;
    bool fits = n->rank == first->rank;
    for (int k = 0; fits && k < n->rank; k++) fits = k == d || n->dims[k] == first->dims[k];
    dtype = cap_promote(dtype, (hlo_dtype)n->dtype);
    if (!fits || dtype == HLO_INVALID)
      return cap_error(xs[0]->rt, "concat: %s does not fit %s along dim %d", cap_shape_text(xs[i], s2, sizeof s2),
                       cap_shape_text(xs[0], s, sizeof s), d);
    dims[d] += n->dims[d];
  }
  cap_node *node = cap_node_like(CAP_CONCAT, 0, count, xs, 1, dtype, first->rank, dims);
  if (node) node->attrs[0] = d;
  return cap_traced(xs[0]->rt, node);
}

latch_tensor *latch_pad(latch_tensor *x, const int64_t *low, const int64_t *high, double value) {
  latch_tensor *bad = cap_poisoned("pad", 1, &x);
  if (bad) return bad;
  int rank = x->node->rank;
  int64_t dims[HLO_MAX_RANK];
  char s[128];
  for (int i = 0; i < rank; i++) {
    int64_t lo = low ? low[i] : 0, hi = high ? high[i] : 0;
    dims[i] = x->node->dims[i] + lo + hi;
    if (dims[i] < 0)
      return cap_error(x->rt, "pad: dim %d of %s cropped below zero", i, cap_shape_text(x, s, sizeof s));
  }
  cap_node *node = cap_node_like(CAP_PAD, 0, 1, &x, 2 * rank, (hlo_dtype)x->node->dtype, rank, dims);
  for (int i = 0; node && i < rank; i++) {
    node->attrs[i] = low ? low[i] : 0;
    node->attrs[rank + i] = high ? high[i] : 0;
  }
  if (node) node->scalar[0] = value;
  return cap_traced(x->rt, node);
}

latch_tensor *latch_broadcast_to(latch_tensor *x, int rank, const int64_t *dims) {
  latch_tensor *bad = cap_poisoned("broadcast_to", 1, &x);
  if (bad) return bad;
  char s[128], d[256];
  int r;
  int64_t out[HLO_MAX_RANK];
  bool ok = rank >= x->node->rank && rank <= HLO_MAX_RANK && (dims || !rank) &&
            cap_broadcast_dims(x->node->rank, x->node->dims, rank, dims, &r, out);
  for (int i = 0; ok && i < rank; i++) ok = out[i] == dims[i];
  if (!ok)
    return cap_error(x->rt, "broadcast_to: %s does not broadcast to %s", cap_shape_text(x, s, sizeof s),
                     rank >= 0 && rank <= HLO_MAX_RANK && dims ? dims_text(rank, dims, d, sizeof d) : "(bad dims)");
  if (!cap_dims_fit("broadcast_to", rank, out)) return cap_error(x->rt, "%s", latch_last_error());
  return cap_traced(x->rt, cap_node_like(CAP_BROADCAST, 0, 1, &x, 0, (hlo_dtype)x->node->dtype, rank, out));
}
