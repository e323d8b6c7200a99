/* Elementwise kernels of the reference evaluator: unary and binary arithmetic, compare,
 * select, clamp and map, with XLA's semantics for every computable element type.
 *
 * Floats are computed the way XLA's evaluator does: f64 in double, f32 in float, f16 and
 * bf16 in float and then rounded to the element type. In fp64 mode the values arrive
 * stored as f64 and are computed in double. Integers wrap in their element width and the
 * cases C leaves undefined (division by zero, INT_MIN / -1, oversized shifts) get the
 * values XLA's CPU and GPU backends produce. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "reference.h"

static hlo_status unsupported_type(rt_eval *eval, const hlo_instr *instr, hlo_dtype dtype) {
  return hlo_diag_set(eval->diag, HLO_ERR_UNSUPPORTED, "unsupported element type %s in %s %%%s",
                      hlo_dtype_name(dtype), hlo_opcode_name(instr->opcode), instr->name);
}

static hlo_status bad_operands(rt_eval *eval, const hlo_instr *instr, const char *what) {
  return hlo_diag_set(eval->diag, HLO_ERR_INPUT, "%s %%%s: %s", hlo_opcode_name(instr->opcode),
                      instr->name, what);
}

/* An operand either matches the result element for element or is a scalar that every
 * element reuses: its index step is 1 or 0. HLO proper has no implicit broadcasting, but
 * clamp and select take scalars and accepting them everywhere costs nothing. */
static bool operand_step(const rt_value *operand, int64_t count, int64_t *step) {
  if (operand->shape.dtype == HLO_TUPLE) return false;
  if (operand->count == count) *step = 1;
  else if (operand->shape.rank == 0) *step = 0;
  else return false;
  return true;
}

/* f16 and bf16 are computed in float; these move them in and out with one rounding. */
static float half_load(hlo_dtype dtype, const uint16_t *data, int64_t index) {
  return dtype == HLO_F16 ? hlo_f16_to_f32(data[index]) : hlo_bf16_to_f32(data[index]);
}

/* f32 -> bf16 on the bits: bf16 is f32's upper half, so nearest-even is "add 0x7FFF plus
 * the lowest kept bit, then truncate"; a carry correctly rounds up into the exponent and
 * on to infinity. NaN becomes the quiet NaN dtype.c uses. Much faster than the general
 * conversion, which matters on large bf16 tensors. */
static uint16_t f32_to_bf16_fast(float value) {
  uint32_t bits;
  memcpy(&bits, &value, 4);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((bits >> 16 & 0x8000u) | 0x7FC0u);
  return (uint16_t)((bits + 0x7FFFu + (bits >> 16 & 1u)) >> 16);
}

static uint16_t half_round(hlo_dtype dtype, float value) {
  return dtype == HLO_F16 ? hlo_f32_to_f16(value) : f32_to_bf16_fast(value);
}

static uint64_t width_mask(int bits) { return bits >= 64 ? UINT64_MAX : (UINT64_C(1) << bits) - 1; }

/* The raw bits of an element sign-extended from its width. */
static int64_t sign_extend(uint64_t bits, int width) {
  if (width >= 64) return (int64_t)bits;
  uint64_t sign = UINT64_C(1) << (width - 1);
  bits &= width_mask(width);
  return (int64_t)((bits ^ sign) - sign);
}

/* Arithmetic right shift without relying on how C shifts negative numbers. */
static int64_t shift_right_arithmetic(int64_t value, unsigned amount) {
  return value < 0 ? ~(int64_t)(~(uint64_t)value >> amount) : (int64_t)((uint64_t)value >> amount);
}

/* ---------------------------------------------------------------------------------------
 * Unary */

static bool float_unary_supported(hlo_opcode op) {
  switch (op) {
    case HLO_OP_ABS: case HLO_OP_NEGATE: case HLO_OP_SIGN: case HLO_OP_FLOOR: case HLO_OP_CEIL:
    case HLO_OP_ROUND_NEAREST_AFZ: case HLO_OP_ROUND_NEAREST_EVEN: case HLO_OP_SQRT:
    case HLO_OP_RSQRT: case HLO_OP_CBRT: case HLO_OP_EXP: case HLO_OP_EXPM1: case HLO_OP_LOG:
    case HLO_OP_LOG1P: case HLO_OP_LOGISTIC: case HLO_OP_SIN: case HLO_OP_COS: case HLO_OP_TAN:
    case HLO_OP_TANH: case HLO_OP_ERF: case HLO_OP_ATAN: case HLO_OP_ACOS: case HLO_OP_ASIN:
    case HLO_OP_ACOSH: case HLO_OP_ASINH: case HLO_OP_ATANH: case HLO_OP_COSH: case HLO_OP_SINH:
    case HLO_OP_REAL: case HLO_OP_IMAG: case HLO_OP_IS_FINITE:
      return true;
    default:
      return false;
  }
}

