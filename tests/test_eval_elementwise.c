/* The reference evaluator's elementwise kernels, run from HLO text: unary and binary
 * arithmetic, compare, select, clamp, convert, bitcast-convert, reduce-precision and map.
 * Expected values are worked out by hand (in the comments) or with Python's math and
 * struct modules, and pasted as literals. */
#include <stdint.h>

#include "eval_util.h"

/* ---------------------------------------------------------------------------------------
 * helpers */

static char text_buffer[4096];

/* A module computing ROOT r = result_type op(a, b) of two constants. */
static const char *binary_text(const char *type, const char *result_type, const char *lhs,
                               const char *rhs, const char *op, const char *attrs) {
  snprintf(text_buffer, sizeof text_buffer,
           "HloModule m\n"
           "ENTRY e {\n"
           "  a = %s constant(%s)\n"
           "  b = %s constant(%s)\n"
           "  ROOT r = %s %s(a, b)%s\n"
           "}\n",
           type, lhs, type, rhs, result_type, op, attrs);
  return text_buffer;
}

static const char *unary_text(const char *type, const char *result_type, const char *operand,
                              const char *op, const char *attrs) {
  snprintf(text_buffer, sizeof text_buffer,
           "HloModule m\n"
           "ENTRY e {\n"
           "  a = %s constant(%s)\n"
           "  ROOT r = %s %s(a)%s\n"
           "}\n",
           type, operand, result_type, op, attrs);
  return text_buffer;
}

static rt_value *run(const char *text, bool fp64) {
  hlo_diag diag;
  rt_value *value = run_text(text, NULL, 0, fp64, &diag);
  CHECK_MSG(value != NULL, "evaluation failed: %s\n%s", diag.message, text);
  return value;
}

/* Exact integer check of every element (the bits as rt_get_i64 reads them). */
static void check_ints(rt_value *value, hlo_dtype dtype, const int64_t *want, int count) {
  if (!value) return;
  CHECK_EQ_INT(value->shape.dtype, dtype);
  CHECK_EQ_INT(value->count, count);
  for (int i = 0; i < count && i < value->count; i++) {
    int64_t got = rt_get_i64(value, i);
    CHECK_MSG(got == want[i], "element %d: got %lld, want %lld", i, (long long)got, (long long)want[i]);
  }
  rt_value_release(value);
}

/* Float check: within tol relative, or exact (sign of zero included, NaN matches NaN) when
 * tol is 0. */
static void check_floats(rt_value *value, hlo_dtype dtype, const double *want, int count, double tol) {
  if (!value) return;
  CHECK_EQ_INT(value->shape.dtype, dtype);
  CHECK_EQ_INT(value->count, count);
  for (int i = 0; i < count && i < value->count; i++) {
    double got = rt_get_f64(value, i);
    bool ok;
    if (isnan(want[i])) ok = isnan(got);
    else if (tol == 0) ok = got == want[i] && signbit(got) == signbit(want[i]);
    else ok = fabs(got - want[i]) <= tol * (1 + fabs(want[i]));
    CHECK_MSG(ok, "element %d: got %.17g, want %.17g", i, got, want[i]);
  }
  rt_value_release(value);
}

#define INTS(...) ((const int64_t[]){__VA_ARGS__}), (int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t))
#define FLOATS(...) ((const double[]){__VA_ARGS__}), (int)(sizeof((const double[]){__VA_ARGS__}) / sizeof(double))

/* ---------------------------------------------------------------------------------------
 * integer arithmetic */

static void test_integer_division_signs(void) {
  /* truncation toward zero; the remainder takes the dividend's sign */
  check_ints(run(binary_text("s32[4]", "s32[4]", "{-7, 7, -7, 7}", "{2, -2, -2, 2}", "divide", ""), false),
             HLO_S32, INTS(-3, -3, 3, 3));
  check_ints(run(binary_text("s32[4]", "s32[4]", "{-7, 7, -7, 7}", "{2, -2, -2, 2}", "remainder", ""), false),
             HLO_S32, INTS(-1, 1, -1, 1));
  check_ints(run(binary_text("s8[2]", "s8[2]", "{-7, 100}", "{3, -7}", "remainder", ""), false),
             HLO_S8, INTS(-1, 2));
}

static void test_division_by_zero(void) {
  /* x / 0 is all ones, x % 0 is x */
  check_ints(run(binary_text("s32[3]", "s32[3]", "{5, -5, 0}", "{0, 0, 0}", "divide", ""), false),
             HLO_S32, INTS(-1, -1, -1));
  check_ints(run(binary_text("s32[3]", "s32[3]", "{5, -5, 0}", "{0, 0, 0}", "remainder", ""), false),
             HLO_S32, INTS(5, -5, 0));
  check_ints(run(binary_text("u32[2]", "u32[2]", "{5, 0}", "{0, 0}", "divide", ""), false),
             HLO_U32, INTS(4294967295, 4294967295));
  check_ints(run(binary_text("u8[2]", "u8[2]", "{200, 7}", "{0, 0}", "remainder", ""), false),
             HLO_U8, INTS(200, 7));
  check_ints(run(binary_text("u64[1]", "u64[1]", "{9}", "{0}", "divide", ""), false),
             HLO_U64, INTS(-1 /* 2^64 - 1 */));
}

static void test_int_min_over_minus_one(void) {
  check_ints(run(binary_text("s32[2]", "s32[2]", "{-2147483648, -2147483648}", "{-1, 1}", "divide", ""), false),
             HLO_S32, INTS(-2147483648, -2147483648));
  check_ints(run(binary_text("s32[1]", "s32[1]", "{-2147483648}", "{-1}", "remainder", ""), false),
             HLO_S32, INTS(0));
  check_ints(run(binary_text("s8[1]", "s8[1]", "{-128}", "{-1}", "divide", ""), false), HLO_S8, INTS(-128));
  check_ints(run(binary_text("s64[1]", "s64[1]", "{-9223372036854775808}", "{-1}", "divide", ""), false),
             HLO_S64, INTS(INT64_MIN));
  check_ints(run(binary_text("s64[1]", "s64[1]", "{-9223372036854775808}", "{-1}", "remainder", ""), false),
             HLO_S64, INTS(0));
}

