/* Shape inference, one function per op family. Every check that fails says which op,
 * which instruction, what did not fit and the operand shapes, because that message is all a
 * user sees when a frontend emits a bad graph. */
#include "hlo.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct infer_ctx {
  const hlo_instr *instr;
  unsigned flags;
  hlo_arena *arena;
  hlo_diag *diag;
} infer_ctx;

static const hlo_shape *operand(const infer_ctx *c, int i) { return &c->instr->operands[i]->shape; }
static bool importer(const infer_ctx *c) { return (c->flags & HLO_INFER_IMPORTER) != 0; }

/* ---- messages ---- */

/* What an op calls its operand i, so "lhs f32[2,3]" reads like the op's documentation. */
static void operand_label(const hlo_instr *instr, int i, char *buffer, size_t size) {
  int n = instr->operand_count;
  const char *label = NULL;
  static const char *const bn_training[] = {"operand", "scale", "offset"};
  static const char *const bn_inference[] = {"operand", "scale", "offset", "mean", "variance"};
  static const char *const bn_grad[] = {"operand", "scale", "mean", "variance", "grad_output"};
  static const char *const sas[] = {"operand", "source", "init_value"};
  switch (instr->opcode) {
    case HLO_OP_DOT: case HLO_OP_CONVOLUTION: case HLO_OP_RAGGED_DOT:
      label = i == 0 ? "lhs" : i == 1 ? "rhs" : "group_sizes";
      break;
    case HLO_OP_SELECT: label = i == 0 ? "pred" : i == 1 ? "on_true" : "on_false"; break;
    case HLO_OP_CLAMP: label = i == 0 ? "min" : i == 1 ? "operand" : "max"; break;
    case HLO_OP_PAD: label = i == 0 ? "operand" : "padding_value"; break;
    case HLO_OP_GATHER: label = i == 0 ? "operand" : "start_indices"; break;
    case HLO_OP_SCATTER:
      label = i < (n - 1) / 2 ? "operand" : i == (n - 1) / 2 ? "indices" : "update";
      break;
    case HLO_OP_REDUCE: case HLO_OP_REDUCE_WINDOW: label = i < n / 2 ? "input" : "init"; break;
    case HLO_OP_SELECT_AND_SCATTER: if (i < 3) label = sas[i]; break;
    case HLO_OP_DYNAMIC_SLICE: label = i == 0 ? "operand" : "start index"; break;
    case HLO_OP_DYNAMIC_UPDATE_SLICE:
      label = i == 0 ? "operand" : i == 1 ? "update" : "start index";
      break;
    case HLO_OP_BATCH_NORM_TRAINING: if (i < 3) label = bn_training[i]; break;
    case HLO_OP_BATCH_NORM_INFERENCE: if (i < 5) label = bn_inference[i]; break;
    case HLO_OP_BATCH_NORM_GRAD: if (i < 5) label = bn_grad[i]; break;
    default: break;
  }
  if (label) snprintf(buffer, size, "%s", label);
  else if (n == 1) snprintf(buffer, size, "operand");
  else snprintf(buffer, size, "operand %d", i);
}

/* " (lhs f32[2,3], rhs f32[4,5])": the operand shapes every message ends with. */
void hlo_describe_operands(const hlo_instr *instr, hlo_strbuf *sb) {
  enum { SHOWN = 6 };
  if (instr->operand_count == 0) return;
  hlo_sb_puts(sb, " (");
  for (int i = 0; i < instr->operand_count && i < SHOWN; i++) {
    char label[32];
    operand_label(instr, i, label, sizeof label);
    hlo_sb_printf(sb, "%s%s ", i ? ", " : "", label);
    if (instr->operands[i]) hlo_shape_print(sb, &instr->operands[i]->shape, false);
    else hlo_sb_puts(sb, "(missing)");
  }
  if (instr->operand_count > SHOWN) hlo_sb_printf(sb, ", ... %d operands", instr->operand_count);
  hlo_sb_puts(sb, ")");
}

static hlo_status fail(infer_ctx *c, const char *format, ...) __attribute__((format(printf, 2, 3)));
static hlo_status fail(infer_ctx *c, const char *format, ...) {
  char detail[600];
  va_list args;
  va_start(args, format);
  vsnprintf(detail, sizeof detail, format, args);
  va_end(args);
  hlo_strbuf sb;
  hlo_sb_init(&sb);
  hlo_sb_printf(&sb, "%s %%%s: %s", hlo_opcode_name(c->instr->opcode),
                c->instr->name ? c->instr->name : "?", detail);
  hlo_describe_operands(c->instr, &sb);
  hlo_diag_set(c->diag, HLO_ERR_INPUT, "%s", sb.failed || !sb.data ? detail : sb.data);
  hlo_sb_free(&sb);
  return HLO_ERR_INPUT;
}

static hlo_status out_of_memory(infer_ctx *c) {
  return hlo_diag_set(c->diag, HLO_ERR_INTERNAL, "out of memory inferring the shape of %s %%%s",
                      hlo_opcode_name(c->instr->opcode), c->instr->name ? c->instr->name : "?");
}

/* ---- shapes and dims ---- */

bool hlo_shape_compatible(const hlo_shape *a, const hlo_shape *b) {
  if (a->dtype != b->dtype) return false;
  if (a->dtype == HLO_TUPLE) {
    if (a->tuple_count != b->tuple_count) return false;
    for (int i = 0; i < a->tuple_count; i++)
      if (!hlo_shape_compatible(&a->tuple[i], &b->tuple[i])) return false;
    return true;
  }
  if (a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++) {
    if (a->dim_kind[i] == HLO_DIM_UNBOUNDED || b->dim_kind[i] == HLO_DIM_UNBOUNDED) continue;
    if (a->dims[i] != b->dims[i]) return false;
  }
  return true;
}

static bool dim_matches(const hlo_shape *a, int ai, const hlo_shape *b, int bi) {
  if (a->dim_kind[ai] == HLO_DIM_UNBOUNDED || b->dim_kind[bi] == HLO_DIM_UNBOUNDED) return true;
  return a->dims[ai] == b->dims[bi];
}

static bool same_dims(const hlo_shape *a, const hlo_shape *b) {
  if (a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++)
    if (!dim_matches(a, i, b, i)) return false;
  return true;
}

/* An array shape with the default layout and no layout text. */
static hlo_shape array(hlo_dtype dtype, int rank, const int64_t *dims, const uint8_t *kinds) {
  hlo_shape shape = hlo_shape_make(dtype, rank, dims);
  if (kinds)
    for (int i = 0; i < rank; i++) shape.dim_kind[i] = kinds[i];
  return shape;
}

/* An array shape of rank dims, all zero, for the caller to fill in. */
static hlo_shape blank(hlo_dtype dtype, int rank) {
  hlo_shape shape = hlo_shape_scalar(dtype);
  shape.rank = rank;
  hlo_shape_default_layout(&shape);
  return shape;
}

/* A copy of shape with default layouts throughout: inferred shapes never carry layouts. */
static hlo_shape plain(infer_ctx *c, const hlo_shape *shape) {
  if (shape->dtype != HLO_TUPLE) {
    if (!hlo_shape_is_array(shape)) return hlo_shape_scalar(shape->dtype);
    return array(shape->dtype, shape->rank, shape->dims, shape->dim_kind);
  }
  hlo_shape result = hlo_shape_tuple(c->arena, shape->tuple_count, shape->tuple);
  for (int i = 0; i < shape->tuple_count; i++) result.tuple[i] = plain(c, &shape->tuple[i]);
  return result;
}

static hlo_shape make_tuple(infer_ctx *c, int count, const hlo_shape *elements) {
  return hlo_shape_tuple(c->arena, count, elements);
}

/* A dim passed from an operand to the result keeps its dynamic kind. */
static void copy_dim(hlo_shape *to, int ti, const hlo_shape *from, int fi) {
  to->dims[ti] = from->dims[fi];
  to->dim_kind[ti] = from->dim_kind[fi];
}

static hlo_status need_array(infer_ctx *c, int i) {
  const hlo_shape *shape = operand(c, i);
  if (hlo_shape_is_array(shape)) return HLO_OK;
  char label[32];
  operand_label(c->instr, i, label, sizeof label);
  return fail(c, "%s must be an array, not %s", label, hlo_shape_text(shape).s);
}

static hlo_status need_arrays(infer_ctx *c, int from, int to) {
  for (int i = from; i < to; i++)
    if (need_array(c, i)) return HLO_ERR_INPUT;
  return HLO_OK;
}

static hlo_status need_scalar(infer_ctx *c, int i) {
  if (need_array(c, i)) return HLO_ERR_INPUT;
  if (operand(c, i)->rank == 0) return HLO_OK;
  char label[32];
  operand_label(c->instr, i, label, sizeof label);
  return fail(c, "%s must be a scalar, not %s", label, hlo_shape_text(operand(c, i)).s);
}

static hlo_status need_integral(infer_ctx *c, int i) {
  hlo_dtype t = operand(c, i)->dtype;
  if (hlo_dtype_is_integral(t)) return HLO_OK;
  char label[32];
  operand_label(c->instr, i, label, sizeof label);
  return fail(c, "%s must have an integer type, not %s", label, hlo_dtype_name(t));
}

/* dims must be distinct and in [0, rank); sorted when the op requires it. */
static hlo_status check_dim_list(infer_ctx *c, const char *what, const hlo_ints *dims, int rank,
                                 bool sorted) {
  for (int i = 0; i < dims->count; i++) {
    int64_t d = dims->values[i];
    if (d < 0 || d >= rank)
      return fail(c, "%s has dim %lld, out of range for rank %d", what, (long long)d, rank);
    for (int j = 0; j < i; j++) {
      if (dims->values[j] == d) return fail(c, "%s repeats dim %lld", what, (long long)d);
      if (sorted && dims->values[j] > d) return fail(c, "%s must be sorted", what);
    }
  }
  return HLO_OK;
}

static bool contains(const hlo_ints *dims, int64_t value) {
  for (int i = 0; i < dims->count; i++)
    if (dims->values[i] == value) return true;
  return false;
}

