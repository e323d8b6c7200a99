/* reduce and reduce-window with the simple reducers (add, multiply, maximum, minimum: the
 * computations hlo_simple_reducer recognizes) as typed loops; any other reducer keeps the
 * reference kernel, which calls the computation per element.
 *
 * reduce: when the reduced dims are the innermost ones each output is one contiguous run,
 * and outputs are split over threads (an f32 maximum or minimum folds its run in vector
 * lanes: extreme_run_f32; f32 sums take eight runs side by side: inner_sum_f32); a
 * reduce-window over whole planes is such a reduce; when the kept dims are one block between
 * reduced ones (a batch norm's statistics over N, H and W), outputs are split over threads,
 * each walking its outputs' runs (an f32 sum in lanes: rt_cpu_lanes_add); otherwise the
 * input is walked in row-major order, each element combined into its output (the order the
 * reference uses). reduce-window:
 * each output combines the init value with the window's taps that land on input elements;
 * taps in padding or dilation holes are skipped, as the reference does. */
#include <math.h>
#include <string.h>

#include "kernel_internal.h"
#include "runtime/reference/reference.h"
#include "runtime/runtime.h"

/* One combine per type: integers in their unsigned twin so sums wrap. */
#define COMBINE_FLOAT(T, MAX, MIN)                                                          \
  static inline T combine_##T(hlo_opcode op, T a, T b) {                                    \
    switch (op) {                                                                           \
      case HLO_OP_ADD: return a + b;                                                        \
      case HLO_OP_MULTIPLY: return a * b;                                                   \
      case HLO_OP_MAXIMUM: return MAX(a, b);                                                \
      default: return MIN(a, b);                                                            \
    }                                                                                       \
  }
#define COMBINE_INT(T, U)                                                                   \
  static inline T combine_##T(hlo_opcode op, T a, T b) {                                    \
    switch (op) {                                                                           \
      case HLO_OP_ADD: return (T)((U)a + (U)b);                                             \
      case HLO_OP_MULTIPLY: return (T)((U)a * (U)b);                                        \
      case HLO_OP_MAXIMUM: return a >= b ? a : b;                                           \
      default: return a <= b ? a : b;                                                       \
    }                                                                                       \
  }
/* The sum alone, for the vector loops (integers wrap) */
#define ADD_float(a, b) ((float)((a) + (b)))
#define ADD_double(a, b) ((double)((a) + (b)))
#define ADD_int32_t(a, b) ((int32_t)((uint32_t)(a) + (uint32_t)(b)))
#define ADD_int64_t(a, b) ((int64_t)((uint64_t)(a) + (uint64_t)(b)))
COMBINE_FLOAT(float, rt_max_f32, rt_min_f32)
COMBINE_FLOAT(double, rt_max_f64, rt_min_f64)
COMBINE_INT(int32_t, uint32_t)
COMBINE_INT(int64_t, uint64_t)

/* The kernel instance for element type t, of those DEFINE_REDUCE, DEFINE_WINDOW and
 * DEFINE_POOL make per type. */
