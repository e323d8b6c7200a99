/* convolution with XLA's full semantics: any dim_labels, window stride, low/high padding
 * (negative crops), base dilation (lhs_dilate), window dilation (rhs_dilate), window
 * reversal, feature groups (grouped and depthwise) and batch groups.
 *
 * Operands are seen in a work type (see kernels_dot.c) in a canonical order, copied only
 * when they are not already so: input [batch][feature][spatial...], kernel [out feature]
 * [in feature][spatial...]; the result is computed as [batch][feature][spatial...] and
 * stored back in the output's order. Each spatial dimension gets a table saying, for output
 * position p and kernel tap k, which input coordinate the tap reads, or -1 when it falls
 * into padding or a dilation hole: stride, padding, dilations and reversal, worked out once.
 * Taps that fall into padding or holes are skipped, as XLA's evaluator does.
 *
 * Two ways to compute, both over those tables:
 *   rows: for each output plane and input feature, 1-D correlations along the last spatial
 *     dimension, each tap (or each output position) over its precomputed run of valid
 *     partners, so no tap is tested in the inner loops. Serves integers (64-bit wrapping
 *     sums), kernels holding inf or NaN, and convolutions with few output features per
 *     group (depthwise), where a matrix product has nothing to share.
 *   lowered: tiles of eight output positions (over batch and space) are gathered into a
 *     panel (zeros where a tap is skipped) and multiplied with the packed kernel by the
 *     matrix multiply in kernels_dot.c. A zero times a finite weight adds nothing (not even
 *     a -0: sums start at +0), so with a finite kernel this is exactly the skipping rule.
 * Accumulation is in double when storage is f64, in float otherwise. Large convolutions
 * split their independent outputs over the machine's cores; every output is still summed by
 * one thread in a fixed order, so results do not depend on the split. */
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "reference.h"

enum {
  MAX_WORKERS = 8,
  MIN_WORK_PER_WORKER = 1 << 22, /* multiply-adds */
  PANEL_DEPTH = 2048,            /* rows of a panel piece, so it stays in the core's cache */
};

/* One spatial dimension. */
typedef struct conv_dim {
  int64_t in, taps, out; /* input, kernel and output sizes */
  int64_t stride, pad_low, pad_high, lhs_dilate, rhs_dilate;
  bool reversal;
  int64_t in_stride;     /* of this dimension in the canonical input */
  int64_t *source;       /* [out * taps]: input coordinate read by tap k at position p, or -1 */
} conv_dim;

/* A run of valid (position, tap) pairs of the last spatial dimension, for one tap (over
 * positions) or one position (over taps): `count` partners from `first` in steps of `step`,
 * reading input coordinates from x_first in steps of x_step. Valid partners always form
 * such a progression: validity is a range bound plus a divisibility by lhs_dilate. */
typedef struct conv_run {
  int64_t first, step, count, x_first, x_step;
} conv_run;

typedef struct conv_plan {
  int spatial;                      /* at least 1: a convolution without one gets a unit one */
  conv_dim dims[HLO_MAX_RANK];
  int64_t in_batch, features;       /* input batch and feature sizes */
  int64_t out_batch, out_features;  /* output batch, kernel output features */
  int64_t group_features;           /* kernel input features: input features per group */
  int64_t feature_groups, batch_groups;
  int64_t groups, group_out;        /* groups of output features, and their size */
  int64_t chunk;                    /* lowered: input features per panel piece */
  int64_t in_plane, taps, out_plane; /* elements of one input plane / window / output plane */
  int in_perm[HLO_MAX_RANK], kernel_perm[HLO_MAX_RANK], out_perm[HLO_MAX_RANK];
  bool by_tap;                      /* rows: runs per tap (axpy) rather than per position (dot) */
  conv_run *runs;                   /* rows: taps or out entries for the last dimension */
} conv_plan;

/* ---------------------------------------------------------------------------------------
 * Planning: decode the attributes, check them against the shapes, build the tables. */

