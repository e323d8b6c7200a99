/* Every op of latch.h through the public API, against values worked out by hand or in
 * closed form (comments show the arithmetic). Lazy: each check reads, which syncs. */
#include <math.h>
#include <stdio.h>
#include <unistd.h>

#include "capture_util.h"

static latch_tensor *a23(void) { return F32(2, (2, 3), 1, 2, 3, 4, 5, 6); }

static void test_broadcasting(void) {
  latch_tensor *a = a23(), *row = F32(1, (3), 10, 20, 30), *col = F32(2, (2, 1), 100, 200);
  latch_tensor *s = keep(latch_scalar(util_rt, LATCH_F32, 0.5));
  EXPECT(latch_binary(LATCH_ADD, a, row), 0, 11, 22, 33, 14, 25, 36);
  EXPECT(latch_binary(LATCH_MUL, a, col), 0, 100, 200, 300, 800, 1000, 1200);
  EXPECT(latch_binary(LATCH_SUB, row, col), 0, -90, -80, -70, -190, -180, -170); /* [3] - [2,1] -> [2,3] */
  EXPECT(latch_binary(LATCH_DIV, a, s), 0, 2, 4, 6, 8, 10, 12);
  EXPECT(latch_binary(LATCH_POW, row, F32(0, (0), 2)), 0, 100, 400, 900);
  latch_tensor *b = latch_binary(LATCH_ADD, row, col);
  CHECK(has_dims(b, 2, DIMS(2, 3)));
  EXPECT(latch_binary(LATCH_MAX, a, F32(1, (3), 2, 2, 9)), 0, 2, 2, 9, 4, 5, 9);
  EXPECT(latch_binary(LATCH_MIN, a, F32(1, (3), 2, 2, 9)), 0, 1, 2, 3, 2, 2, 6);
  EXPECT(latch_binary(LATCH_REM, F32(1, (2), 7, -7), F32(1, (2), 3, 3)), 0, 1, -1); /* fmod */
}

static latch_tensor *typed(latch_dtype dtype, int64_t n, const void *data) {
  return keep(latch_from_host(util_rt, dtype, 1, &n, data));
}

static void test_promotion(void) {
  int32_t i32[2] = {1, 2};
  uint8_t u8[1] = {200};
  int8_t i8[1] = {-1};
  uint64_t u64[1] = {1};
  uint8_t yes[2] = {1, 0};
  latch_tensor *ti = typed(LATCH_I32, 2, i32), *tu8 = typed(LATCH_U8, 1, u8), *ti8 = typed(LATCH_I8, 1, i8);
  latch_tensor *half = keep(latch_scalar(util_rt, LATCH_F32, 0.5)), *tb = typed(LATCH_BOOL, 2, yes);
  latch_tensor *r = latch_binary(LATCH_ADD, ti, half); /* integer + float -> the float */
  CHECK_EQ_INT(latch_tensor_dtype(r), LATCH_F32);
  EXPECT(r, 0, 1.5, 2.5);
  r = latch_binary(LATCH_ADD, tu8, ti8); /* u8 + s8 -> s16: 200 + -1 */
  CHECK_EQ_INT(latch_tensor_dtype(r), LATCH_I16);
  EXPECT(r, 0, 199);
  r = latch_binary(LATCH_ADD, ti, tb); /* bool yields */
  CHECK_EQ_INT(latch_tensor_dtype(r), LATCH_I32);
  EXPECT(r, 0, 2, 2);
  latch_tensor *h = keep(latch_cast(half, LATCH_F16)), *bf = keep(latch_cast(half, LATCH_BF16));
  r = latch_binary(LATCH_MUL, h, bf); /* f16 with bf16 -> f32 */
  CHECK_EQ_INT(latch_tensor_dtype(r), LATCH_F32);
  EXPECT(r, 0, 0.25);
  latch_tensor *big = typed(LATCH_U64, 1, u64);
  r = latch_binary(LATCH_ADD, big, ti8); /* u64 with a signed type: no type holds both */
  CHECK(latch_tensor_error(r) && strstr(latch_tensor_error(r), "no type holds both"));
  latch_release(r);
  int32_t num[2] = {7, -7}, den[2] = {2, 2};
  latch_tensor *n = typed(LATCH_I32, 2, num), *d = typed(LATCH_I32, 2, den);
  r = latch_binary(LATCH_DIV, n, d); /* truncates toward zero */
  CHECK_EQ_INT(latch_tensor_dtype(r), LATCH_I32);
  EXPECT(r, 0, 3, -3);
  EXPECT(latch_binary(LATCH_AND, tb, typed(LATCH_BOOL, 2, (uint8_t[]){1, 1})), 0, 1, 0);
  latch_tensor *bad = latch_binary(LATCH_XOR, half, half);
  CHECK(latch_tensor_error(bad) != NULL);
  latch_release(bad);
}