static bool int_unary_supported(hlo_opcode op) {
  switch (op) {
    case HLO_OP_ABS: case HLO_OP_NEGATE: case HLO_OP_SIGN: case HLO_OP_NOT: case HLO_OP_POPCNT:
    case HLO_OP_CLZ:
      return true;
    default:
      return false;
  }
}

/* One definition for float and double: S is the libm suffix (f or nothing). nearbyint
 * rounds ties to even in the default rounding mode, which the evaluator never changes. */
#define DEFINE_FLOAT_UNARY(name, T, S)                                                 \
  static T name(hlo_opcode op, T x) {                                                  \
    switch (op) {                                                                      \
      case HLO_OP_ABS: return fabs##S(x);                                              \
      case HLO_OP_NEGATE: return -x;                                                   \
      case HLO_OP_SIGN: return isnan(x) ? x : copysign##S(x != 0 ? (T)1 : (T)0, x);    \
      case HLO_OP_FLOOR: return floor##S(x);                                           \
      case HLO_OP_CEIL: return ceil##S(x);                                             \
      case HLO_OP_ROUND_NEAREST_AFZ: return round##S(x);                               \
      case HLO_OP_ROUND_NEAREST_EVEN: return nearbyint##S(x);                          \
      case HLO_OP_SQRT: return sqrt##S(x);                                             \
      case HLO_OP_RSQRT: return (T)1 / sqrt##S(x);                                     \
      case HLO_OP_CBRT: return cbrt##S(x);                                             \
      case HLO_OP_EXP: return exp##S(x);                                               \
      case HLO_OP_EXPM1: return expm1##S(x);                                           \
      case HLO_OP_LOG: return log##S(x);                                               \
      case HLO_OP_LOG1P: return log1p##S(x);                                           \
      case HLO_OP_LOGISTIC: return (T)1 / ((T)1 + exp##S(-x));                         \
      case HLO_OP_SIN: return sin##S(x);                                               \
      case HLO_OP_COS: return cos##S(x);                                               \
      case HLO_OP_TAN: return tan##S(x);                                               \
      case HLO_OP_TANH: return tanh##S(x);                                             \
      case HLO_OP_ERF: return erf##S(x);                                               \
      case HLO_OP_ATAN: return atan##S(x);                                             \
      case HLO_OP_ACOS: return acos##S(x);                                             \
      case HLO_OP_ASIN: return asin##S(x);                                             \
      case HLO_OP_ACOSH: return acosh##S(x);                                           \
      case HLO_OP_ASINH: return asinh##S(x);                                           \
      case HLO_OP_ATANH: return atanh##S(x);                                           \
      case HLO_OP_COSH: return cosh##S(x);                                             \
      case HLO_OP_SINH: return sinh##S(x);                                             \
      case HLO_OP_IMAG: return 0;                                                      \
      default: return x; /* real */                                                    \
    }                                                                                  \
  }

DEFINE_FLOAT_UNARY(unary_f32, float, f)
DEFINE_FLOAT_UNARY(unary_f64, double, )

/* Integer unary ops on the element's bits (sign-extended for signed types); the caller
 * stores the result, which truncates it to the element width. */
static int64_t unary_int(hlo_opcode op, int64_t x, int bits, bool is_signed) {
  uint64_t raw = (uint64_t)x & width_mask(bits);
  switch (op) {
    case HLO_OP_ABS: return is_signed && x < 0 ? (int64_t)(0 - (uint64_t)x) : x; /* wraps at INT_MIN */
    case HLO_OP_NEGATE: return (int64_t)(0 - (uint64_t)x);
    case HLO_OP_SIGN: return is_signed ? (x > 0) - (x < 0) : raw != 0;
    case HLO_OP_NOT: return (int64_t)~(uint64_t)x;
    case HLO_OP_POPCNT: return __builtin_popcountll(raw);
    case HLO_OP_CLZ: return raw == 0 ? bits : __builtin_clzll(raw) - (64 - bits);
    default: return x;
  }
}

static void unary_float(hlo_opcode op, const rt_value *x, rt_value *result) {
  int64_t n = result->count;
  if (op == HLO_OP_IS_FINITE) {
    uint8_t *r = result->data;
    for (int64_t i = 0; i < n; i++) r[i] = isfinite(rt_get_f64(x, i)) != 0;
    return;
  }
  switch (x->shape.dtype) {
    case HLO_F64: {
      const double *in = x->data;
      double *r = result->data;
      for (int64_t i = 0; i < n; i++) r[i] = unary_f64(op, in[i]);
      break;
    }
    case HLO_F32: {
      const float *in = x->data;
      float *r = result->data;
      for (int64_t i = 0; i < n; i++) r[i] = unary_f32(op, in[i]);
      break;
    }
    default: { /* f16, bf16 */
      hlo_dtype dtype = x->shape.dtype;
      const uint16_t *in = x->data;
      uint16_t *r = result->data;
      for (int64_t i = 0; i < n; i++) r[i] = half_round(dtype, unary_f32(op, half_load(dtype, in, i)));
      break;
    }
  }
}

RT_KERNEL(rt_kernel_unary) {
  const rt_value *x = args[0];
  hlo_dtype dtype = x->shape.dtype;
  hlo_opcode op = instr->opcode;
  bool supported = hlo_dtype_is_float(dtype)      ? float_unary_supported(op)
                   : hlo_dtype_is_integral(dtype) ? int_unary_supported(op)
                   : dtype == HLO_PRED            ? op == HLO_OP_NOT
                                                  : false;
  if (!supported || !hlo_dtype_is_computable(dtype)) return unsupported_type(eval, instr, dtype);
  rt_value *result = rt_new_output(eval, instr, &instr->shape);
  if (!result) return eval->diag->status;
  hlo_dtype want = op == HLO_OP_IS_FINITE ? HLO_PRED : dtype;
  if (result->count != x->count || result->shape.dtype != want) {
    rt_value_release(result);
    return bad_operands(eval, instr, "the result's shape does not match the operand's");
  }
  if (hlo_dtype_is_float(dtype)) {
    unary_float(op, x, result);
  } else if (dtype == HLO_PRED) {
    const uint8_t *in = x->data;
    uint8_t *bools = result->data;
    for (int64_t i = 0; i < result->count; i++) bools[i] = !in[i];
  } else {
    int bits = hlo_dtype_bits(dtype);
    bool is_signed = hlo_dtype_is_signed(dtype);
    for (int64_t i = 0; i < result->count; i++)
      rt_set_i64(result, i, unary_int(op, rt_get_i64(x, i), bits, is_signed));
  }
  *out = result;
  return HLO_OK;
}

/* ---------------------------------------------------------------------------------------
 * Binary */

static bool float_binary_supported(hlo_opcode op) {
  switch (op) {
    case HLO_OP_ADD: case HLO_OP_SUBTRACT: case HLO_OP_MULTIPLY: case HLO_OP_DIVIDE:
    case HLO_OP_REMAINDER: case HLO_OP_POWER: case HLO_OP_ATAN2: case HLO_OP_MAXIMUM:
    case HLO_OP_MINIMUM:
      return true;
    default:
      return false;
  }
}

static bool int_binary_supported(hlo_opcode op) {
  switch (op) {
    case HLO_OP_ADD: case HLO_OP_SUBTRACT: case HLO_OP_MULTIPLY: case HLO_OP_DIVIDE:
    case HLO_OP_REMAINDER: case HLO_OP_POWER: case HLO_OP_MAXIMUM: case HLO_OP_MINIMUM:
    case HLO_OP_AND: case HLO_OP_OR: case HLO_OP_XOR: case HLO_OP_SHIFT_LEFT:
    case HLO_OP_SHIFT_RIGHT_ARITHMETIC: case HLO_OP_SHIFT_RIGHT_LOGICAL:
      return true;
    default:
      return false;
  }
}

/* pred arithmetic is XLA's "int8 op, then != 0": add and maximum act as or, multiply and
 * minimum as and. */
static bool pred_binary_supported(hlo_opcode op) {
  switch (op) {
    case HLO_OP_ADD: case HLO_OP_SUBTRACT: case HLO_OP_MULTIPLY: case HLO_OP_MAXIMUM:
    case HLO_OP_MINIMUM: case HLO_OP_AND: case HLO_OP_OR: case HLO_OP_XOR: case HLO_OP_POWER:
      return true;
    default:
      return false;
  }
}

/* maximum and minimum propagate NaN (either operand) and order -0 below +0 (rt_max_f32 and
 * the like, runtime.h), as the compiled backends do. */
#define DEFINE_FLOAT_BINARY(name, T, S, D)                                             \
  static T name(hlo_opcode op, T a, T b) {                                             \
    switch (op) {                                                                      \
      case HLO_OP_ADD: return a + b;                                                   \
      case HLO_OP_SUBTRACT: return a - b;                                              \
      case HLO_OP_MULTIPLY: return a * b;                                              \
      case HLO_OP_DIVIDE: return a / b;                                                \
      case HLO_OP_REMAINDER: return fmod##S(a, b);                                     \
      case HLO_OP_POWER: return a == 1 || b == 0 ? (T)1 : pow##S(a, b);                \
      case HLO_OP_ATAN2: return atan2##S(a, b);                                        \
      case HLO_OP_MAXIMUM: return rt_max_##D(a, b);                                    \
      default: return rt_min_##D(a, b);                                                \
    }                                                                                  \
  }                                                                                    \
  /* The common ops get a loop each, so the switch stays out of the inner loop. */     \
  static void name##_loop(hlo_opcode op, const T *a, int64_t sa, const T *b,           \
                          int64_t sb, T *r, int64_t n) {                               \
    switch (op) {                                                                      \
      case HLO_OP_ADD: for (int64_t i = 0; i < n; i++) r[i] = a[i * sa] + b[i * sb]; break; \
      case HLO_OP_SUBTRACT: for (int64_t i = 0; i < n; i++) r[i] = a[i * sa] - b[i * sb]; break; \
      case HLO_OP_MULTIPLY: for (int64_t i = 0; i < n; i++) r[i] = a[i * sa] * b[i * sb]; break; \
      case HLO_OP_DIVIDE: for (int64_t i = 0; i < n; i++) r[i] = a[i * sa] / b[i * sb]; break; \
      case HLO_OP_MAXIMUM:                                                             \
        for (int64_t i = 0; i < n; i++) r[i] = rt_max_##D(a[i * sa], b[i * sb]);       \
        break;                                                                         \
      case HLO_OP_MINIMUM:                                                             \
        for (int64_t i = 0; i < n; i++) r[i] = rt_min_##D(a[i * sa], b[i * sb]);       \
        break;                                                                         \
      default:                                                                         \
        for (int64_t i = 0; i < n; i++) r[i] = name(op, a[i * sa], b[i * sb]);         \
        break;                                                                         \
    }                                                                                  \
  }