static bool distinct(const int *perm, int rank) {
  bool seen[HLO_MAX_RANK] = {false};
  for (int i = 0; i < rank; i++) {
    if (perm[i] < 0 || perm[i] >= rank || seen[perm[i]]) return false;
    seen[perm[i]] = true;
  }
  return true;
}

/* The output size XLA's shape inference gives one spatial dimension. */
static int64_t windows_along(const conv_dim *d) {
  int64_t dilated_in = d->in == 0 ? 0 : (d->in - 1) * d->lhs_dilate + 1;
  int64_t padded = d->pad_low + dilated_in + d->pad_high;
  int64_t dilated_window = d->taps == 0 ? 0 : (d->taps - 1) * d->rhs_dilate + 1;
  if (padded <= 0 || dilated_window > padded) return 0;
  return (padded - dilated_window) / d->stride + 1;
}

static const char *plan_dims(const hlo_instr *instr, const hlo_shape *in, const hlo_shape *kernel,
                             conv_plan *p) {
  const hlo_conv_dims *cd = instr->conv;
  const hlo_window *window = instr->window;
  int spatial = cd->spatial_count;
  if (spatial < 0 || spatial > HLO_MAX_RANK - 2) return "bad dim_labels";
  int rank = spatial + 2;
  if (in->rank != rank || kernel->rank != rank || instr->shape.rank != rank)
    return "operand and result ranks do not match dim_labels";
  if ((window ? window->rank : 0) != spatial) return "the window rank does not match dim_labels";
  p->spatial = spatial;
  p->in_perm[0] = (int)cd->input_batch;
  p->in_perm[1] = (int)cd->input_feature;
  p->kernel_perm[0] = (int)cd->kernel_output_feature;
  p->kernel_perm[1] = (int)cd->kernel_input_feature;
  p->out_perm[0] = (int)cd->output_batch;
  p->out_perm[1] = (int)cd->output_feature;
  for (int d = 0; d < spatial; d++) {
    p->in_perm[2 + d] = (int)cd->input_spatial[d];
    p->kernel_perm[2 + d] = (int)cd->kernel_spatial[d];
    p->out_perm[2 + d] = (int)cd->output_spatial[d];
  }
  if (!distinct(p->in_perm, rank) || !distinct(p->kernel_perm, rank) || !distinct(p->out_perm, rank))
    return "dim_labels name a dimension twice or out of range";
  for (int d = 0; d < spatial; d++) {
    const hlo_window_dim *w = &window->dims[d];
    conv_dim *cd_ = &p->dims[d];
    *cd_ = (conv_dim){
        .in = in->dims[p->in_perm[2 + d]],
        .taps = kernel->dims[p->kernel_perm[2 + d]],
        .out = instr->shape.dims[p->out_perm[2 + d]],
        .stride = w->stride,
        .pad_low = w->pad_low,
        .pad_high = w->pad_high,
        .lhs_dilate = w->lhs_dilate,
        .rhs_dilate = w->rhs_dilate,
        .reversal = w->reversal,
    };
    if (w->size != cd_->taps) return "the window size does not match the kernel";
    if (cd_->stride < 1 || cd_->lhs_dilate < 1 || cd_->rhs_dilate < 1)
      return "window strides and dilations must be positive";
    if (windows_along(cd_) != cd_->out) return "an output spatial size does not match the window";
  }
  if (spatial == 0) { /* a unit dimension lets the loops below assume one */
    p->dims[0] = (conv_dim){.in = 1, .taps = 1, .out = 1, .stride = 1, .lhs_dilate = 1, .rhs_dilate = 1};
    p->spatial = 1;
  }
  return NULL;
}

