/* Kernels that change how elements are represented: convert, bitcast-convert and
 * reduce-precision. (Declared in reference.h with the elementwise group.)
 *
 * Every conversion rounds once. float -> integer truncates toward zero, saturates at the
 * target's range and maps NaN to 0, as XLA's converts do; integer -> float rounds to
 * nearest-even directly from the integer, never through a wider float, since a double
 * rounding can land on the wrong neighbour. In fp64 mode floats are stored as f64 and a
 * convert between float types keeps the f64 value: that mode computes every float in f64. */
#include <math.h>
#include <string.h>

#include "reference.h"

static hlo_status unsupported_type(rt_eval *eval, const hlo_instr *instr, hlo_dtype dtype) {
  return hlo_diag_set(eval->diag, HLO_ERR_UNSUPPORTED, "unsupported element type %s in %s %%%s",
                      hlo_dtype_name(dtype), hlo_opcode_name(instr->opcode), instr->name);
}

static hlo_status bad_shape(rt_eval *eval, const hlo_instr *instr, const char *what) {
  return hlo_diag_set(eval->diag, HLO_ERR_INPUT, "%s %%%s: %s", hlo_opcode_name(instr->opcode),
                      instr->name, what);
}

/* ---------------------------------------------------------------------------------------
 * convert */

/* An integer magnitude rounded to `digits` significant bits, ties to even. The result has
 * at most 24 significant bits, so the double holds it exactly and the caller's store into
 * f16 or bf16 only has to range-check it (overflow to infinity). */
static double round_magnitude(uint64_t magnitude, int digits) {
  if (magnitude == 0) return 0;
  int width = 64 - __builtin_clzll(magnitude);
  if (width <= digits) return (double)magnitude;
  int drop = width - digits;
  uint64_t kept = magnitude >> drop;
  uint64_t rest = magnitude & ((UINT64_C(1) << drop) - 1);
  uint64_t half = UINT64_C(1) << (drop - 1);
  if (rest > half || (rest == half && (kept & 1))) kept++;
  return ldexp((double)kept, drop);
}

/* Element i of an integer (or pred) value converted to the float value's type. */
static void int_to_float(rt_value *dst, const rt_value *src, int64_t i) {
  bool is_unsigned = !hlo_dtype_is_signed(src->shape.dtype);
  int64_t value = rt_get_i64(src, i);
  uint64_t uvalue = (uint64_t)value;
  switch (dst->shape.dtype) {
    case HLO_F64: /* C's conversions round once, to nearest */
      ((double *)dst->data)[i] = is_unsigned ? (double)uvalue : (double)value;
      return;
    case HLO_F32:
      ((float *)dst->data)[i] = is_unsigned ? (float)uvalue : (float)value;
      return;
    default: {
      int digits = dst->shape.dtype == HLO_F16 ? 11 : 8;
      bool negative = !is_unsigned && value < 0;
      double magnitude = round_magnitude(negative ? 0 - uvalue : uvalue, digits);
      rt_set_f64(dst, i, negative ? -magnitude : magnitude);
      return;
    }
  }
}

/* f32 -> bf16 on the bits: bf16 is f32's upper half, so nearest-even is "add 0x7FFF plus
 * the lowest kept bit, then truncate"; a carry correctly rounds up into the exponent and
 * on to infinity. NaN becomes the quiet NaN dtype.c uses. The general conversion is much
 * slower, and f32 <-> bf16 is the conversion mixed-precision graphs are full of. */
static uint16_t f32_to_bf16_fast(float value) {
  uint32_t bits;
  memcpy(&bits, &value, 4);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((bits >> 16 & 0x8000u) | 0x7FC0u);
  return (uint16_t)((bits + 0x7FFFu + (bits >> 16 & 1u)) >> 16);
}