#define BY_TYPE(t, kernel) \
  ((t) == HLO_F32 ? kernel##_float : (t) == HLO_F64 ? kernel##_double : (t) == HLO_S32 ? kernel##_int32_t : kernel##_int64_t)

typedef struct reduce_job {
  hlo_opcode op;
  const void *x, *init;
  void *y;
  int64_t inner;  /* contiguous reduced run per output */
} reduce_job;

/* Where the reduce's row (all dims but the last, row-major) goes in the output. */
static int64_t output_of(const hlo_shape *s, const int64_t *out_strides, int64_t row) {
  int64_t base = 0;
  for (int d = s->rank - 2; d >= 0; d--) {
    base += (row % s->dims[d]) * out_strides[d];
    row /= s->dims[d];
  }
  return base;
}

/* A row-major walk split over the input's first dim, when it is kept: each item's rows
 * combine into their own outputs, each output in the walk's order. */
typedef struct walk_job {
  hlo_opcode op;
  const void *x;
  const hlo_shape *shape;
  const int64_t *out_strides;
  void *y;
  int64_t rows_per_item; /* rows (all dims but the last) per index of the first dim */
} walk_job;

#define DEFINE_REDUCE(T)                                                                    \
  static void inner_##T(void *ctx, int64_t begin, int64_t end) {                            \
    const reduce_job *j = ctx;                                                              \
    const T *x = j->x;                                                                      \
    T *y = j->y, init = *(const T *)j->init;                                                \
    hlo_opcode op = j->op;                                                                  \
    for (int64_t o = begin; o < end; o++) {                                                 \
      T acc = init;                                                                         \
      const T *run = x + o * j->inner;                                                      \
      switch (op) { /* the op outside the loop */                                           \
        case HLO_OP_ADD: for (int64_t r = 0; r < j->inner; r++) acc = combine_##T(HLO_OP_ADD, acc, run[r]); break; \
        case HLO_OP_MULTIPLY: for (int64_t r = 0; r < j->inner; r++) acc = combine_##T(HLO_OP_MULTIPLY, acc, run[r]); break; \
        case HLO_OP_MAXIMUM: for (int64_t r = 0; r < j->inner; r++) acc = combine_##T(HLO_OP_MAXIMUM, acc, run[r]); break; \
        default: for (int64_t r = 0; r < j->inner; r++) acc = combine_##T(HLO_OP_MINIMUM, acc, run[r]); break; \
      }                                                                                     \
      y[o] = acc;                                                                           \
    }                                                                                       \
  }                                                                                         \
  /* Row-major walk of the rows from begin to end (rows: all dims but the last); out_strides[d] \
   * is 0 for reduced dims. Outputs start at init (set by the caller). */                  \
  static void walk_##T(hlo_opcode op, const T *x, const hlo_shape *s, const int64_t *out_strides, T *y, \
                       int64_t begin, int64_t end) {                                        \
    int last = s->rank - 1;                                                                 \
    int64_t n = s->dims[last], os = out_strides[last];                                      \
    for (int64_t row = begin; row < end;) {                                                 \
      int64_t base = output_of(s, out_strides, row);                                        \
      const T *xr = x + row * n;                                                            \
      T *yr = y + base;                                                                     \
      if (os == 0) {                                                                        \
        T acc = *yr;                                                                        \
        for (int64_t i = 0; i < n; i++) acc = combine_##T(op, acc, xr[i]);                  \
        *yr = acc;                                                                          \
        row++;                                                                              \
      } else if (os == 1 && op == HLO_OP_ADD) {                                             \
        /* a kept last dim: vector loops, four rows of one output row at a time, each sum   \
         * still taken in row order */                                                      \
        int64_t rows = 1;                                                                   \
        while (rows < 4 && row + rows < end && output_of(s, out_strides, row + rows) == base) rows++; \
        const T *x1 = xr + n, *x2 = xr + 2 * n, *x3 = xr + 3 * n;                           \
        if (rows == 3) rows = 2; /* then one */                                             \
        if (rows == 4)                                                                      \
          for (int64_t i = 0; i < n; i++)                                                   \
            yr[i] = ADD_##T(ADD_##T(ADD_##T(ADD_##T(yr[i], xr[i]), x1[i]), x2[i]), x3[i]);  \
        else if (rows == 2)                                                                 \
          for (int64_t i = 0; i < n; i++) yr[i] = ADD_##T(ADD_##T(yr[i], xr[i]), x1[i]);    \
        else                                                                                \
          for (int64_t i = 0; i < n; i++) yr[i] = ADD_##T(yr[i], xr[i]);                    \
        row += rows;                                                                        \
      } else {                                                                              \
        for (int64_t i = 0; i < n; i++) yr[i * os] = combine_##T(op, yr[i * os], xr[i]);    \
        row++;                                                                              \
      }                                                                                     \
    }                                                                                       \
  }                                                                                         \
  static void walk_items_##T(void *ctx, int64_t begin, int64_t end) {                       \
    const walk_job *j = ctx;                                                                \
    walk_##T(j->op, j->x, j->shape, j->out_strides, j->y, begin * j->rows_per_item,         \
             end * j->rows_per_item);                                                       \
  }

DEFINE_REDUCE(float)
DEFINE_REDUCE(double)
DEFINE_REDUCE(int32_t)
DEFINE_REDUCE(int64_t)