static void test_unary(void) {
  latch_tensor *x = F32(1, (3), -1, 0.5, 2);
  EXPECT(latch_unary(LATCH_NEG, x), 0, 1, -0.5, -2);
  EXPECT(latch_unary(LATCH_ABS, x), 0, 1, 0.5, 2);
  EXPECT(latch_unary(LATCH_EXP, x), 1e-6, exp(-1), exp(0.5), exp(2));
  EXPECT(latch_unary(LATCH_SIGMOID, x), 1e-6, 1 / (1 + exp(1)), 1 / (1 + exp(-0.5)), 1 / (1 + exp(-2)));
  EXPECT(latch_unary(LATCH_ERF, x), 1e-6, erf(-1), erf(0.5), erf(2));
  EXPECT(latch_unary(LATCH_TANH, x), 1e-6, tanh(-1), tanh(0.5), tanh(2));
  EXPECT(latch_unary(LATCH_FLOOR, x), 0, -1, 0, 2);
  EXPECT(latch_unary(LATCH_CEIL, x), 0, -1, 1, 2);
  EXPECT(latch_unary(LATCH_SIGN, x), 0, -1, 1, 1);
  latch_tensor *p = F32(1, (2), 4, 0.25);
  EXPECT(latch_unary(LATCH_SQRT, p), 1e-7, 2, 0.5);
  EXPECT(latch_unary(LATCH_RSQRT, p), 1e-6, 0.5, 2);
  EXPECT(latch_unary(LATCH_LOG, p), 1e-6, log(4), log(0.25));
  int32_t iv[2] = {1, 2};
  latch_tensor *ints = keep(latch_from_host(util_rt, LATCH_I32, 1, DIMS(2), iv));
  latch_tensor *e = latch_unary(LATCH_EXP, ints); /* float ops promote integers to f32 */
  CHECK_EQ_INT(latch_tensor_dtype(e), LATCH_F32);
  EXPECT(e, 1e-6, exp(1), exp(2));
  EXPECT(latch_unary(LATCH_FLOOR, ints), 0, 1, 2);
  EXPECT(latch_unary(LATCH_NOT, ints), 0, -2, -3); /* bitwise */
}

static void test_compare_where_clamp_cast(void) {
  latch_tensor *a = a23(), *row = F32(1, (3), 2, 5, 3);
  latch_tensor *lt = latch_compare(LATCH_LT, a, row); /* {1<2, 2<5, 3<3, 4<2, 5<5, 6<3} */
  CHECK_EQ_INT(latch_tensor_dtype(lt), LATCH_BOOL);
  latch_tensor *w = latch_where(lt, a, keep(latch_scalar(util_rt, LATCH_F32, -1)));
  EXPECT(lt, 0, 1, 1, 0, 0, 0, 0);
  EXPECT(w, 0, 1, 2, -1, -1, -1, -1);
  EXPECT(latch_compare(LATCH_EQ, a, row), 0, 0, 0, 1, 0, 1, 0);
  EXPECT(latch_compare(LATCH_GE, a, row), 0, 0, 0, 1, 1, 1, 1);
  latch_tensor *notbool = latch_where(a, a, a);
  CHECK(latch_tensor_error(notbool) && strstr(latch_tensor_error(notbool), "where"));
  EXPECT(latch_clamp(F32(1, (3), -2, 0.5, 3), 0, 1), 0, 0, 0.5, 1);
  latch_tensor *c = latch_cast(F32(1, (3), 1.7, -1.7, 300), LATCH_I32);
  CHECK_EQ_INT(latch_tensor_dtype(c), LATCH_I32);
  EXPECT(c, 0, 1, -1, 300);
  EXPECT(latch_relu(F32(1, (3), -1, 0, 2)), 0, 0, 0, 2);
}