static void test_shifts(void) {
  /* amounts >= 32 (and -1, read as unsigned 2^32-1) shift everything out */
  check_ints(run(binary_text("s32[5]", "s32[5]", "{1, 1, 1, 1, 3}", "{31, 32, 33, -1, 2}", "shift-left", ""), false),
             HLO_S32, INTS(-2147483648, 0, 0, 0, 12));
  check_ints(run(binary_text("s32[5]", "s32[5]", "{-8, -8, -8, -8, 8}", "{1, 32, 33, -1, 40}",
                             "shift-right-arithmetic", ""), false),
             HLO_S32, INTS(-4, -1, -1, -1, 0));
  /* -8 = 0xFFFFFFF8; >> 1 logically = 0x7FFFFFFC = 2147483644 */
  check_ints(run(binary_text("s32[4]", "s32[4]", "{-8, -8, -8, -8}", "{1, 32, 33, -1}",
                             "shift-right-logical", ""), false),
             HLO_S32, INTS(2147483644, 0, 0, 0));
  /* u8: 200 = 0xC8 is -56 as s8; arithmetic >> 1 gives -28 = 0xE4 = 228 */
  check_ints(run(binary_text("u8[3]", "u8[3]", "{200, 128, 200}", "{1, 7, 8}", "shift-right-arithmetic", ""), false),
             HLO_U8, INTS(228, 255, 255));
  check_ints(run(binary_text("u8[3]", "u8[3]", "{200, 128, 1}", "{1, 7, 8}", "shift-right-logical", ""), false),
             HLO_U8, INTS(100, 1, 0));
  check_ints(run(binary_text("s8[3]", "s8[3]", "{1, 1, 1}", "{7, 8, -1}", "shift-left", ""), false),
             HLO_S8, INTS(-128, 0, 0));
  check_ints(run(binary_text("s64[2]", "s64[2]", "{1, 1}", "{63, 64}", "shift-left", ""), false),
             HLO_S64, INTS(INT64_MIN, 0));
}

static void test_integer_power(void) {
  /* 2^10, 1^-5 = 1, (-1)^-3 = 0 (XLA: any base but 1 gives 0 for a negative exponent),
   * 2^-1 = 0, 0^0 = 1, 3^3, (-2)^3 */
  check_ints(run(binary_text("s32[7]", "s32[7]", "{2, 1, -1, 2, 0, 3, -2}", "{10, -5, -3, -1, 0, 3, 3}",
                             "power", ""), false),
             HLO_S32, INTS(1024, 1, 0, 0, 1, 27, -8));
  /* wraps: 3^5 = 243 = -13 as s8 */
  check_ints(run(binary_text("s8[1]", "s8[1]", "{3}", "{5}", "power", ""), false), HLO_S8, INTS(-13));
  check_ints(run(binary_text("u8[2]", "u8[2]", "{2, 3}", "{8, 4}", "power", ""), false), HLO_U8, INTS(0, 81));
}

static void test_integer_min_max_bitwise(void) {
  check_ints(run(binary_text("s32[2]", "s32[2]", "{-1, 5}", "{1, 3}", "maximum", ""), false), HLO_S32, INTS(1, 5));
  /* unsigned: 4294967295 is the largest */
  check_ints(run(binary_text("u32[2]", "u32[2]", "{4294967295, 5}", "{1, 3}", "maximum", ""), false),
             HLO_U32, INTS(4294967295, 5));
  check_ints(run(binary_text("u32[2]", "u32[2]", "{4294967295, 5}", "{1, 3}", "minimum", ""), false),
             HLO_U32, INTS(1, 3));
  check_ints(run(binary_text("s32[3]", "s32[3]", "{12, 12, 12}", "{10, 10, -1}", "and", ""), false),
             HLO_S32, INTS(8, 8, 12));
  check_ints(run(binary_text("s32[2]", "s32[2]", "{12, 12}", "{10, 3}", "or", ""), false), HLO_S32, INTS(14, 15));
  check_ints(run(binary_text("s32[2]", "s32[2]", "{12, 12}", "{10, -1}", "xor", ""), false), HLO_S32, INTS(6, -13));
  check_ints(run(binary_text("s32[2]", "s32[2]", "{-7, 65536}", "{3, 65536}", "multiply", ""), false),
             HLO_S32, INTS(-21, 0 /* 2^32 wraps */));
  check_ints(run(binary_text("u16[1]", "u16[1]", "{3}", "{5}", "subtract", ""), false), HLO_U16, INTS(65534));
}

static void test_pred_arithmetic(void) {
  check_ints(run(binary_text("pred[4]", "pred[4]", "{0, 0, 1, 1}", "{0, 1, 0, 1}", "add", ""), false),
             HLO_PRED, INTS(0, 1, 1, 1));
  check_ints(run(binary_text("pred[4]", "pred[4]", "{0, 0, 1, 1}", "{0, 1, 0, 1}", "multiply", ""), false),
             HLO_PRED, INTS(0, 0, 0, 1));
  check_ints(run(binary_text("pred[4]", "pred[4]", "{0, 0, 1, 1}", "{0, 1, 0, 1}", "xor", ""), false),
             HLO_PRED, INTS(0, 1, 1, 0));
  check_ints(run(binary_text("pred[4]", "pred[4]", "{0, 0, 1, 1}", "{0, 1, 0, 1}", "and", ""), false),
             HLO_PRED, INTS(0, 0, 0, 1));
  check_ints(run(binary_text("pred[4]", "pred[4]", "{0, 0, 1, 1}", "{0, 1, 0, 1}", "or", ""), false),
             HLO_PRED, INTS(0, 1, 1, 1));
  check_ints(run(unary_text("pred[2]", "pred[2]", "{0, 1}", "not", ""), false), HLO_PRED, INTS(1, 0));
}

