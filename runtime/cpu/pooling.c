/* Max and min pools over f32 planes (a reduce-window over the last two dims, no dilation or
 * reversal), separable and vectorized: for each output row, the window's input rows are
 * combined column by column into one row, then each output combines its window's columns of
 * that row, starting from the init value; every loop is contiguous, so the compiler
 * vectorizes it.
 *
 * maximum and minimum as the reference computes them (NaN wins, +0 is the larger zero) are
 * associative and commutative, so combining rows first gives the same values as the generic
 * loop's row-major order (of several NaNs, another one may come out). Written without
 * branches so that the column loop vectorizes. Sums keep the generic loop on row-major
 * planes: reordering them would change their rounding. In oneDNN's blocked layout (below)
 * the lanes are channels, each output's taps are folded in the reference's order, and sums
 * run there too (a global average pool after a convolution). */
#include <stdatomic.h>
#include <string.h>

#include "kernel_internal.h"
#include "runtime/runtime.h"

static inline uint32_t bits(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}

static inline float from_bits(uint32_t u) {
  float x;
  memcpy(&x, &u, sizeof x);
  return x;
}

/* Chooses with masks, not branches: the compiler keeps it branch-free (a tie or a NaN is
 * no mispredicted jump) and vectorizes it. */
static inline uint32_t pick(uint32_t mask, uint32_t yes, uint32_t no) { return (yes & mask) | (no & ~mask); }

/* max: a NaN a, else a NaN b (a > b is false), else the larger; of equal values the bits
 * and-ed (+0 over -0). min: the same with the smaller, bits or-ed (-0 under +0). */
static inline float max_f(float a, float b) {
  uint32_t ua = bits(a), ub = bits(b);
  uint32_t r = pick(-(uint32_t)(a > b), ua, ub);
  r = pick(-(uint32_t)(a == b), ua & ub, r);
  return from_bits(pick(-(uint32_t)(a != a), ua, r));
}

static inline float min_f(float a, float b) {
  uint32_t ua = bits(a), ub = bits(b);
  uint32_t r = pick(-(uint32_t)(a < b), ua, ub);
  r = pick(-(uint32_t)(a == b), ua | ub, r);
  return from_bits(pick(-(uint32_t)(a != a), ua, r));
}

/* A sum in the order the caller folds: a window's taps in row-major order from the init. */
static inline float add_f(float a, float b) { return a + b; }

enum { POOL_MAX_WIDTH = 4096 }; /* the row buffers live on the stack */

typedef struct pool_job {
  const hlo_window_dim *wh, *ww;
  int64_t in_h, in_w, out_h, out_w;
  int64_t padded_w, phase_len; /* the padded row's width; the length of each of its stride phases */
  const float *x;
  float *y, init;
} pool_job;

/* One output row: the window's input rows combined into row (init in the row's padding),
 * the row split into its stride phases (phase p holds columns p, p + stride, ...), so tap k
 * of every output is one contiguous run, phase k % stride from k / stride on. Combining the
 * init value again where the reference skips padding changes nothing (max and min are
 * idempotent, and the accumulator starts at init). */