DEFINE_FLOAT_BINARY(binary_f32, float, f, f32)
DEFINE_FLOAT_BINARY(binary_f64, double, , f64)

/* base^exponent by squaring, wrapping in 64 bits; the caller truncates to the width. */
static uint64_t integer_power(uint64_t base, uint64_t exponent) {
  uint64_t result = 1;
  while (exponent) {
    if (exponent & 1) result *= base;
    base *= base;
    exponent >>= 1;
  }
  return result;
}

/* One integer binary op. a and b are the elements as rt_get_i64 reads them: sign-extended
 * for signed types, zero-extended for unsigned ones. The result's low `bits` bits count. */
static int64_t binary_int(hlo_opcode op, int64_t a, int64_t b, int bits, bool is_signed) {
  uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
  int64_t int_min = bits >= 64 ? INT64_MIN : -(INT64_C(1) << (bits - 1));
  switch (op) {
    case HLO_OP_ADD: return (int64_t)(ua + ub);
    case HLO_OP_SUBTRACT: return (int64_t)(ua - ub);
    case HLO_OP_MULTIPLY: return (int64_t)(ua * ub);
    case HLO_OP_DIVIDE:
      if (b == 0) return -1; /* all ones, signed or not */
      if (!is_signed) return (int64_t)(ua / ub);
      if (a == int_min && b == -1) return int_min;
      return a / b;
    case HLO_OP_REMAINDER:
      if (b == 0) return a;
      if (!is_signed) return (int64_t)(ua % ub);
      if (a == int_min && b == -1) return 0;
      return a % b;
    case HLO_OP_POWER:
      /* XLA: 1^x = x^0 = 1; a negative exponent gives 0 for every other base, -1 included */
      if (a == 1 || b == 0) return 1;
      if (is_signed && b < 0) return 0;
      return (int64_t)integer_power(ua, ub);
    case HLO_OP_MAXIMUM: return is_signed ? (a >= b ? a : b) : (ua >= ub ? a : b);
    case HLO_OP_MINIMUM: return is_signed ? (a <= b ? a : b) : (ua <= ub ? a : b);
    case HLO_OP_AND: return (int64_t)(ua & ub);
    case HLO_OP_OR: return (int64_t)(ua | ub);
    case HLO_OP_XOR: return (int64_t)(ua ^ ub);
    default: break;
  }
  /* Shifts: the amount is read as unsigned in the element width, so a negative amount is
   * a huge one; amounts of the width or more shift everything out. */
  uint64_t amount = ub & width_mask(bits);
  bool out_of_range = amount >= (uint64_t)bits;
  switch (op) {
    case HLO_OP_SHIFT_LEFT: return out_of_range ? 0 : (int64_t)(ua << amount);
    case HLO_OP_SHIFT_RIGHT_LOGICAL:
      return out_of_range ? 0 : (int64_t)((ua & width_mask(bits)) >> amount);
    default: { /* shift-right-arithmetic reads the operand as signed, whatever its type */
      int64_t value = sign_extend(ua, bits);
      if (out_of_range) return value < 0 ? -1 : 0;
      return shift_right_arithmetic(value, (unsigned)amount);
    }
  }
}