/* ---- operand counts ---- */

/* Fixed operand counts; variadic ops give -1 and are checked by their own rule. */
static int fixed_arity(hlo_opcode op) {
  if (hlo_opcode_is_elementwise_unary(op)) return 1;
  if (hlo_opcode_is_elementwise_binary(op)) return 2;
  switch (op) {
    case HLO_OP_PARAMETER: case HLO_OP_CONSTANT: case HLO_OP_IOTA: case HLO_OP_PARTITION_ID:
    case HLO_OP_REPLICA_ID: case HLO_OP_RNG_GET_AND_UPDATE_STATE:
      return 0;
    case HLO_OP_COPY: case HLO_OP_BITCAST: case HLO_OP_BITCAST_CONVERT: case HLO_OP_CONVERT:
    case HLO_OP_BROADCAST: case HLO_OP_RESHAPE: case HLO_OP_TRANSPOSE: case HLO_OP_SLICE:
    case HLO_OP_REVERSE: case HLO_OP_REDUCE_PRECISION: case HLO_OP_GET_TUPLE_ELEMENT:
    case HLO_OP_CHOLESKY: case HLO_OP_FFT: case HLO_OP_GET_DIMENSION_SIZE: case HLO_OP_WHILE:
    case HLO_OP_RNG_BIT_GENERATOR: case HLO_OP_DOMAIN: case HLO_OP_COPY_START:
    case HLO_OP_COPY_DONE: case HLO_OP_TOPK: case HLO_OP_INFEED: case HLO_OP_RECV:
    case HLO_OP_RECV_DONE: case HLO_OP_SEND_DONE: case HLO_OP_ALL_GATHER_DONE:
    case HLO_OP_ALL_REDUCE_DONE: case HLO_OP_COLLECTIVE_PERMUTE_DONE: case HLO_OP_ASYNC_DONE:
    case HLO_OP_ASYNC_UPDATE:
      return 1;
    case HLO_OP_PAD: case HLO_OP_SET_DIMENSION_SIZE: case HLO_OP_TRIANGULAR_SOLVE:
    case HLO_OP_ADD_DEPENDENCY: case HLO_OP_OUTFEED: case HLO_OP_SEND: case HLO_OP_RNG:
    case HLO_OP_STOCHASTIC_CONVERT: case HLO_OP_DOT: case HLO_OP_CONVOLUTION: case HLO_OP_GATHER:
      return 2;
    case HLO_OP_SELECT: case HLO_OP_CLAMP: case HLO_OP_SELECT_AND_SCATTER:
    case HLO_OP_BATCH_NORM_TRAINING: case HLO_OP_RAGGED_DOT:
      return 3;
    case HLO_OP_BATCH_NORM_INFERENCE: case HLO_OP_BATCH_NORM_GRAD:
      return 5;
    case HLO_OP_RAGGED_ALL_TO_ALL:
      return 6;
    default:
      return -1;
  }
}

static hlo_status check_arity(infer_ctx *c) {
  const hlo_instr *instr = c->instr;
  int n = instr->operand_count;
  for (int i = 0; i < n; i++)
    if (!instr->operands[i]) return fail(c, "operand %d is missing", i);
  int fixed = fixed_arity(instr->opcode);
  if (fixed >= 0) {
    if (n != fixed) return fail(c, "takes %d operand%s, not %d", fixed, fixed == 1 ? "" : "s", n);
    return HLO_OK;
  }
  switch (instr->opcode) {
    case HLO_OP_REDUCE: case HLO_OP_REDUCE_WINDOW:
      if (n < 2 || n % 2) return fail(c, "takes inputs and as many init values, not %d operands", n);
      break;
    case HLO_OP_SCATTER:
      if (n < 3 || n % 2 == 0)
        return fail(c, "takes operands, indices and as many updates, not %d operands", n);
      break;
    case HLO_OP_DYNAMIC_SLICE:
      if (n < 2) return fail(c, "takes an operand and start indices, not %d operands", n);
      break;
    case HLO_OP_DYNAMIC_UPDATE_SLICE:
      if (n < 3) return fail(c, "takes an operand, an update and start indices, not %d operands", n);
      break;
    case HLO_OP_CONCATENATE: case HLO_OP_SORT: case HLO_OP_MAP: case HLO_OP_ALL_REDUCE:
    case HLO_OP_ALL_GATHER: case HLO_OP_REDUCE_SCATTER: case HLO_OP_ALL_TO_ALL:
    case HLO_OP_COLLECTIVE_PERMUTE: case HLO_OP_COLLECTIVE_BROADCAST: case HLO_OP_CONDITIONAL:
    case HLO_OP_OPTIMIZATION_BARRIER: case HLO_OP_DYNAMIC_RESHAPE:
      if (n < 1) return fail(c, "needs at least one operand");
      break;
    default: /* tuple, after-all, call, fusion, custom-call, async-start, ... take any */
      break;
  }
  return HLO_OK;
}

static hlo_status need_called(infer_ctx *c, int count) {
  if (c->instr->called_count < count)
    return fail(c, "needs %d called computation%s, has %d", count, count == 1 ? "" : "s",
                c->instr->called_count);
  for (int i = 0; i < count; i++) {
    const hlo_comp *comp = c->instr->called[i];
    if (!comp) return fail(c, "called computation %d is missing", i);
    if (!comp->root) return fail(c, "called computation %s has no root", comp->name);
  }
  return HLO_OK;
}

/* The scalar a reducer-like computation returns; with the importer's leniency a
 * one-element tuple around it counts too. */
static const hlo_shape *called_scalar_result(infer_ctx *c, const hlo_comp *comp) {
  const hlo_shape *root = &comp->root->shape;
  if (importer(c) && root->dtype == HLO_TUPLE && root->tuple_count == 1) root = &root->tuple[0];
  return root;
}

/* ---- elementwise ---- */

static hlo_dtype complex_part(hlo_dtype t) {
  return t == HLO_C64 ? HLO_F32 : t == HLO_C128 ? HLO_F64 : t;
}

static hlo_status infer_unary(infer_ctx *c, hlo_shape *out) {
  if (need_array(c, 0)) return HLO_ERR_INPUT;
  const hlo_shape *x = operand(c, 0);
  hlo_dtype t = x->dtype;
  hlo_dtype result = t;
  bool floating = hlo_dtype_is_float(t), complex = hlo_dtype_is_complex(t);
  const char *needs = NULL;
  switch (c->instr->opcode) {
    case HLO_OP_NOT:
      if (!hlo_dtype_is_integral(t) && t != HLO_PRED) needs = "pred or an integer type";
      break;
    case HLO_OP_POPCNT: case HLO_OP_CLZ:
      if (!hlo_dtype_is_integral(t)) needs = "an integer type";
      break;
    case HLO_OP_IS_FINITE:
      if (!floating) needs = "a floating-point type";
      result = HLO_PRED;
      break;
    case HLO_OP_FLOOR: case HLO_OP_CEIL: case HLO_OP_ROUND_NEAREST_AFZ:
    case HLO_OP_ROUND_NEAREST_EVEN:
      if (!floating) needs = "a floating-point type";
      break;
    case HLO_OP_ABS: case HLO_OP_REAL: case HLO_OP_IMAG:
      if (t == HLO_PRED || (c->instr->opcode != HLO_OP_ABS && !floating && !complex))
        needs = "a numeric type";
      result = complex_part(t);
      break;
    case HLO_OP_NEGATE: case HLO_OP_SIGN:
      if (t == HLO_PRED) needs = "a numeric type";
      break;
    case HLO_OP_EXP: case HLO_OP_EXPM1: case HLO_OP_LOG: case HLO_OP_LOG1P:
    case HLO_OP_LOGISTIC: case HLO_OP_SQRT: case HLO_OP_RSQRT: case HLO_OP_CBRT:
    case HLO_OP_SIN: case HLO_OP_COS: case HLO_OP_TAN: case HLO_OP_TANH: case HLO_OP_ATAN:
    case HLO_OP_ACOS: case HLO_OP_ACOSH: case HLO_OP_ASIN: case HLO_OP_ASINH:
    case HLO_OP_ATANH: case HLO_OP_COSH: case HLO_OP_SINH: case HLO_OP_ERF:
      if (!floating && !complex) needs = "a floating-point or complex type";
      break;
    default:
      break;
  }
  if (needs) return fail(c, "needs %s, not %s", needs, hlo_dtype_name(t));
  *out = array(result, x->rank, x->dims, x->dim_kind);
  return HLO_OK;
}

/* The result dim of two matching operand dims: a dynamic one wins over a static one. */
static void merge_dim(hlo_shape *out, int i, const hlo_shape *a, const hlo_shape *b) {
  if (a->dim_kind[i] == HLO_DIM_UNBOUNDED) copy_dim(out, i, b, i);
  else if (b->dim_kind[i] == HLO_DIM_UNBOUNDED) copy_dim(out, i, a, i);
  else if (b->dim_kind[i] != HLO_DIM_STATIC) copy_dim(out, i, b, i);
  else copy_dim(out, i, a, i);
}