static void test_matmul(void) {
  latch_tensor *a = a23(), *b = F32(2, (3, 2), 1, 0, 0, 1, 1, 1);
  /* [1 2 3; 4 5 6] x [1 0; 0 1; 1 1] = [4 5; 10 11] */
  EXPECT(latch_matmul(a, b), 0, 4, 5, 10, 11);
  latch_tensor *v = F32(1, (3), 1, 1, 1);
  EXPECT(latch_matmul(a, v), 0, 6, 15);      /* matrix x vector */
  EXPECT(latch_matmul(v, v), 0, 3);          /* vector . vector: a scalar */
  EXPECT(latch_matmul(v, b), 0, 2, 2);       /* vector x matrix */
  /* Batch broadcasting: [2,1,2,2] x [3,2,2] -> [2,3,2,2]; lhs batch i is i*I, rhs batch j
   * is [[j, 0], [0, 1]], so block (i, j) is diag(i*j, i). */
  double lhs[8] = {1, 0, 0, 1, 2, 0, 0, 2}, rhs[12] = {0, 0, 0, 1, 1, 0, 0, 1, 2, 0, 0, 1};
  latch_tensor *l = tf(4, DIMS(2, 1, 2, 2), lhs), *r = tf(3, DIMS(3, 2, 2), rhs);
  latch_tensor *m = latch_matmul(l, r);
  CHECK(has_dims(m, 4, DIMS(2, 3, 2, 2)));
  EXPECT(m, 0, 0, 0, 0, 1, 1, 0, 0, 1, 2, 0, 0, 1, 0, 0, 0, 2, 2, 0, 0, 2, 4, 0, 0, 2);
  latch_tensor *bad = latch_matmul(a, a);
  CHECK(latch_tensor_error(bad) && strstr(latch_tensor_error(bad), "f32[2,3]"));
  latch_release(bad);
}

static void test_conv2d(void) {
  latch_tensor *x = F32(4, (1, 1, 3, 3), 1, 2, 3, 4, 5, 6, 7, 8, 9);
  latch_tensor *ones = F32(4, (1, 1, 2, 2), 1, 1, 1, 1);
  EXPECT(latch_conv2d(x, ones, NULL), 0, 12, 16, 24, 28); /* 1+2+4+5, 2+3+5+6, ... */
  latch_conv2d_params p = {{2, 2}, {1, 1}, {1, 1}, 1};
  /* Padded by 1, stride 2: windows at (-1,-1) {1}, (-1,1) {2,3}, (1,-1) {4,7}, (1,1) {5,6,8,9} */
  EXPECT(latch_conv2d(x, ones, &p), 0, 1, 5, 11, 28);
  latch_conv2d_params dil = {{1, 1}, {0, 0}, {2, 2}, 1};
  EXPECT(latch_conv2d(x, ones, &dil), 0, 20); /* the corners: 1+3+7+9 */
  /* Two groups: channel 0 all 1 times weight 3, channel 1 all 2 times weight 5. */
  latch_tensor *x2 = F32(4, (1, 2, 2, 2), 1, 1, 1, 1, 2, 2, 2, 2), *w2 = F32(4, (2, 1, 1, 1), 3, 5);
  latch_conv2d_params groups = {{0, 0}, {0, 0}, {0, 0}, 2};
  EXPECT(latch_conv2d(x2, w2, &groups), 0, 3, 3, 3, 3, 10, 10, 10, 10);
  latch_tensor *bad = latch_conv2d(x2, ones, &groups);
  CHECK(latch_tensor_error(bad) && strstr(latch_tensor_error(bad), "conv2d"));
  latch_release(bad);
  /* The input's gradient of the stride-2 pad-1 convolution above, kernel [1, 10; 100, 1000],
   * result gradient [1, 2; 3, 4]: input row h is reached from output row oh by tap
   * kh = h + 1 - 2 oh (h 0: oh 0 tap 1; h 1: oh 1 tap 0; h 2: oh 1 tap 1), columns alike,
   * so dx(0, 0) = g(0, 0) w(1, 1), dx(0, 1) = g(0, 1) w(1, 0), ... */
  latch_tensor *g = F32(4, (1, 1, 2, 2), 1, 2, 3, 4), *w = F32(4, (1, 1, 2, 2), 1, 10, 100, 1000);
  const int64_t size[2] = {3, 3};
  EXPECT(latch_conv2d_input_grad(g, w, &p, size), 0, 1000, 200, 2000, 30, 4, 40, 3000, 400, 4000);
  /* stride 1, no padding, [1, 1, 2, 2] result of a 3x3 input: each tap's full map */
  latch_tensor *g1 = F32(4, (1, 1, 2, 2), 1, 2, 3, 4);
  /* dx(h, w) = sum over taps (kh, kw) of g(h - kh, w - kw) w(kh, kw) */
  EXPECT(latch_conv2d_input_grad(g1, w, NULL, size), 0, 1, 12, 20, 103, 1234, 2040, 300, 3400, 4000);
  const int64_t wrong[2] = {6, 6}; /* whose stride-2 result would be 4x4 */
  bad = latch_conv2d_input_grad(g, w, &p, wrong);
  CHECK(latch_tensor_error(bad) && strstr(latch_tensor_error(bad), "conv2d_input_grad"));
  latch_release(bad);
  /* The weights' gradient of the same: dw(kh, kw) = sum over the windows of x(2 oh - 1 + kh,
   * 2 ow - 1 + kw) g(oh, ow): tap (0, 0) meets only x(1, 1) = 5 (times 4); tap (0, 1) x(1, 0)
   * 4 * 3 + x(1, 2) 6 * 4; tap (1, 0) 2 * 2 + 8 * 4; tap (1, 1) 1 + 3 * 2 + 7 * 3 + 9 * 4 */
  const int64_t taps[2] = {2, 2};
  EXPECT(latch_conv2d_weight_grad(x, g, &p, taps), 0, 20, 36, 36, 64);
  /* stride 1: dw(kh, kw) = sum of x(oh + kh, ow + kw) g(oh, ow): 1 + 4 + 12 + 20, ... */
  EXPECT(latch_conv2d_weight_grad(x, g1, NULL, taps), 0, 37, 47, 67, 77);
  const int64_t wide[2] = {3, 3}; /* a stride-1 3x3 kernel leaves a 1x1 result, not 2x2 */
  bad = latch_conv2d_weight_grad(x, g1, NULL, wide);
  CHECK(latch_tensor_error(bad) && strstr(latch_tensor_error(bad), "conv2d_weight_grad"));
  latch_release(bad);
}