/* f32 maximum or minimum of init and one contiguous run, as the in-order fold (rt_max_f32,
 * rt_min_f32) gives it, in vector lanes: the fold's result does not depend on the order but for
 * which NaN comes out (the first) and a zero's sign (+0 wins a maximum, -0 a minimum), so
 * the lanes take the plain comparison, and a run holding a NaN, or whose result is a zero,
 * is folded again in order. A softmax's row maximum was a third of its time as the fold. */
/* lane[l] takes the element that wins CMP (>: maximum, <: minimum); nan[l] notes NaNs */
#define LANE_FOLD(CMP)                                                                      \
  for (; i + LANES <= n; i += LANES)                                                        \
    for (int l = 0; l < LANES; l++) {                                                       \
      float v = x[i + l];                                                                   \
      nan[l] |= v != v;                                                                     \
      lane[l] = v CMP lane[l] ? v : lane[l];                                                \
    }                                                                                       \
  for (int l = 0; i < n; i++, l++) {                                                        \
    nan[l] |= x[i] != x[i];                                                                 \
    lane[l] = x[i] CMP lane[l] ? x[i] : lane[l];                                            \
  }                                                                                         \
  for (int l = 1; l < LANES; l++) lane[0] = lane[l] CMP lane[0] ? lane[l] : lane[0];

static float extreme_run_f32(hlo_opcode op, const float *x, int64_t n, float init) {
  enum { LANES = 8 };
  float lane[LANES];
  int32_t nan[LANES];
  for (int l = 0; l < LANES; l++) lane[l] = init, nan[l] = isnan(init);
  int64_t i = 0;
  if (op == HLO_OP_MAXIMUM) {
    LANE_FOLD(>)
  } else {
    LANE_FOLD(<)
  }
  bool any_nan = false;
  for (int l = 0; l < LANES; l++) any_nan = any_nan || nan[l];
  if (!any_nan && lane[0] != 0) return lane[0];
  float acc = init;
  for (i = 0; i < n; i++) acc = op == HLO_OP_MAXIMUM ? rt_max_f32(acc, x[i]) : rt_min_f32(acc, x[i]);
  return acc;
}
#undef LANE_FOLD

static void inner_extreme_f32(void *ctx, int64_t begin, int64_t end) {
  const reduce_job *j = ctx;
  const float *x = j->x;
  float *y = j->y, init = *(const float *)j->init;
  for (int64_t o = begin; o < end; o++) y[o] = extreme_run_f32(j->op, x + o * j->inner, j->inner, init);
}

/* f32 sums of contiguous runs, each added in order from init as inner_float adds it (the
 * same bits): one run's sum is a chain of dependent adds, so eight runs go side by side, one
 * chain each. A classifier's global average pool is such a sum (a reduce over the last dims,
 * or a reduce-window over whole planes). */
enum { SUM_LANES = 8 };

static void inner_sum_f32(void *ctx, int64_t begin, int64_t end) {
  const reduce_job *j = ctx;
  int64_t n = j->inner, o = begin;
  float *y = j->y, init = *(const float *)j->init;
  for (; o + SUM_LANES <= end; o += SUM_LANES) {
    const float *x = (const float *)j->x + o * n;
    float acc[SUM_LANES];
    for (int l = 0; l < SUM_LANES; l++) acc[l] = init;
    for (int64_t t = 0; t < n; t++)
      for (int l = 0; l < SUM_LANES; l++) acc[l] += x[l * n + t];
    for (int l = 0; l < SUM_LANES; l++) y[o + l] = acc[l];
  }
  for (; o < end; o++) {
    const float *x = (const float *)j->x + o * n;
    float acc = init;
    for (int64_t t = 0; t < n; t++) acc += x[t];
    y[o] = acc;
  }
}