static hlo_status infer_binary(infer_ctx *c, hlo_shape *out) {
  if (need_arrays(c, 0, 2)) return HLO_ERR_INPUT;
  const hlo_shape *a = operand(c, 0), *b = operand(c, 1);
  hlo_opcode op = c->instr->opcode;
  if (!same_dims(a, b))
    return fail(c, "operands must have the same dims (no implicit broadcast in HLO)");
  if (a->dtype != b->dtype)
    return fail(c, "operands must have the same element type, not %s and %s",
                hlo_dtype_name(a->dtype), hlo_dtype_name(b->dtype));
  hlo_dtype t = a->dtype, result = t;
  switch (op) {
    case HLO_OP_COMPARE:
      result = HLO_PRED;
      break;
    case HLO_OP_COMPLEX:
      if (t != HLO_F32 && t != HLO_F64) return fail(c, "needs f32 or f64 parts, not %s", hlo_dtype_name(t));
      result = t == HLO_F32 ? HLO_C64 : HLO_C128;
      break;
    case HLO_OP_AND: case HLO_OP_OR: case HLO_OP_XOR:
      if (t != HLO_PRED && !hlo_dtype_is_integral(t))
        return fail(c, "needs pred or an integer type, not %s", hlo_dtype_name(t));
      break;
    case HLO_OP_SHIFT_LEFT: case HLO_OP_SHIFT_RIGHT_ARITHMETIC: case HLO_OP_SHIFT_RIGHT_LOGICAL:
      if (!hlo_dtype_is_integral(t)) return fail(c, "needs an integer type, not %s", hlo_dtype_name(t));
      break;
    case HLO_OP_ATAN2:
      if (!hlo_dtype_is_float(t) && !hlo_dtype_is_complex(t))
        return fail(c, "needs a floating-point type, not %s", hlo_dtype_name(t));
      break;
    default:
      break;
  }
  *out = array(result, a->rank, a->dims, NULL);
  for (int i = 0; i < a->rank; i++) merge_dim(out, i, a, b);
  return HLO_OK;
}

static hlo_status infer_select(infer_ctx *c, hlo_shape *out) {
  if (need_arrays(c, 0, 3)) return HLO_ERR_INPUT;
  const hlo_shape *p = operand(c, 0), *t = operand(c, 1), *f = operand(c, 2);
  if (p->dtype != HLO_PRED) return fail(c, "pred must have type pred, not %s", hlo_dtype_name(p->dtype));
  if (t->dtype != f->dtype || !same_dims(t, f))
    return fail(c, "on_true and on_false must have the same shape");
  if (p->rank != 0 && !same_dims(p, t)) return fail(c, "pred must be a scalar or have the dims of on_true");
  *out = array(t->dtype, t->rank, t->dims, NULL);
  for (int i = 0; i < t->rank; i++) merge_dim(out, i, t, f);
  return HLO_OK;
}

static hlo_status infer_clamp(infer_ctx *c, hlo_shape *out) {
  if (need_arrays(c, 0, 3)) return HLO_ERR_INPUT;
  const hlo_shape *lo = operand(c, 0), *x = operand(c, 1), *hi = operand(c, 2);
  if (lo->dtype != x->dtype || hi->dtype != x->dtype)
    return fail(c, "min, operand and max must have the same element type");
  if ((lo->rank != 0 && !same_dims(lo, x)) || (hi->rank != 0 && !same_dims(hi, x)))
    return fail(c, "min and max must be scalars or have the operand's dims");
  *out = array(x->dtype, x->rank, x->dims, x->dim_kind);
  return HLO_OK;
}

/* ---- conversions ---- */

static hlo_status declared_type(infer_ctx *c, hlo_dtype *dtype) {
  *dtype = c->instr->shape.dtype;
  if (hlo_dtype_is_array(*dtype)) return HLO_OK;
  return fail(c, "needs a result element type, not %s", hlo_dtype_name(*dtype));
}

static hlo_status infer_convert(infer_ctx *c, hlo_shape *out) {
  hlo_dtype to;
  if (need_array(c, 0) || declared_type(c, &to)) return HLO_ERR_INPUT;
  const hlo_shape *x = operand(c, 0);
  if (c->instr->opcode == HLO_OP_STOCHASTIC_CONVERT) {
    if (need_array(c, 1)) return HLO_ERR_INPUT;
    const hlo_shape *bits = operand(c, 1);
    if (!same_dims(x, bits) || !hlo_dtype_is_unsigned(bits->dtype))
      return fail(c, "random bits must be unsigned integers with the operand's dims");
  }
  *out = array(to, x->rank, x->dims, x->dim_kind);
  return HLO_OK;
}

/* Between types of different widths the minor dim absorbs the ratio: f32[4] -> u8[4,4]. */
static hlo_status infer_bitcast_convert(infer_ctx *c, hlo_shape *out) {
  hlo_dtype to;
  if (need_array(c, 0) || declared_type(c, &to)) return HLO_ERR_INPUT;
  const hlo_shape *x = operand(c, 0);
  int from_bits = hlo_dtype_bits(x->dtype), to_bits = hlo_dtype_bits(to);
  if (from_bits <= 0 || to_bits <= 0) return fail(c, "cannot bitcast between %s and %s",
                                                  hlo_dtype_name(x->dtype), hlo_dtype_name(to));
  *out = array(to, x->rank, x->dims, x->dim_kind);
  if (from_bits == to_bits) return HLO_OK;
  if (from_bits > to_bits) {
    if (from_bits % to_bits) return fail(c, "%s is not a whole number of %s", hlo_dtype_name(x->dtype), hlo_dtype_name(to));
    if (x->rank >= HLO_MAX_RANK) return fail(c, "result would exceed rank %d", HLO_MAX_RANK);
    out->rank = x->rank + 1;
    out->dims[x->rank] = from_bits / to_bits;
    out->dim_kind[x->rank] = HLO_DIM_STATIC;
    hlo_shape_default_layout(out);
    return HLO_OK;
  }
  if (to_bits % from_bits || x->rank == 0 || x->dims[x->rank - 1] != to_bits / from_bits)
    return fail(c, "converting %s to the wider %s needs a minor dim of size %d",
                hlo_dtype_name(x->dtype), hlo_dtype_name(to), to_bits / from_bits);
  out->rank = x->rank - 1;
  hlo_shape_default_layout(out);
  return HLO_OK;
}

/* ---- shape manipulation ---- */

static hlo_status infer_broadcast(infer_ctx *c, hlo_shape *out) {
  if (need_array(c, 0)) return HLO_ERR_INPUT;
  const hlo_shape *x = operand(c, 0), *to = &c->instr->shape;
  const hlo_ints *dims = &c->instr->dimensions;
  if (!hlo_shape_is_array(to)) return fail(c, "needs result dims, not %s", hlo_shape_text(to).s);
  if (dims->count != x->rank)
    return fail(c, "dimensions has %d entries for an operand of rank %d", dims->count, x->rank);
  for (int i = 0; i < dims->count; i++) {
    int64_t d = dims->values[i];
    if (d < 0 || d >= to->rank)
      return fail(c, "dimensions[%d]=%lld is out of range for result %s", i, (long long)d, hlo_shape_text(to).s);
    /* XLA's verifier does not require increasing order here (its builder does), so a
     * broadcast may also transpose; only a repeated target dim is meaningless. */
    for (int j = 0; j < i; j++)
      if (dims->values[j] == d) return fail(c, "dimensions repeats dim %lld", (long long)d);
    if (!dim_matches(x, i, to, (int)d))
      return fail(c, "operand dim %d has size %lld but result dim %lld has size %lld (result %s)", i,
                  (long long)x->dims[i], (long long)d, (long long)to->dims[d], hlo_shape_text(to).s);
  }
  *out = array(x->dtype, to->rank, to->dims, to->dim_kind);
  return HLO_OK;
}

static bool has_unbounded(const hlo_shape *s) {
  for (int i = 0; i < s->rank; i++)
    if (s->dim_kind[i] == HLO_DIM_UNBOUNDED) return true;
  return false;
}

static hlo_status infer_reshape(infer_ctx *c, hlo_shape *out) {
  if (need_array(c, 0)) return HLO_ERR_INPUT;
  const hlo_shape *x = operand(c, 0), *to = &c->instr->shape;
  if (!hlo_shape_is_array(to)) return fail(c, "needs result dims, not %s", hlo_shape_text(to).s);
  if (!has_unbounded(x) && !has_unbounded(to) && hlo_shape_elements(x) != hlo_shape_elements(to))
    return fail(c, "result %s has %lld elements but the operand has %lld", hlo_shape_text(to).s,
                (long long)hlo_shape_elements(to), (long long)hlo_shape_elements(x));
  *out = array(x->dtype, to->rank, to->dims, to->dim_kind);
  return HLO_OK;
}

static hlo_status infer_transpose(infer_ctx *c, hlo_shape *out) {
  if (need_array(c, 0)) return HLO_ERR_INPUT;
  const hlo_shape *x = operand(c, 0);
  const hlo_ints *perm = &c->instr->dimensions;
  if (perm->count != x->rank)
    return fail(c, "dimensions has %d entries for an operand of rank %d", perm->count, x->rank);
  if (check_dim_list(c, "dimensions", perm, x->rank, false)) return HLO_ERR_INPUT;
  *out = array(x->dtype, x->rank, x->dims, NULL);
  for (int i = 0; i < x->rank; i++) copy_dim(out, i, x, (int)perm->values[i]);
  return HLO_OK;
}

static hlo_status infer_reverse(infer_ctx *c, hlo_shape *out) {
  if (need_array(c, 0)) return HLO_ERR_INPUT;
  const hlo_shape *x = operand(c, 0);
  if (check_dim_list(c, "dimensions", &c->instr->dimensions, x->rank, false)) return HLO_ERR_INPUT;
  *out = plain(c, x);
  return HLO_OK;
}

static hlo_status infer_slice(infer_ctx *c, hlo_shape *out) {
  if (need_array(c, 0)) return HLO_ERR_INPUT;
  const hlo_instr *in = c->instr;
  const hlo_shape *x = operand(c, 0);
  if (in->slice_starts.count != x->rank || in->slice_limits.count != x->rank ||
      (in->slice_strides.count != 0 && in->slice_strides.count != x->rank))
    return fail(c, "slice has %d ranges for an operand of rank %d", in->slice_starts.count, x->rank);
  *out = array(x->dtype, x->rank, x->dims, NULL);
  for (int i = 0; i < x->rank; i++) {
    int64_t start = in->slice_starts.values[i], limit = in->slice_limits.values[i];
    int64_t stride = in->slice_strides.count ? in->slice_strides.values[i] : 1;
    if (stride < 1) return fail(c, "dim %d has stride %lld; strides must be positive", i, (long long)stride);
    if (start < 0 || start > limit || limit > x->dims[i])
      return fail(c, "dim %d range [%lld:%lld] is outside [0:%lld]", i, (long long)start,
                  (long long)limit, (long long)x->dims[i]);
    out->dims[i] = hlo_slice_size(start, limit, stride);
  }
  return HLO_OK;
}

