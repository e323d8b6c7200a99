/* Lowering one node to HLO through the builder: leaves, elementwise ops and shape ops.
 * Broadcasting and type promotion, implicit in the API, become explicit broadcast and
 * convert instructions here. The nn ops are in lower_nn.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "hlo/hlo.h"

hlo_instr *cap_lower_convert(hlo_comp *comp, hlo_instr *x, hlo_dtype dtype, hlo_diag *diag) {
  if (!x || x->shape.dtype == dtype) return x;
  return hlo_build_convert(comp, x, dtype, diag);
}

/* NumPy broadcasting: x's dims align with the trailing dims; size-1 dims that stretch are
 * reshaped away first, since an HLO broadcast maps dims of equal size only. */
hlo_instr *cap_lower_broadcast(hlo_comp *comp, hlo_instr *x, int rank, const int64_t *dims, hlo_diag *diag) {
  if (!x) return NULL;
  int xr = x->shape.rank, offset = rank - xr;
  if (xr == rank && !memcmp(x->shape.dims, dims, sizeof(int64_t) * (size_t)rank)) return x;
  int64_t kept_dims[HLO_MAX_RANK], mapping[HLO_MAX_RANK];
  int kept = 0;
  for (int i = 0; i < xr; i++) {
    if (x->shape.dims[i] == dims[offset + i]) {
      kept_dims[kept] = x->shape.dims[i];
      mapping[kept++] = offset + i;
    }
  }
  if (kept != xr) {
    x = hlo_build_reshape(comp, x, kept, kept_dims, diag);
    if (!x) return NULL;
  }
  return hlo_build_broadcast(comp, x, rank, dims, mapping, diag);
}

hlo_instr *cap_lower_scalar(hlo_comp *comp, hlo_dtype dtype, double value, hlo_diag *diag) {
  return hlo_build_constant_scalar(comp, dtype, value, diag);
}

hlo_instr *cap_lower_full(hlo_comp *comp, hlo_dtype dtype, int rank, const int64_t *dims, double value,
                          hlo_diag *diag) {
  hlo_instr *scalar = cap_lower_scalar(comp, dtype, value, diag);
  if (!scalar || rank == 0) return scalar;
  return hlo_build_broadcast(comp, scalar, rank, dims, NULL, diag);
}

hlo_comp *cap_lower_reducer(hlo_comp *comp, hlo_opcode op, hlo_dtype dtype, hlo_diag *diag) {
  hlo_comp *reducer = hlo_shared_scalar_reducer(comp->module, op, dtype);
  if (!reducer && comp->module->arena.failed)
    hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory making a %s reducer", hlo_opcode_name(op));
  else if (!reducer)
    hlo_diag_set(diag, HLO_ERR_INTERNAL, "no %s reducer for %s", hlo_opcode_name(op), hlo_dtype_name(dtype));
  return reducer;
}

hlo_instr *cap_lower_reduce(hlo_comp *comp, hlo_instr *x, hlo_opcode op, double init, int count, const int64_t *dims,
                            hlo_diag *diag) {
  hlo_dtype dtype = x->shape.dtype;
  hlo_comp *reducer = cap_lower_reducer(comp, op, dtype, diag);
  hlo_instr *start = reducer ? cap_lower_scalar(comp, dtype, init, diag) : NULL;
  if (!start) return NULL;
  return hlo_build_reduce(comp, x, start, count, dims, reducer, diag);
}

static hlo_opcode unary_opcode(int op) {
  switch ((latch_unop)op) {
    case LATCH_NEG: return HLO_OP_NEGATE;
    case LATCH_ABS: return HLO_OP_ABS;
    case LATCH_SIGN: return HLO_OP_SIGN;
    case LATCH_FLOOR: return HLO_OP_FLOOR;
    case LATCH_CEIL: return HLO_OP_CEIL;
    case LATCH_ROUND: return HLO_OP_ROUND_NEAREST_EVEN;
    case LATCH_NOT: return HLO_OP_NOT;
    case LATCH_EXP: return HLO_OP_EXP;
    case LATCH_LOG: return HLO_OP_LOG;
    case LATCH_SQRT: return HLO_OP_SQRT;
    case LATCH_RSQRT: return HLO_OP_RSQRT;
    case LATCH_TANH: return HLO_OP_TANH;
    case LATCH_SIGMOID: return HLO_OP_LOGISTIC;
    case LATCH_SIN: return HLO_OP_SIN;
    case LATCH_COS: return HLO_OP_COS;
    case LATCH_ERF: return HLO_OP_ERF;
    case LATCH_LOG1P: return HLO_OP_LOG1P;
    case LATCH_EXPM1: return HLO_OP_EXPM1;
  }
  return HLO_OP_COUNT;
}