static const char *plan_groups(const hlo_instr *instr, const hlo_shape *in, const hlo_shape *kernel,
                               conv_plan *p) {
  p->in_batch = in->dims[p->in_perm[0]];
  p->features = in->dims[p->in_perm[1]];
  p->out_features = kernel->dims[p->kernel_perm[0]];
  p->group_features = kernel->dims[p->kernel_perm[1]];
  p->out_batch = instr->shape.dims[p->out_perm[0]];
  p->feature_groups = instr->feature_group_count;
  p->batch_groups = instr->batch_group_count;
  if (p->feature_groups < 1 || p->batch_groups < 1) return "group counts must be positive";
  if (p->feature_groups > 1 && p->batch_groups > 1)
    return "feature_group_count and batch_group_count cannot both exceed 1";
  if (p->features % p->feature_groups || p->group_features != p->features / p->feature_groups)
    return "the kernel input features must be the input features / feature_group_count";
  p->groups = p->feature_groups * p->batch_groups;
  if (p->out_features % p->groups) return "the kernel output features do not divide into the groups";
  if (p->in_batch % p->batch_groups || p->out_batch != p->in_batch / p->batch_groups)
    return "the output batch must be the input batch / batch_group_count";
  if (instr->shape.dims[p->out_perm[1]] != p->out_features)
    return "the output feature size must be the kernel output feature size";
  p->group_out = p->out_features / p->groups;
  return NULL;
}

/* Tap k of the window at output position p reads padded position p*stride + j*rhs_dilate,
 * j = k (or taps-1-k when reversed); that is dilated input position (that - pad_low), a real
 * element only at multiples of lhs_dilate within the dilated input. */
static bool fill_source(conv_dim *d) {
  d->source = hlo_malloc((size_t)(d->out * d->taps + 1) * sizeof(int64_t));
  if (!d->source) return false;
  int64_t dilated_in = d->in == 0 ? 0 : (d->in - 1) * d->lhs_dilate + 1;
  for (int64_t p = 0; p < d->out; p++)
    for (int64_t k = 0; k < d->taps; k++) {
      int64_t j = d->reversal ? d->taps - 1 - k : k;
      int64_t at = p * d->stride + j * d->rhs_dilate - d->pad_low;
      bool real = at >= 0 && at < dilated_in && at % d->lhs_dilate == 0;
      d->source[p * d->taps + k] = real ? at / d->lhs_dilate : -1;
    }
  return true;
}

/* The run of valid entries among table[i * step], i < n. */
static conv_run make_run(const int64_t *table, int64_t n, int64_t step) {
  conv_run run = {.step = 1, .x_step = 1};
  for (int64_t i = 0; i < n; i++) {
    int64_t at = table[i * step];
    if (at < 0) continue;
    if (run.count == 0) {
      run.first = i;
      run.x_first = at;
    } else if (run.count == 1) {
      run.step = i - run.first;
      run.x_step = at - run.x_first;
    }
    run.count++;
  }
  return run;
}

/* Runs of the last dimension: per tap when taps are fewer than positions, so the inner loop
 * is the longer one. */
static bool fill_runs(conv_plan *p) {
  const conv_dim *d = &p->dims[p->spatial - 1];
  p->by_tap = d->taps <= d->out;
  int64_t count = p->by_tap ? d->taps : d->out;
  p->runs = hlo_malloc((size_t)(count + 1) * sizeof(conv_run));
  if (!p->runs) return false;
  for (int64_t i = 0; i < count; i++)
    p->runs[i] = p->by_tap ? make_run(d->source + i, d->out, d->taps)      /* tap i, over p */
                           : make_run(d->source + i * d->taps, d->taps, 1); /* position i, over k */
  return true;
}

static void free_plan(conv_plan *p) {
  for (int d = 0; d < p->spatial; d++) free(p->dims[d].source);
  free(p->runs);
}