#define DEFINE_ROWS(NAME, COMBINE, ATTR)                                                     \
  ATTR static void NAME(void *ctx, int64_t begin, int64_t end) {                                \
    const pool_job *j = ctx;                                                               \
    float row[POOL_MAX_WIDTH], phases[POOL_MAX_WIDTH];                                     \
    int64_t stride = j->ww->stride, pad = j->ww->pad_low, len = j->phase_len;              \
    for (int64_t w = 0; w < j->padded_w; w++) row[w] = j->init;                            \
    for (int64_t item = begin; item < end; item++) {                                       \
      int64_t plane = item / j->out_h, oh = item % j->out_h;                               \
      int64_t top = oh * j->wh->stride - j->wh->pad_low;                                   \
      int64_t k0 = top < 0 ? -top : 0, k1 = j->in_h - top < j->wh->size ? j->in_h - top : j->wh->size; \
      const float *xp = j->x + plane * j->in_h * j->in_w;                                  \
      float *yr = j->y + item * j->out_w, *in = row + pad;                                 \
      for (int64_t w = 0; w < j->in_w; w++) in[w] = j->init;                               \
      for (int64_t kh = k0; kh < k1; kh++) {                                               \
        const float *xr = xp + (top + kh) * j->in_w;                                       \
        for (int64_t w = 0; w < j->in_w; w++) in[w] = COMBINE(in[w], xr[w]);              \
      }                                                                                    \
      const float *split = row;                                                            \
      if (stride > 1) {                                                                    \
        for (int64_t p = 0; p < stride; p++)                                               \
          for (int64_t i = 0; i < len; i++)                                                \
            phases[p * len + i] = i * stride + p < j->padded_w ? row[i * stride + p] : j->init; \
        split = phases;                                                                    \
      }                                                                                    \
      for (int64_t ow = 0; ow < j->out_w; ow++) yr[ow] = j->init;                          \
      for (int64_t k = 0; k < j->ww->size; k++) {                                          \
        const float *tap = split + (k % stride) * len + k / stride;                        \
        for (int64_t ow = 0; ow < j->out_w; ow++) yr[ow] = COMBINE(yr[ow], tap[ow]);       \
      }                                                                                    \
    }                                                                                      \
  }


/* ---- pools in oneDNN's blocked layout ---- */

/* The same pools over an [N, C, H, W] activation held in oneDNN's blocked layout (aBcd8b or
 * aBcd16b: [N, C/B, H, W, B], channels padded to a multiple of B with zeros), so a pool
 * between two convolutions needs no reorder on either side. The B channels of a block are
 * the vector lanes. The result is blocked the same way (its padded lanes zero, as oneDNN
 * requires) or row-major. */
typedef struct blocked_job {
  const hlo_window_dim *wh, *ww;
  int64_t channels, blocks, in_h, in_w, out_h, out_w;
  const float *x;
  float *y, init;
  bool blocked_out;
  atomic_bool *nonfinite; /* set when a value written is inf or NaN */
} blocked_job;

/* Four outputs of a row at a time where their windows lie inside the row: each output's
 * combine is a chain of dependent steps (compare, blend, blend, blend), so one output at a
 * time waits on that chain; four independent chains keep the vector units busy. Every lane
 * written, padded ones included (zero, or init where a window holds only padding), is
 * checked for inf and NaN in registers (rt_cpu_nonfinite). */
enum { POOL_UNROLL = 4 };