/* Start indices come as one scalar per dim, or (older dumps) one rank-1 vector. */
static hlo_status check_start_indices(infer_ctx *c, int first, int rank) {
  int n = c->instr->operand_count - first;
  if (need_arrays(c, first, first + n)) return HLO_ERR_INPUT;
  if (n == 1 && operand(c, first)->rank == 1 && rank != 1) {
    if (operand(c, first)->dims[0] != rank)
      return fail(c, "the start index vector has %lld entries for rank %d",
                  (long long)operand(c, first)->dims[0], rank);
    return need_integral(c, first);
  }
  if (n != rank) return fail(c, "has %d start indices for an operand of rank %d", n, rank);
  for (int i = first; i < first + n; i++) {
    if (need_scalar(c, i) || need_integral(c, i)) return HLO_ERR_INPUT;
    if (operand(c, i)->dtype != operand(c, first)->dtype)
      return fail(c, "start indices must all have the same type");
  }
  return HLO_OK;
}

static hlo_status infer_dynamic_slice(infer_ctx *c, hlo_shape *out) {
  if (need_array(c, 0)) return HLO_ERR_INPUT;
  const hlo_shape *x = operand(c, 0);
  const hlo_ints *sizes = &c->instr->dimensions;
  if (check_start_indices(c, 1, x->rank)) return HLO_ERR_INPUT;
  if (sizes->count != x->rank)
    return fail(c, "dynamic_slice_sizes has %d entries for an operand of rank %d", sizes->count, x->rank);
  *out = blank(x->dtype, x->rank);
  for (int i = 0; i < x->rank; i++) {
    int64_t size = sizes->values[i];
    if (size < 0 || (x->dim_kind[i] != HLO_DIM_UNBOUNDED && size > x->dims[i]))
      return fail(c, "slice size %lld of dim %d does not fit the operand's %lld", (long long)size, i,
                  (long long)x->dims[i]);
    out->dims[i] = size;
  }
  return HLO_OK;
}

static hlo_status infer_dynamic_update_slice(infer_ctx *c, hlo_shape *out) {
  if (need_arrays(c, 0, 2)) return HLO_ERR_INPUT;
  const hlo_shape *x = operand(c, 0), *update = operand(c, 1);
  if (update->dtype != x->dtype) return fail(c, "update must have the operand's element type");
  if (update->rank != x->rank) return fail(c, "update must have the operand's rank");
  for (int i = 0; i < x->rank; i++)
    if (update->dims[i] < 0 || (x->dim_kind[i] != HLO_DIM_UNBOUNDED && update->dims[i] > x->dims[i]))
      return fail(c, "update dim %d (size %lld) is larger than the operand's (%lld)", i,
                  (long long)update->dims[i], (long long)x->dims[i]);
  if (check_start_indices(c, 2, x->rank)) return HLO_ERR_INPUT;
  *out = plain(c, x);
  return HLO_OK;
}

static hlo_status infer_concatenate(infer_ctx *c, hlo_shape *out) {
  int n = c->instr->operand_count;
  if (need_arrays(c, 0, n)) return HLO_ERR_INPUT;
  const hlo_shape *first = operand(c, 0);
  if (c->instr->dimensions.count != 1) return fail(c, "needs exactly one dimension");
  int64_t axis = c->instr->dimensions.values[0];
  if (axis < 0 || axis >= first->rank)
    return fail(c, "dimension %lld is out of range for rank %d", (long long)axis, first->rank);
  *out = array(first->dtype, first->rank, first->dims, first->dim_kind);
  for (int k = 1; k < n; k++) {
    const hlo_shape *x = operand(c, k);
    if (x->dtype != first->dtype || x->rank != first->rank)
      return fail(c, "operand %d must have the element type and rank of operand 0", k);
    for (int i = 0; i < x->rank; i++) {
      if (i == axis) {
        bool overflow = false;
        out->dims[i] = hlo_ck_add(&overflow, out->dims[i], x->dims[i]);
        if (overflow) return fail(c, "dimension %lld's total size overflows", (long long)axis);
        if (x->dim_kind[i] != HLO_DIM_STATIC) out->dim_kind[i] = x->dim_kind[i];
      } else if (!dim_matches(x, i, first, i)) {
        return fail(c, "operand %d dim %d has size %lld but operand 0 has %lld", k, i,
                    (long long)x->dims[i], (long long)first->dims[i]);
      }
    }
  }
  if (out->dim_kind[axis] == HLO_DIM_UNBOUNDED) out->dims[axis] = -1;
  return HLO_OK;
}

static hlo_status infer_pad(infer_ctx *c, hlo_shape *out) {
  if (need_array(c, 0) || need_scalar(c, 1)) return HLO_ERR_INPUT;
  const hlo_shape *x = operand(c, 0);
  const hlo_padding *pad = c->instr->padding;
  if (operand(c, 1)->dtype != x->dtype) return fail(c, "padding_value must have the operand's element type");
  if (!pad || pad->rank != x->rank)
    return fail(c, "padding has %d dims for an operand of rank %d", pad ? pad->rank : 0, x->rank);
  *out = array(x->dtype, x->rank, x->dims, x->dim_kind);
  for (int i = 0; i < x->rank; i++) {
    int64_t d = x->dims[i];
    if (pad->interior[i] < 0) return fail(c, "dim %d has negative interior padding", i);
    bool overflow = false;
    int64_t interior = d > 0 ? hlo_ck_mul(&overflow, d - 1, pad->interior[i]) : 0;
    int64_t size = hlo_ck_add(&overflow, hlo_ck_add(&overflow, pad->low[i], pad->high[i]), hlo_ck_add(&overflow, d, interior));
    if (overflow)
      return fail(c, "dim %d's padded size overflows (low %lld, high %lld, interior %lld on size %lld)", i,
                  (long long)pad->low[i], (long long)pad->high[i], (long long)pad->interior[i], (long long)d);
    if (size < 0) return fail(c, "dim %d would have negative size %lld", i, (long long)size);
    out->dims[i] = size;
  }
  return HLO_OK;
}

static hlo_status infer_iota(infer_ctx *c, hlo_shape *out) {
  const hlo_shape *to = &c->instr->shape;
  if (!hlo_shape_is_array(to) || to->rank == 0)
    return fail(c, "needs an array result of rank >= 1, not %s", hlo_shape_text(to).s);
  if (c->instr->index < 0 || c->instr->index >= to->rank)
    return fail(c, "iota_dimension %lld is out of range for %s", (long long)c->instr->index, hlo_shape_text(to).s);
  *out = plain(c, to);
  return HLO_OK;
}

/* ---- dot and convolution ---- */

/* The element type a contraction produces: its own declared one (XLA's preferred element
 * type, as in bf16 x bf16 -> f32), else the operands'. */
static hlo_status contraction_type(infer_ctx *c, hlo_dtype *result) {
  hlo_dtype a = operand(c, 0)->dtype, b = operand(c, 1)->dtype;
  bool both_float = hlo_dtype_is_float(a) && hlo_dtype_is_float(b);
  if (a != b && !both_float)
    return fail(c, "lhs and rhs must have the same element type, not %s and %s", hlo_dtype_name(a),
                hlo_dtype_name(b));
  *result = hlo_dtype_is_array(c->instr->shape.dtype) ? c->instr->shape.dtype : a;
  return HLO_OK;
}

static hlo_status check_dot_dims(infer_ctx *c, const char *side, const hlo_shape *x,
                                 const hlo_ints *batch, const hlo_ints *contracting) {
  /* the attribute names as literals: formatting them on every call cost more than the check */
  bool lhs = strcmp(side, "lhs") == 0;
  if (check_dim_list(c, lhs ? "lhs_batch_dims" : "rhs_batch_dims", batch, x->rank, false)) return HLO_ERR_INPUT;
  if (check_dim_list(c, lhs ? "lhs_contracting_dims" : "rhs_contracting_dims", contracting, x->rank, false))
    return HLO_ERR_INPUT;
  for (int i = 0; i < contracting->count; i++)
    if (contains(batch, contracting->values[i]))
      return fail(c, "%s dim %lld is both a batch and a contracting dim", side, (long long)contracting->values[i]);
  return HLO_OK;
}

static hlo_status infer_dot(infer_ctx *c, hlo_shape *out) {
  if (need_arrays(c, 0, 2)) return HLO_ERR_INPUT;
  const hlo_shape *lhs = operand(c, 0), *rhs = operand(c, 1);
  const hlo_dot_dims *d = c->instr->dot;
  hlo_dot_dims none;
  if (!d) {
    memset(&none, 0, sizeof none);
    d = &none;
  }
  hlo_dtype t;
  if (contraction_type(c, &t)) return HLO_ERR_INPUT;
  if (check_dot_dims(c, "lhs", lhs, &d->lhs_batch, &d->lhs_contracting) ||
      check_dot_dims(c, "rhs", rhs, &d->rhs_batch, &d->rhs_contracting))
    return HLO_ERR_INPUT;
  if (d->lhs_batch.count != d->rhs_batch.count)
    return fail(c, "lhs has %d batch dims but rhs has %d", d->lhs_batch.count, d->rhs_batch.count);
  if (d->lhs_contracting.count != d->rhs_contracting.count)
    return fail(c, "lhs has %d contracting dims but rhs has %d", d->lhs_contracting.count,
                d->rhs_contracting.count);
  for (int i = 0; i < d->lhs_batch.count; i++) {
    int l = (int)d->lhs_batch.values[i], r = (int)d->rhs_batch.values[i];
    if (!dim_matches(lhs, l, rhs, r))
      return fail(c, "lhs batch dim %d has size %lld but rhs batch dim %d has size %lld", l,
                  (long long)lhs->dims[l], r, (long long)rhs->dims[r]);
  }
  for (int i = 0; i < d->lhs_contracting.count; i++) {
    int l = (int)d->lhs_contracting.values[i], r = (int)d->rhs_contracting.values[i];
    if (!dim_matches(lhs, l, rhs, r))
      return fail(c, "lhs contracting dim %d has size %lld but rhs contracting dim %d has size %lld",
                  l, (long long)lhs->dims[l], r, (long long)rhs->dims[r]);
  }
  /* Result dims: batch dims, then lhs's free dims, then rhs's free dims, each in order. */
  int rank = d->lhs_batch.count + (lhs->rank - d->lhs_batch.count - d->lhs_contracting.count) +
             (rhs->rank - d->rhs_batch.count - d->rhs_contracting.count);
  if (rank > HLO_MAX_RANK) return fail(c, "result rank %d exceeds %d", rank, HLO_MAX_RANK);
  *out = blank(t, rank);
  int k = 0;
  for (int i = 0; i < d->lhs_batch.count; i++) copy_dim(out, k++, lhs, (int)d->lhs_batch.values[i]);
  for (int i = 0; i < lhs->rank; i++)
    if (!contains(&d->lhs_batch, i) && !contains(&d->lhs_contracting, i)) copy_dim(out, k++, lhs, i);
  for (int i = 0; i < rhs->rank; i++)
    if (!contains(&d->rhs_batch, i) && !contains(&d->rhs_contracting, i)) copy_dim(out, k++, rhs, i);
  return HLO_OK;
}