static const char *plan_conv(const hlo_instr *instr, const hlo_shape *in, const hlo_shape *kernel,
                             conv_plan *p, bool *out_of_memory) {
  *p = (conv_plan){0};
  if (!instr->conv) return "missing dim_labels";
  const char *error = plan_dims(instr, in, kernel, p);
  if (!error) error = plan_groups(instr, in, kernel, p);
  if (error) return error;
  p->in_plane = p->taps = p->out_plane = 1;
  for (int d = p->spatial - 1; d >= 0; d--) {
    p->dims[d].in_stride = p->in_plane;
    p->in_plane *= p->dims[d].in;
    p->taps *= p->dims[d].taps;
    p->out_plane *= p->dims[d].out;
  }
  p->chunk = p->taps >= PANEL_DEPTH ? 1 : PANEL_DEPTH / (p->taps ? p->taps : 1);
  if (p->chunk > p->group_features) p->chunk = p->group_features > 0 ? p->group_features : 1;
  bool ok = true;
  for (int d = 0; d < p->spatial; d++) ok = fill_source(&p->dims[d]) && ok;
  if (ok) ok = fill_runs(p);
  if (!ok) {
    *out_of_memory = true;
    return "out of memory";
  }
  return NULL;
}

/* Offset in an input plane read by tap `tap` of the window at output position `pos`, over
 * the first `rank` spatial dimensions; -1 when the tap falls into padding or a hole. */
static int64_t input_offset(const conv_plan *p, int rank, const int64_t *pos, const int64_t *tap) {
  int64_t offset = 0;
  for (int d = 0; d < rank; d++) {
    const conv_dim *cd = &p->dims[d];
    int64_t at = cd->source[pos[d] * cd->taps + tap[d]];
    if (at < 0) return -1;
    offset += at * cd->in_stride;
  }
  return offset;
}

/* Advances coords over the first `rank` dimensions' output positions (or taps). */
static void next_pos(const conv_plan *p, int rank, int64_t *coords) {
  for (int d = rank - 1; d >= 0; d--) {
    if (++coords[d] < p->dims[d].out) return;
    coords[d] = 0;
  }
}

static void next_tap(const conv_plan *p, int rank, int64_t *coords) {
  for (int d = rank - 1; d >= 0; d--) {
    if (++coords[d] < p->dims[d].taps) return;
    coords[d] = 0;
  }
}

/* The group g of output features reads, for output batch n, input batch group_batch(g, n)
 * and input features from group_feature(g). */
static int64_t group_batch(const conv_plan *p, int64_t g, int64_t n) {
  return p->batch_groups > 1 ? g * p->out_batch + n : n;
}

static int64_t group_feature(const conv_plan *p, int64_t g) {
  return p->feature_groups > 1 ? g * p->group_features : 0;
}

/* Where group g's input starts, for output batch 0. */
static int64_t group_base(const conv_plan *p, int64_t g) {
  return (group_batch(p, g, 0) * p->features + group_feature(p, g)) * p->in_plane;
}

/* ---------------------------------------------------------------------------------------
 * rows: output plane by output plane, 1-D correlations along the last dimension. */