#define DEFINE_BLOCKED(NAME, B, COMBINE, ATTR)                                               \
  ATTR static void NAME(void *ctx, int64_t begin, int64_t end) {                                \
    const blocked_job *j = ctx;                                                            \
    int64_t sw = j->ww->stride, size_w = j->ww->size, pad_w = j->ww->pad_low;               \
    unsigned bad = 0;                                                                      \
    for (int64_t item = begin; item < end; item++) { /* (image, block, output row) */     \
      int64_t oh = item % j->out_h, nb = item / j->out_h, cb = nb % j->blocks, n = nb / j->blocks; \
      int64_t top = oh * j->wh->stride - j->wh->pad_low;                                   \
      int64_t k0 = top < 0 ? -top : 0, k1 = j->in_h - top < j->wh->size ? j->in_h - top : j->wh->size; \
      const float *plane = j->x + nb * j->in_h * j->in_w * B;                              \
      int64_t real = j->channels - cb * B < B ? j->channels - cb * B : B;                  \
      for (int64_t ow = 0; ow < j->out_w;) {                                               \
        int64_t left = ow * sw - pad_w, run = 1;                                           \
        if (left >= 0 && ow + POOL_UNROLL <= j->out_w && (ow + POOL_UNROLL - 1) * sw - pad_w + size_w <= j->in_w) \
          run = POOL_UNROLL;                                                               \
        int64_t l0 = left < 0 ? -left : 0, l1 = j->in_w - left < size_w ? j->in_w - left : size_w; \
        float acc[POOL_UNROLL][B];                                                         \
        for (int u = 0; u < POOL_UNROLL; u++)                                              \
          for (int l = 0; l < B; l++) acc[u][l] = j->init;                                 \
        if (run == POOL_UNROLL) {                                                          \
          for (int64_t kh = k0; kh < k1; kh++)                                             \
            for (int64_t kw = 0; kw < size_w; kw++) {                                      \
              const float *px = plane + ((top + kh) * j->in_w + left + kw) * B;            \
              _Pragma("GCC unroll 4") for (int u = 0; u < POOL_UNROLL; u++)                \
                for (int l = 0; l < B; l++) acc[u][l] = COMBINE(acc[u][l], px[u * sw * B + l]); \
            }                                                                              \
        } else {                                                                           \
          for (int64_t kh = k0; kh < k1; kh++)                                             \
            for (int64_t kw = l0; kw < l1; kw++) {                                         \
              const float *px = plane + ((top + kh) * j->in_w + left + kw) * B;            \
              for (int l = 0; l < B; l++) acc[0][l] = COMBINE(acc[0][l], px[l]);           \
            }                                                                              \
        }                                                                                  \
        for (int64_t u = 0; u < run; u++, ow++) {                                          \
          for (int l = 0; l < B; l++) bad |= rt_cpu_nonfinite(acc[u][l]);                 \
          if (j->blocked_out) {                                                            \
            float *py = j->y + ((nb * j->out_h + oh) * j->out_w + ow) * B;                 \
            for (int l = 0; l < B; l++) py[l] = l < real ? acc[u][l] : 0.0f;              \
          } else {                                                                         \
            float *py = j->y + ((n * j->channels + cb * B) * j->out_h + oh) * j->out_w + ow; \
            for (int64_t l = 0; l < real; l++) py[l * j->out_h * j->out_w] = acc[u][l];    \
          }                                                                                \
        }                                                                                  \
      }                                                                                    \
    }                                                                                      \
    if (bad) atomic_store_explicit(j->nonfinite, true, memory_order_relaxed);              \
  }

/* Each kernel for each instruction set fused groups are built for (fusion_run.c), the one
 * rt_cpu_isa_in_use picks running: the same results, wider vectors. */
typedef void (*pool_rows)(void *ctx, int64_t begin, int64_t end);
enum { POOL_ROWS_MAX, POOL_ROWS_MIN, POOL_BLOCKED8_MAX, POOL_BLOCKED8_MIN, POOL_BLOCKED8_SUM, POOL_BLOCKED16_MAX,
       POOL_BLOCKED16_MIN, POOL_BLOCKED16_SUM, POOL_KERNELS };