/* Each output a contiguous run of inner elements, split over the threads. */
static void reduce_runs(hlo_opcode op, hlo_dtype t, const rt_value *x, const rt_value *init, rt_value *out,
                        int64_t inner) {
  reduce_job j = {.op = op, .x = x->data, .init = init->data, .y = out->data, .inner = inner};
  int64_t grain = RT_CPU_GRAIN / (inner ? inner : 1);
  void (*fn)(void *, int64_t, int64_t) = BY_TYPE(t, inner);
  if (t == HLO_F32 && (op == HLO_OP_MAXIMUM || op == HLO_OP_MINIMUM)) fn = inner_extreme_f32;
  if (t == HLO_F32 && op == HLO_OP_ADD) fn = inner_sum_f32, grain = grain > SUM_LANES ? grain : SUM_LANES;
  rt_parallel_for(out->count, grain > 0 ? grain : 1, fn, &j);
}

/* ---- kept dims between reduced ones ---- */

/* The input seen as [outer, kept, inner]: output o combines the runs x[a][o][0..inner) for a
 * in turn. Outputs are split over the threads, each walking the runs of its own outputs. */
typedef struct middle_job {
  hlo_opcode op;
  const void *x, *init;
  void *y;
  int64_t outer, kept, inner;
} middle_job;

/* Any type and reducer: each output in the row-major walk's order. */
#define DEFINE_MIDDLE(T)                                                                    \
  static void middle_##T(void *ctx, int64_t begin, int64_t end) {                           \
    const middle_job *j = ctx;                                                              \
    const T *x = j->x;                                                                      \
    T *y = j->y, init = *(const T *)j->init;                                                \
    hlo_opcode op = j->op;                                                                  \
    for (int64_t o = begin; o < end; o++) y[o] = init;                                      \
    for (int64_t a = 0; a < j->outer; a++)                                                  \
      for (int64_t o = begin; o < end; o++) {                                               \
        const T *run = x + (a * j->kept + o) * j->inner;                                    \
        T acc = y[o];                                                                       \
        for (int64_t b = 0; b < j->inner; b++) acc = combine_##T(op, acc, run[b]);         \
        y[o] = acc;                                                                         \
      }                                                                                     \
  }
DEFINE_MIDDLE(float)
DEFINE_MIDDLE(double)
DEFINE_MIDDLE(int32_t)
DEFINE_MIDDLE(int64_t)

/* An f32 sum in lanes (rt_cpu_lanes_add), a few outputs at a time so their lanes stay in
 * registers or L1. */
static void middle_sum_f32(void *ctx, int64_t begin, int64_t end) {
  enum { GROUP = 32 };
  const middle_job *j = ctx;
  const float *x = j->x;
  float *y = j->y, init = *(const float *)j->init;
  int width = rt_cpu_lanes_width(j->inner);
  float lanes[GROUP * RT_CPU_LANES];
  for (int64_t o0 = begin; o0 < end; o0 += GROUP) {
    int64_t g = end - o0 < GROUP ? end - o0 : GROUP;
    rt_cpu_lanes_clear(lanes, g * width);
    for (int64_t a = 0; a < j->outer; a++) {
      const float *runs = x + (a * j->kept + o0) * j->inner;
      for (int64_t k = 0; k < g; k++) rt_cpu_lanes_add(lanes + k * width, width, runs + k * j->inner, j->inner);
    }
    for (int64_t k = 0; k < g; k++) y[o0 + k] = rt_cpu_lanes_total(lanes + k * width, width, init);
  }
}

/* Whether the kept dims of a reduce over `reduced` of shape s are one block of consecutive
 * dims with reduced dims on both sides of it; then the sizes before, of and after the block.
 * (Kept dims at the front are the walk's, split over the first dim; at the end, the walk's
 * vector loops over whole rows.) */
bool rt_cpu_reduce_middle(const hlo_shape *s, const bool *reduced, int64_t *outer, int64_t *kept, int64_t *inner) {
  int first = -1, last = -1;
  for (int d = 0; d < s->rank; d++)
    if (!reduced[d]) {
      if (first < 0) first = d;
      else if (last != d - 1) return false;
      last = d;
    }
  if (first <= 0 || last == s->rank - 1) return false;
  *outer = *kept = *inner = 1;
  for (int d = 0; d < s->rank; d++) *(d < first ? outer : d <= last ? kept : inner) *= s->dims[d];
  return *outer > 1; /* else the kept dims lead: reduce_runs */
}

