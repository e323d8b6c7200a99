/* The zoo's layers over latch.h: linear, conv, batch and layer norm, activations, pooling,
 * attention. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "layers.h"

bench_linear_w bench_linear_make(bench_store *s, const char *prefix, int64_t in, int64_t out, bool bias) {
  bench_linear_w w = {0};
  w.weight = bench_paramf(s, 2, BENCH_DIMS(out, in), BENCH_INIT_UNIFORM, sqrt(6.0 / (double)in), "%s.weight", prefix);
  if (bias) w.bias = bench_paramf(s, 1, BENCH_DIMS(out), BENCH_INIT_UNIFORM, 1 / sqrt((double)in), "%s.bias", prefix);
  bench_linear_pack(s, &w);
  return w;
}

void bench_linear_pack(bench_store *s, bench_linear_w *w) {
  if (s->trainable || !w->weight) return;
  w->weight_t = bench_store_replace(s, w->weight, latch_permute(w->weight, (const int[]){1, 0}));
  w->weight = NULL;
}

bench_bn_w bench_bn_make(bench_store *s, const char *prefix, int64_t channels) {
  bench_bn_w w;
  w.weight = bench_paramf(s, 1, BENCH_DIMS(channels), BENCH_INIT_CONST, 1, "%s.weight", prefix);
  w.bias = bench_paramf(s, 1, BENCH_DIMS(channels), BENCH_INIT_CONST, 0, "%s.bias", prefix);
  w.mean = bench_paramf(s, 1, BENCH_DIMS(channels), BENCH_INIT_CONST, 0, "%s.running_mean", prefix);
  w.var = bench_paramf(s, 1, BENCH_DIMS(channels), BENCH_INIT_CONST, 1, "%s.running_var", prefix);
  return w;
}

bench_conv_w bench_conv_make(bench_store *s, const char *prefix, int64_t in, int64_t out, int64_t kernel,
                             int64_t stride, int64_t padding, int64_t groups, bool bias) {
  bench_conv_w w = {0};
  double fan_in = (double)(in / groups * kernel * kernel);
  w.weight = bench_paramf(s, 4, BENCH_DIMS(out, in / groups, kernel, kernel), BENCH_INIT_UNIFORM, sqrt(6.0 / fan_in),
                          "%s.weight", prefix);
  if (bias) w.bias = bench_paramf(s, 1, BENCH_DIMS(out), BENCH_INIT_UNIFORM, 1 / sqrt(fan_in), "%s.bias", prefix);
  w.stride = stride;
  w.padding = padding;
  w.groups = groups;
  return w;
}

bench_ln_w bench_ln_make(bench_store *s, const char *prefix, int64_t dim, double eps) {
  bench_ln_w w;
  w.weight = bench_paramf(s, 1, BENCH_DIMS(dim), BENCH_INIT_CONST, 1, "%s.weight", prefix);
  w.bias = bench_paramf(s, 1, BENCH_DIMS(dim), BENCH_INIT_CONST, 0, "%s.bias", prefix);
  w.eps = eps;
  return w;
}

latch_tensor *bench_linear(latch_tensor *x, const bench_linear_w *w) {
  latch_tensor *wt = w->weight_t ? latch_retain(w->weight_t) : latch_permute(w->weight, (const int[]){1, 0});
  latch_tensor *y = latch_matmul(x, wt);
  latch_release(wt);
  if (w->bias) BENCH_THEN(y, latch_binary(LATCH_ADD, y, w->bias));
  return y;
}

latch_tensor *bench_conv(latch_tensor *x, const bench_conv_w *w) {
  latch_conv2d_params p = {{w->stride, w->stride}, {w->padding, w->padding}, {1, 1}, w->groups};
  latch_tensor *y = latch_conv2d(x, w->weight, &p);
  if (w->bias) {
    latch_tensor *b = latch_reshape(w->bias, 3, BENCH_DIMS(latch_dim(w->bias, 0), 1, 1));
    BENCH_THEN(y, latch_binary(LATCH_ADD, y, b));
    latch_release(b);
  }
  return y;
}

latch_tensor *bench_bn(latch_tensor *x, const bench_bn_w *w) {
  return latch_batch_norm(x, w->mean, w->var, w->weight, w->bias, 1e-5);
}

latch_tensor *bench_ln(latch_tensor *x, const bench_ln_w *w) {
  return latch_layer_norm(x, 1, w->weight, w->bias, w->eps);
}

latch_tensor *bench_act_apply(latch_tensor *x, bench_act act) {
  if (act == BENCH_RELU) return latch_relu(x);
  if (act == BENCH_RELU6) return latch_clamp(x, 0, 6);
  return latch_retain(x);
}

latch_tensor *bench_conv_bn(latch_tensor *x, const bench_conv_w *conv, const bench_bn_w *bn, bench_act act) {
  latch_tensor *y = bench_conv(x, conv);
  BENCH_THEN(y, bench_bn(y, bn));
  if (act != BENCH_NONE) BENCH_THEN(y, bench_act_apply(y, act));
  return y;
}

/* Adaptive average pooling along one spatial dim (2 or 3) of x. */
static latch_tensor *adaptive_dim(latch_tensor *x, int dim, int64_t out) {
  int64_t in = latch_dim(x, dim);
  if (in == out) return latch_retain(x);
  if (in % out == 0) {
    int64_t k[2] = {dim == 2 ? in / out : 1, dim == 3 ? in / out : 1};
    return latch_avg_pool2d(x, k, k, NULL);
  }
  /* The batch stays -1 and the repeat is a concat, not a broadcast to given dims: a
   * traced function keeps the batch symbolic. */
  int64_t d[4] = {-1, latch_dim(x, 1), latch_dim(x, 2), latch_dim(x, 3)};
  if (out % in == 0) {
    /* Each input row is the average of its own window, repeated out/in times. */
    int64_t r = out / in, split[5];
    for (int i = 0, j = 0; i < 4; i++) {
      split[j++] = d[i];
      if (i == dim) split[j++] = 1;
    }
    latch_tensor *y = latch_reshape(x, 5, split);
    latch_tensor **copies = calloc((size_t)r, sizeof *copies);
    if (!copies) return latch_release(y), NULL;
    for (int64_t i = 0; i < r; i++) copies[i] = y;
    BENCH_THEN(y, latch_concat((int)r, copies, dim + 1));
    free(copies);
    d[dim] = out;
    BENCH_THEN(y, latch_reshape(y, 4, d));
    return y;
  }
  latch_tensor **parts = calloc((size_t)out, sizeof *parts);
  if (!parts) return NULL;
  for (int64_t i = 0; i < out; i++) {
    int64_t start = i * in / out, stop = ((i + 1) * in + out - 1) / out;
    latch_tensor *window = latch_slice(x, dim, start, stop, 1);
    parts[i] = latch_reduce(LATCH_MEAN, window, 1, (const int[]){dim}, true);
    latch_release(window);
  }
  latch_tensor *y = latch_concat((int)out, parts, dim);
  for (int64_t i = 0; i < out; i++) latch_release(parts[i]);
  free(parts);
  return y;
}