static void test_pool(void) {
  double v[16];
  for (int i = 0; i < 16; i++) v[i] = i + 1;
  latch_tensor *x = tf(4, DIMS(1, 1, 4, 4), v), *x3 = F32(4, (1, 1, 3, 3), 1, 2, 3, 4, 5, 6, 7, 8, 9);
  int64_t k[2] = {2, 2}, pad[2] = {1, 1};
  EXPECT(latch_max_pool2d(x, k, NULL, NULL), 0, 6, 8, 14, 16);
  EXPECT(latch_avg_pool2d(x, k, NULL, NULL), 0, 3.5, 5.5, 11.5, 13.5);
  EXPECT(latch_max_pool2d(x3, k, k, pad), 0, 1, 3, 7, 9);
  EXPECT(latch_avg_pool2d(x3, k, k, pad), 0, 0.25, 1.25, 2.75, 7); /* padding counts as zeros */
}

/* A max pool's gradient: each window's gradient to its first maximum, overlapping windows
 * adding up. */
static void test_max_pool_grad(void) {
  double v[16];
  for (int i = 0; i < 16; i++) v[i] = i + 1;
  latch_tensor *x = tf(4, DIMS(1, 1, 4, 4), v), *g = F32(4, (1, 1, 2, 2), 1, 2, 3, 4);
  int64_t k3[2] = {3, 3}, s2[2] = {2, 2}, p1[2] = {1, 1}, k2[2] = {2, 2}, s1[2] = {1, 1}, p0[2] = {0, 0};
  /* 3x3 stride 2 pad 1 over 1..16: the windows' maxima are 6, 8, 14 and 16 */
  EXPECT(latch_max_pool2d_grad(x, g, k3, s2, p1), 0, 0, 0, 0, 0, 0, 1, 0, 2, 0, 0, 0, 0, 0, 3, 0, 4);
  /* 2x2 stride 1 over 1..9: bottom-right of each window; over ones: the first, top-left */
  latch_tensor *x3 = F32(4, (1, 1, 3, 3), 1, 2, 3, 4, 5, 6, 7, 8, 9), *ones = F32(4, (1, 1, 3, 3), 1, 1, 1, 1, 1, 1, 1, 1, 1);
  EXPECT(latch_max_pool2d_grad(x3, g, k2, s1, p0), 0, 0, 0, 0, 0, 1, 2, 0, 3, 4);
  EXPECT(latch_max_pool2d_grad(ones, g, k2, s1, p0), 0, 1, 2, 0, 3, 4, 0, 0, 0, 0);
  /* 3x3 stride 1 pad 1 over 1..9, gradients 1..9: 9 is the maximum of the four windows at
   * (1..2, 1..2): 5 + 6 + 8 + 9; 8 of (1, 0) and (2, 0): 4 + 7; 6 of (0, 1) and (0, 2): 2 + 3 */
  latch_tensor *g9 = F32(4, (1, 1, 3, 3), 1, 2, 3, 4, 5, 6, 7, 8, 9);
  EXPECT(latch_max_pool2d_grad(x3, g9, k3, s1, p1), 0, 0, 0, 0, 0, 1, 5, 0, 11, 28);
  latch_tensor *bad = latch_max_pool2d_grad(x3, g9, k2, s1, p0); /* the gradient is 3x3, the pool 2x2 */
  CHECK(latch_tensor_error(bad) && strstr(latch_tensor_error(bad), "max_pool2d_grad"));
  latch_release(bad);
}