RT_KERNEL(rt_kernel_convert) {
  const rt_value *x = args[0];
  hlo_dtype from = x->shape.dtype;
  if (!hlo_dtype_is_computable(from)) return unsupported_type(eval, instr, from);
  rt_value *result = rt_new_output(eval, instr, &instr->shape);
  if (!result) return eval->diag->status;
  if (result->count != x->count) {
    rt_value_release(result);
    return bad_shape(eval, instr, "the result has a different number of elements than the operand");
  }
  hlo_dtype to = result->shape.dtype;
  int64_t n = result->count;
  if (from == to) {
    memcpy(result->data, x->data, (size_t)n * hlo_dtype_size(to));
  } else if (from == HLO_F32 && to == HLO_F64) {
    const float *in = x->data;
    double *r = result->data;
    for (int64_t i = 0; i < n; i++) r[i] = in[i];
  } else if (from == HLO_F64 && to == HLO_F32) {
    const double *in = x->data;
    float *r = result->data;
    for (int64_t i = 0; i < n; i++) r[i] = (float)in[i];
  } else if (from == HLO_F32 && to == HLO_BF16) {
    const float *in = x->data;
    uint16_t *r = result->data;
    for (int64_t i = 0; i < n; i++) r[i] = f32_to_bf16_fast(in[i]);
  } else if (from == HLO_BF16 && to == HLO_F32) {
    const uint16_t *in = x->data;
    float *r = result->data;
    for (int64_t i = 0; i < n; i++) r[i] = hlo_bf16_to_f32(in[i]);
  } else if (hlo_dtype_is_float(from)) {
    /* float -> float rounds once (the double holds any f16/bf16/f32 exactly); float ->
     * integer truncates, saturates, NaN -> 0; float -> pred is x != 0 */
    for (int64_t i = 0; i < n; i++) rt_set_f64(result, i, rt_get_f64(x, i));
  } else if (hlo_dtype_is_float(to)) {
    for (int64_t i = 0; i < n; i++) int_to_float(result, x, i);
  } else {
    /* integer -> integer wraps to the target width; -> pred is x != 0 */
    for (int64_t i = 0; i < n; i++) rt_set_i64(result, i, rt_get_i64(x, i));
  }
  *out = result;
  return HLO_OK;
}

/* ---------------------------------------------------------------------------------------
 * bitcast-convert: the bytes stay, the element type changes. Between widths the shape
 * gains (narrower result) or loses (wider result) a minor dimension of the size ratio,
 * which in row-major order is the same run of bytes. The bits reinterpreted are those of
 * the declared types, so in fp64 mode a float operand is first rounded back to its
 * declared type and a float result is widened to f64 afterwards. */

RT_KERNEL(rt_kernel_bitcast_convert) {
  hlo_dtype declared_in = instr->operand_count > 0 ? instr->operands[0]->shape.dtype : args[0]->shape.dtype;
  hlo_dtype declared_out = instr->shape.dtype;
  if (!hlo_dtype_is_computable(declared_in)) return unsupported_type(eval, instr, declared_in);
  if (!hlo_dtype_is_computable(declared_out)) return unsupported_type(eval, instr, declared_out);
  rt_value *x = args[0];
  int64_t in_bytes = x->count * (int64_t)hlo_dtype_size(declared_in);
  if (in_bytes != hlo_shape_bytes(&instr->shape))
    return bad_shape(eval, instr, "operand and result sizes in bytes differ");

  rt_value *declared = rt_value_retain(x);
  if (x->shape.dtype != declared_in) { /* fp64 mode: round f64 back to the declared float */
    rt_value_release(declared);
    declared = rt_value_new_array(declared_in, x->shape.rank, x->shape.dims);
    if (!declared) return hlo_diag_set(eval->diag, HLO_ERR_INTERNAL, "out of memory in %%%s", instr->name);
    for (int64_t i = 0; i < x->count; i++) rt_set_f64(declared, i, rt_get_f64(x, i));
  }
  rt_value *bits = rt_value_new(&instr->shape);
  if (bits) memcpy(bits->data, declared->data, (size_t)in_bytes);
  rt_value_release(declared);
  rt_value *result = bits ? rt_to_storage(eval, bits, declared_out) : NULL;
  rt_value_release(bits);
  if (!result) return hlo_diag_set(eval->diag, HLO_ERR_INTERNAL, "out of memory in %%%s", instr->name);
  *out = result;
  return HLO_OK;
}

/* ---------------------------------------------------------------------------------------
 * reduce-precision: rounds each value to a float format with exponent_bits and
 * mantissa_bits, keeping the storage type. It works on the bits the way XLA does, so the
 * corner cases match: mantissa rounding is nearest-even (a carry may bump the exponent),
 * values above the format's range become infinity, values at or below its smallest
 * normal exponent flush to a signed zero (XLA does not keep subnormals here), and NaN
 * stays NaN (infinity when there are no mantissa bits to carry it). In fp64 mode the f64
 * bits are reduced, which gives the same rounded value. */

