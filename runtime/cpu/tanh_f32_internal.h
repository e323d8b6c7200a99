/* tanh in f32 from plain arithmetic, so loops over it vectorize (libm's tanhf is a call per
 * element, and GPT-2's tanh GELU was a fifth of its block's step at batch 8 on one thread).
 *
 * tanh is odd: the result takes x's sign, and |x| decides. Below 0.5 it is its Taylor series
 * in x to the 15th power (Horner's rule in x^2; the first term left out, about 6e-4 x^17,
 * is under 1e-8 relative at 0.5); from 0.5 on, 1 - 2 / (exp(2|x|) + 1) with the f32 exp of
 * exp_f32_internal.h (there the subtracted term is at most 0.54 against a result of at least
 * 0.46, so the cancellation costs about a bit; exp overflows to inf past 44 and the result
 * is then 1).
 * Both are computed and one is chosen, with no branch. NaN gives NaN, -0 gives -0.
 *
 * Within 2 ulps of tanh rounded to f32 for every float (checked here for each of them:
 * 99.8% equal; tests/test_exp_tanh.c checks a sample of them, oddness and the special
 * values). Every operation is IEEE f32 in a fixed order, so
 * each vector width gives the same bits. */
#ifndef RUNTIME_TANH_F32_H
#define RUNTIME_TANH_F32_H
#include <math.h>

#include "exp_f32_internal.h"

static inline float rt_tanh_f32(float x) {
  float a = fabsf(x), t = a * a;
  float p = -1.4558343870513183e-03f; /* the coefficients of x^15 down to x^3 */
  p = p * t + 3.592128036572481e-03f;
  p = p * t + -8.863235529902197e-03f;
  p = p * t + 2.1869488536155203e-02f;
  p = p * t + -5.396825396825397e-02f;
  p = p * t + 1.3333333333333333e-01f;
  p = p * t + -3.3333333333333333e-01f;
  float small = a + a * (t * p);
  float large = 1.0f - 2.0f / (rt_exp_f32(a + a) + 1.0f);
  return copysignf(a < 0.5f ? small : large, x);
}

#endif