static void binary_float(hlo_opcode op, const rt_value *a, int64_t sa, const rt_value *b,
                         int64_t sb, rt_value *result) {
  int64_t n = result->count;
  hlo_dtype dtype = result->shape.dtype;
  if (dtype == HLO_F32) {
    binary_f32_loop(op, a->data, sa, b->data, sb, result->data, n);
  } else if (dtype == HLO_F64) {
    binary_f64_loop(op, a->data, sa, b->data, sb, result->data, n);
  } else {
    const uint16_t *x = a->data, *y = b->data;
    uint16_t *r = result->data;
    for (int64_t i = 0; i < n; i++)
      r[i] = half_round(dtype, binary_f32(op, half_load(dtype, x, i * sa), half_load(dtype, y, i * sb)));
  }
}

/* The ops that work on raw bits whatever the element type: and, or, xor, and on pred (whose
 * elements are 0 or 1) add and maximum as or, multiply and minimum as and. HLO_OP_COUNT for
 * the others. They get plain loops: pred masks over activations are as large as the
 * activations themselves. */
static hlo_opcode bitwise_op(hlo_opcode op, hlo_dtype dtype) {
  if (op == HLO_OP_AND || op == HLO_OP_OR || op == HLO_OP_XOR) return op;
  if (dtype != HLO_PRED) return HLO_OP_COUNT;
  if (op == HLO_OP_ADD || op == HLO_OP_MAXIMUM) return HLO_OP_OR;
  if (op == HLO_OP_MULTIPLY || op == HLO_OP_MINIMUM) return HLO_OP_AND;
  return HLO_OP_COUNT;
}