static void reduce_middle(hlo_opcode op, hlo_dtype t, const rt_value *x, const rt_value *init, rt_value *out,
                          int64_t outer, int64_t inner) {
  middle_job j = {.op = op, .x = x->data, .init = init->data, .y = out->data, .outer = outer, .kept = out->count,
                  .inner = inner};
  int64_t per_output = outer * inner, grain = RT_CPU_GRAIN / (per_output ? per_output : 1);
  void (*fn)(void *, int64_t, int64_t) = BY_TYPE(t, middle);
  if (t == HLO_F32 && op == HLO_OP_ADD) fn = middle_sum_f32;
  rt_parallel_for(out->count, grain > 0 ? grain : 1, fn, &j);
}

static bool reduce_kernel(const hlo_instr *instr, const rt_value *const *in, rt_value *out) {
  hlo_opcode op = hlo_simple_reducer(instr->called[0]);
  const hlo_shape *s = &in[0]->shape;
  bool reduced[HLO_MAX_RANK] = {false};
  for (int k = 0; k < instr->dimensions.count; k++) reduced[instr->dimensions.values[k]] = true;
  /* innermost? then every output is one run of `inner` elements */
  int64_t inner = 1;
  bool trailing = true, seen_kept = false;
  for (int d = s->rank - 1; d >= 0; d--) {
    if (reduced[d] && seen_kept && s->dims[d] != 1) trailing = false; /* a size-1 dim moves nothing */
    if (reduced[d]) inner *= s->dims[d];
    else seen_kept = true;
  }
  hlo_dtype t = out->shape.dtype;
  if (trailing || s->rank == 0) {
    reduce_runs(op, t, in[0], in[1], out, inner);
    return true;
  }
  int64_t outer, kept;
  if (in[0]->count > 0 && rt_cpu_reduce_middle(s, reduced, &outer, &kept, &inner)) {
    reduce_middle(op, t, in[0], in[1], out, outer, inner);
    return true;
  }
  int64_t out_strides[HLO_MAX_RANK], kept_strides[HLO_MAX_RANK];
  hlo_shape_strides(&out->shape, kept_strides);
  for (int d = 0, k = 0; d < s->rank; d++) out_strides[d] = reduced[d] ? 0 : kept_strides[k++];
  rt_value_fill(out, in[1]->data);
  int64_t last = s->dims[s->rank - 1], rows = last ? in[0]->count / last : 0;
  if (rows == 0) return true;
  /* the first dim kept: its slices reduce apart, on as many threads as the work allows */
  int64_t items = reduced[0] || s->rank == 1 ? 1 : s->dims[0];
  walk_job j = {.op = op, .x = in[0]->data, .shape = s, .out_strides = out_strides, .y = out->data,
                .rows_per_item = rows / items};
  int64_t per_item = in[0]->count / items, grain = RT_CPU_GRAIN / (per_item ? per_item : 1);
  void (*fn)(void *, int64_t, int64_t) = BY_TYPE(t, walk_items);
  rt_parallel_for(items, grain > 0 ? grain : 1, fn, &j);
  return true;
}

/* ---- reduce-window ---- */

typedef struct window_job {
  const hlo_instr *instr;
  hlo_opcode op;
  const rt_value *x, *init;
  rt_value *y;
} window_job;