static void test_reductions(void) {
  latch_tensor *a = a23();
  EXPECT(latch_reduce(LATCH_SUM, a, 1, (int[]){1}, false), 0, 6, 15);
  latch_tensor *k = latch_reduce(LATCH_SUM, a, 1, (int[]){-1}, true);
  CHECK(has_dims(k, 2, DIMS(2, 1)));
  EXPECT(k, 0, 6, 15);
  EXPECT(latch_reduce(LATCH_MEAN, a, 1, (int[]){0}, false), 0, 2.5, 3.5, 4.5);
  latch_tensor *all = latch_reduce(LATCH_RMAX, a, 0, NULL, false);
  CHECK_EQ_INT(latch_rank(all), 0);
  EXPECT(all, 0, 6);
  EXPECT(latch_reduce(LATCH_RMIN, a, 1, (int[]){1}, false), 0, 1, 4);
  EXPECT(latch_reduce(LATCH_SUM, a, 2, (int[]){0, 1}, true), 0, 21);
  latch_tensor *mask = keep(latch_compare(LATCH_GT, a, keep(latch_scalar(util_rt, LATCH_F32, 2))));
  latch_tensor *count = latch_reduce(LATCH_SUM, mask, 0, NULL, false);
  CHECK_EQ_INT(latch_tensor_dtype(count), LATCH_I64);
  EXPECT(count, 0, 4);
  int32_t iv[3] = {-5, 7, 2};
  latch_tensor *ints = keep(latch_from_host(util_rt, LATCH_I32, 1, DIMS(3), iv));
  EXPECT(latch_reduce(LATCH_RMAX, ints, 0, NULL, false), 0, 7);
  EXPECT(latch_reduce(LATCH_RMIN, ints, 0, NULL, false), 0, -5);
  latch_tensor *bad = latch_reduce(LATCH_MEAN, ints, 0, NULL, false);
  CHECK(latch_tensor_error(bad) != NULL);
  latch_release(bad);
}

static void test_argmax(void) {
  EXPECT(latch_argmax(F32(1, (4), 1, 3, 3, 2), 0, false), 0, 1); /* ties: the first */
  latch_tensor *x = F32(2, (2, 3), 5, 1, 5, 0, 0, 0);
  latch_tensor *r = latch_argmax(x, 1, false);
  CHECK_EQ_INT(latch_tensor_dtype(r), LATCH_I64);
  EXPECT(r, 0, 0, 0);
  r = latch_argmax(x, 0, true);
  CHECK(has_dims(r, 2, DIMS(1, 3)));
  EXPECT(r, 0, 0, 0, 0);
  EXPECT(latch_argmax(F32(2, (2, 2), -3, -1, -2, -5), -1, false), 0, 1, 0);
}

static void test_softmax_norms(void) {
  latch_tensor *x = F32(1, (3), 1, 2, 3);
  double s = exp(1) + exp(2) + exp(3);
  EXPECT(latch_softmax(x, 0), 1e-6, exp(1) / s, exp(2) / s, exp(3) / s);
  EXPECT(latch_log_softmax(x, 0), 1e-6, 1 - log(s), 2 - log(s), 3 - log(s));
  EXPECT(latch_softmax(F32(2, (2, 2), 1000, 1000, -1000, 0), 1), 1e-6, 0.5, 0.5, 0, 1); /* no overflow */
  EXPECT(latch_log_softmax(F32(1, (2), 1000, 0), 0), 1e-6, 0, -1000);
  /* layer_norm of {1, 2, 3}: mean 2, variance 2/3. */
  double inv = 1 / sqrt(2.0 / 3 + 1e-5);
  EXPECT(latch_layer_norm(x, 1, NULL, NULL, 1e-5), 1e-5, -inv, 0, inv);
  latch_tensor *w = F32(1, (3), 1, 2, 3), *b = F32(1, (3), 0, 1, 0);
  EXPECT(latch_layer_norm(x, 1, w, b, 1e-5), 1e-5, -inv, 1, 3 * inv);
  /* Over two dims of [1,2,2] {0,0,2,2}: mean 1, variance 1. */
  EXPECT(latch_layer_norm(F32(3, (1, 2, 2), 0, 0, 2, 2), 2, NULL, NULL, 0), 1e-6, -1, -1, 1, 1);
  latch_tensor *bad = latch_layer_norm(x, 1, b, F32(1, (2), 1, 1), 1e-5);
  CHECK(latch_tensor_error(bad) && strstr(latch_tensor_error(bad), "bias"));
  latch_release(bad);
  /* batch_norm: channel 0 (x-1)/2*2+0, channel 1 (x-3)/1*1+10. */
  latch_tensor *bx = F32(4, (1, 2, 1, 2), 1, 2, 3, 4);
  latch_tensor *mean = F32(1, (2), 1, 3), *var = F32(1, (2), 4, 1), *g = F32(1, (2), 2, 1), *o = F32(1, (2), 0, 10);
  EXPECT(latch_batch_norm(bx, mean, var, g, o, 0), 1e-6, 0, 1, 10, 11);
  EXPECT(latch_batch_norm(bx, mean, var, NULL, NULL, 0), 1e-6, 0, 0.5, 0, 1);
  /* gelu */
  latch_tensor *gx = F32(1, (3), -1, 0.5, 2);
  double xs[3] = {-1, 0.5, 2}, erf_form[3], tanh_form[3];
  for (int i = 0; i < 3; i++) {
    double t = xs[i];
    erf_form[i] = 0.5 * t * (1 + erf(t / sqrt(2)));
    tanh_form[i] = 0.5 * t * (1 + tanh(sqrt(2 / M_PI) * (t + 0.044715 * t * t * t)));
  }
  EXPECT(latch_gelu(gx, false), 1e-6, erf_form[0], erf_form[1], erf_form[2]);
  EXPECT(latch_gelu(gx, true), 1e-6, tanh_form[0], tanh_form[1], tanh_form[2]);
}