static void binary_bitwise(hlo_opcode op, const rt_value *a, int64_t sa, const rt_value *b, int64_t sb,
                           rt_value *result) {
  int64_t n = result->count;
#define BITWISE(T)                                                                     \
  do {                                                                                 \
    const T *x = a->data, *y = b->data;                                                \
    T *r = result->data;                                                               \
    if (op == HLO_OP_AND) for (int64_t i = 0; i < n; i++) r[i] = x[i * sa] & y[i * sb]; \
    else if (op == HLO_OP_OR) for (int64_t i = 0; i < n; i++) r[i] = x[i * sa] | y[i * sb]; \
    else for (int64_t i = 0; i < n; i++) r[i] = x[i * sa] ^ y[i * sb];                 \
  } while (0)
  switch (hlo_dtype_size(result->shape.dtype)) {
    case 1: BITWISE(uint8_t); break;
    case 2: BITWISE(uint16_t); break;
    case 4: BITWISE(uint32_t); break;
    default: BITWISE(uint64_t); break;
  }
#undef BITWISE
}

RT_KERNEL(rt_kernel_binary) {
  const rt_value *a = args[0], *b = args[1];
  hlo_dtype dtype = a->shape.dtype;
  hlo_opcode op = instr->opcode;
  if (b->shape.dtype != dtype) return bad_operands(eval, instr, "operands have different element types");
  bool supported = hlo_dtype_is_float(dtype)      ? float_binary_supported(op)
                   : hlo_dtype_is_integral(dtype) ? int_binary_supported(op)
                   : dtype == HLO_PRED            ? pred_binary_supported(op)
                                                  : false;
  if (!supported || !hlo_dtype_is_computable(dtype)) return unsupported_type(eval, instr, dtype);
  rt_value *result = rt_new_output(eval, instr, &instr->shape);
  if (!result) return eval->diag->status;
  int64_t sa, sb;
  if (result->shape.dtype != dtype || !operand_step(a, result->count, &sa) ||
      !operand_step(b, result->count, &sb)) {
    rt_value_release(result);
    return bad_operands(eval, instr, "operand shapes do not match the result");
  }
  if (hlo_dtype_is_float(dtype)) {
    binary_float(op, a, sa, b, sb, result);
  } else if (bitwise_op(op, dtype) != HLO_OP_COUNT) {
    binary_bitwise(bitwise_op(op, dtype), a, sa, b, sb, result);
  } else {
    /* pred computes as u8 and stores x != 0 */
    int bits = dtype == HLO_PRED ? 8 : hlo_dtype_bits(dtype);
    bool is_signed = hlo_dtype_is_signed(dtype);
    for (int64_t i = 0; i < result->count; i++)
      rt_set_i64(result, i, binary_int(op, rt_get_i64(a, i * sa), rt_get_i64(b, i * sb), bits, is_signed));
  }
  *out = result;
  return HLO_OK;
}