static hlo_opcode binary_opcode(int op) {
  switch ((latch_binop)op) {
    case LATCH_ADD: return HLO_OP_ADD;
    case LATCH_SUB: return HLO_OP_SUBTRACT;
    case LATCH_MUL: return HLO_OP_MULTIPLY;
    case LATCH_DIV: return HLO_OP_DIVIDE;
    case LATCH_REM: return HLO_OP_REMAINDER;
    case LATCH_POW: return HLO_OP_POWER;
    case LATCH_MAX: return HLO_OP_MAXIMUM;
    case LATCH_MIN: return HLO_OP_MINIMUM;
    case LATCH_AND: return HLO_OP_AND;
    case LATCH_OR: return HLO_OP_OR;
    case LATCH_XOR: return HLO_OP_XOR;
  }
  return HLO_OP_COUNT;
}

/* An operand converted to dtype and broadcast to the node's dims. */
static hlo_instr *fit(hlo_comp *comp, const cap_node *node, hlo_instr *x, hlo_dtype dtype, hlo_diag *diag) {
  return cap_lower_broadcast(comp, cap_lower_convert(comp, x, dtype, diag), node->rank, node->dims, diag);
}

static hlo_instr *lower_unary(hlo_comp *comp, const cap_node *node, hlo_instr *x, hlo_diag *diag) {
  x = cap_lower_convert(comp, x, (hlo_dtype)node->dtype, diag);
  if (!x) return NULL;
  bool integral = !hlo_dtype_is_float((hlo_dtype)node->dtype);
  if (integral && (node->sub == LATCH_FLOOR || node->sub == LATCH_CEIL || node->sub == LATCH_ROUND)) return x;
  if (node->sub == LATCH_ABS && hlo_dtype_is_unsigned((hlo_dtype)node->dtype)) return x;
  return hlo_build_unary(comp, unary_opcode(node->sub), x, diag);
}

static hlo_instr *lower_binary(hlo_comp *comp, const cap_node *node, hlo_instr *const *in, hlo_diag *diag) {
  hlo_dtype dtype = (hlo_dtype)node->dtype;
  hlo_instr *a = fit(comp, node, in[0], dtype, diag), *b = a ? fit(comp, node, in[1], dtype, diag) : NULL;
  if (!b) return NULL;
  return hlo_build_binary(comp, binary_opcode(node->sub), a, b, diag);
}

static hlo_instr *lower_compare(hlo_comp *comp, const cap_node *node, hlo_instr *const *in, hlo_diag *diag) {
  hlo_dtype dtype = cap_promote(in[0]->shape.dtype, in[1]->shape.dtype);
  hlo_instr *a = fit(comp, node, in[0], dtype, diag), *b = a ? fit(comp, node, in[1], dtype, diag) : NULL;
  if (!b) return NULL;
  return hlo_build_compare(comp, (hlo_direction)(HLO_DIR_EQ + node->sub), a, b, diag);
}

static hlo_instr *lower_where(hlo_comp *comp, const cap_node *node, hlo_instr *const *in, hlo_diag *diag) {
  hlo_dtype dtype = (hlo_dtype)node->dtype;
  hlo_instr *c = fit(comp, node, in[0], HLO_PRED, diag);
  hlo_instr *a = c ? fit(comp, node, in[1], dtype, diag) : NULL;
  hlo_instr *b = a ? fit(comp, node, in[2], dtype, diag) : NULL;
  return b ? hlo_build_select(comp, c, a, b, diag) : NULL;
}

/* The dims of the mask in attrs[0], in order. */
static hlo_instr *lower_flip(hlo_comp *comp, const cap_node *node, hlo_instr *x, hlo_diag *diag) {
  int64_t dims[HLO_MAX_RANK];
  int count = 0;
  for (int d = 0; d < node->rank; d++)
    if (node->attrs[0] & ((int64_t)1 << d)) dims[count++] = d;
  return count ? hlo_build_reverse(comp, x, count, dims, diag) : x;
}

static hlo_instr *lower_slice(hlo_comp *comp, const cap_node *node, hlo_instr *x, hlo_diag *diag) {
  int64_t starts[HLO_MAX_RANK], limits[HLO_MAX_RANK], strides[HLO_MAX_RANK];
  int dim = (int)node->attrs[0];
  for (int i = 0; i < x->shape.rank; i++) {
    starts[i] = 0;
    limits[i] = x->shape.dims[i];
    strides[i] = 1;
  }
  starts[dim] = node->attrs[1];
  /* The exact limit of the elements taken, so the result size is plain to read. */
  limits[dim] = node->dims[dim] ? node->attrs[1] + (node->dims[dim] - 1) * node->attrs[3] + 1 : node->attrs[1];
  strides[dim] = node->attrs[3];
  return hlo_build_slice(comp, x, starts, limits, strides, diag);
}

