/* erf in f32 as one rational function, so loops over it vectorize (libm's erff is a call
 * per element, and was a sixth of a BERT step at batch 8). erf is odd and within half an
 * f32 ulp of +-1 past |x| = 3.92, so x is clamped to [-4, 4] and erf(x) = x P(x^2) / Q(x^2),
 * P of degree 6 and Q of degree 4 in x^2. The coefficients were fitted here by weighted least
 * squares on the relative error against erf in double over 4,000 Chebyshev points of
 * (0, 4], reweighted until the error stopped falling: at most 7.4e-8 relative in double. In
 * f32 arithmetic the result is within 7 ulps of erf rounded to f32 for every float in
 * [1e-37, 8) (the most between 2 and 4, where the result is nearly 1 and an ulp is 6e-8;
 * at most 4 below 1), odd, exactly +-1 for |x| >= 4 and the infinities, NaN for NaN.
 * tests/test_erf.c checks those bounds. XLA's and PyTorch's CPU kernels approximate erf by
 * a rational function too. */
#ifndef RUNTIME_ERF_F32_H
#define RUNTIME_ERF_F32_H

static inline float rt_erf_f32(float x) {
  float c = x < -4.0f ? -4.0f : x > 4.0f ? 4.0f : x; /* NaN stays NaN */
  float t = c * c;
  float p = 1.9145630708230018e-08f;
  p = p * t + -1.919430076270196e-06f;
  p = p * t + 1.4234692100482458e-04f;
  p = p * t + 3.79483797207707e-03f;
  p = p * t + 5.091056672534345e-02f;
  p = p * t + 2.0262383550693544e-01f;
  p = p * t + 1.1283791451208696f;
  float q = 9.729051497461317e-04f;
  q = q * t + 1.456332390610433e-02f;
  q = q * t + 1.160933827362043e-01f;
  q = q * t + 5.129028299787735e-01f;
  q = q * t + 1.0f;
  return c * p / q;
}

#endif