latch_tensor *bench_adaptive_avg_pool(latch_tensor *x, int64_t out_h, int64_t out_w) {
  if (latch_rank(x) != 4 || out_h < 1 || out_w < 1) return latch_avg_pool2d(x, NULL, NULL, NULL);
  int64_t h = latch_dim(x, 2), w = latch_dim(x, 3);
  if (h % out_h == 0 && w % out_w == 0) {
    if (h == out_h && w == out_w) return latch_retain(x);
    int64_t k[2] = {h / out_h, w / out_w};
    return latch_avg_pool2d(x, k, k, NULL);
  }
  latch_tensor *y = adaptive_dim(x, 2, out_h);
  BENCH_THEN(y, adaptive_dim(y, 3, out_w));
  return y;
}

latch_tensor *bench_max_pool(latch_tensor *x, int64_t kernel, int64_t stride, int64_t padding) {
  int64_t k[2] = {kernel, kernel}, s[2] = {stride, stride}, p[2] = {padding, padding};
  return latch_max_pool2d(x, k, s, p);
}

latch_tensor *bench_max_pool_ceil(latch_tensor *x, int64_t kernel, int64_t stride) {
  int64_t extra[4] = {0, 0, 0, 0};
  for (int i = 0; i < 2 && latch_rank(x) == 4; i++) {
    int64_t size = latch_dim(x, 2 + i);
    if (size < kernel) continue; /* the pool reports it */
    int64_t out = (size - kernel + stride - 1) / stride + 1;
    extra[2 + i] = (out - 1) * stride + kernel - size;
  }
  latch_tensor *y = latch_pad(x, NULL, extra, -INFINITY);
  BENCH_THEN(y, bench_max_pool(y, kernel, stride, 0));
  return y;
}

/* The batch is the -1, inferred: reading it (latch_dim) would specialize a traced function
 * to one batch size; the other dims are the model's own. */
latch_tensor *bench_flatten(latch_tensor *x) {
  int64_t rest = 1;
  for (int i = 1; i < latch_rank(x); i++) rest *= latch_dim(x, i);
  return latch_reshape(x, 2, BENCH_DIMS(-1, rest));
}

latch_tensor *bench_attention(latch_runtime *rt, latch_tensor *q, latch_tensor *k, latch_tensor *v) {
  latch_tensor *kt = latch_permute(k, (const int[]){0, 1, 3, 2});
  latch_tensor *scores = latch_matmul(q, kt);
  latch_release(kt);
  latch_tensor *scale = latch_scalar(rt, LATCH_F32, 1 / sqrt((double)latch_dim(q, -1)));
  BENCH_THEN(scores, latch_binary(LATCH_MUL, scores, scale));
  latch_release(scale);
  BENCH_THEN(scores, latch_softmax(scores, -1));
  latch_tensor *y = latch_matmul(scores, v);
  latch_release(scores);
  return y;
}

latch_tensor *bench_split_heads(latch_tensor *x, int64_t heads) {
  /* The batch stays -1, so that a traced function keeps it symbolic (see bench_flatten). */
  int64_t t = latch_dim(x, 1), d = latch_dim(x, 2) / heads;
  latch_tensor *y = latch_reshape(x, 4, BENCH_DIMS(-1, t, heads, d));
  BENCH_THEN(y, latch_permute(y, (const int[]){0, 2, 1, 3}));
  return y;
}

latch_tensor *bench_merge_heads(latch_tensor *x) {
  int64_t h = latch_dim(x, 1), t = latch_dim(x, 2), d = latch_dim(x, 3);
  latch_tensor *y = latch_permute(x, (const int[]){0, 2, 1, 3});
  BENCH_THEN(y, latch_reshape(y, 3, BENCH_DIMS(-1, t, h * d)));
  return y;
}