/* ---------------------------------------------------------------------------------------
 * Compare */

#define COMPARE(dir, a, b)                                                             \
  ((dir) == HLO_DIR_EQ   ? (a) == (b)                                                  \
   : (dir) == HLO_DIR_NE ? (a) != (b)                                                  \
   : (dir) == HLO_DIR_LT ? (a) < (b)                                                   \
   : (dir) == HLO_DIR_LE ? (a) <= (b)                                                  \
   : (dir) == HLO_DIR_GT ? (a) > (b)                                                   \
                         : (a) >= (b))

/* Floats in XLA's total order, -NaN < -Inf < ... < -0 < +0 < ... < +Inf < +NaN: flipping the
 * magnitude bits of negative numbers makes the bit patterns compare as signed integers. Read
 * from the storage bits so NaN signs and payloads keep their places. */
int64_t rt_total_order_key(const rt_value *value, int64_t index) {
  const void *data = value->data;
  switch (value->shape.dtype) {
    case HLO_F64: {
      int64_t bits;
      memcpy(&bits, (const char *)data + index * 8, 8);
      return bits < 0 ? bits ^ INT64_MAX : bits;
    }
    case HLO_F32: {
      int32_t bits;
      memcpy(&bits, (const char *)data + index * 4, 4);
      return bits < 0 ? bits ^ INT32_MAX : bits;
    }
    case HLO_F16: case HLO_BF16: {
      int16_t bits;
      memcpy(&bits, (const char *)data + index * 2, 2);
      return bits < 0 ? bits ^ INT16_MAX : bits;
    }
    default: return rt_get_i64(value, index);
  }
}

typedef enum { ORDER_FLOAT, ORDER_TOTAL, ORDER_SIGNED, ORDER_UNSIGNED } compare_order;

/* f32 compares are as common as the activations they mask: one loop per direction. */
static void compare_f32(hlo_direction dir, const float *x, int64_t sx, const float *y, int64_t sy,
                        uint8_t *r, int64_t n) {
#define LOOP(expr) for (int64_t i = 0; i < n; i++) { float u = x[i * sx], v = y[i * sy]; r[i] = (expr); }
  switch (dir) {
    case HLO_DIR_EQ: LOOP(u == v); break;
    case HLO_DIR_NE: LOOP(u != v); break;
    case HLO_DIR_LT: LOOP(u < v); break;
    case HLO_DIR_LE: LOOP(u <= v); break;
    case HLO_DIR_GT: LOOP(u > v); break;
    default: LOOP(u >= v); break;
  }
#undef LOOP
}

/* The comparison type when the text gave none (or one that does not fit the operands)
 * follows the element type; pred compares as unsigned. */
static compare_order order_for(hlo_dtype dtype, hlo_compare_type type) {
  if (hlo_dtype_is_float(dtype)) return type == HLO_CMP_TOTALORDER ? ORDER_TOTAL : ORDER_FLOAT;
  if (type == HLO_CMP_SIGNED) return ORDER_SIGNED;
  if (type == HLO_CMP_UNSIGNED) return ORDER_UNSIGNED;
  return hlo_dtype_is_signed(dtype) ? ORDER_SIGNED : ORDER_UNSIGNED;
}

RT_KERNEL(rt_kernel_compare) {
  const rt_value *a = args[0], *b = args[1];
  hlo_dtype dtype = a->shape.dtype;
  hlo_direction dir = instr->direction;
  if (b->shape.dtype != dtype) return bad_operands(eval, instr, "operands have different element types");
  if (!hlo_dtype_is_computable(dtype)) return unsupported_type(eval, instr, dtype);
  if (dir < HLO_DIR_EQ || dir > HLO_DIR_GE) return bad_operands(eval, instr, "no comparison direction");
  rt_value *result = rt_new_output(eval, instr, &instr->shape);
  if (!result) return eval->diag->status;
  int64_t sa, sb, n = result->count;
  if (result->shape.dtype != HLO_PRED || !operand_step(a, n, &sa) || !operand_step(b, n, &sb)) {
    rt_value_release(result);
    return bad_operands(eval, instr, "operand shapes do not match the pred result");
  }
  uint8_t *r = result->data;
  int bits = dtype == HLO_PRED ? 8 : hlo_dtype_bits(dtype);
  switch (order_for(dtype, instr->compare_type)) {
    case ORDER_FLOAT:
      if (dtype == HLO_F32) {
        compare_f32(dir, a->data, sa, b->data, sb, r, n);
      } else { /* f16 and bf16 widen exactly, f64 is f64 */
        for (int64_t i = 0; i < n; i++) {
          double x = rt_get_f64(a, i * sa), y = rt_get_f64(b, i * sb);
          r[i] = COMPARE(dir, x, y);
        }
      }
      break;
    case ORDER_TOTAL:
      for (int64_t i = 0; i < n; i++) {
        int64_t x = rt_total_order_key(a, i * sa), y = rt_total_order_key(b, i * sb);
        r[i] = COMPARE(dir, x, y);
      }
      break;
    case ORDER_SIGNED:
      for (int64_t i = 0; i < n; i++) {
        int64_t x = sign_extend((uint64_t)rt_get_i64(a, i * sa), bits);
        int64_t y = sign_extend((uint64_t)rt_get_i64(b, i * sb), bits);
        r[i] = COMPARE(dir, x, y);
      }
      break;
    case ORDER_UNSIGNED:
      for (int64_t i = 0; i < n; i++) {
        uint64_t x = (uint64_t)rt_get_i64(a, i * sa) & width_mask(bits);
        uint64_t y = (uint64_t)rt_get_i64(b, i * sb) & width_mask(bits);
        r[i] = COMPARE(dir, x, y);
      }
      break;
  }
  *out = result;
  return HLO_OK;
}