#define DEFINE_ROWS(T, S)                                                                  \
  /* y[p] += sum over valid taps k of w[k] * x[input coordinate of (p, k)] */               \
  static void correlate_##S(const conv_plan *p, T *restrict y, const T *restrict x, const T *w) { \
    const conv_dim *d = &p->dims[p->spatial - 1];                                          \
    if (p->by_tap) {                                                                       \
      for (int64_t k = 0; k < d->taps; k++) {                                              \
        conv_run r = p->runs[k];                                                           \
        T wk = w[k], *yy = y + r.first;                                                    \
        const T *xx = x + r.x_first;                                                       \
        if (r.step == 1 && r.x_step == 1) { /* blocks of eight, so it vectorizes */       \
          int64_t c = 0;                                                                   \
          for (; c + 8 <= r.count; c += 8)                                                 \
            for (int j = 0; j < 8; j++) yy[c + j] += wk * xx[c + j];                       \
          for (; c < r.count; c++) yy[c] += wk * xx[c];                                    \
        } else {                                                                           \
          for (int64_t c = 0; c < r.count; c++) yy[c * r.step] += wk * xx[c * r.x_step];   \
        }                                                                                  \
      }                                                                                    \
      return;                                                                              \
    }                                                                                      \
    for (int64_t q = 0; q < d->out; q++) {                                                 \
      conv_run r = p->runs[q];                                                             \
      const T *ww = w + r.first, *xx = x + r.x_first;                                      \
      T acc = 0;                                                                           \
      int64_t c = 0;                                                                       \
      if (r.step == 1 && r.x_step == 1) { /* eight partial sums, so it vectorizes */       \
        T part[8] = {0};                                                                   \
        for (; c + 8 <= r.count; c += 8)                                                   \
          for (int j = 0; j < 8; j++) part[j] += ww[c + j] * xx[c + j];                    \
        for (int j = 0; j < 8; j++) acc += part[j];                                        \
        for (; c < r.count; c++) acc += ww[c] * xx[c];                                     \
      } else {                                                                             \
        for (; c < r.count; c++) acc += ww[c * r.step] * xx[c * r.x_step];                 \
      }                                                                                    \
      y[q] += acc;                                                                         \
    }                                                                                      \
  }                                                                                        \
  /* Output plane (n, o): for each input feature, each outer output row and each outer    \
   * tap whose input row exists, one correlation along the last dimension. */              \
  static void plane_##S(const conv_plan *p, const T *x, const T *w, T *y, int64_t n, int64_t o) { \
    int outer = p->spatial - 1;                                                            \
    const conv_dim *last = &p->dims[outer];                                                \
    int64_t g = o / p->group_out;                                                          \
    int64_t out_rows = p->out_plane / (last->out ? last->out : 1);                         \
    int64_t tap_rows = p->taps / (last->taps ? last->taps : 1);                            \
    const T *xg = x + group_base(p, g) + n * p->features * p->in_plane;                    \
    T *yo = y + (n * p->out_features + o) * p->out_plane;                                  \
    if (last->out == 0 || last->taps == 0) return;                                         \
    /* Already zero, but writing it first spares a fault per page: read first, a fresh page \
     * maps the shared zero page and the first += then copies it, flushing every core's TLB. */ \
    memset(yo, 0, sizeof(T) * (size_t)p->out_plane);                                       \
    for (int64_t i = 0; i < p->group_features; i++) {                                      \
      const T *xi = xg + i * p->in_plane, *wi = w + (o * p->group_features + i) * p->taps;   \
      int64_t pos[HLO_MAX_RANK] = {0};                                                     \
      for (int64_t row = 0; row < out_rows; row++, next_pos(p, outer, pos)) {              \
        int64_t tap[HLO_MAX_RANK] = {0};                                                   \
        for (int64_t t = 0; t < tap_rows; t++, next_tap(p, outer, tap)) {                  \
          int64_t offset = input_offset(p, outer, pos, tap);                               \
          if (offset >= 0)                                                                 \
            correlate_##S(p, yo + row * last->out, xi + offset, wi + t * last->taps);      \
        }                                                                                  \
      }                                                                                    \
    }                                                                                      \
  }

DEFINE_ROWS(float, f32)
DEFINE_ROWS(double, f64)
DEFINE_ROWS(uint64_t, u64) /* integers: unsigned, so sums wrap instead of overflowing */

/* ---------------------------------------------------------------------------------------
 * lowered: tiles of output positions as matrix products. Column q of the product is output
 * batch q / out_plane at position q % out_plane. */

typedef struct tile {
  int cols;
  int64_t *offsets; /* [taps * COLS]: input offset (group base aside) of tap t, column c; -1 */
  bool *dense;      /* [taps]: the COLS offsets are consecutive, so a panel row is one copy */
  int64_t out_at[RT_GEMM_COLS]; /* where column c lands in the output, group aside */
  void *panel;      /* [group_features * taps][COLS] */
  void *product;    /* [group_out][COLS] */
} tile;

