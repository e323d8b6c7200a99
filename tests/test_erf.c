/* The cpu backend's f32 erf (runtime/erf_f32.h) against erf in double, rounded to f32: within
 * 7 ulps over [1e-37, 8), 4 below 1 (every 61st float checked), odd, +-1 from 4 on and at
 * the infinities, NaN for NaN, and through the cpu backend's unary kernel and a fused GELU. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cpu_util.h"
#include "runtime/cpu/erf_f32_internal.h"

static void test_error_bounds(void) {
  int64_t worst_below_1 = 0, worst = 0, odd_failures = 0;
  float worst_at = 0;
  for (uint32_t bits = 0x02000000u; bits < 0x41000000u; bits += 61) { /* about 1.5e-37 .. 8 */
    float x;
    memcpy(&x, &bits, sizeof x);
    float want = (float)erf((double)x), got = rt_erf_f32(x);
    int64_t apart = ulps_apart(got, want);
    if (apart > worst) worst = apart, worst_at = x;
    if (x < 1 && apart > worst_below_1) worst_below_1 = apart;
    odd_failures += rt_erf_f32(-x) != -got;
  }
  CHECK_MSG(worst <= 7, "%lld ulps at %.9g", (long long)worst, worst_at);
  CHECK_MSG(worst_below_1 <= 4, "%lld ulps below 1", (long long)worst_below_1);
  CHECK_EQ_INT(odd_failures, 0);
}

static void test_special_values(void) {
  CHECK(rt_erf_f32(0.0f) == 0.0f && !signbit(rt_erf_f32(0.0f)));
  CHECK(rt_erf_f32(-0.0f) == 0.0f && signbit(rt_erf_f32(-0.0f)));
  CHECK(rt_erf_f32(4.0f) == 1.0f && rt_erf_f32(9.5f) == 1.0f && rt_erf_f32(-30.0f) == -1.0f);
  CHECK(rt_erf_f32(INFINITY) == 1.0f && rt_erf_f32(-INFINITY) == -1.0f);
  CHECK(isnan(rt_erf_f32(NAN)));
  /* erf(x) ~ 2x / sqrt(pi) near 0 */
  CHECK(fabs(rt_erf_f32(1e-20f) / 1e-20 - 2 / sqrt(M_PI)) < 1e-6);
}

/* erf as a cpu op and inside a fused GELU, x * (1 + erf(x / sqrt 2)) / 2, against values
 * computed here with erf in double: -3 -> -0.00404969, -0.5 -> -0.154269, 0 -> 0,
 * 0.5 -> 0.345731, 1 -> 0.841345, 3 -> 2.99595. */
static void test_through_the_backend(void) {
  const double xs[6] = {-3, -0.5, 0, 0.5, 1, 3};
  double erfs[6], gelu[6];
  for (int i = 0; i < 6; i++) {
    erfs[i] = erf(xs[i]);
    gelu[i] = xs[i] * (1 + erf(xs[i] / sqrt(2))) / 2;
  }
  rt_value *a[] = {make_value(HLO_F32, 1, (int64_t[]){6}, xs)};
  EXPECT_CPU("HloModule m\nENTRY e {\n x = f32[6] parameter(0)\n ROOT e = f32[6] erf(x)\n}\n", a, erfs, 1e-6);
  rt_value *b[] = {make_value(HLO_F32, 1, (int64_t[]){6}, xs)};
  EXPECT_CPU("HloModule m\nENTRY e {\n x = f32[6] parameter(0)\n s = f32[] constant(0.707106781)\n"
             " sb = f32[6] broadcast(s), dimensions={}\n xs = f32[6] multiply(x, sb)\n e = f32[6] erf(xs)\n"
             " one = f32[] constant(1)\n ob = f32[6] broadcast(one), dimensions={}\n p = f32[6] add(e, ob)\n"
             " h = f32[] constant(0.5)\n hb = f32[6] broadcast(h), dimensions={}\n xh = f32[6] multiply(x, hb)\n"
             " ROOT g = f32[6] multiply(xh, p)\n}\n",
             b, gelu, 1e-6);
}

int main(void) {
  RUN(test_error_bounds);
  RUN(test_special_values);
  RUN(test_through_the_backend);
  return TEST_REPORT();
}