#define DEFINE_WINDOW(T)                                                                    \
  static void window_##T(void *ctx, int64_t begin, int64_t end) {                           \
    const window_job *j = ctx;                                                              \
    const hlo_window *w = j->instr->window;                                                 \
    const hlo_shape *xs = &j->x->shape, *ys = &j->y->shape;                                 \
    int rank = xs->rank;                                                                    \
    int64_t xstr[HLO_MAX_RANK], taps = 1;                                                   \
    hlo_shape_strides(xs, xstr);                                                            \
    for (int d = 0; d < rank; d++) taps *= w->dims[d].size;                                 \
    const T *x = j->x->data;                                                                \
    T *y = j->y->data, init = *(const T *)j->init->data;                                    \
    for (int64_t o = begin; o < end; o++) {                                                 \
      int64_t pos[HLO_MAX_RANK], rest = o;                                                  \
      for (int d = rank - 1; d >= 0; d--) {                                                 \
        pos[d] = rest % ys->dims[d];                                                        \
        rest /= ys->dims[d];                                                                \
      }                                                                                     \
      T acc = init;                                                                         \
      for (int64_t t = 0; t < taps; t++) {                                                  \
        int64_t tr = t, offset = 0;                                                         \
        bool inside = true;                                                                 \
        for (int d = rank - 1; d >= 0 && inside; d--) {                                     \
          const hlo_window_dim *wd = &w->dims[d];                                           \
          int64_t k = tr % wd->size;                                                        \
          tr /= wd->size;                                                                   \
          if (wd->reversal) k = wd->size - 1 - k;                                           \
          int64_t at = pos[d] * wd->stride + k * wd->rhs_dilate - wd->pad_low;              \
          int64_t dilated = xs->dims[d] == 0 ? 0 : (xs->dims[d] - 1) * wd->lhs_dilate + 1;  \
          inside = at >= 0 && at < dilated && at % wd->lhs_dilate == 0;                     \
          offset += (at / wd->lhs_dilate) * xstr[d];                                        \
        }                                                                                   \
        if (inside) acc = combine_##T(j->op, acc, x[offset]);                               \
      }                                                                                     \
      y[o] = acc;                                                                           \
    }                                                                                       \
  }

/* Pooling: a window over the last two dims only (size 1 and stride 1 elsewhere), no
 * dilation or reversal. Each output row of a plane clips its taps to the input once, then
 * combines them in the generic loop's order (row-major taps, padding skipped): the same
 * results, without a division per tap. Items are (plane, output row) pairs. */
#define DEFINE_POOL(T)                                                                      \
  static void pool_##T(void *ctx, int64_t begin, int64_t end) {                             \
    const window_job *j = ctx;                                                              \
    const hlo_window *w = j->instr->window;                                                 \
    const hlo_shape *xs = &j->x->shape, *ys = &j->y->shape;                                 \
    int r = xs->rank;                                                                       \
    const hlo_window_dim *wh = &w->dims[r - 2], *ww = &w->dims[r - 1];                      \
    int64_t in_h = xs->dims[r - 2], in_w = xs->dims[r - 1], out_h = ys->dims[r - 2], out_w = ys->dims[r - 1]; \
    const T *x = j->x->data;                                                                \
    T *y = j->y->data, init = *(const T *)j->init->data;                                    \
    hlo_opcode op = j->op;                                                                  \
    for (int64_t item = begin; item < end; item++) {                                        \
      int64_t plane = item / out_h, oh = item % out_h;                                      \
      int64_t top = oh * wh->stride - wh->pad_low;                                          \
      int64_t k0 = top < 0 ? -top : 0, k1 = in_h - top < wh->size ? in_h - top : wh->size;  \
      const T *xp = x + plane * in_h * in_w;                                                \
      T *yr = y + item * out_w;                                                             \
      for (int64_t ow = 0; ow < out_w; ow++) {                                              \
        int64_t left = ow * ww->stride - ww->pad_low;                                       \
        int64_t l0 = left < 0 ? -left : 0, l1 = in_w - left < ww->size ? in_w - left : ww->size; \
        T acc = init;                                                                       \
        for (int64_t kh = k0; kh < k1; kh++)                                                \
          for (int64_t kw = l0; kw < l1; kw++) acc = combine_##T(op, acc, xp[(top + kh) * in_w + left + kw]); \
        yr[ow] = acc;                                                                       \
      }                                                                                     \
    }                                                                                       \
  }

DEFINE_WINDOW(float)
DEFINE_WINDOW(double)
DEFINE_WINDOW(int32_t)
DEFINE_WINDOW(int64_t)
DEFINE_POOL(float)
DEFINE_POOL(double)
DEFINE_POOL(int32_t)
DEFINE_POOL(int64_t)

static bool is_pool(const hlo_window *w) {
  if (w->rank < 2) return false;
  for (int d = 0; d < w->rank; d++) {
    const hlo_window_dim *wd = &w->dims[d];
    if (wd->lhs_dilate != 1 || wd->rhs_dilate != 1 || wd->reversal) return false;
    if (d < w->rank - 2 && (wd->size != 1 || wd->stride != 1 || wd->pad_low != 0 || wd->pad_high != 0)) return false;
  }
  return true;
}