/* add on every element type, with the wrap-around and rounding each one has */
static void test_add_every_type(void) {
  check_ints(run(binary_text("s8[3]", "s8[3]", "{127, -128, 5}", "{1, -1, -7}", "add", ""), false),
             HLO_S8, INTS(-128, 127, -2));
  check_ints(run(binary_text("s16[2]", "s16[2]", "{32767, -3}", "{1, 1}", "add", ""), false),
             HLO_S16, INTS(-32768, -2));
  check_ints(run(binary_text("s32[2]", "s32[2]", "{2147483647, 3}", "{1, -5}", "add", ""), false),
             HLO_S32, INTS(-2147483648, -2));
  check_ints(run(binary_text("s64[2]", "s64[2]", "{9223372036854775807, 3}", "{1, -5}", "add", ""), false),
             HLO_S64, INTS(INT64_MIN, -2));
  check_ints(run(binary_text("u8[2]", "u8[2]", "{255, 3}", "{1, 4}", "add", ""), false), HLO_U8, INTS(0, 7));
  check_ints(run(binary_text("u16[2]", "u16[2]", "{65535, 3}", "{2, 4}", "add", ""), false), HLO_U16, INTS(1, 7));
  check_ints(run(binary_text("u32[2]", "u32[2]", "{4294967295, 1}", "{1, 2}", "add", ""), false), HLO_U32, INTS(0, 3));
  check_ints(run(binary_text("u64[2]", "u64[2]", "{18446744073709551615, 1}", "{1, 2}", "add", ""), false),
             HLO_U64, INTS(0, 3));
  /* f16 has 11 significant bits: at 2048 the spacing is 2, 2049 ties to 2048, 2051 to 2052 */
  check_floats(run(binary_text("f16[3]", "f16[3]", "{2048, 2048, 0.5}", "{1, 3, 0.25}", "add", ""), false),
               HLO_F16, FLOATS(2048, 2052, 0.75), 0);
  /* bf16 has 8: at 256 the spacing is 2 */
  check_floats(run(binary_text("bf16[3]", "bf16[3]", "{256, 256, 1.5}", "{1, 3, 0.25}", "add", ""), false),
               HLO_BF16, FLOATS(256, 260, 1.75), 0);
  /* f32: 2^24 + 1 ties back to 2^24 */
  check_floats(run(binary_text("f32[2]", "f32[2]", "{16777216, 1.5}", "{1, 2.25}", "add", ""), false),
               HLO_F32, FLOATS(16777216, 3.75), 0);
  check_floats(run(binary_text("f64[2]", "f64[2]", "{9007199254740992, 0.1}", "{1, 0.2}", "add", ""), false),
               HLO_F64, FLOATS(9007199254740992.0, 0.30000000000000004), 0);
  check_ints(run(binary_text("pred[2]", "pred[2]", "{0, 1}", "{0, 1}", "add", ""), false), HLO_PRED, INTS(0, 1));
}

/* ---------------------------------------------------------------------------------------
 * float arithmetic */

static void test_float_binary(void) {
  /* NaN in either operand wins; -0 is below +0 */
  check_floats(run(binary_text("f32[5]", "f32[5]", "{nan, 1, -0, 2, -inf}", "{1, nan, 0, 3, -5}", "maximum", ""), false),
               HLO_F32, FLOATS(NAN, NAN, 0.0, 3, -5), 0);
  check_floats(run(binary_text("f32[5]", "f32[5]", "{nan, 1, -0, 2, -inf}", "{1, nan, 0, 3, -5}", "minimum", ""), false),
               HLO_F32, FLOATS(NAN, NAN, -0.0, 2, -INFINITY), 0);
  check_floats(run(binary_text("f64[2]", "f64[2]", "{nan, 4}", "{1, nan}", "maximum", ""), false),
               HLO_F64, FLOATS(NAN, NAN), 0);
  check_floats(run(binary_text("bf16[2]", "bf16[2]", "{nan, 4}", "{1, 2}", "minimum", ""), false),
               HLO_BF16, FLOATS(NAN, 2), 0);
  /* remainder is fmod: the dividend's sign */
  check_floats(run(binary_text("f32[3]", "f32[3]", "{5.5, -5.5, 5.5}", "{2, 2, -2}", "remainder", ""), false),
               HLO_F32, FLOATS(1.5, -1.5, 1.5), 0);
  check_floats(run(binary_text("f32[3]", "f32[3]", "{1, -3, 0}", "{4, 2, 0}", "divide", ""), false),
               HLO_F32, FLOATS(0.25, -1.5, NAN), 0);
  /* atan2f(1, -1) = 3pi/4 and atan2f(-2, 0.5), from Python rounded to f32 */
  check_floats(run(binary_text("f32[2]", "f32[2]", "{1, -2}", "{-1, 0.5}", "atan2", ""), false),
               HLO_F32, FLOATS(2.356194496154785, -1.3258177042007446), 1e-6);
  /* pow: 2^0.5, 1^nan = 1, nan^0 = 1, (-8)^(1/3) = nan */
  check_floats(run(binary_text("f32[4]", "f32[4]", "{2, 1, nan, -8}", "{0.5, nan, 0, 0.333}", "power", ""), false),
               HLO_F32, FLOATS(1.4142135381698608, 1, 1, NAN), 1e-7);
  check_floats(run(binary_text("f16[2]", "f16[2]", "{3, 0.1}", "{2, 10}", "multiply", ""), false),
               HLO_F16, FLOATS(6, 1.0), 0); /* f16(0.1) = 0.0999755859375; times 10 = 4095/4096 ties to 1 */
}

