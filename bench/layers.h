/* The layers the zoo is built from, in PyTorch's weight layouts (Linear [out, in], Conv2d
 * OIHW), so weights exported from PyTorch load as they are. Every function borrows its
 * arguments and returns a new reference; errors poison the result (see latch.h). */
#ifndef BENCH_LAYERS_H
#define BENCH_LAYERS_H
#include "bench.h"

/* x = expr, releasing the old x: the usual way a model drops its temporaries. */
#define BENCH_THEN(x, expr)              \
  do {                                   \
    latch_tensor *then_next_ = (expr);   \
    latch_release(x);                    \
    (x) = then_next_;                    \
  } while (0)

#define BENCH_DIMS(...) ((const int64_t[]){__VA_ARGS__})

typedef struct bench_linear_w {
  latch_tensor *weight, *bias; /* [out, in], [out] or NULL */
  latch_tensor *weight_t;      /* [in, out]: weight transposed once at load (inference) */
} bench_linear_w;

typedef struct bench_bn_w {
  latch_tensor *weight, *bias, *mean, *var;
} bench_bn_w;

typedef struct bench_conv_w {
  latch_tensor *weight, *bias; /* bias NULL when the conv has none */
  int64_t stride, padding, groups;
} bench_conv_w;

typedef struct bench_ln_w {
  latch_tensor *weight, *bias;
  double eps;
} bench_ln_w;

/* Weights made or loaded under prefix (prefix.weight, prefix.bias, ...). Kaiming-uniform
 * for ReLU (bound sqrt(6 / fan_in)) keeps activations of the deep nets finite and
 * roughly unit-sized; batch norm starts as PyTorch's (weight 1, bias 0, mean 0, var 1). */
bench_linear_w bench_linear_make(bench_store *s, const char *prefix, int64_t in, int64_t out, bool bias);
/* Transposes the weight once (see bench_linear), unless the store is trainable. */
void bench_linear_pack(bench_store *s, bench_linear_w *w);
bench_bn_w bench_bn_make(bench_store *s, const char *prefix, int64_t channels);
bench_conv_w bench_conv_make(bench_store *s, const char *prefix, int64_t in, int64_t out, int64_t kernel,
                             int64_t stride, int64_t padding, int64_t groups, bool bias);
bench_ln_w bench_ln_make(bench_store *s, const char *prefix, int64_t dim, double eps);

/* x @ weight^T + bias, over the last dim of x. Inference models hold the weight transposed
 * once at load time (weight_t; weight is then NULL), as a compiler would fold the
 * transpose of a constant: the reference backend's transpose would otherwise dominate
 * the fully connected layers. Trainable stores keep weight, transposed per step. */
latch_tensor *bench_linear(latch_tensor *x, const bench_linear_w *w);
latch_tensor *bench_conv(latch_tensor *x, const bench_conv_w *w);
latch_tensor *bench_bn(latch_tensor *x, const bench_bn_w *w);
latch_tensor *bench_ln(latch_tensor *x, const bench_ln_w *w);

typedef enum bench_act { BENCH_NONE, BENCH_RELU, BENCH_RELU6 } bench_act;
latch_tensor *bench_act_apply(latch_tensor *x, bench_act act);
/* conv, batch norm, activation: the block of ResNet and MobileNet. */
latch_tensor *bench_conv_bn(latch_tensor *x, const bench_conv_w *conv, const bench_bn_w *bn, bench_act act);

/* PyTorch's AdaptiveAvgPool2d: output cell i averages input rows floor(i*H/out) to
 * ceil((i+1)*H/out). A plain pool when out divides the size, a broadcast when the size
 * divides out, otherwise one window per output row and column (pooling is separable). */
latch_tensor *bench_adaptive_avg_pool(latch_tensor *x, int64_t out_h, int64_t out_w);
/* MaxPool2d with ceil_mode=True (SqueezeNet): pads the high side with -inf as needed. */
latch_tensor *bench_max_pool_ceil(latch_tensor *x, int64_t kernel, int64_t stride);
latch_tensor *bench_max_pool(latch_tensor *x, int64_t kernel, int64_t stride, int64_t padding);
/* [N, ...] -> [N, rest]. */
latch_tensor *bench_flatten(latch_tensor *x);
/* Multi-head attention core: q, k, v [B, heads, T, d] -> softmax(q k^T / sqrt(d)) v. */
latch_tensor *bench_attention(latch_runtime *rt, latch_tensor *q, latch_tensor *k, latch_tensor *v);
/* [B, T, heads*d] -> [B, heads, T, d] and back. */
latch_tensor *bench_split_heads(latch_tensor *x, int64_t heads);
latch_tensor *bench_merge_heads(latch_tensor *x);


/* ---- training (grad.c): the pieces of a hand-written backward pass ---- */
/* Mean softmax cross-entropy of logits [B, K] against labels [B, K] whose rows sum to 1
 * (one-hot); *grad gets d loss / d logits = (softmax - labels) / B. B is read from the
 * labels' total, not from the shape, so a traced step keeps the batch symbolic. */
latch_tensor *bench_cross_entropy(latch_runtime *rt, latch_tensor *logits, latch_tensor *labels, latch_tensor **grad);
/* g where pre > 0, else 0: the gradient through a ReLU whose input was pre. */
latch_tensor *bench_relu_grad(latch_runtime *rt, latch_tensor *g, latch_tensor *pre);
/* w <- w - lr * g, in place (latch_assign): the path whose write-back the step measures. */
latch_status bench_sgd(latch_runtime *rt, latch_tensor *w, latch_tensor *g, double lr);
/* Gradients of a stride-1 conv with padding p: of its OIHW weight, given input x and the
 * output's gradient g; and of its input, given g and the weight flipped by flip (a [k*k,
 * k*k] anti-diagonal constant). */
latch_tensor *bench_conv_grad_weight(latch_tensor *x, latch_tensor *g, int64_t padding);
latch_tensor *bench_conv_grad_input(latch_tensor *g, latch_tensor *w, latch_tensor *flip, int64_t padding);
/* The [n, n] anti-diagonal ones matrix (reverses a last dim of n by matmul). */
latch_tensor *bench_reverser(latch_runtime *rt, int64_t n);

#endif