int64_t hlo_slice_size(int64_t start, int64_t limit, int64_t stride) {
  return start < limit ? (limit - start - 1) / stride + 1 : 0;
}

bool hlo_window_output_size(int64_t base, const hlo_window_dim *w, int64_t *out) {
  if (w->size < 1 || w->stride < 1 || w->lhs_dilate < 1 || w->rhs_dilate < 1) return false;
  bool overflow = false;
  int64_t dilated_base = base > 0 ? hlo_ck_add(&overflow, hlo_ck_mul(&overflow, base - 1, w->lhs_dilate), 1) : 0;
  int64_t padded = hlo_ck_add(&overflow, dilated_base, hlo_ck_add(&overflow, w->pad_low, w->pad_high));
  int64_t dilated_window = hlo_ck_add(&overflow, hlo_ck_mul(&overflow, w->size - 1, w->rhs_dilate), 1);
  int64_t span = hlo_ck_sub(&overflow, padded, dilated_window);
  if (overflow) return false;
  *out = span < 0 ? 0 : span / w->stride + 1;
  return true;
}

static hlo_status window_size(infer_ctx *c, int64_t base, int dim, int64_t *result) {
  const hlo_window_dim *w = &c->instr->window->dims[dim];
  if (!hlo_window_output_size(base, w, result))
    return fail(c, "window dim %d has size %lld, stride %lld, dilations %lld/%lld, padding %lld_%lld on size %lld: "
                "all but the padding must be >= 1, and the padded, dilated size must not overflow", dim,
                (long long)w->size, (long long)w->stride, (long long)w->lhs_dilate, (long long)w->rhs_dilate,
                (long long)w->pad_low, (long long)w->pad_high, (long long)base);
  return HLO_OK;
}

/* A conv operand's dims (batch/feature plus spatial) must be a permutation of its rank. */
static hlo_status check_conv_layout(infer_ctx *c, const char *side, int rank, int64_t a, int64_t b,
                                    const int64_t *spatial, int spatial_count) {
  if (rank != spatial_count + 2)
    return fail(c, "%s has rank %d but dim_labels name %d dims", side, rank, spatial_count + 2);
  bool seen[HLO_MAX_RANK] = {false};
  int64_t all[HLO_MAX_RANK + 2];
  all[0] = a;
  all[1] = b;
  for (int i = 0; i < spatial_count; i++) all[i + 2] = spatial[i];
  for (int i = 0; i < rank; i++) {
    if (all[i] < 0 || all[i] >= rank || seen[all[i]])
      return fail(c, "dim_labels for %s do not name each of its %d dims once", side, rank);
    seen[all[i]] = true;
  }
  return HLO_OK;
}

static hlo_status infer_convolution(infer_ctx *c, hlo_shape *out) {
  if (need_arrays(c, 0, 2)) return HLO_ERR_INPUT;
  const hlo_shape *lhs = operand(c, 0), *rhs = operand(c, 1);
  const hlo_conv_dims *d = c->instr->conv;
  const hlo_window *w = c->instr->window;
  if (!d) return fail(c, "needs dim_labels");
  int n = d->spatial_count;
  if (n < 0 || n > HLO_MAX_RANK - 2) return fail(c, "dim_labels name %d spatial dims", n);
  hlo_dtype t;
  if (contraction_type(c, &t)) return HLO_ERR_INPUT;
  if (check_conv_layout(c, "lhs", lhs->rank, d->input_batch, d->input_feature, d->input_spatial, n) ||
      check_conv_layout(c, "rhs", rhs->rank, d->kernel_input_feature, d->kernel_output_feature,
                        d->kernel_spatial, n) ||
      check_conv_layout(c, "the result", n + 2, d->output_batch, d->output_feature, d->output_spatial, n))
    return HLO_ERR_INPUT;
  if ((w ? w->rank : 0) != n) return fail(c, "window has %d dims but there are %d spatial dims", w ? w->rank : 0, n);
  int64_t fgc = c->instr->feature_group_count, bgc = c->instr->batch_group_count;
  int64_t batch = lhs->dims[d->input_batch], features = lhs->dims[d->input_feature];
  int64_t kernel_in = rhs->dims[d->kernel_input_feature], kernel_out = rhs->dims[d->kernel_output_feature];
  if (fgc < 1 || bgc < 1) return fail(c, "group counts must be >= 1");
  if (fgc > 1 && bgc > 1) return fail(c, "feature_group_count and batch_group_count cannot both exceed 1");
  if (features % fgc) return fail(c, "input features %lld are not divisible by feature_group_count %lld", (long long)features, (long long)fgc);
  if (features / fgc != kernel_in)
    return fail(c, "input features %lld / feature_group_count %lld must equal the kernel's input features %lld",
                (long long)features, (long long)fgc, (long long)kernel_in);
  if (kernel_out % fgc) return fail(c, "kernel output features %lld are not divisible by feature_group_count %lld", (long long)kernel_out, (long long)fgc);
  if (batch % bgc) return fail(c, "batch %lld is not divisible by batch_group_count %lld", (long long)batch, (long long)bgc);
  if (kernel_out % bgc) return fail(c, "kernel output features %lld are not divisible by batch_group_count %lld", (long long)kernel_out, (long long)bgc);
  *out = blank(t, n + 2);
  out->dims[d->output_batch] = batch / bgc;
  out->dims[d->output_feature] = kernel_out;
  for (int i = 0; i < n; i++) {
    int64_t kernel_size = rhs->dims[d->kernel_spatial[i]];
    if (w->dims[i].size != kernel_size && !importer(c))
      return fail(c, "window dim %d has size %lld but the kernel's spatial dim %lld has size %lld", i,
                  (long long)w->dims[i].size, (long long)d->kernel_spatial[i], (long long)kernel_size);
    if (window_size(c, lhs->dims[d->input_spatial[i]], i, &out->dims[d->output_spatial[i]]))
      return HLO_ERR_INPUT;
  }
  return HLO_OK;
}

/* ---- reductions ---- */

/* XLA lets a reduction accumulate in another float width than its input (bf16 summed in
 * f32); the reducer's parameters then say which. */
static bool same_type_ignoring_precision(hlo_dtype a, hlo_dtype b) {
  return a == b || (hlo_dtype_is_float(a) && hlo_dtype_is_float(b));
}

/* The scalar (or, for the importer, any) shape each init value must have; result types come
 * from the init values. */
static hlo_status check_inits(infer_ctx *c, int n) {
  for (int i = 0; i < n; i++) {
    if (importer(c) ? need_array(c, n + i) : need_scalar(c, n + i)) return HLO_ERR_INPUT;
    if (!same_type_ignoring_precision(operand(c, n + i)->dtype, operand(c, i)->dtype))
      return fail(c, "init %d has type %s but input %d has %s", i, hlo_dtype_name(operand(c, n + i)->dtype),
                  i, hlo_dtype_name(operand(c, i)->dtype));
  }
  return HLO_OK;
}

static hlo_status check_same_dims(infer_ctx *c, int from, int to) {
  for (int i = from + 1; i < to; i++)
    if (!same_dims(operand(c, i), operand(c, from)))
      return fail(c, "operand %d must have the dims of operand %d", i, from);
  return HLO_OK;
}

static hlo_shape tuple_or_single(infer_ctx *c, int n, const hlo_shape *results) {
  return n == 1 ? results[0] : make_tuple(c, n, results);
}

static hlo_status infer_reduce(infer_ctx *c, hlo_shape *out) {
  int n = c->instr->operand_count / 2;
  if (need_arrays(c, 0, n) || check_same_dims(c, 0, n) || check_inits(c, n)) return HLO_ERR_INPUT;
  const hlo_shape *x = operand(c, 0);
  const hlo_ints *dims = &c->instr->dimensions;
  if (check_dim_list(c, "dimensions", dims, x->rank, false)) return HLO_ERR_INPUT;
  hlo_shape *results = hlo_arena_alloc(c->arena, sizeof(hlo_shape) * (size_t)n);
  if (!results) return out_of_memory(c);
  for (int k = 0; k < n; k++) {
    hlo_shape r = blank(operand(c, n + k)->dtype, x->rank - dims->count);
    int kept = 0;
    for (int i = 0; i < x->rank; i++)
      if (!contains(dims, i)) copy_dim(&r, kept++, x, i);
    results[k] = r;
  }
  *out = tuple_or_single(c, n, results);
  return HLO_OK;
}

static hlo_status check_window_rank(infer_ctx *c, int rank) {
  const hlo_window *w = c->instr->window;
  if ((w ? w->rank : 0) != rank) return fail(c, "window has %d dims for rank %d", w ? w->rank : 0, rank);
  return HLO_OK;
}

