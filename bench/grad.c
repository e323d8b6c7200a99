/* Hand-written backward pieces for the zoo's training steps (latch has no autograd: the
 * steps spell out their gradients, as a frontend's autograd would emit them). */
#include <stdlib.h>

#include "layers.h"

latch_tensor *bench_cross_entropy(latch_runtime *rt, latch_tensor *logits, latch_tensor *labels, latch_tensor **grad) {
  (void)rt;
  /* The batch size as a tensor: each label row sums to 1, so all of them sum to B. A
   * constant 1/B (latch_dim) would specialize a traced step to one batch size. */
  latch_tensor *batch = latch_reduce(LATCH_SUM, labels, 0, NULL, false);
  latch_tensor *logp = latch_log_softmax(logits, 1);
  latch_tensor *picked = latch_binary(LATCH_MUL, logp, labels);
  latch_tensor *loss = latch_reduce(LATCH_SUM, picked, 0, NULL, false);
  latch_release(picked);
  BENCH_THEN(loss, latch_unary(LATCH_NEG, loss));
  BENCH_THEN(loss, latch_binary(LATCH_DIV, loss, batch));
  latch_tensor *p = latch_unary(LATCH_EXP, logp);
  latch_release(logp);
  BENCH_THEN(p, latch_binary(LATCH_SUB, p, labels));
  *grad = latch_binary(LATCH_DIV, p, batch);
  latch_release(batch), latch_release(p);
  return loss;
}

latch_tensor *bench_relu_grad(latch_runtime *rt, latch_tensor *g, latch_tensor *pre) {
  latch_tensor *zero = latch_scalar(rt, LATCH_F32, 0);
  latch_tensor *mask = latch_compare(LATCH_GT, pre, zero);
  latch_tensor *y = latch_where(mask, g, zero);
  latch_release(mask), latch_release(zero);
  return y;
}

latch_status bench_sgd(latch_runtime *rt, latch_tensor *w, latch_tensor *g, double lr) {
  latch_tensor *rate = latch_scalar(rt, LATCH_F32, lr);
  latch_tensor *step = latch_binary(LATCH_MUL, g, rate);
  latch_tensor *next = latch_binary(LATCH_SUB, w, step);
  latch_release(rate), latch_release(step);
  latch_status status = latch_assign(w, next);
  if (status != LATCH_OK) bench_set_error("sgd: %s", latch_last_error());
  latch_release(next);
  return status;
}

latch_tensor *bench_conv_grad_weight(latch_tensor *x, latch_tensor *g, int64_t padding) {
  /* dW[o, c, i, j] = sum over n, h, w of x_padded[n, c, h + i, w + j] * g[n, o, h, w]: a
   * conv of x with batch and channels swapped, by g with the same swap. */
  const int swap[4] = {1, 0, 2, 3};
  latch_tensor *xs = latch_permute(x, swap), *gs = latch_permute(g, swap);
  latch_conv2d_params p = {{1, 1}, {padding, padding}, {1, 1}, 1};
  latch_tensor *dw = latch_conv2d(xs, gs, &p); /* [C, O, k, k] */
  latch_release(xs), latch_release(gs);
  BENCH_THEN(dw, latch_permute(dw, swap));
  return dw;
}

latch_tensor *bench_conv_grad_input(latch_tensor *g, latch_tensor *w, latch_tensor *flip, int64_t padding) {
  /* dX is g convolved with the weight rotated by 180 degrees, in and out channels swapped. */
  int64_t o = latch_dim(w, 0), c = latch_dim(w, 1), kh = latch_dim(w, 2), kw = latch_dim(w, 3);
  latch_tensor *r = latch_reshape(w, 2, BENCH_DIMS(o * c, kh * kw));
  BENCH_THEN(r, latch_matmul(r, flip));
  BENCH_THEN(r, latch_reshape(r, 4, BENCH_DIMS(o, c, kh, kw)));
  BENCH_THEN(r, latch_permute(r, (const int[]){1, 0, 2, 3}));
  latch_conv2d_params p = {{1, 1}, {kh - 1 - padding, kw - 1 - padding}, {1, 1}, 1};
  latch_tensor *dx = latch_conv2d(g, r, &p);
  latch_release(r);
  return dx;
}

latch_tensor *bench_reverser(latch_runtime *rt, int64_t n) {
  float *data = calloc((size_t)(n * n), sizeof *data);
  if (!data) return NULL;
  for (int64_t i = 0; i < n; i++) data[i * n + (n - 1 - i)] = 1;
  latch_tensor *t = latch_from_host(rt, LATCH_F32, 2, BENCH_DIMS(n, n), data);
  free(data);
  return t;
}
