/* Max and min pools over f32 planes (a reduce-window over the last two dims, no dilation or
 * reversal), separable and vectorized: for each output row, the window's input rows are
 * combined column by column into one row (a contiguous loop the compiler vectorizes), then
 * each output combines its window's columns of that row, starting from the init value.
 *
 * maximum and minimum as the reference computes them (NaN wins, +0 is the larger zero) are
 * associative and commutative, so combining rows first gives the same values as the generic
 * loop's row-major order (of several NaNs, another one may come out). Written without
 * branches so that the column loop vectorizes. Sums keep the generic loop: reordering them
 * would change their rounding. */
#include <string.h>

#include "cpu_internal.h"
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

/* max: a NaN a, else a NaN b (a > b is false), else the larger; of equal values the bits
 * and-ed (+0 over -0). min: the same with the smaller, bits or-ed (-0 under +0). */
static inline float max_f(float a, float b) {
  uint32_t r = bits(a > b ? a : b);
  r = a == b ? bits(a) & bits(b) : r;
  return from_bits(a != a ? bits(a) : r);
}

static inline float min_f(float a, float b) {
  uint32_t r = bits(a < b ? a : b);
  r = a == b ? bits(a) | bits(b) : r;
  return from_bits(a != a ? bits(a) : r);
}

enum { POOL_MAX_WIDTH = 4096 }; /* the row buffer lives on the stack */

typedef struct pool_job {
  const hlo_window_dim *wh, *ww;
  int64_t in_h, in_w, out_h, out_w;
  const float *x;
  float *y, init;
} pool_job;

#define DEFINE_ROWS(NAME, COMBINE)                                                           \
  static void NAME(void *ctx, int64_t begin, int64_t end) {                                \
    const pool_job *j = ctx;                                                               \
    float row[POOL_MAX_WIDTH];                                                             \
    for (int64_t item = begin; item < end; item++) {                                       \
      int64_t plane = item / j->out_h, oh = item % j->out_h;                               \
      int64_t top = oh * j->wh->stride - j->wh->pad_low;                                   \
      int64_t k0 = top < 0 ? -top : 0, k1 = j->in_h - top < j->wh->size ? j->in_h - top : j->wh->size; \
      const float *xp = j->x + plane * j->in_h * j->in_w;                                  \
      float *yr = j->y + item * j->out_w;                                                  \
      if (k0 >= k1) { /* the window covers padding only */                                 \
        for (int64_t ow = 0; ow < j->out_w; ow++) yr[ow] = j->init;                        \
        continue;                                                                          \
      }                                                                                    \
      memcpy(row, xp + (top + k0) * j->in_w, (size_t)j->in_w * sizeof(float));             \
      for (int64_t kh = k0 + 1; kh < k1; kh++) {                                           \
        const float *xr = xp + (top + kh) * j->in_w;                                       \
        for (int64_t w = 0; w < j->in_w; w++) row[w] = COMBINE(row[w], xr[w]);             \
      }                                                                                    \
      for (int64_t ow = 0; ow < j->out_w; ow++) {                                          \
        int64_t left = ow * j->ww->stride - j->ww->pad_low;                                \
        int64_t l0 = left < 0 ? -left : 0, l1 = j->in_w - left < j->ww->size ? j->in_w - left : j->ww->size; \
        float acc = j->init;                                                               \
        for (int64_t kw = l0; kw < l1; kw++) acc = COMBINE(acc, row[left + kw]);           \
        yr[ow] = acc;                                                                      \
      }                                                                                    \
    }                                                                                      \
  }

DEFINE_ROWS(max_rows, max_f)
DEFINE_ROWS(min_rows, min_f)

bool rt_cpu_pool_f32(const hlo_window *w, hlo_opcode op, const rt_value *x, const rt_value *init, rt_value *y) {
  int r = x->shape.rank;
  if (x->shape.dtype != HLO_F32 || (op != HLO_OP_MAXIMUM && op != HLO_OP_MINIMUM) || r < 2 ||
      x->shape.dims[r - 1] > POOL_MAX_WIDTH)
    return false;
  pool_job j = {.wh = &w->dims[r - 2], .ww = &w->dims[r - 1], .in_h = x->shape.dims[r - 2],
                .in_w = x->shape.dims[r - 1], .out_h = y->shape.dims[r - 2], .out_w = y->shape.dims[r - 1],
                .x = x->data, .y = y->data, .init = *(const float *)init->data};
  int64_t rows = j.out_w ? y->count / j.out_w : 0;
  int64_t per_row = j.in_w * j.wh->size + j.out_w * j.ww->size;
  int64_t grain = RT_CPU_GRAIN / (per_row ? per_row : 1);
  rt_parallel_for(rows, grain > 0 ? grain : 1, op == HLO_OP_MAXIMUM ? max_rows : min_rows, &j);
  return true;
}