static void test_float_unary(void) {
  check_floats(run(unary_text("f32[5]", "f32[5]", "{2.5, -0.5, 3.5, -2.5, 0.5}", "round-nearest-even", ""), false),
               HLO_F32, FLOATS(2, -0.0, 4, -2, 0), 0);
  check_floats(run(unary_text("f32[5]", "f32[5]", "{2.5, -0.5, -2.5, 0.4, -0.4}", "round-nearest-afz", ""), false),
               HLO_F32, FLOATS(3, -1, -3, 0, -0.0), 0);
  check_floats(run(unary_text("f64[3]", "f64[3]", "{2.5, -0.5, 1.5}", "round-nearest-even", ""), false),
               HLO_F64, FLOATS(2, -0.0, 2), 0);
  check_floats(run(unary_text("f32[3]", "f32[3]", "{-1.5, 1.5, -0}", "floor", ""), false),
               HLO_F32, FLOATS(-2, 1, -0.0), 0);
  check_floats(run(unary_text("f32[3]", "f32[3]", "{-1.5, 1.5, -0.5}", "ceil", ""), false),
               HLO_F32, FLOATS(-1, 2, -0.0), 0);
  check_floats(run(unary_text("f32[6]", "f32[6]", "{-3, -0, 0, nan, 5, -inf}", "sign", ""), false),
               HLO_F32, FLOATS(-1, -0.0, 0, NAN, 1, -1), 0);
  check_floats(run(unary_text("f32[3]", "f32[3]", "{-3, -0, inf}", "abs", ""), false),
               HLO_F32, FLOATS(3, 0, INFINITY), 0);
  check_floats(run(unary_text("f32[2]", "f32[2]", "{3, 0}", "negate", ""), false),
               HLO_F32, FLOATS(-3, -0.0), 0);
  check_ints(run(unary_text("f32[4]", "pred[4]", "{1, inf, -inf, nan}", "is-finite", ""), false),
             HLO_PRED, INTS(1, 0, 0, 0));
  check_ints(run(unary_text("bf16[2]", "pred[2]", "{1, inf}", "is-finite", ""), false), HLO_PRED, INTS(1, 0));
  /* erf from Python's math.erf, rounded to f32 */
  check_floats(run(unary_text("f32[4]", "f32[4]", "{0.5, -1, 2, 0.1}", "erf", ""), false),
               HLO_F32, FLOATS(0.5204998850822449, -0.8427007794380188, 0.9953222870826721, 0.11246291548013687), 1e-6);
  check_floats(run(unary_text("f64[2]", "f64[2]", "{0.5, -1}", "erf", ""), false),
               HLO_F64, FLOATS(0.5204998778130465, -0.8427007929497149), 1e-15);
  /* the rest of the transcendental family at one point each (Python, rounded to f32) */
  struct { const char *op, *x; double want; } cases[] = {
      {"exponential", "1", 2.7182817459106445},     {"log", "2", 0.6931471824645996},
      {"log-plus-one", "1e-07", 9.999999406318238e-08}, {"exponential-minus-one", "1e-07", 1.000000082740371e-07},
      {"tanh", "0.5", 0.46211716532707214},         {"logistic", "2", 0.8807970881462097},
      {"sine", "1", 0.8414709568023682},            {"cosine", "1", 0.5403022766113281},
      {"tan", "1", 1.5574077367782593},             {"atan", "1", 0.7853981852531433},
      {"acos", "0.5", 1.0471975803375244},          {"asin", "0.5", 0.5235987901687622},
      {"acosh", "2", 1.316957950592041},            {"asinh", "1", 0.8813735842704773},
      {"atanh", "0.5", 0.5493061542510986},         {"cosh", "1", 1.5430806875228882},
      {"sinh", "1", 1.175201177597046},             {"sqrt", "2", 1.4142135381698608},
      {"rsqrt", "4", 0.5},                          {"cbrt", "-8", -2},
      {"real", "-1.5", -1.5},                       {"imag", "-1.5", 0},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    char literal[64];
    snprintf(literal, sizeof literal, "{%s}", cases[k].x);
    rt_value *value = run(unary_text("f32[1]", "f32[1]", literal, cases[k].op, ""), false);
    CHECK_MSG(value == NULL || fabs(rt_get_f64(value, 0) - cases[k].want) <= 4e-7 * fabs(cases[k].want) + 1e-30,
              "%s(%s) = %.17g, want %.17g", cases[k].op, cases[k].x, value ? rt_get_f64(value, 0) : 0.0, cases[k].want);
    rt_value_release(value);
  }
  /* half types compute in f32 and round: exp(1) = 2.71828... in f16 is 2.71875 (spacing 2^-9) */
  check_floats(run(unary_text("f16[1]", "f16[1]", "{1}", "exponential", ""), false), HLO_F16, FLOATS(2.71875), 0);
  /* bf16 spacing at 2 is 2^-6: 2.71828 -> 2.71875 as well */
  check_floats(run(unary_text("bf16[1]", "bf16[1]", "{1}", "exponential", ""), false), HLO_BF16, FLOATS(2.71875), 0);
}

static void test_integer_unary(void) {
  check_ints(run(unary_text("s32[3]", "s32[3]", "{-2147483648, -5, 5}", "abs", ""), false),
             HLO_S32, INTS(-2147483648, 5, 5));
  check_ints(run(unary_text("s8[2]", "s8[2]", "{-128, -1}", "abs", ""), false), HLO_S8, INTS(-128, 1));
  check_ints(run(unary_text("s32[2]", "s32[2]", "{-2147483648, 7}", "negate", ""), false),
             HLO_S32, INTS(-2147483648, -7));
  check_ints(run(unary_text("u8[2]", "u8[2]", "{1, 0}", "negate", ""), false), HLO_U8, INTS(255, 0));
  check_ints(run(unary_text("s32[3]", "s32[3]", "{-9, 0, 4}", "sign", ""), false), HLO_S32, INTS(-1, 0, 1));
  check_ints(run(unary_text("s32[2]", "s32[2]", "{0, 5}", "not", ""), false), HLO_S32, INTS(-1, -6));
  check_ints(run(unary_text("u8[1]", "u8[1]", "{5}", "not", ""), false), HLO_U8, INTS(250));
  /* popcnt and clz count within the element's own width */
  check_ints(run(unary_text("s8[3]", "s8[3]", "{-1, 1, 0}", "popcnt", ""), false), HLO_S8, INTS(8, 1, 0));
  check_ints(run(unary_text("s32[3]", "s32[3]", "{-1, 1, 0}", "popcnt", ""), false), HLO_S32, INTS(32, 1, 0));
  check_ints(run(unary_text("s8[4]", "s8[4]", "{-1, 1, 0, 16}", "count-leading-zeros", ""), false),
             HLO_S8, INTS(0, 7, 8, 3));
  check_ints(run(unary_text("s32[4]", "s32[4]", "{-1, 1, 0, 16}", "count-leading-zeros", ""), false),
             HLO_S32, INTS(0, 31, 32, 27));
  check_ints(run(unary_text("u16[2]", "u16[2]", "{256, 65535}", "count-leading-zeros", ""), false),
             HLO_U16, INTS(7, 0));
  check_ints(run(unary_text("s64[2]", "s64[2]", "{1, -1}", "count-leading-zeros", ""), false),
             HLO_S64, INTS(63, 0));
}