static void tile_columns(const conv_plan *p, int64_t q0, tile *t) {
  int outer = p->spatial;
  for (int c = 0; c < RT_GEMM_COLS; c++) {
    int64_t q = q0 + c, n = q / (p->out_plane ? p->out_plane : 1), at = q - n * p->out_plane;
    int64_t pos[HLO_MAX_RANK], rest = at;
    for (int d = outer - 1; d >= 0; d--) {
      pos[d] = rest % p->dims[d].out;
      rest /= p->dims[d].out;
    }
    t->out_at[c] = n * p->out_features * p->out_plane + at;
    int64_t tap[HLO_MAX_RANK] = {0};
    for (int64_t k = 0; k < p->taps; k++, next_tap(p, outer, tap)) {
      int64_t offset = c < t->cols ? input_offset(p, outer, pos, tap) : -1;
      t->offsets[k * RT_GEMM_COLS + c] = offset < 0 ? -1 : offset + n * p->features * p->in_plane;
    }
  }
  for (int64_t k = 0; k < p->taps; k++) {
    const int64_t *row = t->offsets + k * RT_GEMM_COLS;
    bool consecutive = row[0] >= 0;
    for (int c = 1; consecutive && c < RT_GEMM_COLS; c++) consecutive = row[c] == row[0] + c;
    t->dense[k] = consecutive;
  }
}

/* panel[((i - i0) * taps + k) * COLS + c] = input feature i of the group at offsets[k][c],
 * or 0, for the features [i0, i1) of one piece; the product of the group's packed kernel
 * rows with the pieces in turn, summed, is spread into y. Wide windows (weight gradients)
 * make deep panels: in pieces they stay in cache for every block of kernel rows. */
#define DEFINE_LOWERED(T, S)                                                               \
  static void fill_panel_##S(const conv_plan *p, const T *xg, const tile *t, int64_t i0, int64_t i1) { \
    T *panel = t->panel;                                                                   \
    for (int64_t i = i0; i < i1; i++) {                                                    \
      const T *plane = xg + i * p->in_plane;                                               \
      for (int64_t k = 0; k < p->taps; k++, panel += RT_GEMM_COLS) {                       \
        const int64_t *at = t->offsets + k * RT_GEMM_COLS;                                 \
        if (t->dense[k]) {                                                                 \
          memcpy(panel, plane + at[0], sizeof(T) * RT_GEMM_COLS);                          \
          continue;                                                                        \
        }                                                                                  \
        for (int c = 0; c < RT_GEMM_COLS; c++) panel[c] = at[c] >= 0 ? plane[at[c]] : 0;   \
      }                                                                                    \
    }                                                                                      \
  }                                                                                        \
  static void tile_group_##S(const conv_plan *p, const T *x, const T *packed, T *y, const tile *t, \
                             int64_t g) {                                                  \
    int64_t depth = p->group_features * p->taps;                                           \
    for (int64_t i0 = 0; i0 < p->group_features; i0 += p->chunk) {                         \
      int64_t i1 = i0 + p->chunk < p->group_features ? i0 + p->chunk : p->group_features;  \
      fill_panel_##S(p, x + group_base(p, g), t, i0, i1);                                  \
      rt_gemm_panel(sizeof(T) == 8 ? HLO_F64 : HLO_F32,                                    \
                    packed + (g * depth + i0 * p->taps) * p->group_out, p->group_out,      \
                    (i1 - i0) * p->taps, t->panel, t->cols, t->product, RT_GEMM_COLS, i0 > 0); \
    }                                                                                      \
    const T *product = t->product;                                                         \
    T *yg = y + g * p->group_out * p->out_plane;                                           \
    for (int64_t r = 0; r < p->group_out; r++)                                             \
      for (int c = 0; c < t->cols; c++) yg[r * p->out_plane + t->out_at[c]] = product[r * RT_GEMM_COLS + c]; \
  }

DEFINE_LOWERED(float, f32)
DEFINE_LOWERED(double, f64)

/* ---------------------------------------------------------------------------------------
 * Running it: the work is a range of independent items (tiles, or output planes), split
 * into one contiguous share per worker thread. */

typedef struct conv_job {
  const conv_plan *p;
  hlo_dtype work;
  bool rows;
  const void *x, *w, *packed;
  void *y;
} conv_job;

