/* exp in f32 from plain arithmetic, so loops over it vectorize (libm's expf is a call per
 * element, and softmax's exponentials were a tenth of a ViT-B/16 step on one thread; its
 * large negative arguments took libm's slow underflow path, which sets errno).
 *
 * exp(x) = 2^n exp(r) with n = x / ln 2 rounded to nearest (by adding and subtracting
 * 1.5 * 2^23) and r = x - n ln 2 in [-ln2/2, ln2/2], n ln 2 subtracted in two parts (Cody and
 * Waite: ln2_hi ends in 9 zero bits of mantissa, so n * ln2_hi is exact for |n| < 2^9,
 * and the first subtraction is exact too). exp(r) is its Taylor polynomial of degree 7 (the
 * first term left out, r^8 / 8!, is under 6e-9 relative there: a tenth of an f32 ulp). 2^n is
 * applied as two exact powers of two, 2^(n/2) then 2^(n - n/2), so results that are
 * subnormal round once, in the last multiply, and those past the range overflow to inf or
 * underflow to 0 by themselves. x is clamped to [-104, 89] first (exp is 0 below -103.98 and
 * inf above 88.73 in f32); a NaN passes the clamp and makes the result NaN. n comes from the
 * bits of the rounded sum, not a float-to-int conversion (undefined for NaN).
 *
 * Within 1 ulp of exp rounded to f32 for every float from -104 to 89 (checked here for each
 * of them: 99.2% equal, the rest 1 apart; tests/test_exp_tanh.c checks a sample of them, the
 * infinities, NaN, 0 and the ends of the range).
 * Every operation is IEEE f32 in a fixed order (no fused multiply-add: C11 mode contracts
 * nothing), so each vector width gives the same bits. */
#ifndef RUNTIME_EXP_F32_H
#define RUNTIME_EXP_F32_H
#include <stdint.h>
#include <string.h>

static inline float rt_pow2_f32(int32_t n) { /* 2^n for n in [-126, 127] */
  uint32_t bits = (uint32_t)(n + 127) << 23;
  float p;
  memcpy(&p, &bits, sizeof p);
  return p;
}

static inline float rt_exp_f32(float x) {
  const float shifter = 0x1.8p23f, log2e = 0x1.715476p0f;
  const float ln2_hi = 0x1.62e400p-1f, ln2_lo = 0x1.7f7d1cp-20f;
  float c = x < -104.0f ? -104.0f : x; /* NaN stays NaN */
  c = c > 89.0f ? 89.0f : c;
  float shifted = c * log2e + shifter;
  float n = shifted - shifter;
  uint32_t shifted_bits, shifter_bits;
  memcpy(&shifted_bits, &shifted, sizeof shifted_bits);
  memcpy(&shifter_bits, &shifter, sizeof shifter_bits);
  /* n as an integer, from the low mantissa bits (kept in [-256, 255] whatever the input) */
  int32_t ni = (int32_t)((shifted_bits - shifter_bits + 256u) & 0x1ffu) - 256;
  float r = (c - n * ln2_hi) - n * ln2_lo;
  float p = 1.0f / 5040;
  p = p * r + 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  int32_t half = ni / 2;
  return p * rt_pow2_f32(half) * rt_pow2_f32(ni - half);
}

#endif
