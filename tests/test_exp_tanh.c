/* The cpu backend's f32 exp and tanh (runtime/cpu/exp_f32_internal.h, tanh_f32_internal.h)
 * against exp and tanh in double, rounded to f32. exp: within 1 ulp from -104 to 89 (every
 * 61st float checked, subnormal results included), exact at 0, inf past 88.73, 0 below
 * -103.98 and at -inf, NaN for NaN. tanh: within 2 ulps (every 61st float), odd, +-1 at the
 * infinities, -0 at -0, NaN for NaN. Through the cpu backend: exponential and tanh as one op,
 * logistic, a fused softmax and a fused tanh GELU. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cpu_util.h"
#include "runtime/cpu/exp_f32_internal.h"
#include "runtime/cpu/tanh_f32_internal.h"

static void test_error_bounds(void) {
  int64_t worst = 0, checked = 0, subnormal = 0;
  float worst_at = 0;
  for (int negative = 0; negative < 2; negative++)
    for (uint32_t bits = 0; bits < 0x42d00000u; bits += 61) { /* |x| from 0 to 104 */
      uint32_t signed_bits = bits | (negative ? 0x80000000u : 0);
      float x;
      memcpy(&x, &signed_bits, sizeof x);
      if (x > 89.0f) continue;
      float want = (float)exp((double)x), got = rt_exp_f32(x);
      int64_t apart = ulps_apart(got, want);
      if (apart > worst) worst = apart, worst_at = x;
      checked++;
      subnormal += want != 0 && fabsf(want) < 0x1p-126f;
    }
  CHECK_MSG(worst <= 1, "%lld ulps at %.9g", (long long)worst, worst_at);
  CHECK(checked > 30000000);
  CHECK(subnormal > 1000);
}

static void test_special_values(void) {
  CHECK(rt_exp_f32(0.0f) == 1.0f && rt_exp_f32(-0.0f) == 1.0f);
  CHECK(rt_exp_f32(1.0f) == (float)M_E);
  CHECK(rt_exp_f32(INFINITY) == INFINITY && rt_exp_f32(88.73f) == INFINITY && rt_exp_f32(1e30f) == INFINITY);
  CHECK(rt_exp_f32(-INFINITY) == 0.0f && rt_exp_f32(-104.0f) == 0.0f && rt_exp_f32(-1e30f) == 0.0f);
  CHECK(isnan(rt_exp_f32(NAN)) && isnan(rt_exp_f32(-NAN)));
  /* the largest finite result, and the smallest subnormal: exp(-103.9) = 1.1e-45 rounds up to
   * 2^-149 */
  CHECK(rt_exp_f32(88.72283f) == (float)exp((double)88.72283f) && isfinite(rt_exp_f32(88.72283f)));
  CHECK(rt_exp_f32(-103.9f) == 0x1p-149f);
}

static void test_tanh_error_bounds(void) {
  int64_t worst = 0, odd_failures = 0, checked = 0;
  float worst_at = 0;
  for (uint32_t bits = 0; bits < 0x7f800000u; bits += 61) { /* every finite x >= 0 */
    float x;
    memcpy(&x, &bits, sizeof x);
    float want = (float)tanh((double)x), got = rt_tanh_f32(x);
    int64_t apart = ulps_apart(got, want);
    if (apart > worst) worst = apart, worst_at = x;
    odd_failures += rt_tanh_f32(-x) != -got;
    checked++;
  }
  CHECK_MSG(worst <= 2, "%lld ulps at %.9g", (long long)worst, worst_at);
  CHECK_EQ_INT(odd_failures, 0);
  CHECK(checked > 30000000);
}

static void test_tanh_special_values(void) {
  CHECK(rt_tanh_f32(0.0f) == 0.0f && !signbit(rt_tanh_f32(0.0f)));
  CHECK(rt_tanh_f32(-0.0f) == 0.0f && signbit(rt_tanh_f32(-0.0f)));
  CHECK(rt_tanh_f32(INFINITY) == 1.0f && rt_tanh_f32(-INFINITY) == -1.0f);
  CHECK(rt_tanh_f32(20.0f) == 1.0f && rt_tanh_f32(1e30f) == 1.0f);
  CHECK(isnan(rt_tanh_f32(NAN)));
  /* tanh(x) = x - x^3/3 near 0: 1e-3 -> 9.9999967e-4 */
  CHECK(rt_tanh_f32(1e-3f) == (float)tanh((double)1e-3f) && rt_tanh_f32(1e-30f) == 1e-30f);
}

