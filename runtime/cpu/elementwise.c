/* The cpu backend's elementwise kernels: unary and binary arithmetic, compare, select and
 * convert as typed loops. The element type and the opcode are switched on once per chunk,
 * never per element; chunks of large arrays run in parallel. f16 and bf16 compute in f32
 * and round to nearest even on store, as the reference does, so results agree bit for bit
 * with it wherever libm agrees with itself. Ops and types left out here (integer division,
 * shifts, total-order compares, ...) keep the reference kernel. */
#include <math.h>
#include <string.h>

#include "kernel_internal.h"
#include "erf_f32_internal.h"
#include "exp_f32_internal.h"
#include "tanh_f32_internal.h"
#include "runtime/runtime.h"

/* Operands of elementwise ops in this backend always match the result in shape, except that
 * select may take a scalar predicate: step 0 or 1. */
typedef struct ew_job {
  hlo_opcode op;
  hlo_direction dir;
  hlo_dtype in_type, out_type;
  const void *a, *b, *c;
  int64_t sa, sb, sc;
  void *r;
} ew_job;

static bool is_half(hlo_dtype t) { return t == HLO_F16 || t == HLO_BF16; }

/* ---- unary ---- */

bool rt_cpu_float_unary(hlo_opcode op) {
  switch (op) {
    case HLO_OP_ABS: case HLO_OP_NEGATE: case HLO_OP_SQRT: case HLO_OP_RSQRT: case HLO_OP_EXP:
    case HLO_OP_LOG: case HLO_OP_TANH: case HLO_OP_LOGISTIC: case HLO_OP_FLOOR: case HLO_OP_CEIL:
    case HLO_OP_SIN: case HLO_OP_COS: case HLO_OP_EXPM1: case HLO_OP_LOG1P:
    case HLO_OP_ROUND_NEAREST_EVEN: case HLO_OP_ROUND_NEAREST_AFZ: case HLO_OP_SIGN: case HLO_OP_ERF:
      return true;
    default:
      return false;
  }
}

/* The same formulas as the reference kernels, so both round alike, but for f32 erf, exp and
 * tanh, which vectorize: erf a rational function (erf_f32_internal.h, within 7 ulps of
 * erff), exp a reduction and a polynomial (exp_f32_internal.h, within 1 ulp), tanh a series
 * or exp (tanh_f32_internal.h, within 2 ulps). */