typedef struct float_format {
  int bits, mantissa_bits, exponent_bits;
} float_format;

static float_format format_of(hlo_dtype dtype) {
  switch (dtype) {
    case HLO_F16: return (float_format){16, 10, 5};
    case HLO_BF16: return (float_format){16, 7, 8};
    case HLO_F32: return (float_format){32, 23, 8};
    default: return (float_format){64, 52, 11};
  }
}

static uint64_t load_bits(const rt_value *value, int64_t i, int bits) {
  const char *p = (const char *)value->data + i * (bits / 8);
  switch (bits) {
    case 16: { uint16_t v; memcpy(&v, p, 2); return v; }
    case 32: { uint32_t v; memcpy(&v, p, 4); return v; }
    default: { uint64_t v; memcpy(&v, p, 8); return v; }
  }
}

static void store_bits(rt_value *value, int64_t i, int bits, uint64_t v) {
  char *p = (char *)value->data + i * (bits / 8);
  switch (bits) {
    case 16: { uint16_t w = (uint16_t)v; memcpy(p, &w, 2); return; }
    case 32: { uint32_t w = (uint32_t)v; memcpy(p, &w, 4); return; }
    default: memcpy(p, &v, 8); return;
  }
}

static uint64_t reduce_bits(uint64_t v, float_format src, int exponent_bits, int mantissa_bits) {
  uint64_t all = src.bits == 64 ? UINT64_MAX : (UINT64_C(1) << src.bits) - 1;
  uint64_t sign = UINT64_C(1) << (src.bits - 1);
  uint64_t exponent_mask = ((UINT64_C(1) << src.exponent_bits) - 1) << src.mantissa_bits;
  uint64_t mantissa_mask = (UINT64_C(1) << src.mantissa_bits) - 1;
  bool is_nan = (v & exponent_mask) == exponent_mask && (v & mantissa_mask) != 0;
  uint64_t original = v;
  if (mantissa_bits < src.mantissa_bits) {
    int shift = src.mantissa_bits - mantissa_bits;
    uint64_t last_kept = UINT64_C(1) << shift;
    /* 0111... below the last kept bit, plus one when that bit is set: ties go to even */
    uint64_t bias = (last_kept >> 1) - 1 + ((v >> shift) & 1);
    v = ((v + bias) & ~(last_kept - 1)) & all;
  }
  if (exponent_bits < src.exponent_bits) {
    uint64_t src_bias = (UINT64_C(1) << (src.exponent_bits - 1)) - 1;
    uint64_t dst_bias = (UINT64_C(1) << (exponent_bits - 1)) - 1;
    uint64_t exponent = v & exponent_mask;
    if (exponent > ((src_bias + dst_bias) << src.mantissa_bits)) v = (v & sign) | exponent_mask;
    else if (exponent <= ((src_bias - dst_bias) << src.mantissa_bits)) v &= sign;
  }
  if (is_nan) return mantissa_bits > 0 ? original : exponent_mask; /* +inf */
  return v;
}

RT_KERNEL(rt_kernel_reduce_precision) {
  const rt_value *x = args[0];
  hlo_dtype dtype = x->shape.dtype;
  if (!hlo_dtype_is_float(dtype) || !hlo_dtype_is_computable(dtype)) return unsupported_type(eval, instr, dtype);
  if (instr->exponent_bits < 1 || instr->mantissa_bits < 0)
    return bad_shape(eval, instr, "needs exponent_bits >= 1 and mantissa_bits >= 0");
  rt_value *result = rt_new_output(eval, instr, &instr->shape);
  if (!result) return eval->diag->status;
  if (result->count != x->count || result->shape.dtype != dtype) {
    rt_value_release(result);
    return bad_shape(eval, instr, "the result's shape does not match the operand's");
  }
  float_format src = format_of(dtype);
  /* Widths past the source's own leave that part alone; clamping keeps the shifts defined. */
  int exponent_bits = instr->exponent_bits < src.exponent_bits ? (int)instr->exponent_bits : src.exponent_bits;
  int mantissa_bits = instr->mantissa_bits < src.mantissa_bits ? (int)instr->mantissa_bits : src.mantissa_bits;
  for (int64_t i = 0; i < x->count; i++)
    store_bits(result, i, src.bits, reduce_bits(load_bits(x, i, src.bits), src, exponent_bits, mantissa_bits));
  *out = result;
  return HLO_OK;
}
