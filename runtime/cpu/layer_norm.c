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
 * 1e19) the step gives the normalized values the f64 sums allow. Rows are split over the
 * threads; the element loops are built for AVX-512, AVX2 and the baseline (isa.c). */
#include <math.h>
#include <stdatomic.h>

#include "attention_internal.h"

enum { LANES = 8 };

static _Atomic int64_t runs;

int64_t rt_cpu_layer_norm_run_count(void) { return atomic_load(&runs); }

typedef struct ln_job {
  const rt_cpu_attention *a;
  const float *x, *w, *b;
  float *y;
} ln_job;

#define DEFINE_ROWS(NAME, ATTR)                                                                                \
  static ATTR void NAME(const ln_job *j, int64_t begin, int64_t end) {                                         \
    int64_t n = j->a->sk, whole = n / LANES * LANES;                                                           \
    for (int64_t r = begin; r < end; r++) {                                                                    \
      const float *x = j->x + r * n;                                                                           \
      float *y = j->y + r * n;                                                                                 \
      double sum[LANES] = {0}, squares[LANES] = {0};                                                           \
      for (int64_t c = 0; c < whole; c += LANES)                                                               \
        for (int q = 0; q < LANES; q++) {                                                                      \
          double v = x[c + q];                                                                                 \
          sum[q] += v;                                                                                         \
          squares[q] += v * v;                                                                                 \
        }                                                                                                      \
      for (int64_t c = whole; c < n; c++) {                                                                    \
        double v = x[c];                                                                                       \
        sum[c - whole] += v;                                                                                   \
        squares[c - whole] += v * v;                                                                           \
      }                                                                                                        \
      double s = 0, ss = 0;                                                                                    \
      for (int q = 0; q < LANES; q++) s += sum[q], ss += squares[q];                                           \
      double mean = s / (double)n, var = ss / (double)n - mean * mean;                                         \
      if (var < 0) var = 0; /* rounding below an exact zero */                                                 \
      float inv = (float)(1.0 / sqrt(var + (double)j->a->eps));                                                \
      if (!(s - s == 0) || !(ss - ss == 0)) mean = inv = NAN; /* an inf or a NaN in the row */                \
      if (j->w && j->b)                                                                                        \
        for (int64_t c = 0; c < n; c++) y[c] = (float)(x[c] - mean) * inv * j->w[c] + j->b[c];                \
      else if (j->w)                                                                                           \
        for (int64_t c = 0; c < n; c++) y[c] = (float)(x[c] - mean) * inv * j->w[c];                           \
      else if (j->b)                                                                                           \
        for (int64_t c = 0; c < n; c++) y[c] = (float)(x[c] - mean) * inv + j->b[c];                           \
      else                                                                                                     \
        for (int64_t c = 0; c < n; c++) y[c] = (float)(x[c] - mean) * inv;                                     \
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