static hlo_instr *lower_pad(hlo_comp *comp, const cap_node *node, hlo_instr *x, hlo_diag *diag) {
  hlo_padding padding;
  memset(&padding, 0, sizeof padding);
  padding.rank = node->rank;
  for (int i = 0; i < node->rank; i++) {
    padding.low[i] = node->attrs[i];
    padding.high[i] = node->attrs[node->rank + i];
  }
  hlo_instr *value = cap_lower_scalar(comp, (hlo_dtype)node->dtype, node->scalar[0], diag);
  return value ? hlo_build_pad(comp, x, value, &padding, diag) : NULL;
}

static hlo_instr *lower_concat(hlo_comp *comp, const cap_node *node, hlo_instr *const *in, hlo_diag *diag) {
  int count = node->operand_count;
  hlo_instr **same = hlo_malloc(sizeof(hlo_instr *) * (size_t)count);
  if (!same) {
    hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory");
    return NULL;
  }
  bool ok = true;
  for (int i = 0; ok && i < count; i++)
    ok = (same[i] = cap_lower_convert(comp, in[i], (hlo_dtype)node->dtype, diag)) != NULL;
  hlo_instr *out = ok ? hlo_build_concatenate(comp, count, same, node->attrs[0], diag) : NULL;
  free(same);
  return out;
}

/* An HLO all-reduce over every replica, the module marked as having the world's size of them
 * (the runtime's collective kernels then carry it across the ranks); a mean divides the sum. */
static hlo_instr *lower_all_reduce(hlo_comp *comp, const cap_node *node, hlo_instr *x, hlo_diag *diag) {
  hlo_dtype dtype = (hlo_dtype)node->dtype;
  hlo_opcode op = node->sub == LATCH_RMAX ? HLO_OP_MAXIMUM : node->sub == LATCH_RMIN ? HLO_OP_MINIMUM : HLO_OP_ADD;
  char replicas[24];
  snprintf(replicas, sizeof replicas, "%lld", (long long)node->attrs[0]);
  if (!hlo_module_set_attr(comp->module, "replica_count", replicas)) {
    hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory lowering an all-reduce");
    return NULL;
  }
  hlo_comp *reducer = cap_lower_reducer(comp, op, dtype, diag);
  hlo_instr *sum = reducer ? hlo_build_all_reduce(comp, x, reducer, diag) : NULL;
  if (!sum || node->sub != LATCH_MEAN) return sum;
  hlo_instr *count = cap_lower_full(comp, dtype, node->rank, node->dims, (double)node->attrs[0], diag);
  return count ? hlo_build_binary(comp, HLO_OP_DIVIDE, sum, count, diag) : NULL;
}

hlo_instr *cap_lower_node(hlo_comp *comp, const cap_node *node, hlo_instr *const *in, hlo_diag *diag) {
  hlo_dtype dtype = (hlo_dtype)node->dtype;
  switch ((cap_op)node->op) {
    case CAP_CONST: return cap_lower_full(comp, dtype, node->rank, node->dims, node->scalar[0], diag);
    case CAP_IOTA: return hlo_build_iota(comp, dtype, node->rank, node->dims, node->attrs[0], diag);
    case CAP_UNARY: return lower_unary(comp, node, in[0], diag);
    case CAP_BINARY: return lower_binary(comp, node, in, diag);
    case CAP_COMPARE: return lower_compare(comp, node, in, diag);
    case CAP_WHERE: return lower_where(comp, node, in, diag);
    case CAP_CLAMP: {
      hlo_instr *lo = cap_lower_scalar(comp, dtype, node->scalar[0], diag);
      hlo_instr *hi = lo ? cap_lower_scalar(comp, dtype, node->scalar[1], diag) : NULL;
      return hi ? hlo_build_clamp(comp, lo, in[0], hi, diag) : NULL;
    }
    case CAP_CAST: return hlo_build_convert(comp, in[0], dtype, diag);
    case CAP_RESHAPE: return hlo_build_reshape(comp, in[0], node->rank, node->dims, diag);
    case CAP_PERMUTE: return hlo_build_transpose(comp, in[0], node->attrs, diag);
    case CAP_FLIP: return lower_flip(comp, node, in[0], diag);
    case CAP_SLICE: return lower_slice(comp, node, in[0], diag);
    case CAP_CONCAT: return lower_concat(comp, node, in, diag);
    case CAP_PAD: return lower_pad(comp, node, in[0], diag);
    case CAP_BROADCAST: return cap_lower_broadcast(comp, in[0], node->rank, node->dims, diag);
    case CAP_RNG_UNIFORM: return cap_lower_rng(comp, node, in[0], diag);
    case CAP_ALL_REDUCE: return lower_all_reduce(comp, node, in[0], diag);
    case CAP_DATA: hlo_diag_set(diag, HLO_ERR_INTERNAL, "lowering: a data node is not pending"); return NULL;
    default: return cap_lower_nn(comp, node, in, diag);
  }
}