#define POOL_VARIANT(ISA, ATTR)                                                              \
  DEFINE_ROWS(max_rows_##ISA, max_f, ATTR)                                                 \
  DEFINE_ROWS(min_rows_##ISA, min_f, ATTR)                                                 \
  DEFINE_BLOCKED(max_blocked8_##ISA, 8, max_f, ATTR)                                       \
  DEFINE_BLOCKED(min_blocked8_##ISA, 8, min_f, ATTR)                                       \
  DEFINE_BLOCKED(sum_blocked8_##ISA, 8, add_f, ATTR)                                       \
  DEFINE_BLOCKED(max_blocked16_##ISA, 16, max_f, ATTR)                                     \
  DEFINE_BLOCKED(min_blocked16_##ISA, 16, min_f, ATTR)                                     \
  DEFINE_BLOCKED(sum_blocked16_##ISA, 16, add_f, ATTR)
#define POOL_TABLE(ISA)                                                                                     \
  {max_rows_##ISA,     min_rows_##ISA,      max_blocked8_##ISA, min_blocked8_##ISA, sum_blocked8_##ISA, \
   max_blocked16_##ISA, min_blocked16_##ISA, sum_blocked16_##ISA}

POOL_VARIANT(portable, __attribute__((flatten)))
#if RT_CPU_X86_VARIANTS
POOL_VARIANT(avx2, __attribute__((target("avx2"), flatten)))
POOL_VARIANT(avx512, __attribute__((target("avx512f"), flatten)))
#endif

static const pool_rows kernels[RT_CPU_ISA_COUNT][POOL_KERNELS] = {
    [RT_CPU_ISA_PORTABLE] = POOL_TABLE(portable),
#if RT_CPU_X86_VARIANTS
    [RT_CPU_ISA_AVX2] = POOL_TABLE(avx2),
    [RT_CPU_ISA_AVX512] = POOL_TABLE(avx512),
#endif
};

static pool_rows kernel(int which) { return kernels[rt_cpu_isa_in_use()][which]; }

bool rt_cpu_pool_f32(const hlo_window *w, hlo_opcode op, const rt_value *x, const rt_value *init, rt_value *y) {
  int r = x->shape.rank;
  if (x->shape.dtype != HLO_F32 || (op != HLO_OP_MAXIMUM && op != HLO_OP_MINIMUM) || r < 2) return false;
  const hlo_window_dim *ww = &w->dims[r - 1];
  int64_t in_w = x->shape.dims[r - 1], padded_w = ww->pad_low + in_w + ww->pad_high;
  int64_t phase_len = (padded_w + ww->stride - 1) / ww->stride;
  if (ww->pad_low < 0 || ww->pad_high < 0 || padded_w > POOL_MAX_WIDTH || phase_len * ww->stride > POOL_MAX_WIDTH)
    return false;
  pool_job j = {.wh = &w->dims[r - 2], .ww = ww, .in_h = x->shape.dims[r - 2], .in_w = in_w,
                .out_h = y->shape.dims[r - 2], .out_w = y->shape.dims[r - 1], .padded_w = padded_w,
                .phase_len = phase_len, .x = x->data, .y = y->data, .init = *(const float *)init->data};
  int64_t rows = j.out_w ? y->count / j.out_w : 0;
  int64_t per_row = in_w * j.wh->size + padded_w + j.out_w * ww->size;
  int64_t grain = RT_CPU_GRAIN / (per_row ? per_row : 1);
  rt_parallel_for(rows, grain > 0 ? grain : 1, kernel(op == HLO_OP_MAXIMUM ? POOL_ROWS_MAX : POOL_ROWS_MIN), &j);
  return true;
}

bool rt_cpu_pool_blocked_f32(const hlo_window *w, hlo_opcode op, int block, const float *x, const int64_t *in_dims,
                             float init, float *y, const int64_t *out_dims, bool blocked_out, bool *finite) {
  if ((block != 8 && block != 16) || (op != HLO_OP_MAXIMUM && op != HLO_OP_MINIMUM && op != HLO_OP_ADD) ||
      w->rank != 4)
    return false;
  atomic_bool nonfinite = false;
  blocked_job j = {.wh = &w->dims[2], .ww = &w->dims[3], .channels = in_dims[1], .blocks = (in_dims[1] + block - 1) / block,
                   .in_h = in_dims[2], .in_w = in_dims[3], .out_h = out_dims[2], .out_w = out_dims[3], .x = x, .y = y,
                   .init = init, .blocked_out = blocked_out, .nonfinite = &nonfinite};
  int which = op == HLO_OP_MAXIMUM ? POOL_BLOCKED8_MAX : op == HLO_OP_MINIMUM ? POOL_BLOCKED8_MIN : POOL_BLOCKED8_SUM;
  pool_rows rows = kernel(block == 8 ? which : which - POOL_BLOCKED8_MAX + POOL_BLOCKED16_MAX);
  int64_t items = in_dims[0] * j.blocks * j.out_h;
  int64_t per_item = j.out_w * j.wh->size * j.ww->size * block;
  int64_t grain = RT_CPU_GRAIN / (per_item ? per_item : 1);
  rt_parallel_for(items, grain > 0 ? grain : 1, rows, &j);
  *finite = !atomic_load(&nonfinite);
  return true;
}
