/* The layer norm step's kernel (layer_norm_plan.c finds it): each row of x read once from
 * memory. One sweep of the row sums its values and their squares in f64, in LANES lanes
 * (element j in lane j % LANES, combined in lane order, so the loop vectorizes and the
 * result does not depend on the instruction set); the mean and variance follow from the two
 * sums, and a second sweep, over the row while it is still in cache, writes
 * (x - mean) * rsqrt(var + eps) [* w] [+ b], the difference taken in f64 and rounded once,
 * the rest in f32.
 *
 * f64 sums of f32 values make sum-of-squares less the squared mean exact enough: its error
 * is about 2^-52 (mean / deviation)^2 of the variance, where f32 would lose every digit at a
 * mean a few thousand deviations from zero. A row holding an inf or a NaN comes out NaN, as
 * the graph's does (inf - inf); where the graph's f32 squares overflow (values past about
 * 1e19) the step gives the normalized values the f64 sums allow.
 *
 * The input, the weight and bias, and the result may each hold bf16 values (a bf16 graph's
 * layer norm, or one that converts bf16 to f32 and back around it): a row goes by in runs of
 * RUN elements, bf16 runs widened to f32 on the stack, the arithmetic the same, the result
 * rounded to bf16 (nearest even) as it is stored. Runs start at multiples of LANES, so each
 * element keeps its lane and an f32 row gives the same bits as in one sweep. Rows are split
 * over the threads; the element loops are built for AVX-512, AVX2 and the baseline (isa.c). */
#include <math.h>
#include <stdatomic.h>

#include "attention_internal.h"

enum { LANES = 8, RUN = 512 }; /* RUN a multiple of LANES */

static _Atomic int64_t runs;

int64_t rt_cpu_layer_norm_run_count(void) { return atomic_load(&runs); }

typedef struct ln_job {
  const rt_cpu_attention *a;
  const void *x, *w, *b; /* f32, or bf16 (a->x_bf16, a->wb_bf16) */
  void *y;               /* f32, or bf16 (a->out_bf16) */
} ln_job;

/* Elements [at, at + n) of p as f32: in place, or widened into buf when bf16. */
static inline const float *f32_run(const void *p, bool bf16, int64_t at, int64_t n, float *buf) {
  if (!bf16) return (const float *)p + at;
  const uint16_t *h = (const uint16_t *)p + at;
  for (int64_t i = 0; i < n; i++) buf[i] = rt_cpu_bf16_value(h[i]);
  return buf;
}

/* One row's sums: sum[q] and squares[q] over its elements j with j % LANES == q. */
#define ROW_SUMS                                                                                               \
  for (int64_t c0 = 0; c0 < n; c0 += RUN) {                                                                    \
    int64_t len = n - c0 < RUN ? n - c0 : RUN, whole = len / LANES * LANES;                                    \
    const float *x = f32_run(j->x, a->x_bf16, r * n + c0, len, xb);                                            \
    for (int64_t c = 0; c < whole; c += LANES)                                                                 \
      for (int q = 0; q < LANES; q++) {                                                                        \
        double v = x[c + q];                                                                                   \
        sum[q] += v;                                                                                           \
        squares[q] += v * v;                                                                                   \
      }                                                                                                        \
    for (int64_t c = whole; c < len; c++) {                                                                    \
      double v = x[c];                                                                                         \
      sum[c - whole] += v;                                                                                     \
      squares[c - whole] += v * v;                                                                             \
    }                                                                                                          \
  }