static hlo_status infer_reduce_window(infer_ctx *c, hlo_shape *out) {
  int n = c->instr->operand_count / 2;
  if (need_arrays(c, 0, n) || check_same_dims(c, 0, n)) return HLO_ERR_INPUT;
  for (int i = 0; i < n; i++) {
    if (need_scalar(c, n + i)) return HLO_ERR_INPUT;
    if (!same_type_ignoring_precision(operand(c, n + i)->dtype, operand(c, i)->dtype))
      return fail(c, "init %d must have the element type of input %d", i, i);
  }
  const hlo_shape *x = operand(c, 0);
  if (check_window_rank(c, x->rank)) return HLO_ERR_INPUT;
  hlo_shape r = array(x->dtype, x->rank, x->dims, NULL);
  for (int i = 0; i < x->rank; i++)
    if (window_size(c, x->dims[i], i, &r.dims[i])) return HLO_ERR_INPUT;
  hlo_shape *results = hlo_arena_alloc(c->arena, sizeof(hlo_shape) * (size_t)n);
  if (!results) return out_of_memory(c);
  for (int k = 0; k < n; k++) {
    results[k] = r;
    results[k].dtype = operand(c, n + k)->dtype;
  }
  *out = tuple_or_single(c, n, results);
  return HLO_OK;
}

static hlo_status infer_select_and_scatter(infer_ctx *c, hlo_shape *out) {
  if (need_arrays(c, 0, 2) || need_scalar(c, 2)) return HLO_ERR_INPUT;
  const hlo_shape *x = operand(c, 0), *source = operand(c, 1);
  if (check_window_rank(c, x->rank)) return HLO_ERR_INPUT;
  if (source->rank != x->rank) return fail(c, "source must have the operand's rank");
  for (int i = 0; i < x->rank; i++) {
    int64_t size;
    if (window_size(c, x->dims[i], i, &size)) return HLO_ERR_INPUT;
    if (source->dims[i] != size)
      return fail(c, "source dim %d has size %lld but the window fits %lld times", i,
                  (long long)source->dims[i], (long long)size);
  }
  if (operand(c, 2)->dtype != source->dtype) return fail(c, "init_value must have the source's element type");
  *out = plain(c, x);
  return HLO_OK;
}

static hlo_status infer_sort(infer_ctx *c, hlo_shape *out) {
  int n = c->instr->operand_count;
  if (need_arrays(c, 0, n) || check_same_dims(c, 0, n)) return HLO_ERR_INPUT;
  const hlo_ints *dims = &c->instr->dimensions;
  int rank = operand(c, 0)->rank;
  if (dims->count != 1 || dims->values[0] < 0 || dims->values[0] >= rank)
    return fail(c, "needs one dimension in range for rank %d", rank);
  hlo_shape *results = hlo_arena_alloc(c->arena, sizeof(hlo_shape) * (size_t)n);
  if (!results) return out_of_memory(c);
  for (int i = 0; i < n; i++) results[i] = plain(c, operand(c, i));
  *out = tuple_or_single(c, n, results);
  return HLO_OK;
}

static hlo_status infer_map(infer_ctx *c, hlo_shape *out) {
  int n = c->instr->operand_count;
  if (need_arrays(c, 0, n) || check_same_dims(c, 0, n) || need_called(c, 1)) return HLO_ERR_INPUT;
  const hlo_shape *result = called_scalar_result(c, c->instr->called[0]);
  if (!hlo_shape_is_array(result) || result->rank != 0)
    return fail(c, "to_apply %s must return a scalar, not %s", c->instr->called[0]->name, hlo_shape_text(result).s);
  const hlo_shape *x = operand(c, 0);
  *out = array(result->dtype, x->rank, x->dims, x->dim_kind);
  return HLO_OK;
}

/* ---- gather and scatter ---- */

static int64_t index_vector_size(const hlo_shape *indices, int64_t index_vector_dim) {
  return index_vector_dim < indices->rank ? indices->dims[index_vector_dim] : 1;
}

static hlo_status infer_gather(infer_ctx *c, hlo_shape *out) {
  if (need_arrays(c, 0, 2) || need_integral(c, 1)) return HLO_ERR_INPUT;
  const hlo_shape *x = operand(c, 0), *indices = operand(c, 1);
  const hlo_gather_dims *g = c->instr->gather;
  const hlo_ints *sizes = &c->instr->gather_slice_sizes;
  if (!g) return fail(c, "needs gather dimension numbers");
  int64_t ivd = g->index_vector_dim;
  if (ivd < 0 || ivd > indices->rank)
    return fail(c, "index_vector_dim %lld is out of range for start_indices of rank %d", (long long)ivd, indices->rank);
  int batch_rank = indices->rank - (ivd < indices->rank ? 1 : 0);
  int out_rank = batch_rank + g->offset_dims.count;
  if (out_rank > HLO_MAX_RANK) return fail(c, "result rank %d exceeds %d", out_rank, HLO_MAX_RANK);
  if (sizes->count != x->rank)
    return fail(c, "slice_sizes has %d entries for an operand of rank %d", sizes->count, x->rank);
  if (check_dim_list(c, "offset_dims", &g->offset_dims, out_rank, true) ||
      check_dim_list(c, "collapsed_slice_dims", &g->collapsed_slice_dims, x->rank, true) ||
      check_dim_list(c, "operand_batching_dims", &g->operand_batching_dims, x->rank, true) ||
      check_dim_list(c, "start_index_map", &g->start_index_map, x->rank, false) ||
      check_dim_list(c, "start_indices_batching_dims", &g->start_indices_batching_dims, indices->rank, false))
    return HLO_ERR_INPUT;
  if (index_vector_size(indices, ivd) != g->start_index_map.count)
    return fail(c, "start_index_map has %d entries but index vectors have %lld", g->start_index_map.count,
                (long long)index_vector_size(indices, ivd));
  if (g->operand_batching_dims.count != g->start_indices_batching_dims.count)
    return fail(c, "operand_batching_dims and start_indices_batching_dims differ in length");
  if (contains(&g->start_indices_batching_dims, ivd))
    return fail(c, "index_vector_dim %lld cannot be a batching dim", (long long)ivd);
  if (g->offset_dims.count + g->collapsed_slice_dims.count + g->operand_batching_dims.count != x->rank)
    return fail(c, "offset_dims (%d), collapsed_slice_dims (%d) and operand_batching_dims (%d) must add up to the operand rank %d",
                g->offset_dims.count, g->collapsed_slice_dims.count, g->operand_batching_dims.count, x->rank);
  for (int i = 0; i < x->rank; i++) {
    int64_t size = sizes->values[i];
    bool collapsed = contains(&g->collapsed_slice_dims, i), batching = contains(&g->operand_batching_dims, i);
    if (collapsed && batching) return fail(c, "dim %d is both collapsed and a batching dim", i);
    if (size < 0 || (x->dim_kind[i] != HLO_DIM_UNBOUNDED && size > x->dims[i]))
      return fail(c, "slice_sizes[%d]=%lld does not fit the operand's %lld", i, (long long)size, (long long)x->dims[i]);
    if ((collapsed || batching) && size > 1)
      return fail(c, "slice_sizes[%d]=%lld must be 1 for a %s dim", i, (long long)size, collapsed ? "collapsed" : "batching");
    if (batching && contains(&g->start_index_map, i))
      return fail(c, "batching dim %d cannot be in start_index_map", i);
  }
  /* Offset dims take the kept slice sizes in order; the rest take the batch dims of the
   * start indices in order. */
  *out = blank(x->dtype, out_rank);
  int offset = 0, batch = 0;
  for (int i = 0; i < out_rank; i++) {
    if (contains(&g->offset_dims, i)) {
      while (contains(&g->collapsed_slice_dims, offset) || contains(&g->operand_batching_dims, offset)) offset++;
      out->dims[i] = sizes->values[offset++];
    } else {
      if (batch == ivd) batch++;
      copy_dim(out, i, indices, batch++);
    }
  }
  return HLO_OK;
}