static void test_embedding(void) {
  latch_tensor *table = F32(2, (4, 2), 0, 1, 10, 11, 20, 21, 30, 31);
  int32_t ix[4] = {3, 0, 1, 1};
  latch_tensor *idx = keep(latch_from_host(util_rt, LATCH_I32, 2, DIMS(2, 2), ix));
  latch_tensor *e = latch_embedding(table, idx);
  CHECK(has_dims(e, 3, DIMS(2, 2, 2)));
  EXPECT(e, 0, 30, 31, 0, 1, 10, 11, 10, 11);
  latch_tensor *bad = latch_embedding(table, table);
  CHECK(latch_tensor_error(bad) != NULL);
  latch_release(bad);
}

static void test_shape_ops(void) {
  latch_tensor *a = a23();
  latch_tensor *flat = latch_reshape(a, 1, DIMS(-1));
  CHECK(has_dims(flat, 1, DIMS(6)));
  EXPECT(flat, 0, 1, 2, 3, 4, 5, 6);
  latch_tensor *r = latch_reshape(a, 2, DIMS(3, -1));
  CHECK(has_dims(r, 2, DIMS(3, 2)));
  EXPECT(r, 0, 1, 2, 3, 4, 5, 6);
  latch_tensor *bad = latch_reshape(a, 2, DIMS(4, -1));
  CHECK(latch_tensor_error(bad) && strstr(latch_tensor_error(bad), "reshape"));
  latch_release(bad);
  EXPECT(latch_permute(a, (int[]){1, 0}), 0, 1, 4, 2, 5, 3, 6);
  /* [[1, 2, 3], [4, 5, 6]] reversed along the columns, the rows, both (a negative dim too) */
  EXPECT(latch_flip(a, 1, (int[]){1}), 0, 3, 2, 1, 6, 5, 4);
  EXPECT(latch_flip(a, 1, (int[]){0}), 0, 4, 5, 6, 1, 2, 3);
  EXPECT(latch_flip(a, 2, (int[]){-1, 0}), 0, 6, 5, 4, 3, 2, 1);
  EXPECT(latch_flip(a, 0, NULL), 0, 1, 2, 3, 4, 5, 6);
  latch_tensor *flips[] = {latch_flip(a, 1, (int[]){2}), latch_flip(a, 2, (int[]){1, -1})};
  CHECK(latch_tensor_error(flips[0]) && strstr(latch_tensor_error(flips[0]), "out of range"));
  CHECK(latch_tensor_error(flips[1]) && strstr(latch_tensor_error(flips[1]), "twice"));
  latch_release(flips[0]);
  latch_release(flips[1]);
  double v[10];
  for (int i = 0; i < 10; i++) v[i] = i;
  latch_tensor *ten = tf(1, DIMS(10), v);
  EXPECT(latch_slice(ten, 0, 1, 8, 3), 0, 1, 4, 7);
  EXPECT(latch_slice(ten, 0, -3, 100, 1), 0, 7, 8, 9);
  EXPECT(latch_slice(ten, 0, 0, 10, 4), 0, 0, 4, 8);
  EXPECT(latch_slice(a, 1, 0, 3, 2), 0, 1, 3, 4, 6);
  latch_tensor *pair[2] = {a, a};
  EXPECT(latch_concat(2, pair, 0), 0, 1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6);
  EXPECT(latch_concat(2, pair, 1), 0, 1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6);
  EXPECT(latch_pad(F32(1, (2), 1, 2), DIMS(1), DIMS(2), 9), 0, 9, 1, 2, 9, 9);
  EXPECT(latch_pad(a, DIMS(0, -1), DIMS(0, 0), 0), 0, 2, 3, 5, 6); /* negative crops */
  latch_tensor *bt = latch_broadcast_to(F32(1, (3), 1, 2, 3), 2, DIMS(2, 3));
  CHECK(has_dims(bt, 2, DIMS(2, 3)));
  EXPECT(bt, 0, 1, 2, 3, 1, 2, 3);
  bad = latch_broadcast_to(a, 1, DIMS(6));
  CHECK(latch_tensor_error(bad) != NULL);
  latch_release(bad);
}