/* The row normalized, a run at a time: (x - mean) * inv [* w] [+ b], stored. */
#define ROW_STORE                                                                                              \
  for (int64_t c0 = 0; c0 < n; c0 += RUN) {                                                                    \
    int64_t len = n - c0 < RUN ? n - c0 : RUN;                                                                 \
    const float *x = f32_run(j->x, a->x_bf16, r * n + c0, len, xb);                                            \
    const float *w = j->w ? f32_run(j->w, a->wb_bf16, c0, len, wb) : NULL;                                     \
    const float *b = j->b ? f32_run(j->b, a->wb_bf16, c0, len, bb) : NULL;                                     \
    float *y = a->out_bf16 ? yb : (float *)j->y + r * n + c0;                                                  \
    if (w && b)                                                                                                \
      for (int64_t c = 0; c < len; c++) y[c] = (float)(x[c] - mean) * inv * w[c] + b[c];                       \
    else if (w)                                                                                                \
      for (int64_t c = 0; c < len; c++) y[c] = (float)(x[c] - mean) * inv * w[c];                              \
    else if (b)                                                                                                \
      for (int64_t c = 0; c < len; c++) y[c] = (float)(x[c] - mean) * inv + b[c];                              \
    else                                                                                                       \
      for (int64_t c = 0; c < len; c++) y[c] = (float)(x[c] - mean) * inv;                                     \
    if (a->out_bf16) {                                                                                         \
      uint16_t *out = (uint16_t *)j->y + r * n + c0;                                                           \
      for (int64_t c = 0; c < len; c++) out[c] = rt_cpu_bf16_bits(y[c]);                                       \
    }                                                                                                          \
  }

#define DEFINE_ROWS(NAME, ATTR)                                                                                \
  static ATTR void NAME(const ln_job *j, int64_t begin, int64_t end) {                                         \
    const rt_cpu_attention *a = j->a;                                                                          \
    int64_t n = a->sk;                                                                                         \
    float xb[RUN], wb[RUN], bb[RUN], yb[RUN];                                                                  \
    for (int64_t r = begin; r < end; r++) {                                                                    \
      double sum[LANES] = {0}, squares[LANES] = {0};                                                           \
      ROW_SUMS                                                                                                 \
      double s = 0, ss = 0;                                                                                    \
      for (int q = 0; q < LANES; q++) s += sum[q], ss += squares[q];                                           \
      double mean = s / (double)n, var = ss / (double)n - mean * mean;                                         \
      if (var < 0) var = 0; /* rounding below an exact zero */                                                 \
      float inv = (float)(1.0 / sqrt(var + (double)a->eps));                                                   \
      if (!(s - s == 0) || !(ss - ss == 0)) mean = inv = NAN; /* an inf or a NaN in the row */                \
      ROW_STORE                                                                                                \
    }                                                                                                          \
  }

DEFINE_ROWS(rows_portable, )
#if RT_CPU_X86_VARIANTS
DEFINE_ROWS(rows_avx2, __attribute__((target("avx2"))))
DEFINE_ROWS(rows_avx512, __attribute__((target("avx512f"))))
#endif

typedef void (*rows_fn)(const ln_job *, int64_t, int64_t);

static const rows_fn rows_kernels[RT_CPU_ISA_COUNT] = {
    [RT_CPU_ISA_PORTABLE] = rows_portable,
#if RT_CPU_X86_VARIANTS
    [RT_CPU_ISA_AVX2] = rows_avx2,
    [RT_CPU_ISA_AVX512] = rows_avx512,
#endif
};

static void items(void *ctx, int64_t begin, int64_t end) {
  rows_kernels[rt_cpu_isa_in_use()](ctx, begin, end);
}

void rt_cpu_layer_norm_run(const rt_cpu_attention *a, const rt_value *const *in, rt_value *out) {
  atomic_fetch_add(&runs, 1);
  ln_job j = {.a = a, .x = in[0]->data, .y = out->data};
  if (a->weight_input >= 0) j.w = in[a->weight_input]->data;
  if (a->bias_input >= 0) j.b = in[a->bias_input]->data;
  if (a->sq == 0 || a->sk == 0) return;
  int64_t grain = a->sk >= RT_CPU_GRAIN ? 1 : RT_CPU_GRAIN / a->sk;
  rt_parallel_for(a->sq, grain, items, &j);
}