static hlo_status infer_scatter(infer_ctx *c, hlo_shape *out) {
  int count = c->instr->operand_count, n = (count - 1) / 2;
  if (need_arrays(c, 0, count) || need_integral(c, n) || check_same_dims(c, 0, n) ||
      check_same_dims(c, n + 1, count))
    return HLO_ERR_INPUT;
  const hlo_shape *x = operand(c, 0), *indices = operand(c, n), *update = operand(c, n + 1);
  const hlo_scatter_dims *s = c->instr->scatter;
  if (!s) return fail(c, "needs scatter dimension numbers");
  for (int i = 0; i < n; i++)
    if (operand(c, n + 1 + i)->dtype != operand(c, i)->dtype)
      return fail(c, "update %d must have the element type of operand %d", i, i);
  int64_t ivd = s->index_vector_dim;
  if (ivd < 0 || ivd > indices->rank)
    return fail(c, "index_vector_dim %lld is out of range for indices of rank %d", (long long)ivd, indices->rank);
  int scatter_rank = indices->rank - (ivd < indices->rank ? 1 : 0);
  if (update->rank != scatter_rank + s->update_window_dims.count)
    return fail(c, "updates have rank %d but need %d scatter dims and %d window dims", update->rank,
                scatter_rank, s->update_window_dims.count);
  if (check_dim_list(c, "update_window_dims", &s->update_window_dims, update->rank, true) ||
      check_dim_list(c, "inserted_window_dims", &s->inserted_window_dims, x->rank, true) ||
      check_dim_list(c, "input_batching_dims", &s->input_batching_dims, x->rank, true) ||
      check_dim_list(c, "scatter_dims_to_operand_dims", &s->scatter_dims_to_operand_dims, x->rank, false) ||
      check_dim_list(c, "scatter_indices_batching_dims", &s->scatter_indices_batching_dims, indices->rank, false))
    return HLO_ERR_INPUT;
  if (index_vector_size(indices, ivd) != s->scatter_dims_to_operand_dims.count)
    return fail(c, "scatter_dims_to_operand_dims has %d entries but index vectors have %lld",
                s->scatter_dims_to_operand_dims.count, (long long)index_vector_size(indices, ivd));
  if (s->input_batching_dims.count != s->scatter_indices_batching_dims.count)
    return fail(c, "input_batching_dims and scatter_indices_batching_dims differ in length");
  if (s->update_window_dims.count + s->inserted_window_dims.count + s->input_batching_dims.count != x->rank)
    return fail(c, "update_window_dims (%d), inserted_window_dims (%d) and input_batching_dims (%d) must add up to the operand rank %d",
                s->update_window_dims.count, s->inserted_window_dims.count, s->input_batching_dims.count, x->rank);
  /* Window dims of the update must fit the operand dims that are neither inserted nor
   * batching, in order; its other dims must equal the indices' batch dims in order. */
  int operand_dim = 0, index_dim = 0;
  for (int i = 0; i < update->rank; i++) {
    if (contains(&s->update_window_dims, i)) {
      while (contains(&s->inserted_window_dims, operand_dim) || contains(&s->input_batching_dims, operand_dim))
        operand_dim++;
      if (update->dims[i] > x->dims[operand_dim] && x->dim_kind[operand_dim] != HLO_DIM_UNBOUNDED)
        return fail(c, "update window dim %d has size %lld, larger than operand dim %d (%lld)", i,
                    (long long)update->dims[i], operand_dim, (long long)x->dims[operand_dim]);
      operand_dim++;
    } else {
      if (index_dim == ivd) index_dim++;
      if (!dim_matches(update, i, indices, index_dim))
        return fail(c, "update scatter dim %d has size %lld but indices dim %d has %lld", i,
                    (long long)update->dims[i], index_dim, (long long)indices->dims[index_dim]);
      index_dim++;
    }
  }
  hlo_shape *results = hlo_arena_alloc(c->arena, sizeof(hlo_shape) * (size_t)n);
  if (!results) return out_of_memory(c);
  for (int i = 0; i < n; i++) results[i] = plain(c, operand(c, i));
  *out = tuple_or_single(c, n, results);
  return HLO_OK;
}

/* ---- tuples and control flow ---- */

static hlo_status infer_tuple(infer_ctx *c, hlo_shape *out) {
  int n = c->instr->operand_count;
  hlo_shape *elements = hlo_arena_alloc(c->arena, sizeof(hlo_shape) * (size_t)(n ? n : 1));
  if (!elements) return out_of_memory(c);
  for (int i = 0; i < n; i++) elements[i] = plain(c, operand(c, i));
  *out = make_tuple(c, n, elements);
  return HLO_OK;
}

static hlo_status infer_get_tuple_element(infer_ctx *c, hlo_shape *out) {
  const hlo_shape *t = operand(c, 0);
  if (t->dtype != HLO_TUPLE) return fail(c, "operand must be a tuple, not %s", hlo_shape_text(t).s);
  int64_t index = c->instr->index;
  if (index < 0 || index >= t->tuple_count)
    return fail(c, "index %lld is out of range for a tuple of %d", (long long)index, t->tuple_count);
  *out = plain(c, &t->tuple[index]);
  return HLO_OK;
}

static hlo_status infer_call(infer_ctx *c, hlo_shape *out) {
  if (need_called(c, 1)) return HLO_ERR_INPUT;
  *out = plain(c, &c->instr->called[0]->root->shape);
  return HLO_OK;
}

static hlo_status infer_while(infer_ctx *c, hlo_shape *out) {
  if (need_called(c, 2)) return HLO_ERR_INPUT;
  *out = plain(c, operand(c, 0));
  return HLO_OK;
}

static hlo_status infer_conditional(infer_ctx *c, hlo_shape *out) {
  int branches = c->instr->called_count;
  if (need_called(c, branches < 1 ? 1 : branches)) return HLO_ERR_INPUT;
  if (c->instr->operand_count != branches + 1)
    return fail(c, "has %d branches but %d branch operands", branches, c->instr->operand_count - 1);
  const hlo_shape *selector = operand(c, 0);
  if (!hlo_shape_is_array(selector) || selector->rank != 0 ||
      (selector->dtype != HLO_PRED && selector->dtype != HLO_S32))
    return fail(c, "the branch selector must be pred[] or s32[], not %s", hlo_shape_text(selector).s);
  if (selector->dtype == HLO_PRED && branches != 2)
    return fail(c, "a pred selector needs 2 branches, not %d", branches);
  *out = plain(c, &c->instr->called[0]->root->shape);
  return HLO_OK;
}

/* ---- normalization ---- */

static hlo_status check_feature_vector(infer_ctx *c, int i, int64_t features) {
  const hlo_shape *v = operand(c, i), *x = operand(c, 0);
  char label[32];
  operand_label(c->instr, i, label, sizeof label);
  if (v->rank != 1 || v->dims[0] != features)
    return fail(c, "%s must be a vector of %lld features", label, (long long)features);
  if (v->dtype != x->dtype) return fail(c, "%s must have the operand's element type", label);
  return HLO_OK;
}

static hlo_status infer_batch_norm(infer_ctx *c, hlo_shape *out) {
  int n = c->instr->operand_count;
  if (need_arrays(c, 0, n)) return HLO_ERR_INPUT;
  const hlo_shape *x = operand(c, 0);
  int64_t f = c->instr->index;
  if (!hlo_dtype_is_float(x->dtype)) return fail(c, "needs a floating-point operand");
  if (f < 0 || f >= x->rank) return fail(c, "feature_index %lld is out of range for rank %d", (long long)f, x->rank);
  int64_t features = x->dims[f];
  hlo_opcode op = c->instr->opcode;
  int vectors = op == HLO_OP_BATCH_NORM_GRAD ? 4 : n;
  for (int i = 1; i < vectors; i++)
    if (check_feature_vector(c, i, features)) return HLO_ERR_INPUT;
  if (op == HLO_OP_BATCH_NORM_GRAD && (!same_dims(operand(c, 4), x) || operand(c, 4)->dtype != x->dtype))
    return fail(c, "grad_output must have the operand's shape");
  if (op == HLO_OP_BATCH_NORM_INFERENCE) {
    *out = plain(c, x);
    return HLO_OK;
  }
  hlo_shape parts[3] = {plain(c, x), array(x->dtype, 1, &features, NULL), array(x->dtype, 1, &features, NULL)};
  *out = make_tuple(c, 3, parts);
  return HLO_OK;
}

/* ---- collectives ---- */

int64_t hlo_replica_group_size(const hlo_instr *instr) {
  const char *g = hlo_instr_raw_attr(instr, "replica_groups");
  if (!g) return 0;
  while (isspace((unsigned char)*g)) g++;
  if (*g == '[') { /* [groups,size]<=[devices]: the second number is a group's size */
    char *end;
    strtoll(g + 1, &end, 10);
    if (*end != ',') return 0;
    long long size = strtoll(end + 1, &end, 10);
    return *end == ']' && size > 0 ? size : 0;
  }
  if (*g != '{') return 0;
  g++;
  while (isspace((unsigned char)*g)) g++;
  if (*g != '{') return 0; /* {}: all replicas, a number the module does not say here */
  int64_t size = 0;
  for (g++; *g && *g != '}'; g++)
    if (isdigit((unsigned char)*g) && !isdigit((unsigned char)g[1])) size++;
  return *g == '}' ? size : 0;
}

static int64_t dim_attribute(const hlo_instr *instr) {
  return instr->dimensions.count > 0 ? instr->dimensions.values[0] : instr->index;
}

/* all-gather multiplies the gathered dim by the group size, reduce-scatter divides it. Where
 * the group size is not written down, the declared dim is trusted if it is a multiple. */
static hlo_status infer_gather_scatter_collective(infer_ctx *c, hlo_shape *out) {
  int n = c->instr->operand_count;
  bool gather = c->instr->opcode == HLO_OP_ALL_GATHER;
  if (need_arrays(c, 0, n)) return HLO_ERR_INPUT;
  int64_t group = hlo_replica_group_size(c->instr), dim = dim_attribute(c->instr);
  const hlo_shape *declared = &c->instr->shape;
  hlo_shape *results = hlo_arena_alloc(c->arena, sizeof(hlo_shape) * (size_t)n);
  if (!results) return out_of_memory(c);
  for (int i = 0; i < n; i++) {
    const hlo_shape *x = operand(c, i);
    if (dim < 0 || dim >= x->rank) return fail(c, "dimension %lld is out of range for rank %d", (long long)dim, x->rank);
    results[i] = plain(c, x);
    int64_t size = x->dims[dim];
    if (group > 0) {
      if (!gather && size % group)
        return fail(c, "dim %lld of size %lld does not split into %lld parts", (long long)dim, (long long)size, (long long)group);
      results[i].dims[dim] = gather ? size * group : size / group;
      continue;
    }
    const hlo_shape *want = n == 1 ? declared : declared->dtype == HLO_TUPLE && i < declared->tuple_count ? &declared->tuple[i] : NULL;
    if (!want || !hlo_shape_is_array(want) || want->rank != x->rank)
      return fail(c, "cannot infer the result without replica groups");
    int64_t big = gather ? want->dims[dim] : size, small = gather ? size : want->dims[dim];
    if (small <= 0 || big % small)
      return fail(c, "declared dim %lld of size %lld is not a multiple of %lld", (long long)dim,
                  (long long)want->dims[dim], (long long)size);
    results[i].dims[dim] = want->dims[dim];
  }
  *out = tuple_or_single(c, n, results);
  return HLO_OK;
}

/* Collectives that keep each operand's shape, and the tuple of them for several operands. */
static hlo_status infer_same_as_operands(infer_ctx *c, hlo_shape *out) {
  int n = c->instr->operand_count;
  hlo_shape *results = hlo_arena_alloc(c->arena, sizeof(hlo_shape) * (size_t)n);
  if (!results) return out_of_memory(c);
  for (int i = 0; i < n; i++) results[i] = plain(c, operand(c, i));
  *out = tuple_or_single(c, n, results);
  return HLO_OK;
}