/* latch_rand_*'s draw for element i, written here from the documented scheme (splitmix64's
 * finalizer over the seed and the index; uniform in [0, 1) from the top 53 bits), not taken
 * from the library. */
static uint64_t test_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
  return z ^ (z >> 31);
}

static double test_unit(uint64_t seed, int64_t i) {
  return (double)(test_mix(seed ^ test_mix((uint64_t)i + UINT64_C(0x632BE59BD9B4E019))) >> 11) * 0x1p-53;
}

/* Large tensors are drawn split over the threads: every element is still the draw for its
 * index (f32 rounded from the double), at the start, the middle and the end. */
static void test_random_large(void) {
  enum { N = 300001 };
  latch_tensor *u = latch_rand_uniform(util_rt, LATCH_F32, 1, DIMS(N), -2, 3, 42);
  latch_tensor *n = latch_rand_normal(util_rt, LATCH_F64, 1, DIMS(N), 1, 2, 7);
  latch_tensor *n32 = latch_rand_normal(util_rt, LATCH_F32, 1, DIMS(N), 1, 2, 7);
  double *got_u = malloc(sizeof(double) * N), *got_n = malloc(sizeof(double) * N);
  double *got_n32 = malloc(sizeof(double) * N);
  CHECK(u && n && n32 && got_u && got_n && got_n32);
  if (!u || !n || !n32 || !got_u || !got_n || !got_n32) {
    free(got_u);
    free(got_n);
    free(got_n32);
    return;
  }
  CHECK_EQ_INT(latch_read_f64(u, got_u, N), LATCH_OK);
  CHECK_EQ_INT(latch_read_f64(n, got_n, N), LATCH_OK);
  CHECK_EQ_INT(latch_read_f64(n32, got_n32, N), LATCH_OK);
  int wrong_u = 0, wrong_n = 0, wrong_n32 = 0;
  for (int64_t i = 0; i < N; i++) {
    float want_u = (float)(-2 + 5 * test_unit(42, i));
    double u1 = test_unit(7, 2 * i), u2 = test_unit(7, 2 * i + 1);
    double want_n = 1 + 2 * sqrt(-2.0 * log1p(-u1)) * cos(6.283185307179586 * u2);
    wrong_u += got_u[i] != (double)want_u;
    wrong_n += got_n[i] != want_n;
    wrong_n32 += got_n32[i] != (double)(float)want_n;
  }
  CHECK_EQ_INT(wrong_u, 0);
  CHECK_EQ_INT(wrong_n, 0);
  CHECK_EQ_INT(wrong_n32, 0);
  free(got_u);
  free(got_n);
  free(got_n32);
  latch_release(u);
  latch_release(n);
  latch_release(n32);
}

static void test_creation(void) {
  EXPECT(latch_full(util_rt, LATCH_F32, 2, DIMS(1, 2), 2.5), 0, 2.5, 2.5);
  EXPECT(latch_zeros(util_rt, LATCH_I32, 1, DIMS(2)), 0, 0, 0);
  EXPECT(latch_ones(util_rt, LATCH_F64, 1, DIMS(2)), 0, 1, 1);
  EXPECT(latch_iota(util_rt, LATCH_I64, 2, DIMS(2, 3), 1), 0, 0, 1, 2, 0, 1, 2);
  EXPECT(latch_iota(util_rt, LATCH_F32, 2, DIMS(2, 2), 0), 0, 0, 0, 1, 1);
  latch_tensor *u1 = latch_rand_uniform(util_rt, LATCH_F32, 1, DIMS(1000), -2, 3, 42);
  latch_tensor *u2 = latch_rand_uniform(util_rt, LATCH_F32, 1, DIMS(1000), -2, 3, 42);
  latch_tensor *u3 = latch_rand_uniform(util_rt, LATCH_F32, 1, DIMS(1000), -2, 3, 43);
  double a[1000], b[1000], c[1000];
  latch_read_f64(u1, a, 1000), latch_read_f64(u2, b, 1000), latch_read_f64(u3, c, 1000);
  int same = 1, differ = 0, in_range = 1;
  double mean = 0;
  for (int i = 0; i < 1000; i++) {
    same &= a[i] == b[i];
    differ += a[i] != c[i];
    in_range &= a[i] >= -2 && a[i] < 3;
    mean += a[i] / 1000;
  }
  CHECK(same);
  CHECK(differ > 990);
  CHECK(in_range);
  CHECK(fabs(mean - 0.5) < 0.2);
  latch_tensor *n = latch_rand_normal(util_rt, LATCH_F64, 1, DIMS(4000), 1, 2, 7);
  double nv[4000], m = 0, var = 0;
  latch_read_f64(n, nv, 4000);
  for (int i = 0; i < 4000; i++) m += nv[i] / 4000;
  for (int i = 0; i < 4000; i++) var += (nv[i] - m) * (nv[i] - m) / 4000;
  CHECK(fabs(m - 1) < 0.15 && fabs(sqrt(var) - 2) < 0.15);
  /* .npy round trip */
  char path[64];
  snprintf(path, sizeof path, "/tmp/latch_capture_%d.npy", (int)getpid());
  latch_tensor *x = keep(latch_binary(LATCH_ADD, a23(), keep(latch_scalar(util_rt, LATCH_F32, 1))));
  CHECK_EQ_INT(latch_save_npy(x, path), LATCH_OK);
  latch_tensor *y = latch_from_npy(util_rt, path);
  CHECK(has_dims(y, 2, DIMS(2, 3)));
  EXPECT(y, 0, 2, 3, 4, 5, 6, 7);
  remove(path);
  latch_tensor *missing = latch_from_npy(util_rt, "/nonexistent/x.npy");
  CHECK(latch_tensor_error(missing) && strstr(latch_tensor_error(missing), "x.npy"));
  latch_release(missing);
  float raw[6];
  CHECK_EQ_INT(latch_read(x, raw, sizeof raw), LATCH_OK);
  CHECK(raw[0] == 2 && raw[5] == 7);
  CHECK_EQ_INT(latch_read(x, raw, 4), LATCH_ERR_INPUT);
  latch_release(u1), latch_release(u2), latch_release(u3), latch_release(n);
}