/* ---------------------------------------------------------------------------------------
 * compare */

static void test_compare(void) {
  /* unsigned: 4294967295 > 1; the same bits as s32 are -1 < 1 */
  check_ints(run(binary_text("u32[2]", "pred[2]", "{4294967295, 1}", "{1, 2}", "compare", ", direction=GT"), false),
             HLO_PRED, INTS(1, 0));
  check_ints(run(binary_text("s32[2]", "pred[2]", "{-1, 1}", "{1, 2}", "compare", ", direction=GT"), false),
             HLO_PRED, INTS(0, 0));
  check_ints(run(binary_text("u8[3]", "pred[3]", "{200, 3, 3}", "{100, 3, 4}", "compare", ", direction=GE"), false),
             HLO_PRED, INTS(1, 1, 0));
  check_ints(run(binary_text("s64[2]", "pred[2]", "{-9223372036854775808, 5}", "{9223372036854775807, 5}", "compare",
                             ", direction=LT"), false),
             HLO_PRED, INTS(1, 0));
  /* IEEE: NaN compares false except NE; -0 == +0 */
  check_ints(run(binary_text("f32[3]", "pred[3]", "{nan, -0, 1}", "{nan, 0, 2}", "compare", ", direction=EQ"), false),
             HLO_PRED, INTS(0, 1, 0));
  check_ints(run(binary_text("f32[3]", "pred[3]", "{nan, -0, 1}", "{nan, 0, 2}", "compare", ", direction=NE"), false),
             HLO_PRED, INTS(1, 0, 1));
  check_ints(run(binary_text("f32[3]", "pred[3]", "{nan, 1, 1}", "{1, nan, 2}", "compare", ", direction=LT"), false),
             HLO_PRED, INTS(0, 0, 1));
  check_ints(run(binary_text("f32[3]", "pred[3]", "{nan, 1, 2}", "{1, nan, 2}", "compare", ", direction=GE, type=FLOAT"), false),
             HLO_PRED, INTS(0, 0, 1));
  check_ints(run(binary_text("bf16[2]", "pred[2]", "{1, 2}", "{1.5, 2}", "compare", ", direction=LE"), false),
             HLO_PRED, INTS(1, 1));
  /* total order: -NaN < -inf < -0 < +0 < inf < NaN. -NaN comes from negating NaN. */
  const char *total =
      "HloModule m\n"
      "ENTRY e {\n"
      "  a = f32[6] constant({-0, 0, nan, 1, nan, -inf})\n"
      "  b = f32[6] constant({0, -0, inf, nan, 1, 0})\n"
      "  na = f32[6] negate(a)\n"
      "  lt = pred[6] compare(a, b), direction=LT, type=TOTALORDER\n"
      "  eq = pred[6] compare(a, b), direction=EQ, type=TOTALORDER\n"
      "  neg_lt = pred[6] compare(na, b), direction=LT, type=TOTALORDER\n"
      "  ROOT t = (pred[6], pred[6], pred[6]) tuple(lt, eq, neg_lt)\n"
      "}\n";
  hlo_diag diag;
  rt_value *tuple = run_text(total, NULL, 0, false, &diag);
  CHECK_MSG(tuple != NULL, "evaluation failed: %s", diag.message);
  if (tuple) {
    CHECK_EQ_INT(tuple->tuple_count, 3);
    /* a < b: -0 < 0 yes; 0 < -0 no; nan < inf no; 1 < nan yes; nan < 1 no; -inf < 0 yes */
    check_ints(rt_value_retain(tuple->tuple[0]), HLO_PRED, INTS(1, 0, 0, 1, 0, 1));
    /* equal only as identical bits: -0 != 0 */
    check_ints(rt_value_retain(tuple->tuple[1]), HLO_PRED, INTS(0, 0, 0, 0, 0, 0));
    /* -a < b: 0 < 0 no; -0 < -0 no; -nan < inf yes; -1 < nan yes; -nan < 1 yes; inf < 0 no */
    check_ints(rt_value_retain(tuple->tuple[2]), HLO_PRED, INTS(0, 0, 1, 1, 1, 0));
    rt_value_release(tuple);
  }
  check_ints(run(binary_text("f32[2]", "pred[2]", "{nan, -0}", "{nan, -0}", "compare", ", direction=EQ, type=TOTALORDER"), false),
             HLO_PRED, INTS(1, 1));
  /* the same total order on f64 */
  check_ints(run(binary_text("f64[2]", "pred[2]", "{-0, -inf}", "{0, -1e308}", "compare", ", direction=LT, type=TOTALORDER"), false),
             HLO_PRED, INTS(1, 1));
}

/* ---------------------------------------------------------------------------------------
 * select, clamp */