/* A pool (is_pool) whose window covers its input's last two dims exactly, leaving 1x1. */
static bool is_whole_plane(const hlo_window *w, const hlo_shape *x, const hlo_shape *y) {
  for (int d = w->rank - 2; d < w->rank; d++) {
    const hlo_window_dim *wd = &w->dims[d];
    if (wd->size != x->dims[d] || wd->pad_low != 0 || wd->pad_high != 0 || y->dims[d] != 1) return false;
  }
  return true;
}

static bool reduce_window_kernel(const hlo_instr *instr, const rt_value *const *in, rt_value *out) {
  window_job j = {.instr = instr, .op = hlo_simple_reducer(instr->called[0]), .x = in[0], .init = in[1], .y = out};
  hlo_dtype t = out->shape.dtype;
  const hlo_window *w = instr->window;
  if (is_pool(w)) {
    if (rt_cpu_pool_f32(w, j.op, in[0], in[1], out)) return true;
    int r = out->shape.rank;
    if (is_whole_plane(w, &in[0]->shape, &out->shape)) { /* a reduce over the last two dims */
      reduce_runs(j.op, t, in[0], in[1], out, in[0]->shape.dims[r - 2] * in[0]->shape.dims[r - 1]);
      return true;
    }
    int64_t rows = out->shape.dims[r - 1] ? out->count / out->shape.dims[r - 1] : 0;
    int64_t per_row = out->shape.dims[r - 1] * w->dims[r - 2].size * w->dims[r - 1].size;
    int64_t grain = RT_CPU_GRAIN / (per_row ? per_row : 1);
    void (*pool)(void *, int64_t, int64_t) = BY_TYPE(t, pool);
    rt_parallel_for(rows, grain > 0 ? grain : 1, pool, &j);
    return true;
  }
  void (*fn)(void *, int64_t, int64_t) = BY_TYPE(t, window);
  int64_t taps = 1;
  for (int d = 0; d < instr->window->rank; d++) taps *= instr->window->dims[d].size;
  int64_t grain = RT_CPU_GRAIN / (taps ? taps : 1);
  rt_parallel_for(out->count, grain > 0 ? grain : 1, fn, &j);
  return true;
}

rt_cpu_kernel rt_cpu_pick_reduce(const hlo_instr *instr) {
  if (instr->opcode == HLO_OP_SELECT_AND_SCATTER) return rt_cpu_pick_pool_grad(instr);
  if (instr->opcode != HLO_OP_REDUCE && instr->opcode != HLO_OP_REDUCE_WINDOW) return NULL;
  if (instr->operand_count != 2 || instr->called_count != 1) return NULL;
  hlo_dtype t = instr->shape.dtype;
  if (t != HLO_F32 && t != HLO_F64 && t != HLO_S32 && t != HLO_S64) return NULL;
  const hlo_shape *x = &instr->operands[0]->shape, *init = &instr->operands[1]->shape;
  if (!hlo_shape_is_array(x) || x->dtype != t || init->dtype != t || init->rank != 0) return NULL;
  hlo_opcode op = hlo_simple_reducer(instr->called[0]);
  if (op != HLO_OP_ADD && op != HLO_OP_MULTIPLY && op != HLO_OP_MAXIMUM && op != HLO_OP_MINIMUM) return NULL;
  if (instr->called[0]->root->shape.dtype != t) return NULL;
  if (instr->opcode == HLO_OP_REDUCE) {
    for (int k = 0; k < instr->dimensions.count; k++)
      if (instr->dimensions.values[k] < 0 || instr->dimensions.values[k] >= x->rank) return NULL;
    return reduce_kernel;
  }
  const hlo_window *w = instr->window;
  if (!w || w->rank != x->rank) return NULL;
  for (int d = 0; d < w->rank; d++)
    if (w->dims[d].size < 1 || w->dims[d].stride < 1 || w->dims[d].lhs_dilate < 1 || w->dims[d].rhs_dilate < 1)
      return NULL;
  return reduce_window_kernel;
}