static void test_edges(void) {
  /* More operands than a node keeps inline, and more attributes than the node cache holds. */
  latch_tensor *parts[10];
  for (int i = 0; i < 10; i++) parts[i] = keep(latch_full(util_rt, LATCH_F32, 1, DIMS(1), i));
  EXPECT(latch_concat(10, parts, 0), 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9);
  latch_tensor *five = keep(latch_ones(util_rt, LATCH_F32, 5, DIMS(1, 1, 1, 1, 1)));
  latch_tensor *padded = latch_pad(five, DIMS(0, 0, 0, 0, 1), DIMS(1, 0, 0, 0, 0), 7);
  CHECK(has_dims(padded, 5, DIMS(2, 1, 1, 1, 2)));
  EXPECT(padded, 0, 7, 1, 7, 7);
  /* Empty tensors. */
  latch_tensor *empty = keep(latch_zeros(util_rt, LATCH_F32, 2, DIMS(0, 3)));
  latch_tensor *sum = latch_reduce(LATCH_SUM, empty, 1, (int[]){0}, false);
  CHECK(has_dims(sum, 1, DIMS(3)));
  EXPECT(sum, 0, 0, 0, 0);
  latch_tensor *sum2 = latch_binary(LATCH_ADD, empty, empty);
  CHECK(has_dims(sum2, 2, DIMS(0, 3)));
  CHECK_EQ_INT(latch_read_f64(sum2, NULL, 0), LATCH_OK);
  latch_release(sum2);
  /* A long chain: dropped unsynced (freed without recursion), then one synced. */
  latch_tensor *t = latch_scalar(util_rt, LATCH_F32, 0), *one = keep(latch_scalar(util_rt, LATCH_F32, 1));
  for (int i = 0; i < 100000; i++) {
    latch_tensor *next = latch_binary(LATCH_ADD, t, one);
    latch_release(t);
    t = next;
  }
  latch_release(t);
  t = latch_scalar(util_rt, LATCH_F32, 0);
  for (int i = 0; i < 2000; i++) {
    latch_tensor *next = latch_binary(LATCH_ADD, t, one);
    latch_release(t);
    t = next;
  }
  EXPECT(t, 0, 2000);
  CHECK_EQ_INT(latch_sync(NULL), LATCH_ERR_INPUT);
}

int main(void) {
  latch_options options;
  latch_options_init(&options);
  options.backend = "reference";
  util_rt = latch_open(&options);
  if (!util_rt) {
    fprintf(stderr, "latch_open: %s\n", latch_last_error());
    return 1;
  }
  RUN(test_broadcasting);
  RUN(test_promotion);
  RUN(test_unary);
  RUN(test_compare_where_clamp_cast);
  RUN(test_matmul);
  RUN(test_conv2d);
  RUN(test_pool);
  RUN(test_max_pool_grad);
  RUN(test_reductions);
  RUN(test_argmax);
  RUN(test_softmax_norms);
  RUN(test_embedding);
  RUN(test_shape_ops);
  RUN(test_creation);
  RUN(test_random_large);
  RUN(test_edges);
  util_release_all();
  latch_close(util_rt);
  return TEST_REPORT();
}