static void test_select_clamp(void) {
  const char *select_array =
      "HloModule m\n"
      "ENTRY e {\n"
      "  p = pred[3] constant({1, 0, 1})\n"
      "  a = s32[3] constant({1, 2, 3})\n"
      "  b = s32[3] constant({-1, -2, -3})\n"
      "  ROOT r = s32[3] select(p, a, b)\n"
      "}\n";
  check_ints(run(select_array, false), HLO_S32, INTS(1, -2, 3));
  const char *select_scalar =
      "HloModule m\n"
      "ENTRY e {\n"
      "  p = pred[] constant(false)\n"
      "  a = f16[2] constant({1, 2})\n"
      "  b = f16[2] constant({-1, -2})\n"
      "  ROOT r = f16[2] select(p, a, b)\n"
      "}\n";
  check_floats(run(select_scalar, false), HLO_F16, FLOATS(-1, -2), 0);
  /* the example of XLA's docs: clamp(0, {-1, 5, 9}, 6) */
  const char *clamp_scalars =
      "HloModule m\n"
      "ENTRY e {\n"
      "  lo = s32[] constant(0)\n"
      "  x = s32[3] constant({-1, 5, 9})\n"
      "  hi = s32[] constant(6)\n"
      "  ROOT r = s32[3] clamp(lo, x, hi)\n"
      "}\n";
  check_ints(run(clamp_scalars, false), HLO_S32, INTS(0, 5, 6));
  const char *clamp_floats =
      "HloModule m\n"
      "ENTRY e {\n"
      "  lo = f32[6] constant({0, 0, nan, 0, 0, -1})\n"
      "  x = f32[6] constant({-1, 7, 1, nan, -0, 0})\n"
      "  hi = f32[6] constant({6, 6, 6, 6, 1, -0})\n"
      "  ROOT r = f32[6] clamp(lo, x, hi)\n"
      "}\n";
  /* max(-0, +0) is +0 and min(+0, -0) is -0, as for maximum and minimum */
  check_floats(run(clamp_floats, false), HLO_F32, FLOATS(0, 6, NAN, NAN, 0.0, -0.0), 0);
  check_floats(run(clamp_floats, true), HLO_F64, FLOATS(0, 6, NAN, NAN, 0.0, -0.0), 0);
  const char *clamp_unsigned =
      "HloModule m\n"
      "ENTRY e {\n"
      "  lo = u32[] constant(10)\n"
      "  x = u32[3] constant({4294967295, 5, 15})\n"
      "  hi = u32[] constant(4000000000)\n"
      "  ROOT r = u32[3] clamp(lo, x, hi)\n"
      "}\n";
  check_ints(run(clamp_unsigned, false), HLO_U32, INTS(4000000000, 10, 15));
}

/* ---------------------------------------------------------------------------------------
 * convert */

static void test_convert_rounding(void) {
  /* to bf16 (8 significant bits): 1 + 2^-8 ties between 1 and 1 + 2^-7 and goes to the
   * even 1; 1.01171875 = 1 + 1.5 * 2^-7 ties between 1 + 2^-7 (odd) and 1 + 2^-6;
   * f32(1.0039064) = 1.0039063692 is just past the first tie and rounds up */
  check_floats(run(unary_text("f32[3]", "bf16[3]", "{1.00390625, 1.01171875, 1.0039064}", "convert", ""), false),
               HLO_BF16, FLOATS(1.0, 1.015625, 1.0078125), 0);
  check_floats(run(unary_text("f64[2]", "f32[2]", "{0.1, 1e300}", "convert", ""), false),
               HLO_F32, FLOATS(0.10000000149011612, INFINITY), 0);
  /* f16's largest finite is 65504; 65519 rounds down to it, 65520 ties away to infinity */
  check_floats(run(unary_text("f32[3]", "f16[3]", "{65519, 65520, 1e-8}", "convert", ""), false),
               HLO_F16, FLOATS(65504, INFINITY, 0), 0);
  check_floats(run(unary_text("s32[3]", "f16[3]", "{65519, 65520, -2049}", "convert", ""), false),
               HLO_F16, FLOATS(65504, INFINITY, -2048), 0);
}

static void test_convert_float_to_int(void) {
  /* truncation toward zero, saturation, NaN -> 0 */
  check_ints(run(unary_text("f32[7]", "s32[7]", "{3e9, -3e9, nan, -1.9, 2.9, inf, -inf}", "convert", ""), false),
             HLO_S32, INTS(2147483647, -2147483648, 0, -1, 2, 2147483647, -2147483648));
  check_ints(run(unary_text("f32[4]", "u8[4]", "{-5, 300, 254.9, nan}", "convert", ""), false),
             HLO_U8, INTS(0, 255, 254, 0));
  check_ints(run(unary_text("f64[3]", "s64[3]", "{1e19, -1e19, -7.5}", "convert", ""), false),
             HLO_S64, INTS(INT64_MAX, INT64_MIN, -7));
  check_ints(run(unary_text("f32[4]", "pred[4]", "{0, -0, 2, nan}", "convert", ""), false),
             HLO_PRED, INTS(0, 0, 1, 1));
  check_ints(run(unary_text("bf16[2]", "s8[2]", "{-200, 100.5}", "convert", ""), false), HLO_S8, INTS(-128, 100));
}

static void test_convert_int_to_float(void) {
  /* 2^60 + 2^36 + 1 to f32 (24 bits, spacing 2^37 there): just above the halfway point, so
   * it rounds up to 2^60 + 2^37 = 1152921642045800448. Through a double it would first
   * become the tie 2^60 + 2^36 and then round to the even 2^60. */
  check_floats(run(unary_text("s64[2]", "f32[2]", "{1152921573326323713, -1152921573326323713}", "convert", ""), false),
               HLO_F32, FLOATS(1152921642045800448.0, -1152921642045800448.0), 0);
  /* bf16 (8 bits, spacing 2^53 at 2^60): 2^60 + 2^52 + 1 -> 2^60 + 2^53 */
  check_floats(run(unary_text("s64[1]", "bf16[1]", "{1157425104234217473}", "convert", ""), false),
               HLO_BF16, FLOATS(1161928703861587968.0), 0);
  check_floats(run(unary_text("u64[1]", "f32[1]", "{18446744073709551615}", "convert", ""), false),
               HLO_F32, FLOATS(18446744073709551616.0), 0);
  check_floats(run(unary_text("u32[1]", "f64[1]", "{4294967295}", "convert", ""), false),
               HLO_F64, FLOATS(4294967295.0), 0);
  check_floats(run(unary_text("pred[2]", "f32[2]", "{1, 0}", "convert", ""), false), HLO_F32, FLOATS(1, 0), 0);
}