typedef struct share {
  const conv_job *job;
  int64_t begin, end;
  bool ok;
} share;

static bool run_rows(const conv_job *job, int64_t begin, int64_t end) {
  const conv_plan *p = job->p;
  for (int64_t item = begin; item < end; item++) {
    int64_t n = item / p->out_features, o = item % p->out_features;
    if (job->work == HLO_F64) plane_f64(p, job->x, job->w, job->y, n, o);
    else if (job->work == HLO_F32) plane_f32(p, job->x, job->w, job->y, n, o);
    else plane_u64(p, job->x, job->w, job->y, n, o);
  }
  return true;
}

static bool run_tiles(const conv_job *job, int64_t begin, int64_t end) {
  const conv_plan *p = job->p;
  size_t size = hlo_dtype_size(job->work);
  tile t = {0};
  t.offsets = hlo_malloc((size_t)(p->taps + 1) * RT_GEMM_COLS * sizeof(int64_t));
  t.dense = hlo_malloc((size_t)(p->taps + 1) * sizeof(bool));
  t.panel = hlo_malloc((size_t)(p->chunk * p->taps + 1) * RT_GEMM_COLS * size);
  t.product = hlo_malloc((size_t)(p->group_out + 1) * RT_GEMM_COLS * size);
  bool ok = t.offsets && t.dense && t.panel && t.product;
  int64_t columns = p->out_batch * p->out_plane;
  for (int64_t item = begin; ok && item < end; item++) {
    int64_t q0 = item * RT_GEMM_COLS;
    t.cols = (int)(columns - q0 < RT_GEMM_COLS ? columns - q0 : RT_GEMM_COLS);
    tile_columns(p, q0, &t);
    for (int64_t g = 0; g < p->groups; g++) {
      if (job->work == HLO_F64) tile_group_f64(p, job->x, job->packed, job->y, &t, g);
      else tile_group_f32(p, job->x, job->packed, job->y, &t, g);
    }
  }
  free(t.offsets);
  free(t.dense);
  free(t.panel);
  free(t.product);
  return ok;
}

static void *run_share(void *arg) {
  share *s = arg;
  s->ok = s->job->rows ? run_rows(s->job, s->begin, s->end) : run_tiles(s->job, s->begin, s->end);
  return NULL;
}

static int worker_count(int64_t items, double work) {
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int64_t workers = cores < 1 ? 1 : cores > MAX_WORKERS ? MAX_WORKERS : cores;
  int64_t by_work = (int64_t)(work / MIN_WORK_PER_WORKER);
  if (workers > by_work) workers = by_work;
  if (workers > items) workers = items;
  return workers < 1 ? 1 : (int)workers;
}

/* Runs items [0, count); a thread that cannot start leaves its share to this one. */
static bool run_items(const conv_job *job, int64_t count, double work) {
  int workers = worker_count(count, work);
  share shares[MAX_WORKERS];
  pthread_t threads[MAX_WORKERS];
  bool started[MAX_WORKERS] = {false};
  for (int i = 0; i < workers; i++)
    shares[i] = (share){job, count * i / workers, count * (i + 1) / workers, false};
  for (int i = 1; i < workers; i++)
    started[i] = pthread_create(&threads[i], NULL, run_share, &shares[i]) == 0;
  run_share(&shares[0]);
  bool ok = shares[0].ok;
  for (int i = 1; i < workers; i++) {
    if (started[i]) pthread_join(threads[i], NULL);
    else run_share(&shares[i]);
    ok = ok && shares[i].ok;
  }
  return ok;
}

static bool all_finite(hlo_dtype work, const void *data, int64_t count) {
  if (work == HLO_F32) {
    const float *v = data;
    for (int64_t i = 0; i < count; i++)
      if (!isfinite(v[i])) return false;
  } else if (work == HLO_F64) {
    const double *v = data;
    for (int64_t i = 0; i < count; i++)
      if (!isfinite(v[i])) return false;
  }
  return true;
}