/* ---------------------------------------------------------------------------------------
 * Select, clamp */

/* Copies element i of the result from src[i * step], for an element size of 1..8 bytes. */
static void copy_element_sized(void *dst, int64_t di, const void *src, int64_t si, size_t size) {
  switch (size) {
    case 1: ((uint8_t *)dst)[di] = ((const uint8_t *)src)[si]; break;
    case 2: ((uint16_t *)dst)[di] = ((const uint16_t *)src)[si]; break;
    case 4: ((uint32_t *)dst)[di] = ((const uint32_t *)src)[si]; break;
    default: ((uint64_t *)dst)[di] = ((const uint64_t *)src)[si]; break;
  }
}

RT_KERNEL(rt_kernel_select) {
  const rt_value *pred = args[0], *on_true = args[1], *on_false = args[2];
  rt_value *result = rt_new_output(eval, instr, &instr->shape);
  if (!result) return eval->diag->status;
  int64_t sp, st, sf, n = result->count;
  hlo_dtype dtype = result->shape.dtype;
  if (pred->shape.dtype != HLO_PRED || on_true->shape.dtype != dtype ||
      on_false->shape.dtype != dtype || !operand_step(pred, n, &sp) ||
      !operand_step(on_true, n, &st) || !operand_step(on_false, n, &sf)) {
    rt_value_release(result);
    return bad_operands(eval, instr, "operands do not match the result (pred, then two arrays of its type)");
  }
  const uint8_t *p = pred->data;
  size_t size = hlo_dtype_size(dtype);
  if (size == 4 && sp == 1 && st == 1 && sf == 1) { /* the common case, f32 or s32 */
    const uint32_t *t = on_true->data, *f = on_false->data;
    uint32_t *r = result->data;
    for (int64_t i = 0; i < n; i++) r[i] = p[i] ? t[i] : f[i];
  } else if (size == 8 && sp == 1 && st == 1 && sf == 1) { /* f64 in fp64 mode */
    const uint64_t *t = on_true->data, *f = on_false->data;
    uint64_t *r = result->data;
    for (int64_t i = 0; i < n; i++) r[i] = p[i] ? t[i] : f[i];
  } else {
    for (int64_t i = 0; i < n; i++) {
      if (p[i * sp]) copy_element_sized(result->data, i, on_true->data, i * st, size);
      else copy_element_sized(result->data, i, on_false->data, i * sf, size);
    }
  }
  *out = result;
  return HLO_OK;
}

/* clamp(lo, x, hi) = min(max(x, lo), hi), with NaN in any operand propagated (lo first)
 * and -0 ordered below +0, like maximum and minimum. Returns which operand the result comes
 * from: 0 lo, 1 x, 2 hi. */
static int clamp_pick_float(double lo, double x, double hi) {
  if (isnan(lo)) return 0;
  if (isnan(x)) return 1;
  if (isnan(hi)) return 2;
  int pick = x > lo || (x == lo && !signbit(x)) ? 1 : 0;
  double m = pick ? x : lo;
  return m < hi || (m == hi && signbit(m)) ? pick : 2;
}

static int clamp_pick_signed(int64_t lo, int64_t x, int64_t hi) {
  int pick = x < lo ? 0 : 1;
  int64_t m = pick ? x : lo;
  return m < hi ? pick : 2;
}

static int clamp_pick_unsigned(uint64_t lo, uint64_t x, uint64_t hi) {
  int pick = x < lo ? 0 : 1;
  uint64_t m = pick ? x : lo;
  return m < hi ? pick : 2;
}