/* exp and logistic as cpu ops and a softmax (max, exp, sum, divide: fused on the cpu
 * backend) against values computed here in double. */
static void test_through_the_backend(void) {
  const double xs[6] = {-20, -1, 0, 0.5, 3, 10};
  double exps[6], logistic[6], softmax[6], sum = 0;
  for (int i = 0; i < 6; i++) {
    exps[i] = exp(xs[i]);
    logistic[i] = 1 / (1 + exp(-xs[i]));
    sum += exp(xs[i] - 10);
  }
  for (int i = 0; i < 6; i++) softmax[i] = exp(xs[i] - 10) / sum;
  rt_value *a[] = {make_value(HLO_F32, 1, (int64_t[]){6}, xs)};
  EXPECT_CPU("HloModule m\nENTRY e {\n x = f32[6] parameter(0)\n ROOT e = f32[6] exponential(x)\n}\n", a, exps, 1e-6);
  rt_value *b[] = {make_value(HLO_F32, 1, (int64_t[]){6}, xs)};
  EXPECT_CPU("HloModule m\nENTRY e {\n x = f32[6] parameter(0)\n ROOT l = f32[6] logistic(x)\n}\n", b, logistic, 1e-6);
  rt_value *c[] = {make_value(HLO_F32, 2, (int64_t[]){1, 6}, xs)};
  EXPECT_CPU("HloModule m\n"
             "max { a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT m = f32[] maximum(a, b)\n}\n"
             "add { a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] add(a, b)\n}\n"
             "ENTRY e {\n x = f32[1,6] parameter(0)\n lo = f32[] constant(-inf)\n"
             " m = f32[1] reduce(x, lo), dimensions={1}, to_apply=max\n mb = f32[1,6] broadcast(m), dimensions={0}\n"
             " d = f32[1,6] subtract(x, mb)\n e = f32[1,6] exponential(d)\n zero = f32[] constant(0)\n"
             " s = f32[1] reduce(e, zero), dimensions={1}, to_apply=add\n sb = f32[1,6] broadcast(s), dimensions={0}\n"
             " ROOT p = f32[1,6] divide(e, sb)\n}\n",
             c, softmax, 1e-6);
  /* GPT-2's GELU, x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3))) / 2, and tanh alone */
  double tanhs[6], gelu[6];
  for (int i = 0; i < 6; i++) {
    tanhs[i] = tanh(xs[i]);
    gelu[i] = xs[i] * (1 + tanh(sqrt(2 / M_PI) * (xs[i] + 0.044715 * xs[i] * xs[i] * xs[i]))) / 2;
  }
  rt_value *d[] = {make_value(HLO_F32, 1, (int64_t[]){6}, xs)};
  EXPECT_CPU("HloModule m\nENTRY e {\n x = f32[6] parameter(0)\n ROOT t = f32[6] tanh(x)\n}\n", d, tanhs, 1e-6);
  rt_value *e[] = {make_value(HLO_F32, 1, (int64_t[]){6}, xs)};
  EXPECT_CPU("HloModule m\nENTRY e {\n x = f32[6] parameter(0)\n x2 = f32[6] multiply(x, x)\n"
             " x3 = f32[6] multiply(x2, x)\n c = f32[] constant(0.044715)\n cb = f32[6] broadcast(c), dimensions={}\n"
             " cx3 = f32[6] multiply(x3, cb)\n i = f32[6] add(x, cx3)\n k = f32[] constant(0.797884561)\n"
             " kb = f32[6] broadcast(k), dimensions={}\n ki = f32[6] multiply(i, kb)\n t = f32[6] tanh(ki)\n"
             " one = f32[] constant(1)\n ob = f32[6] broadcast(one), dimensions={}\n p = f32[6] add(t, ob)\n"
             " h = f32[] constant(0.5)\n hb = f32[6] broadcast(h), dimensions={}\n xh = f32[6] multiply(x, hb)\n"
             " ROOT g = f32[6] multiply(xh, p)\n}\n",
             e, gelu, 1e-6);
}

int main(void) {
  RUN(test_error_bounds);
  RUN(test_special_values);
  RUN(test_tanh_error_bounds);
  RUN(test_tanh_special_values);
  RUN(test_through_the_backend);
  return TEST_REPORT();
}