/* ---- the rest ---- */

static hlo_status infer_reduce_precision(infer_ctx *c, hlo_shape *out) {
  if (need_array(c, 0)) return HLO_ERR_INPUT;
  if (!hlo_dtype_is_float(operand(c, 0)->dtype)) return fail(c, "needs a floating-point operand");
  if (c->instr->exponent_bits < 1 || c->instr->mantissa_bits < 0)
    return fail(c, "exponent_bits must be >= 1 and mantissa_bits >= 0");
  *out = plain(c, operand(c, 0));
  return HLO_OK;
}

static hlo_status infer_dimension_size(infer_ctx *c, hlo_shape *out) {
  if (need_array(c, 0)) return HLO_ERR_INPUT;
  const hlo_shape *x = operand(c, 0);
  int64_t dim = dim_attribute(c->instr);
  if (dim < 0 || dim >= x->rank) return fail(c, "dimension %lld is out of range for rank %d", (long long)dim, x->rank);
  if (c->instr->opcode == HLO_OP_GET_DIMENSION_SIZE) {
    *out = hlo_shape_scalar(HLO_S32);
    return HLO_OK;
  }
  if (need_scalar(c, 1) || need_integral(c, 1)) return HLO_ERR_INPUT;
  *out = plain(c, x);
  out->dim_kind[dim] = HLO_DIM_BOUNDED;
  return HLO_OK;
}

static hlo_status infer_rng(infer_ctx *c, hlo_shape *out) {
  if (need_scalar(c, 0) || need_scalar(c, 1)) return HLO_ERR_INPUT;
  const hlo_shape *to = &c->instr->shape;
  if (!hlo_shape_is_array(to)) return fail(c, "needs an array result, not %s", hlo_shape_text(to).s);
  if (operand(c, 0)->dtype != to->dtype || operand(c, 1)->dtype != to->dtype)
    return fail(c, "parameters must have the result's element type %s", hlo_dtype_name(to->dtype));
  *out = plain(c, to);
  return HLO_OK;
}

static hlo_status infer_rng_bit_generator(infer_ctx *c, hlo_shape *out) {
  const hlo_shape *to = &c->instr->shape;
  if (need_array(c, 0)) return HLO_ERR_INPUT;
  if (to->dtype == HLO_TUPLE && (to->tuple_count != 2 || !hlo_shape_compatible(&to->tuple[0], operand(c, 0))))
    return fail(c, "result must be (state, values) with the state's shape, not %s", hlo_shape_text(to).s);
  *out = hlo_shape_clone(c->arena, to);
  return HLO_OK;
}

static hlo_status infer_triangular_solve(infer_ctx *c, hlo_shape *out) {
  if (need_arrays(c, 0, 2)) return HLO_ERR_INPUT;
  const hlo_shape *a = operand(c, 0), *b = operand(c, 1);
  if (a->rank < 2 || a->rank != b->rank || a->dims[a->rank - 1] != a->dims[a->rank - 2])
    return fail(c, "a must be a batch of square matrices matching b's rank");
  *out = plain(c, b);
  return HLO_OK;
}

static hlo_status infer_cholesky(infer_ctx *c, hlo_shape *out) {
  if (need_array(c, 0)) return HLO_ERR_INPUT;
  const hlo_shape *a = operand(c, 0);
  if (a->rank < 2 || a->dims[a->rank - 1] != a->dims[a->rank - 2])
    return fail(c, "needs a batch of square matrices");
  *out = plain(c, a);
  return HLO_OK;
}

static hlo_status infer_declared(infer_ctx *c, hlo_shape *out) {
  const hlo_instr *instr = c->instr;
  if (instr->opcode == HLO_OP_CONSTANT && instr->literal &&
      !hlo_shape_compatible(&instr->literal->shape, &instr->shape))
    return fail(c, "literal of shape %s does not match the declared %s", hlo_shape_text(&instr->literal->shape).s,
                hlo_shape_text(&instr->shape).s);
  if (instr->shape.dtype == HLO_INVALID) return fail(c, "has no declared shape to take");
  *out = hlo_shape_clone(c->arena, &instr->shape);
  return HLO_OK;
}

static hlo_status dispatch(infer_ctx *c, hlo_shape *out) {
  hlo_opcode op = c->instr->opcode;
  if (op == HLO_OP_COPY) {
    *out = plain(c, operand(c, 0));
    return HLO_OK;
  }
  if (hlo_opcode_is_elementwise_unary(op)) return infer_unary(c, out);
  if (hlo_opcode_is_elementwise_binary(op)) return infer_binary(c, out);
  switch (op) {
    case HLO_OP_SELECT: return infer_select(c, out);
    case HLO_OP_CLAMP: return infer_clamp(c, out);
    case HLO_OP_CONVERT: case HLO_OP_STOCHASTIC_CONVERT: return infer_convert(c, out);
    case HLO_OP_BITCAST_CONVERT: return infer_bitcast_convert(c, out);
    case HLO_OP_BROADCAST: return infer_broadcast(c, out);
    case HLO_OP_RESHAPE: return infer_reshape(c, out);
    case HLO_OP_TRANSPOSE: return infer_transpose(c, out);
    case HLO_OP_REVERSE: return infer_reverse(c, out);
    case HLO_OP_SLICE: return infer_slice(c, out);
    case HLO_OP_DYNAMIC_SLICE: return infer_dynamic_slice(c, out);
    case HLO_OP_DYNAMIC_UPDATE_SLICE: return infer_dynamic_update_slice(c, out);
    case HLO_OP_CONCATENATE: return infer_concatenate(c, out);
    case HLO_OP_PAD: return infer_pad(c, out);
    case HLO_OP_IOTA: return infer_iota(c, out);
    case HLO_OP_DOT: return infer_dot(c, out);
    case HLO_OP_CONVOLUTION: return infer_convolution(c, out);
    case HLO_OP_REDUCE: return infer_reduce(c, out);
    case HLO_OP_REDUCE_WINDOW: return infer_reduce_window(c, out);
    case HLO_OP_SELECT_AND_SCATTER: return infer_select_and_scatter(c, out);
    case HLO_OP_SORT: return infer_sort(c, out);
    case HLO_OP_MAP: return infer_map(c, out);
    case HLO_OP_GATHER: return infer_gather(c, out);
    case HLO_OP_SCATTER: return infer_scatter(c, out);
    case HLO_OP_TUPLE: return infer_tuple(c, out);
    case HLO_OP_GET_TUPLE_ELEMENT: return infer_get_tuple_element(c, out);
    case HLO_OP_CALL: case HLO_OP_FUSION: return infer_call(c, out);
    case HLO_OP_WHILE: return infer_while(c, out);
    case HLO_OP_CONDITIONAL: return infer_conditional(c, out);
    case HLO_OP_BATCH_NORM_TRAINING: case HLO_OP_BATCH_NORM_INFERENCE: case HLO_OP_BATCH_NORM_GRAD:
      return infer_batch_norm(c, out);
    case HLO_OP_ALL_GATHER: case HLO_OP_REDUCE_SCATTER: return infer_gather_scatter_collective(c, out);
    case HLO_OP_ALL_REDUCE: case HLO_OP_ALL_TO_ALL: case HLO_OP_COLLECTIVE_PERMUTE:
    case HLO_OP_COLLECTIVE_BROADCAST:
      if (c->instr->opcode == HLO_OP_COLLECTIVE_PERMUTE && c->instr->operand_count > 1)
        return infer_declared(c, out); /* the combined form with buffers and offsets */
      return infer_same_as_operands(c, out);
    case HLO_OP_OPTIMIZATION_BARRIER: return infer_same_as_operands(c, out);
    case HLO_OP_REDUCE_PRECISION: return infer_reduce_precision(c, out);
    case HLO_OP_GET_DIMENSION_SIZE: case HLO_OP_SET_DIMENSION_SIZE: return infer_dimension_size(c, out);
    case HLO_OP_RNG: return infer_rng(c, out);
    case HLO_OP_RNG_BIT_GENERATOR: return infer_rng_bit_generator(c, out);
    case HLO_OP_TRIANGULAR_SOLVE: return infer_triangular_solve(c, out);
    case HLO_OP_CHOLESKY: return infer_cholesky(c, out);
    case HLO_OP_DOMAIN: case HLO_OP_ADD_DEPENDENCY:
      *out = plain(c, operand(c, 0));
      return HLO_OK;
    case HLO_OP_AFTER_ALL: case HLO_OP_OUTFEED: case HLO_OP_SEND_DONE:
      for (int i = 0; i < c->instr->operand_count; i++)
        if (op == HLO_OP_AFTER_ALL && operand(c, i)->dtype != HLO_TOKEN)
          return fail(c, "operand %d must be a token", i);
      *out = hlo_shape_scalar(HLO_TOKEN);
      return HLO_OK;
    case HLO_OP_PARTITION_ID: case HLO_OP_REPLICA_ID:
      *out = hlo_shape_scalar(HLO_U32);
      return HLO_OK;
    default: /* parameter, constant, custom-call, infeed, recv, async ops, fft, topk, ... */
      return infer_declared(c, out);
  }
}

hlo_status hlo_infer_shape_flags(const hlo_instr *instr, unsigned flags, hlo_shape *out,
                                 hlo_arena *arena, hlo_diag *diag) {
  infer_ctx c = {instr, flags, arena, diag};
  if (instr->opcode < 0 || instr->opcode >= HLO_OP_COUNT)
    return hlo_diag_set(diag, HLO_ERR_INPUT, "instruction %%%s has an invalid opcode", instr->name);
  if (check_arity(&c)) return HLO_ERR_INPUT;
  hlo_status status = dispatch(&c, out);
  if (!status && arena->failed) status = out_of_memory(&c); /* a tuple or clone was cut short */
  return status;
}

hlo_status hlo_infer_shape(const hlo_instr *instr, hlo_shape *out, hlo_arena *arena, hlo_diag *diag) {
  return hlo_infer_shape_flags(instr, 0, out, arena, diag);
}