static void test_convert_int_to_int(void) {
  check_ints(run(unary_text("s32[3]", "s8[3]", "{300, -129, 127}", "convert", ""), false), HLO_S8, INTS(44, 127, 127));
  check_ints(run(unary_text("s32[1]", "u32[1]", "{-1}", "convert", ""), false), HLO_U32, INTS(4294967295));
  check_ints(run(unary_text("u8[1]", "s8[1]", "{255}", "convert", ""), false), HLO_S8, INTS(-1));
  check_ints(run(unary_text("u64[1]", "s64[1]", "{18446744073709551615}", "convert", ""), false), HLO_S64, INTS(-1));
  check_ints(run(unary_text("s32[3]", "pred[3]", "{0, 5, -1}", "convert", ""), false), HLO_PRED, INTS(0, 1, 1));
}

/* s32 {-3, 7} converted to every type, and every type converted to f32 */
static void test_convert_every_type(void) {
  struct { const char *type; hlo_dtype dtype; int64_t want[2]; } ints[] = {
      {"pred", HLO_PRED, {1, 1}},       {"s8", HLO_S8, {-3, 7}},     {"s16", HLO_S16, {-3, 7}},
      {"s32", HLO_S32, {-3, 7}},        {"s64", HLO_S64, {-3, 7}},   {"u8", HLO_U8, {253, 7}},
      {"u16", HLO_U16, {65533, 7}},     {"u32", HLO_U32, {4294967293, 7}},
      {"u64", HLO_U64, {-3 /* 2^64 - 3 */, 7}},
  };
  for (size_t k = 0; k < sizeof ints / sizeof ints[0]; k++) {
    char type[16];
    snprintf(type, sizeof type, "%s[2]", ints[k].type);
    check_ints(run(unary_text("s32[2]", type, "{-3, 7}", "convert", ""), false), ints[k].dtype, ints[k].want, 2);
  }
  struct { const char *type; hlo_dtype dtype; } floats[] = {
      {"f16", HLO_F16}, {"bf16", HLO_BF16}, {"f32", HLO_F32}, {"f64", HLO_F64}};
  for (size_t k = 0; k < sizeof floats / sizeof floats[0]; k++) {
    char type[16];
    snprintf(type, sizeof type, "%s[2]", floats[k].type);
    check_floats(run(unary_text("s32[2]", type, "{-3, 7}", "convert", ""), false), floats[k].dtype, FLOATS(-3, 7), 0);
    check_floats(run(unary_text(type, "f32[2]", "{-3, 7}", "convert", ""), false), HLO_F32, FLOATS(-3, 7), 0);
  }
  const char *from_ints[] = {"s8", "s16", "s64", "u8", "u16", "u32", "u64"};
  for (size_t k = 0; k < sizeof from_ints / sizeof from_ints[0]; k++) {
    char type[16];
    snprintf(type, sizeof type, "%s[2]", from_ints[k]);
    check_floats(run(unary_text(type, "f32[2]", "{3, 7}", "convert", ""), false), HLO_F32, FLOATS(3, 7), 0);
  }
}

/* ---------------------------------------------------------------------------------------
 * bitcast-convert, reduce-precision */

static void test_bitcast_convert(void) {
  /* 1.0f = 0x3F800000 = 1065353216; -1.0f = 0xBF800000 = -1082130432 as s32 */
  check_ints(run(unary_text("f32[2]", "s32[2]", "{1, -1}", "bitcast-convert", ""), false),
             HLO_S32, INTS(1065353216, -1082130432));
  check_floats(run(unary_text("s32[2]", "f32[2]", "{1065353216, -1082130432}", "bitcast-convert", ""), false),
               HLO_F32, FLOATS(1, -1), 0);
  /* narrower: f32[] 1.0 becomes u16[2], little-endian halves 0x0000 then 0x3F80 = 16256 */
  check_ints(run(unary_text("f32[]", "u16[2]", "1", "bitcast-convert", ""), false), HLO_U16, INTS(0, 16256));
  check_floats(run(unary_text("u16[2]", "f32[]", "{0, 16256}", "bitcast-convert", ""), false), HLO_F32, FLOATS(1), 0);
  /* f32[2] -> s8[2,4]: 1.0f is bytes 00 00 80 3F; 2.0f = 0x40000000 is 00 00 00 40 */
  check_ints(run(unary_text("f32[2]", "s8[2,4]", "{1, 2}", "bitcast-convert", ""), false),
             HLO_S8, INTS(0, 0, -128, 63, 0, 0, 0, 64));
  check_ints(run(unary_text("bf16[2]", "u16[2]", "{1, -2}", "bitcast-convert", ""), false),
             HLO_U16, INTS(0x3F80, 0xC000));
  /* fp64 mode: the f32 operand is stored as f64, so it is rounded back to f32 before its
   * bits are taken: 0.1 -> 0x3DCCCCCD = 1036831949 */
  check_ints(run(unary_text("f32[1]", "s32[1]", "{0.1}", "bitcast-convert", ""), true), HLO_S32, INTS(1036831949));
  /* and a float result comes back as f64 */
  check_floats(run(unary_text("s32[1]", "f32[1]", "{1036831949}", "bitcast-convert", ""), true),
               HLO_F64, FLOATS(0.10000000149011612), 0);
}

static void test_reduce_precision(void) {
  /* to bf16's format: the same ties as convert; f32's max rounds up into infinity */
  check_floats(run(unary_text("f32[5]", "f32[5]", "{1.00390625, 1.01171875, nan, 3.4028235e38, -1.00390625}",
                              "reduce-precision", ", exponent_bits=8, mantissa_bits=7"), false),
               HLO_F32, FLOATS(1.0, 1.015625, NAN, INFINITY, -1.0), 0);
  /* to f16's format: 65520 overflows, 1e-8 is below f16's smallest normal and flushes to
   * zero (XLA does not keep subnormals in reduce-precision), 2049 ties to 2048 */
  check_floats(run(unary_text("f32[5]", "f32[5]", "{65520, 1e-8, -1e-8, 2049, 1.5}",
                              "reduce-precision", ", exponent_bits=5, mantissa_bits=10"), false),
               HLO_F32, FLOATS(INFINITY, 0, -0.0, 2048, 1.5), 0);
  check_floats(run(unary_text("f64[2]", "f64[2]", "{0.1, 1e39}", "reduce-precision", ", exponent_bits=8, mantissa_bits=23"), false),
               HLO_F64, FLOATS(0.10000000149011612, INFINITY), 0);
}