RT_KERNEL(rt_kernel_clamp) {
  const rt_value *ops[3] = {args[0], args[1], args[2]};
  rt_value *result = rt_new_output(eval, instr, &instr->shape);
  if (!result) return eval->diag->status;
  int64_t steps[3], n = result->count;
  hlo_dtype dtype = result->shape.dtype;
  bool ok = true;
  for (int k = 0; k < 3; k++) ok = ok && ops[k]->shape.dtype == dtype && operand_step(ops[k], n, &steps[k]);
  if (!ok) {
    rt_value_release(result);
    return bad_operands(eval, instr, "operands do not match the result (min and max may be scalars)");
  }
  if (dtype == HLO_F32) { /* min(max(x, lo), hi) with maximum's and minimum's NaN and -0 rules */
    const float *lo = ops[0]->data, *x = ops[1]->data, *hi = ops[2]->data;
    float *r = result->data;
    for (int64_t i = 0; i < n; i++)
      r[i] = rt_min_f32(rt_max_f32(x[i * steps[1]], lo[i * steps[0]]), hi[i * steps[2]]);
  } else if (dtype == HLO_F64) {
    const double *lo = ops[0]->data, *x = ops[1]->data, *hi = ops[2]->data;
    double *r = result->data;
    for (int64_t i = 0; i < n; i++)
      r[i] = rt_min_f64(rt_max_f64(x[i * steps[1]], lo[i * steps[0]]), hi[i * steps[2]]);
  } else {
    size_t size = hlo_dtype_size(dtype);
    bool is_float = hlo_dtype_is_float(dtype), is_signed = hlo_dtype_is_signed(dtype);
    for (int64_t i = 0; i < n; i++) {
      int64_t i0 = i * steps[0], i1 = i * steps[1], i2 = i * steps[2];
      int pick = is_float ? clamp_pick_float(rt_get_f64(ops[0], i0), rt_get_f64(ops[1], i1), rt_get_f64(ops[2], i2))
                 : is_signed ? clamp_pick_signed(rt_get_i64(ops[0], i0), rt_get_i64(ops[1], i1), rt_get_i64(ops[2], i2))
                             : clamp_pick_unsigned(rt_get_u64(ops[0], i0), rt_get_u64(ops[1], i1), rt_get_u64(ops[2], i2));
      int64_t from = pick == 0 ? i0 : pick == 1 ? i1 : i2;
      copy_element_sized(result->data, i, ops[pick]->data, from, size);
    }
  }
  *out = result;
  return HLO_OK;
}

/* ---------------------------------------------------------------------------------------
 * Map: the computation runs once per element on scalars. Slow, and rare enough. */

RT_KERNEL(rt_kernel_map) {
  if (instr->called_count < 1) return bad_operands(eval, instr, "no to_apply computation");
  const hlo_comp *comp = instr->called[0];
  int count = instr->operand_count;
  rt_value *result = rt_new_output(eval, instr, &instr->shape);
  if (!result) return eval->diag->status;
  int64_t *steps = hlo_calloc((size_t)count + 1, sizeof *steps);
  rt_value **scalars = hlo_calloc((size_t)count + 1, sizeof *scalars);
  hlo_status status = HLO_OK;
  if (!steps || !scalars) status = hlo_diag_set(eval->diag, HLO_ERR_INTERNAL, "out of memory in map %%%s", instr->name);
  for (int k = 0; status == HLO_OK && k < count; k++)
    if (!hlo_dtype_is_computable(args[k]->shape.dtype) || !operand_step(args[k], result->count, &steps[k]))
      status = bad_operands(eval, instr, "operand shapes do not match the result");
  for (int64_t i = 0; status == HLO_OK && i < result->count; i++) {
    for (int k = 0; k < count && status == HLO_OK; k++) {
      scalars[k] = rt_value_new_array(args[k]->shape.dtype, 0, NULL);
      if (!scalars[k]) status = hlo_diag_set(eval->diag, HLO_ERR_INTERNAL, "out of memory in map %%%s", instr->name);
      else rt_copy_element(scalars[k], 0, args[k], i * steps[k]);
    }
    rt_value *element = NULL;
    if (status == HLO_OK) status = rt_eval_comp(eval, comp, scalars, count, &element);
    if (status == HLO_OK && (element->shape.dtype != result->shape.dtype || element->count != 1))
      status = bad_operands(eval, instr, "to_apply must return a scalar of the result's type");
    if (status == HLO_OK) rt_copy_element(result, i, element, 0);
    rt_value_release(element);
    for (int k = 0; k < count; k++) {
      rt_value_release(scalars[k]);
      scalars[k] = NULL;
    }
  }
  free(steps);
  free(scalars);
  if (status != HLO_OK) {
    rt_value_release(result);
    return status;
  }
  *out = result;
  return HLO_OK;
}