#define ERFf(x) rt_erf_f32(x)
#define ERF(x) erf(x)
#define EXPf(x) rt_exp_f32(x)
#define EXP(x) exp(x)
#define TANHf(x) rt_tanh_f32(x)
#define TANH(x) tanh(x)
#define UNARY_CASES(T, S, LOAD, STORE)                                                         \
  case HLO_OP_ABS: LOOP(fabs##S(x)); break;                                                  \
  case HLO_OP_NEGATE: LOOP(-x); break;                                                       \
  case HLO_OP_SQRT: LOOP(sqrt##S(x)); break;                                                 \
  case HLO_OP_RSQRT: LOOP((T)1 / sqrt##S(x)); break;                                         \
  case HLO_OP_EXP: LOOP(EXP##S(x)); break;                                                   \
  case HLO_OP_LOG: LOOP(log##S(x)); break;                                                   \
  case HLO_OP_TANH: LOOP(TANH##S(x)); break;                                                 \
  case HLO_OP_LOGISTIC: LOOP((T)1 / ((T)1 + EXP##S(-x))); break;                             \
  case HLO_OP_FLOOR: LOOP(floor##S(x)); break;                                               \
  case HLO_OP_CEIL: LOOP(ceil##S(x)); break;                                                 \
  case HLO_OP_SIN: LOOP(sin##S(x)); break;                                                   \
  case HLO_OP_COS: LOOP(cos##S(x)); break;                                                   \
  case HLO_OP_EXPM1: LOOP(expm1##S(x)); break;                                               \
  case HLO_OP_LOG1P: LOOP(log1p##S(x)); break;                                               \
  case HLO_OP_ERF: LOOP(ERF##S(x)); break; /* GELU's, in every transformer layer */           \
  case HLO_OP_ROUND_NEAREST_EVEN: LOOP(nearbyint##S(x)); break;                              \
  case HLO_OP_ROUND_NEAREST_AFZ: LOOP(round##S(x)); break;                                   \
  case HLO_OP_SIGN: LOOP(isnan(x) ? x : copysign##S(x != 0 ? (T)1 : (T)0, x)); break;       \
  default: break;

static void unary_chunk(void *ctx, int64_t begin, int64_t end) {
  const ew_job *j = ctx;
  switch (j->in_type) {
    case HLO_F32: {
      const float *a = j->a;
      float *r = j->r;
#define LOOP(expr) for (int64_t i = begin; i < end; i++) { float x = a[i]; r[i] = (expr); }
      switch (j->op) { UNARY_CASES(float, f, , ) }
#undef LOOP
      break;
    }
    case HLO_F64: {
      const double *a = j->a;
      double *r = j->r;
#define LOOP(expr) for (int64_t i = begin; i < end; i++) { double x = a[i]; r[i] = (expr); }
      switch (j->op) { UNARY_CASES(double, , , ) }
#undef LOOP
      break;
    }
    case HLO_F16: case HLO_BF16: {
      const uint16_t *a = j->a;
      uint16_t *r = j->r;
      hlo_dtype t = j->in_type;
#define LOOP(expr) \
  for (int64_t i = begin; i < end; i++) { float x = rt_cpu_half_load(t, a[i]); r[i] = rt_cpu_half_store(t, (expr)); }
      switch (j->op) { UNARY_CASES(float, f, , ) }
#undef LOOP
      break;
    }
    case HLO_S32: case HLO_S64: {
      /* negate and abs wrap at the most negative value: computed in unsigned */
#define INT_UNARY(T, U)                                                                      \
  do {                                                                                       \
    const T *a = j->a;                                                                       \
    T *r = j->r;                                                                             \
    if (j->op == HLO_OP_NEGATE) for (int64_t i = begin; i < end; i++) r[i] = (T)(0 - (U)a[i]); \
    else if (j->op == HLO_OP_ABS) for (int64_t i = begin; i < end; i++) r[i] = a[i] < 0 ? (T)(0 - (U)a[i]) : a[i]; \
    else for (int64_t i = begin; i < end; i++) r[i] = (T)~(U)a[i];                           \
  } while (0)
      if (j->in_type == HLO_S32) INT_UNARY(int32_t, uint32_t);
      else INT_UNARY(int64_t, uint64_t);
#undef INT_UNARY
      break;
    }
    default: { /* pred not */
      const uint8_t *a = j->a;
      uint8_t *r = j->r;
      for (int64_t i = begin; i < end; i++) r[i] = !a[i];
      break;
    }
  }
}

static bool unary_kernel(const hlo_instr *instr, const rt_value *const *in, rt_value *out) {
  ew_job j = {.op = instr->opcode, .in_type = in[0]->shape.dtype, .a = in[0]->data, .r = out->data};
  rt_parallel_for(out->count, RT_CPU_GRAIN / 4, unary_chunk, &j);
  return true;
}

/* ---- binary ---- */


#define FLOAT_BINARY_CASES(T, PRE)                                                           \
  case HLO_OP_ADD: LOOP(x + y); break;                                                       \
  case HLO_OP_SUBTRACT: LOOP(x - y); break;                                                  \
  case HLO_OP_MULTIPLY: LOOP(x * y); break;                                                  \
  case HLO_OP_DIVIDE: LOOP(x / y); break;                                                    \
  case HLO_OP_MAXIMUM: LOOP(rt_max_##PRE(x, y)); break;                                         \
  case HLO_OP_MINIMUM: LOOP(rt_min_##PRE(x, y)); break;                                         \
  default: break;

static void binary_chunk(void *ctx, int64_t begin, int64_t end) {
  const ew_job *j = ctx;
  hlo_dtype t = j->in_type;
  switch (t) {
    case HLO_F32: {
      const float *a = j->a, *b = j->b;
      float *r = j->r;
#define LOOP(expr) for (int64_t i = begin; i < end; i++) { float x = a[i], y = b[i]; r[i] = (expr); }
      switch (j->op) { FLOAT_BINARY_CASES(float, f32) }
#undef LOOP
      return;
    }
    case HLO_F64: {
      const double *a = j->a, *b = j->b;
      double *r = j->r;
#define LOOP(expr) for (int64_t i = begin; i < end; i++) { double x = a[i], y = b[i]; r[i] = (expr); }
      switch (j->op) { FLOAT_BINARY_CASES(double, f64) }
#undef LOOP
      return;
    }
    case HLO_F16: case HLO_BF16: {
      const uint16_t *a = j->a, *b = j->b;
      uint16_t *r = j->r;
#define LOOP(expr)                                                                           \
  for (int64_t i = begin; i < end; i++) {                                                    \
    float x = rt_cpu_half_load(t, a[i]), y = rt_cpu_half_load(t, b[i]);                      \
    r[i] = rt_cpu_half_store(t, (expr));                                                     \
  }
      switch (j->op) { FLOAT_BINARY_CASES(float, f32) }
#undef LOOP
      return;
    }
    default: break;
  }
  /* Integers and pred: arithmetic in the unsigned type of the same width wraps without
   * undefined behaviour; max and min compare in the element's own signedness. pred add and
   * maximum are or, multiply and minimum are and (pred never reaches here with others). */
  hlo_opcode op = j->op;
  if (t == HLO_PRED) {
    if (op == HLO_OP_ADD || op == HLO_OP_MAXIMUM) op = HLO_OP_OR;
    if (op == HLO_OP_MULTIPLY || op == HLO_OP_MINIMUM) op = HLO_OP_AND;
  }
#define INT_BINARY(T, U)                                                                     \
  do {                                                                                       \
    typedef T elem_t;                                                                        \
    const T *a = j->a, *b = j->b;                                                            \
    T *r = j->r;                                                                             \
    switch (op) {                                                                            \
      case HLO_OP_ADD: LOOP((T)((U)x + (U)y)); break;                                        \
      case HLO_OP_SUBTRACT: LOOP((T)((U)x - (U)y)); break;                                   \
      case HLO_OP_MULTIPLY: LOOP((T)((U)x * (U)y)); break;                                   \
      case HLO_OP_MAXIMUM: LOOP(x >= y ? x : y); break;                                      \
      case HLO_OP_MINIMUM: LOOP(x <= y ? x : y); break;                                      \
      case HLO_OP_AND: LOOP((T)((U)x & (U)y)); break;                                        \
      case HLO_OP_OR: LOOP((T)((U)x | (U)y)); break;                                         \
      case HLO_OP_XOR: LOOP((T)((U)x ^ (U)y)); break;                                        \
      default: break;                                                                        \
    }                                                                                        \
  } while (0)
#define LOOP(expr) for (int64_t i = begin; i < end; i++) { elem_t x = a[i], y = b[i]; r[i] = (expr); }
  switch (t) {
    case HLO_PRED: case HLO_U8: INT_BINARY(uint8_t, uint8_t); break;
    case HLO_S8: INT_BINARY(int8_t, uint8_t); break;
    case HLO_S16: INT_BINARY(int16_t, uint16_t); break;
    case HLO_U16: INT_BINARY(uint16_t, uint16_t); break;
    case HLO_S32: INT_BINARY(int32_t, uint32_t); break;
    case HLO_U32: INT_BINARY(uint32_t, uint32_t); break;
    case HLO_S64: INT_BINARY(int64_t, uint64_t); break;
    case HLO_U64: INT_BINARY(uint64_t, uint64_t); break;
    default: break;
  }
#undef LOOP
#undef INT_BINARY
}

static bool binary_kernel(const hlo_instr *instr, const rt_value *const *in, rt_value *out) {
  ew_job j = {.op = instr->opcode, .in_type = in[0]->shape.dtype, .a = in[0]->data, .b = in[1]->data,
              .r = out->data};
  rt_parallel_for(out->count, RT_CPU_GRAIN, binary_chunk, &j);
  return true;
}

/* ---- compare ---- */

#define COMPARE_LOOP(T, LOAD)                                                                \
  do {                                                                                       \
    const T *a = j->a, *b = j->b;                                                            \
    switch (j->dir) {                                                                        \
      case HLO_DIR_EQ: LOOP(LOAD(a[i]) == LOAD(b[i])); break;                                \
      case HLO_DIR_NE: LOOP(LOAD(a[i]) != LOAD(b[i])); break;                                \
      case HLO_DIR_LT: LOOP(LOAD(a[i]) < LOAD(b[i])); break;                                 \
      case HLO_DIR_LE: LOOP(LOAD(a[i]) <= LOAD(b[i])); break;                                \
      case HLO_DIR_GT: LOOP(LOAD(a[i]) > LOAD(b[i])); break;                                 \
      default: LOOP(LOAD(a[i]) >= LOAD(b[i])); break;                                        \
    }                                                                                        \
  } while (0)

#define PLAIN(x) (x)
#define F16(x) hlo_f16_to_f32(x)
#define BF16(x) hlo_bf16_to_f32(x)

static void compare_chunk(void *ctx, int64_t begin, int64_t end) {
  const ew_job *j = ctx;
  uint8_t *r = j->r;
#define LOOP(expr) for (int64_t i = begin; i < end; i++) r[i] = (expr)
  switch (j->in_type) {
    case HLO_F32: COMPARE_LOOP(float, PLAIN); break;
    case HLO_F64: COMPARE_LOOP(double, PLAIN); break;
    case HLO_F16: COMPARE_LOOP(uint16_t, F16); break;
    case HLO_BF16: COMPARE_LOOP(uint16_t, BF16); break;
    case HLO_PRED: case HLO_U8: COMPARE_LOOP(uint8_t, PLAIN); break;
    case HLO_S8: COMPARE_LOOP(int8_t, PLAIN); break;
    case HLO_S16: COMPARE_LOOP(int16_t, PLAIN); break;
    case HLO_U16: COMPARE_LOOP(uint16_t, PLAIN); break;
    case HLO_S32: COMPARE_LOOP(int32_t, PLAIN); break;
    case HLO_U32: COMPARE_LOOP(uint32_t, PLAIN); break;
    case HLO_S64: COMPARE_LOOP(int64_t, PLAIN); break;
    case HLO_U64: COMPARE_LOOP(uint64_t, PLAIN); break;
    default: break;
  }
#undef LOOP
}

static bool compare_kernel(const hlo_instr *instr, const rt_value *const *in, rt_value *out) {
  ew_job j = {.dir = instr->direction, .in_type = in[0]->shape.dtype, .a = in[0]->data,
              .b = in[1]->data, .r = out->data};
  rt_parallel_for(out->count, RT_CPU_GRAIN, compare_chunk, &j);
  return true;
}

/* ---- select ---- */

static void select_chunk(void *ctx, int64_t begin, int64_t end) {
  const ew_job *j = ctx;
  const uint8_t *p = j->a;
  int64_t sp = j->sa;
#define SELECT(T)                                                                            \
  do {                                                                                       \
    const T *t = j->b, *f = j->c;                                                            \
    T *r = j->r;                                                                             \
    for (int64_t i = begin; i < end; i++) r[i] = p[i * sp] ? t[i] : f[i];                    \
  } while (0)
  switch (hlo_dtype_size(j->out_type)) {
    case 1: SELECT(uint8_t); break;
    case 2: SELECT(uint16_t); break;
    case 4: SELECT(uint32_t); break;
    default: SELECT(uint64_t); break;
  }
#undef SELECT
}

static bool select_kernel(const hlo_instr *instr, const rt_value *const *in, rt_value *out) {
  (void)instr;
  ew_job j = {.out_type = out->shape.dtype, .a = in[0]->data, .sa = in[0]->count == out->count ? 1 : 0,
              .b = in[1]->data, .c = in[2]->data, .r = out->data};
  rt_parallel_for(out->count, RT_CPU_GRAIN, select_chunk, &j);
  return true;
}

/* ---- clamp ---- */

/* min(max(x, lo), hi) with maximum's and minimum's NaN and -0 rules, as the reference;
 * lo and hi may be scalars (step 0). */
static void clamp_chunk(void *ctx, int64_t begin, int64_t end) {
  const ew_job *j = ctx;
#define CLAMP(T, MAX, MIN)                                                                   \
  do {                                                                                       \
    const T *lo = j->a, *x = j->b, *hi = j->c;                                               \
    T *r = j->r;                                                                             \
    for (int64_t i = begin; i < end; i++) r[i] = MIN(MAX(x[i], lo[i * j->sa]), hi[i * j->sc]); \
  } while (0)
  if (j->out_type == HLO_F32) CLAMP(float, rt_max_f32, rt_min_f32);
  else CLAMP(double, rt_max_f64, rt_min_f64);
#undef CLAMP
}

static bool clamp_kernel(const hlo_instr *instr, const rt_value *const *in, rt_value *out) {
  (void)instr;
  ew_job j = {.out_type = out->shape.dtype, .a = in[0]->data, .sa = in[0]->count == out->count ? 1 : 0,
              .b = in[1]->data, .c = in[2]->data, .sc = in[2]->count == out->count ? 1 : 0, .r = out->data};
  rt_parallel_for(out->count, RT_CPU_GRAIN, clamp_chunk, &j);
  return true;
}

/* ---- convert ---- */

/* float -> integer: truncate toward zero, saturate, NaN -> 0 (XLA's rule). */
#define SATURATE(T, MIN, MAX, v) \
  (isnan(v) ? (T)0 : (v) <= (double)(MIN) ? (T)(MIN) : (v) >= (double)(MAX) ? (T)(MAX) : (T)(v))

static double load_as_double(hlo_dtype t, const void *data, int64_t i) {
  switch (t) {
    case HLO_F32: return ((const float *)data)[i];
    case HLO_F64: return ((const double *)data)[i];
    case HLO_F16: return hlo_f16_to_f32(((const uint16_t *)data)[i]);
    default: return hlo_bf16_to_f32(((const uint16_t *)data)[i]);
  }
}

static int64_t load_as_int(hlo_dtype t, const void *data, int64_t i) {
  switch (t) {
    case HLO_PRED: return ((const uint8_t *)data)[i] != 0;
    case HLO_S8: return ((const int8_t *)data)[i];
    case HLO_S16: return ((const int16_t *)data)[i];
    case HLO_S32: return ((const int32_t *)data)[i];
    case HLO_S64: return ((const int64_t *)data)[i];
    case HLO_U8: return ((const uint8_t *)data)[i];
    case HLO_U16: return ((const uint16_t *)data)[i];
    case HLO_U32: return ((const uint32_t *)data)[i];
    default: return (int64_t)((const uint64_t *)data)[i];
  }
}

/* The common conversions get their own loops; the rest go element by element through a
 * switch, still without the reference's generic accessors. */
static void convert_chunk(void *ctx, int64_t begin, int64_t end) {
  const ew_job *j = ctx;
  hlo_dtype from = j->in_type, to = j->out_type;
  if (from == HLO_F32 && to == HLO_F64) {
    const float *a = j->a;
    double *r = j->r;
    for (int64_t i = begin; i < end; i++) r[i] = a[i];
    return;
  }
  if (from == HLO_F64 && to == HLO_F32) {
    const double *a = j->a;
    float *r = j->r;
    for (int64_t i = begin; i < end; i++) r[i] = (float)a[i];
    return;
  }
  if (from == HLO_S32 && to == HLO_F32) {
    const int32_t *a = j->a;
    float *r = j->r;
    for (int64_t i = begin; i < end; i++) r[i] = (float)a[i];
    return;
  }
  if (from == HLO_F32 && to == HLO_BF16) { /* a bf16 product's operands */
    const float *a = j->a;
    uint16_t *r = j->r;
    for (int64_t i = begin; i < end; i++) r[i] = hlo_f32_to_bf16(a[i]);
    return;
  }
  if (from == HLO_BF16 && to == HLO_F32) {
    const uint16_t *a = j->a;
    float *r = j->r;
    for (int64_t i = begin; i < end; i++) r[i] = hlo_bf16_to_f32(a[i]);
    return;
  }
  bool from_float = hlo_dtype_is_float(from);
  for (int64_t i = begin; i < end; i++) {
    if (to == HLO_PRED) {
      ((uint8_t *)j->r)[i] = from_float ? load_as_double(from, j->a, i) != 0 : load_as_int(from, j->a, i) != 0;
      continue;
    }
    if (hlo_dtype_is_float(to)) {
      /* f16/bf16 targets only come from floats (picked so), where the double is exact and
       * the store rounds once; integers reach f32 and f64 by C's correctly rounded cast */
      double v;
      float f;
      if (from_float) v = load_as_double(from, j->a, i);
      else if (hlo_dtype_is_unsigned(from)) v = (double)(uint64_t)load_as_int(from, j->a, i);
      else v = (double)load_as_int(from, j->a, i);
      switch (to) {
        case HLO_F64: ((double *)j->r)[i] = v; break;
        case HLO_F32:
          f = from_float ? (float)v
              : hlo_dtype_is_unsigned(from) ? (float)(uint64_t)load_as_int(from, j->a, i)
                                            : (float)load_as_int(from, j->a, i);
          ((float *)j->r)[i] = f;
          break;
        case HLO_F16: ((uint16_t *)j->r)[i] = hlo_f64_to_f16(v); break;
        default: ((uint16_t *)j->r)[i] = hlo_f64_to_bf16(v); break;
      }
      continue;
    }
    if (from_float) {
      double v = load_as_double(from, j->a, i);
      switch (to) {
        case HLO_S8: ((int8_t *)j->r)[i] = SATURATE(int8_t, INT8_MIN, INT8_MAX, v); break;
        case HLO_S16: ((int16_t *)j->r)[i] = SATURATE(int16_t, INT16_MIN, INT16_MAX, v); break;
        case HLO_S32: ((int32_t *)j->r)[i] = SATURATE(int32_t, INT32_MIN, INT32_MAX, v); break;
        case HLO_U8: ((uint8_t *)j->r)[i] = SATURATE(uint8_t, 0, UINT8_MAX, v); break;
        case HLO_U16: ((uint16_t *)j->r)[i] = SATURATE(uint16_t, 0, UINT16_MAX, v); break;
        case HLO_U32: ((uint32_t *)j->r)[i] = SATURATE(uint32_t, 0, UINT32_MAX, v); break;
        default: break; /* 64-bit targets are left to the reference (picked so) */
      }
      continue;
    }
    uint64_t v = (uint64_t)load_as_int(from, j->a, i); /* wraps to the target width */
    switch (hlo_dtype_size(to)) {
      case 1: ((uint8_t *)j->r)[i] = (uint8_t)v; break;
      case 2: ((uint16_t *)j->r)[i] = (uint16_t)v; break;
      case 4: ((uint32_t *)j->r)[i] = (uint32_t)v; break;
      default: ((uint64_t *)j->r)[i] = v; break;
    }
  }
}

static bool convert_kernel(const hlo_instr *instr, const rt_value *const *in, rt_value *out) {
  (void)instr;
  ew_job j = {.in_type = in[0]->shape.dtype, .out_type = out->shape.dtype, .a = in[0]->data, .r = out->data};
  rt_parallel_for(out->count, RT_CPU_GRAIN, convert_chunk, &j);
  return true;
}

/* ---- picking ---- */

static bool plain_type(hlo_dtype t) {
  switch (t) {
    case HLO_PRED: case HLO_S8: case HLO_S16: case HLO_S32: case HLO_S64: case HLO_U8:
    case HLO_U16: case HLO_U32: case HLO_U64: case HLO_F16: case HLO_BF16: case HLO_F32:
    case HLO_F64:
      return true;
    default:
      return false;
  }
}

static bool same_dims(const hlo_shape *a, const hlo_shape *b) {
  if (a->rank != b->rank) return false;
  for (int d = 0; d < a->rank; d++)
    if (a->dims[d] != b->dims[d]) return false;
  return true;
}

rt_cpu_kernel rt_cpu_pick_elementwise(const hlo_instr *instr) {
  hlo_opcode op = instr->opcode;
  const hlo_shape *shape = &instr->shape;
  for (int k = 0; k < instr->operand_count; k++)
    if (!hlo_shape_is_array(&instr->operands[k]->shape) || !plain_type(instr->operands[k]->shape.dtype))
      return NULL;
  if (!plain_type(shape->dtype)) return NULL;
  if (hlo_opcode_is_elementwise_unary(op)) {
    hlo_dtype t = instr->operands[0]->shape.dtype;
    if (t != shape->dtype || !same_dims(shape, &instr->operands[0]->shape)) return NULL;
    if (hlo_dtype_is_float(t)) return rt_cpu_float_unary(op) ? unary_kernel : NULL;
    if (t == HLO_S32 || t == HLO_S64)
      return op == HLO_OP_NEGATE || op == HLO_OP_ABS || op == HLO_OP_NOT ? unary_kernel : NULL;
    return t == HLO_PRED && op == HLO_OP_NOT ? unary_kernel : NULL;
  }
  if (op == HLO_OP_COMPARE) {
    const hlo_shape *a = &instr->operands[0]->shape, *b = &instr->operands[1]->shape;
    if (a->dtype != b->dtype || !same_dims(a, shape) || !same_dims(b, shape)) return NULL;
    if (instr->compare_type == HLO_CMP_TOTALORDER) return NULL;
    /* an explicit signedness that differs from the element type's is the reference's job */
    if (instr->compare_type == HLO_CMP_SIGNED && !hlo_dtype_is_signed(a->dtype)) return NULL;
    if (instr->compare_type == HLO_CMP_UNSIGNED && (hlo_dtype_is_signed(a->dtype) || hlo_dtype_is_float(a->dtype)))
      return NULL;
    if (instr->direction < HLO_DIR_EQ || instr->direction > HLO_DIR_GE) return NULL;
    return compare_kernel;
  }
  if (hlo_opcode_is_elementwise_binary(op)) {
    const hlo_shape *a = &instr->operands[0]->shape, *b = &instr->operands[1]->shape;
    if (a->dtype != shape->dtype || b->dtype != shape->dtype || !same_dims(a, shape) || !same_dims(b, shape))
      return NULL;
    hlo_dtype t = shape->dtype;
    if (hlo_dtype_is_float(t)) {
      switch (op) {
        case HLO_OP_ADD: case HLO_OP_SUBTRACT: case HLO_OP_MULTIPLY: case HLO_OP_DIVIDE:
        case HLO_OP_MAXIMUM: case HLO_OP_MINIMUM:
          return binary_kernel;
        default:
          return NULL;
      }
    }
    switch (op) {
      case HLO_OP_ADD: case HLO_OP_MULTIPLY: case HLO_OP_MAXIMUM: case HLO_OP_MINIMUM:
      case HLO_OP_AND: case HLO_OP_OR: case HLO_OP_XOR:
        return binary_kernel;
      case HLO_OP_SUBTRACT:
        return t == HLO_PRED ? NULL : binary_kernel;
      default:
        return NULL;
    }
  }
  if (op == HLO_OP_SELECT) {
    const hlo_shape *p = &instr->operands[0]->shape, *t = &instr->operands[1]->shape, *f = &instr->operands[2]->shape;
    if (p->dtype != HLO_PRED || t->dtype != shape->dtype || f->dtype != shape->dtype) return NULL;
    if (!same_dims(t, shape) || !same_dims(f, shape) || (p->rank != 0 && !same_dims(p, shape))) return NULL;
    return select_kernel;
  }
  if (op == HLO_OP_CLAMP) {
    const hlo_shape *lo = &instr->operands[0]->shape, *x = &instr->operands[1]->shape, *hi = &instr->operands[2]->shape;
    if ((shape->dtype != HLO_F32 && shape->dtype != HLO_F64) || x->dtype != shape->dtype || lo->dtype != shape->dtype ||
        hi->dtype != shape->dtype || !same_dims(x, shape) || (lo->rank != 0 && !same_dims(lo, shape)) ||
        (hi->rank != 0 && !same_dims(hi, shape)))
      return NULL;
    return clamp_kernel;
  }
  if (op == HLO_OP_CONVERT) {
    hlo_dtype from = instr->operands[0]->shape.dtype, to = shape->dtype;
    if (!same_dims(shape, &instr->operands[0]->shape)) return NULL;
    if (is_half(to) && !hlo_dtype_is_float(from)) return NULL; /* needs a single rounding from the integer */
    if (hlo_dtype_is_float(from) && (to == HLO_S64 || to == HLO_U64)) return NULL;
    return convert_kernel;
  }
  return NULL;
}