/* ---------------------------------------------------------------------------------------
 * map, fp64 mode, errors */

static void test_map(void) {
  const char *text =
      "HloModule m\n"
      "fma {\n"
      "  x = f32[] parameter(0)\n"
      "  y = f32[] parameter(1)\n"
      "  m = f32[] multiply(x, y)\n"
      "  one = f32[] constant(1)\n"
      "  ROOT r = f32[] add(m, one)\n"
      "}\n"
      "ENTRY e {\n"
      "  a = f32[3] constant({1, 2, 3})\n"
      "  b = f32[3] constant({4, 5, 6})\n"
      "  ROOT r = f32[3] map(a, b), dimensions={0}, to_apply=fma\n"
      "}\n";
  check_floats(run(text, false), HLO_F32, FLOATS(5, 11, 19), 0);
  check_floats(run(text, true), HLO_F64, FLOATS(5, 11, 19), 0);
}

static void test_fp64_mode(void) {
  /* 1 + f32(1e-10): f32 rounds it away, f64 keeps 1.0000000001000000 (f32(1e-10) is
   * 1.000000013351432e-10) */
  const char *text = binary_text("f32[2]", "f32[2]", "{1, 0.1}", "{1e-10, 0.2}", "add", "");
  check_floats(run(text, false), HLO_F32, FLOATS(1, 0.30000001192092896), 0);
  text = binary_text("f32[2]", "f32[2]", "{1, 0.1}", "{1e-10, 0.2}", "add", "");
  check_floats(run(text, true), HLO_F64, FLOATS(1.0000000001000000, 0.30000000447034836), 1e-15);
  /* transcendental in double: exp(1) */
  check_floats(run(unary_text("bf16[1]", "bf16[1]", "{1}", "exponential", ""), true),
               HLO_F64, FLOATS(2.718281828459045), 1e-15);
  /* compare and convert see f64 values; converting to f16 keeps the f64 value */
  check_floats(run(unary_text("f32[1]", "f16[1]", "{0.1}", "convert", ""), true),
               HLO_F64, FLOATS(0.10000000149011612), 0);
  check_ints(run(unary_text("f32[2]", "s32[2]", "{-2.5, 3e9}", "convert", ""), true), HLO_S32, INTS(-2, 2147483647));
  check_ints(run(binary_text("f32[2]", "pred[2]", "{1, nan}", "{2, 1}", "compare", ", direction=LT"), true),
             HLO_PRED, INTS(1, 0));
  check_floats(run(binary_text("f16[2]", "f16[2]", "{nan, 1}", "{1, 2}", "maximum", ""), true),
               HLO_F64, FLOATS(NAN, 2), 0);
  /* integer ops are unchanged */
  check_ints(run(binary_text("s32[1]", "s32[1]", "{-7}", "{2}", "divide", ""), true), HLO_S32, INTS(-3));
}

static void test_parameters(void) {
  /* values passed in rather than constants, including a scalar min for clamp */
  const char *text =
      "HloModule m\n"
      "ENTRY e {\n"
      "  x = f32[2,2] parameter(0)\n"
      "  y = f32[2,2] parameter(1)\n"
      "  s = f32[2,2] subtract(x, y)\n"
      "  lo = f32[] constant(-1)\n"
      "  hi = f32[] constant(1)\n"
      "  ROOT c = f32[2,2] clamp(lo, s, hi)\n"
      "}\n";
  int64_t dims[2] = {2, 2};
  rt_value *args[2] = {make_value(HLO_F32, 2, dims, (double[]){0.5, 3, -3, 0}),
                       make_value(HLO_F32, 2, dims, (double[]){0.25, 1, 0, 0})};
  hlo_diag diag;
  rt_value *result = run_text(text, args, 2, false, &diag);
  CHECK_MSG(result != NULL, "evaluation failed: %s", diag.message);
  check_floats(result, HLO_F32, FLOATS(0.25, 1, -1, 0), 0);
  rt_value_release(args[0]);
  rt_value_release(args[1]);
}

static void test_errors(void) {
  /* floor of an integer: refused, by the parser's shape checks or by the kernel */
  hlo_diag diag;
  rt_value *value = run_text(unary_text("s32[2]", "s32[2]", "{1, 2}", "floor", ""), NULL, 0, false, &diag);
  CHECK(value == NULL);
  CHECK(diag.status == HLO_ERR_INPUT || (diag.status == HLO_ERR_UNSUPPORTED && strstr(diag.message, "%r")));
  rt_value_release(value);
  value = run_text(binary_text("f32[2]", "f32[2]", "{1, 2}", "{1, 2}", "shift-left", ""), NULL, 0, false, &diag);
  CHECK(value == NULL);
  rt_value_release(value);
}

int main(void) {
  RUN(test_integer_division_signs);
  RUN(test_division_by_zero);
  RUN(test_int_min_over_minus_one);
  RUN(test_shifts);
  RUN(test_integer_power);
  RUN(test_integer_min_max_bitwise);
  RUN(test_pred_arithmetic);
  RUN(test_add_every_type);
  RUN(test_float_binary);
  RUN(test_float_unary);
  RUN(test_integer_unary);
  RUN(test_compare);
  RUN(test_select_clamp);
  RUN(test_convert_rounding);
  RUN(test_convert_float_to_int);
  RUN(test_convert_int_to_float);
  RUN(test_convert_int_to_int);
  RUN(test_convert_every_type);
  RUN(test_bitcast_convert);
  RUN(test_reduce_precision);
  RUN(test_map);
  RUN(test_fp64_mode);
  RUN(test_parameters);
  RUN(test_errors);
  return TEST_REPORT();
}