static bool compute(const conv_plan *p, hlo_dtype work, const void *x, const void *w, void *y,
                    int64_t kernel_count) {
  double macs = (double)p->out_batch * p->out_features * p->out_plane * p->group_features * p->taps;
  if (macs == 0) return true; /* nothing to sum: y stays zero */
  conv_job job = {.p = p, .work = work, .x = x, .w = w, .y = y};
  /* A matrix product pays off when a panel is shared by several output features. */
  job.rows = work == HLO_S64 || p->group_out < 4 || !all_finite(work, w, kernel_count);
  if (job.rows) return run_items(&job, p->out_batch * p->out_features, macs);
  size_t size = hlo_dtype_size(work);
  int64_t depth = p->group_features * p->taps;
  void *packed = hlo_malloc((size_t)(p->out_features * depth + 1) * size);
  if (!packed) return false;
  /* Each group's kernel rows, packed once, piece by piece: piece [i0, i1) of group g at
   * (g * depth + i0 * taps) * group_out. */
  for (int64_t g = 0; g < p->groups; g++)
    for (int64_t i0 = 0; i0 < p->group_features; i0 += p->chunk) {
      int64_t i1 = i0 + p->chunk < p->group_features ? i0 + p->chunk : p->group_features;
      size_t from = (size_t)(g * p->group_out * depth + i0 * p->taps) * size;
      size_t to = (size_t)((g * depth + i0 * p->taps) * p->group_out) * size;
      rt_gemm_pack_rows(work, (const char *)w + from, p->group_out, (i1 - i0) * p->taps, depth,
                        (char *)packed + to);
    }
  job.packed = packed;
  int64_t tiles = (p->out_batch * p->out_plane + RT_GEMM_COLS - 1) / RT_GEMM_COLS;
  bool ok = run_items(&job, tiles, macs);
  free(packed);
  return ok;
}

RT_KERNEL(rt_kernel_convolution) {
  if (instr->operand_count != 2) return rt_kernel_fail(eval, instr, HLO_ERR_INPUT, "needs two operands");
  const rt_value *in = args[0], *kernel = args[1];
  if (in->shape.dtype == HLO_TUPLE || kernel->shape.dtype == HLO_TUPLE)
    return rt_kernel_fail(eval, instr, HLO_ERR_INPUT, "operands must be arrays");
  conv_plan plan;
  bool out_of_memory = false;
  const char *error = plan_conv(instr, &in->shape, &kernel->shape, &plan, &out_of_memory);
  if (error) {
    free_plan(&plan);
    return rt_kernel_fail(eval, instr, out_of_memory ? HLO_ERR_INTERNAL : HLO_ERR_INPUT, "%s", error);
  }
  rt_value *result = rt_new_output(eval, instr, &instr->shape);
  if (!result) {
    free_plan(&plan);
    return eval->diag->status;
  }
  hlo_dtype work = rt_work_dtype(result->shape.dtype);
  void *x_copy = NULL, *w_copy = NULL, *y_copy = NULL;
  const void *x = rt_work_view(in, plan.in_perm, work, &x_copy);
  const void *w = rt_work_view(kernel, plan.kernel_perm, work, &w_copy);
  /* The result is computed in place when it already is the canonical work array. */
  bool in_place = result->shape.dtype == work && rt_perm_is_identity(plan.out_perm, result->shape.rank);
  void *y = in_place ? result->data : (y_copy = hlo_calloc((size_t)(result->count + 1), hlo_dtype_size(work)));
  bool ok = x && w && y && compute(&plan, work, x, w, y, kernel->count);
  if (ok && !in_place) rt_work_store(result, plan.out_perm, y, work);
  free(x_copy);
  free(w_copy);
  free(y_copy);
  free_plan(&plan);
  if (!ok) {
    rt_value_release(result);
    return rt_kernel_fail(eval, instr, HLO_ERR_INTERNAL, "out of memory");
  }
  *out = result;
  return HLO_OK;
}
