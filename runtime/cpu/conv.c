/* convolution as im2col + GEMM. The operands are seen in canonical orders through
 * rt_work_view (input [batch][feature][spatial...], kernel [out][in][spatial...], in f32 or
 * f64), which is the transpose to a canonical layout that lets any dim_labels through. For
 * each output batch n and group g the taps the window reads are gathered into a column
 * matrix col[(feature, tap)][position] (zero where a tap falls into padding or a dilation
 * hole), and one BLAS call computes the group's output features:
 *   y[n][g's features][positions] = kernel[g's features][(feature, tap)] x col.
 * A 1x1 window with stride 1 and no padding reads the input plane as it is: no gather. A
 * depthwise convolution (one input feature per group, few outputs) has no product worth
 * BLAS: its taps are summed straight from the gather table instead.
 * Groups follow XLA: feature groups split input and output features; batch groups split the
 * input batch and the output features. (batch, group) pairs are the parallel items, run in
 * at most one chunk per thread, each chunk with its own column matrix; with fewer items
 * than threads (batch 1) each item's gather and product are split over the threads instead.
 * A batch of small planes (fewer than FOLD_POSITIONS positions, one group) is folded into
 * one product over the whole batch instead: per image, BLAS packed the kernel again for a
 * product only a few columns wide (resnet's late stages at 32x32 inputs: 16, 4 and 1).
 *
 * The copies to canonical order, the result before its store and the column matrices live
 * in scratch the plan sized from the shapes (conv_setup) and placed in the arena: the
 * kernel allocates nothing.
 *
 * Zero times a finite weight adds nothing, so this equals the reference's rule of skipping
 * padded taps; a kernel holding inf or NaN would turn those zeros into NaN, so such a
 * kernel goes to the reference kernel instead. Scanning the kernel on every call cost more
 * than the convolution itself for batch-1 inputs (the weights outweigh the activations), so
 * the output is scanned instead: a NaN made from a padding zero never vanishes in the sums,
 * hence an all-finite output is exact, and only a non-finite one needs the kernel looked at. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "kernel_internal.h"
#include "runtime/reference/reference.h"
#include "runtime/runtime.h"

typedef struct conv_geom {
  int spatial;
  int64_t in[HLO_MAX_RANK], taps[HLO_MAX_RANK], out[HLO_MAX_RANK];
  int64_t in_plane, tap_count, out_plane;
  int64_t in_batch, features, out_batch, out_features, group_features, groups, group_out;
  int64_t feature_groups, batch_groups;
  int64_t *source; /* [tap_count * out_plane]: offset in an input plane, or -1 */
  bool direct;     /* col is the input plane itself */
  bool depthwise;  /* one input feature per group and few outputs: no matrix product to share */
} conv_geom;

typedef struct conv_job {
  const conv_geom *g;
  bool f64;
  const void *x, *w;
  void *y;
  char *cols;        /* one im2col matrix per chunk, col_bytes apart */
  int64_t col_bytes;
  int64_t items, chunks;
  /* folded: the batch's columns side by side in cols, the product in tmp, split into
   * fold_blocks blocks of output features (fold_by_rows) or of columns */
  void *tmp;
  int64_t fold_blocks;
  bool fold_by_rows;
} conv_job;

/* source[t][p]: where tap t of the window at output position p reads, per XLA's window
 * rule: padded position p*stride + j*rhs_dilate (j = t, or reversed), minus pad_low, is an
 * input element when it lands inside the dilated input on a multiple of lhs_dilate. */
static void fill_source(conv_geom *g, const hlo_window *w) {
  int64_t tap[HLO_MAX_RANK] = {0};
  for (int64_t t = 0; t < g->tap_count; t++) {
    int64_t pos[HLO_MAX_RANK] = {0};
    for (int64_t p = 0; p < g->out_plane; p++) {
      int64_t offset = 0;
      for (int d = 0; d < g->spatial && offset >= 0; d++) {
        const hlo_window_dim *wd = &w->dims[d];
        int64_t j = wd->reversal ? g->taps[d] - 1 - tap[d] : tap[d];
        int64_t at = pos[d] * wd->stride + j * wd->rhs_dilate - wd->pad_low;
        int64_t dilated = g->in[d] == 0 ? 0 : (g->in[d] - 1) * wd->lhs_dilate + 1;
        if (at < 0 || at >= dilated || at % wd->lhs_dilate != 0) offset = -1;
        else offset = offset * g->in[d] + at / wd->lhs_dilate;
      }
      g->source[t * g->out_plane + p] = offset;
      for (int d = g->spatial - 1; d >= 0; d--) { /* next output position */
        if (++pos[d] < g->out[d]) break;
        pos[d] = 0;
      }
    }
    for (int d = g->spatial - 1; d >= 0; d--) { /* next tap */
      if (++tap[d] < g->taps[d]) break;
      tap[d] = 0;
    }
  }
}

/* Up to this many output positions, one gemv per position replaces the GEMM: with so few
 * columns GEMM's packing copy of the whole kernel (read, written, read again) costs more
 * than the arithmetic, while gemv reads the kernel once per position (late ResNet stages
 * at small inputs have 1x1 or 2x2 outputs and most of the weights). */
enum { GEMV_POSITIONS = 2 };

/* The pieces of one (batch, group) item, over element type T: the depthwise sum, the im2col
 * gather of features [f0, f1), and the product for output features [r0, r1) at positions
 * [p0, p1). A whole item is all three over full ranges; a split item runs the gather and then
 * the product in blocks on every thread. */
#define DEFINE_ITEMS(T, GEMM, GEMV)                                                            \
  static void depthwise_##T(const conv_job *j, int64_t n, int64_t grp) {                       \
    const conv_geom *g = j->g;                                                                 \
    const T *planes = item_planes_##T(j, n, grp);                                              \
    for (int64_t o = 0; o < g->group_out; o++) {                                               \
      T *yo = (T *)j->y + (n * g->out_features + grp * g->group_out + o) * g->out_plane;       \
      const T *wo = (const T *)j->w + (grp * g->group_out + o) * g->tap_count;                 \
      for (int64_t p = 0; p < g->out_plane; p++) yo[p] = 0;                                    \
      for (int64_t t = 0; t < g->tap_count; t++) {                                             \
        const int64_t *src = g->source + t * g->out_plane;                                     \
        T wt = wo[t];                                                                          \
        for (int64_t p = 0; p < g->out_plane; p++)                                             \
          if (src[p] >= 0) yo[p] += wt * planes[src[p]];                                       \
      }                                                                                        \
    }                                                                                          \
  }                                                                                            \
  /* row (feature f, tap t) of col starts at col + (f * taps + t) * ld */                     \
  static void gather_##T(const conv_job *j, const T *planes, int64_t f0, int64_t f1, T *col, int64_t ld) { \
    const conv_geom *g = j->g;                                                                 \
    for (int64_t f = f0; f < f1; f++) {                                                        \
      const T *plane = planes + f * g->in_plane;                                               \
      for (int64_t t = 0; t < g->tap_count; t++) {                                             \
        const int64_t *src = g->source + t * g->out_plane;                                     \
        T *row = col + (f * g->tap_count + t) * ld;                                            \
        for (int64_t p = 0; p < g->out_plane; p++) row[p] = src[p] >= 0 ? plane[src[p]] : 0;    \
      }                                                                                        \
    }                                                                                          \
  }                                                                                            \
  static void product_##T(const conv_job *j, int64_t n, int64_t grp, const T *b, int64_t r0,   \
                          int64_t r1, int64_t p0, int64_t p1) {                                \
    const conv_geom *g = j->g;                                                                 \
    int64_t depth = g->group_features * g->tap_count, ld = g->out_plane;                       \
    const T *w = (const T *)j->w + (grp * g->group_out + r0) * depth;                          \
    T *out = (T *)j->y + (n * g->out_features + grp * g->group_out + r0) * ld;                 \
    if (g->out_plane <= GEMV_POSITIONS) {                                                      \
      for (int64_t p = p0; p < p1; p++)                                                        \
        GEMV(CblasRowMajor, CblasNoTrans, (int)(r1 - r0), (int)depth, 1, w, (int)depth, b + p, (int)ld, 0, \
             out + p, (int)ld);                                                                \
      return;                                                                                  \
    }                                                                                          \
    GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)(r1 - r0), (int)(p1 - p0), (int)depth, 1, w, \
         (int)depth, b + p0, (int)ld, 0, out + p0, (int)ld);                                   \
  }                                                                                            \
  static void items_##T(conv_job *j, int64_t begin, int64_t end, T *col) {                     \
    const conv_geom *g = j->g;                                                                 \
    for (int64_t item = begin; item < end; item++) {                                           \
      int64_t n = item / g->groups, grp = item % g->groups;                                    \
      if (g->depthwise) {                                                                      \
        depthwise_##T(j, n, grp);                                                              \
        continue;                                                                              \
      }                                                                                        \
      const T *planes = item_planes_##T(j, n, grp);                                            \
      if (!g->direct) gather_##T(j, planes, 0, g->group_features, col, g->out_plane);          \
      product_##T(j, n, grp, g->direct ? planes : col, 0, g->group_out, 0, g->out_plane);       \
    }                                                                                          \
  }

/* The input planes of item (n, grp): its batch (a batch group's) and its group's features. */
#define DEFINE_PLANES(T)                                                                       \
  static const T *item_planes_##T(const conv_job *j, int64_t n, int64_t grp) {                 \
    const conv_geom *g = j->g;                                                                 \
    int64_t in_n = g->batch_groups > 1 ? grp * g->out_batch + n : n;                           \
    int64_t in_f = g->feature_groups > 1 ? grp * g->group_features : 0;                        \
    return (const T *)j->x + (in_n * g->features + in_f) * g->in_plane;                        \
  }

/* A batch of small planes folded into one product (conv_setup's folded): the gather lays
 * the batch's columns side by side, col[(feature, tap)][n * positions + p], one product
 * computes tmp[out feature][n * positions + p] with the kernel packed once instead of once
 * per image, and the scatter puts each image's rows in place. Gather items are input
 * features, product items blocks, scatter items output features. */
#define DEFINE_FOLDED(T, GEMM)                                                                 \
  static void fold_gather_##T(void *ctx, int64_t begin, int64_t end) {                         \
    const conv_job *j = ctx;                                                                   \
    const conv_geom *g = j->g;                                                                 \
    int64_t positions = g->out_plane, width = g->out_batch * positions;                        \
    for (int64_t n = 0; n < g->out_batch; n++) {                                               \
      const T *planes = item_planes_##T(j, n, 0);                                              \
      T *col = (T *)j->cols + n * positions;                                                   \
      if (!g->direct) {                                                                        \
        gather_##T(j, planes, begin, end, col, width);                                         \
        continue;                                                                              \
      }                                                                                        \
      for (int64_t f = begin; f < end; f++) /* one tap: the plane is its row */                \
        memcpy(col + f * width, planes + f * g->in_plane, sizeof(T) * (size_t)positions);      \
    }                                                                                          \
  }                                                                                            \
  static void fold_product_##T(void *ctx, int64_t begin, int64_t end) {                        \
    const conv_job *j = ctx;                                                                   \
    const conv_geom *g = j->g;                                                                 \
    int64_t depth = g->features * g->tap_count, width = g->out_batch * g->out_plane;           \
    int64_t extent = j->fold_by_rows ? g->out_features : width;                                \
    for (int64_t block = begin; block < end; block++) {                                        \
      int64_t lo = block * extent / j->fold_blocks, hi = (block + 1) * extent / j->fold_blocks; \
      int64_t r0 = j->fold_by_rows ? lo : 0, rows = j->fold_by_rows ? hi - lo : g->out_features; \
      int64_t c0 = j->fold_by_rows ? 0 : lo, cols = j->fold_by_rows ? width : hi - lo;          \
      GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)cols, (int)depth, 1,     \
           (const T *)j->w + r0 * depth, (int)depth, (const T *)j->cols + c0, (int)width, 0,   \
           (T *)j->tmp + r0 * width + c0, (int)width);                                         \
    }                                                                                          \
  }                                                                                            \
  static void fold_scatter_##T(void *ctx, int64_t begin, int64_t end) {                        \
    const conv_job *j = ctx;                                                                   \
    const conv_geom *g = j->g;                                                                 \
    int64_t positions = g->out_plane, width = g->out_batch * positions;                        \
    for (int64_t o = begin; o < end; o++)                                                      \
      for (int64_t n = 0; n < g->out_batch; n++)                                               \
        memcpy((T *)j->y + (n * g->out_features + o) * positions, (const T *)j->tmp + o * width + n * positions, \
               sizeof(T) * (size_t)positions);                                                 \
  }

DEFINE_PLANES(float)
DEFINE_PLANES(double)
DEFINE_ITEMS(float, cblas_sgemm, cblas_sgemv)
DEFINE_ITEMS(double, cblas_dgemm, cblas_dgemv)
DEFINE_FOLDED(float, cblas_sgemm)
DEFINE_FOLDED(double, cblas_dgemm)

/* The folded convolution: gather, product, scatter, each over every thread. The product's
 * blocks split whichever side packs less again: each block packs its rows of the kernel
 * and its columns of col, so blocks of output features repack col and blocks of columns
 * repack the kernel. */
static void run_folded(conv_job *j, int threads) {
  enum { GRAIN = 1 << 15 };
  const conv_geom *g = j->g;
  int64_t depth = g->features * g->tap_count, width = g->out_batch * g->out_plane;
  j->fold_by_rows = g->out_features > width;
  j->fold_blocks = threads;
  int64_t extent = j->fold_by_rows ? g->out_features : width;
  if (j->fold_blocks > extent / 16) j->fold_blocks = extent / 16 > 1 ? extent / 16 : 1;
  if (g->out_features * width * depth < (1 << 20)) j->fold_blocks = 1;
  int64_t per_feature = g->tap_count * width, per_output = width;
  int64_t gather_grain = per_feature >= GRAIN ? 1 : GRAIN / per_feature;
  int64_t scatter_grain = per_output >= GRAIN ? 1 : GRAIN / per_output;
  rt_parallel_for(g->features, gather_grain, j->f64 ? fold_gather_double : fold_gather_float, j);
  rt_parallel_for(j->fold_blocks, 1, j->f64 ? fold_product_double : fold_product_float, j);
  rt_parallel_for(g->out_features, scatter_grain, j->f64 ? fold_scatter_double : fold_scatter_float, j);
}

/* Chunk c runs its share of the (batch, group) items with im2col matrix c: chunks are few
 * (at most the threads), so their matrices fit in the step's planned scratch. */
static void conv_chunks(void *ctx, int64_t begin, int64_t end) {
  conv_job *j = ctx;
  for (int64_t c = begin; c < end; c++) {
    int64_t first = c * j->items / j->chunks, last = (c + 1) * j->items / j->chunks;
    void *col = j->cols + c * j->col_bytes;
    if (j->f64) items_double(j, first, last, col);
    else items_float(j, first, last, col);
  }
}

/* Fewer items than threads (a batch-1 convolution is one item) would leave threads idle:
 * each item is split instead, its gather over input features and its product over blocks
 * of output features or of positions (the longer side), on every thread, one item after
 * another, with im2col matrix 0. */
typedef struct split_item {
  conv_job *j;
  int64_t n, grp;
  const void *planes; /* the item's input planes */
  bool by_rows;       /* blocks of output features, else of positions */
  int64_t blocks, extent;
} split_item;

static void split_gather(void *ctx, int64_t begin, int64_t end) {
  const split_item *si = ctx;
  int64_t ld = si->j->g->out_plane;
  if (si->j->f64) gather_double(si->j, si->planes, begin, end, (double *)si->j->cols, ld);
  else gather_float(si->j, si->planes, begin, end, (float *)si->j->cols, ld);
}

static void split_product(void *ctx, int64_t begin, int64_t end) {
  const split_item *si = ctx;
  const conv_geom *g = si->j->g;
  const void *b = g->direct ? si->planes : si->j->cols;
  for (int64_t block = begin; block < end; block++) {
    int64_t lo = block * si->extent / si->blocks, hi = (block + 1) * si->extent / si->blocks;
    int64_t r0 = si->by_rows ? lo : 0, r1 = si->by_rows ? hi : g->group_out;
    int64_t p0 = si->by_rows ? 0 : lo, p1 = si->by_rows ? g->out_plane : hi;
    if (si->j->f64) product_double(si->j, si->n, si->grp, b, r0, r1, p0, p1);
    else product_float(si->j, si->n, si->grp, b, r0, r1, p0, p1);
  }
}

static void run_split_items(conv_job *j, int threads) {
  enum { MIN_BLOCK = 16, GATHER_GRAIN = 1 << 16 };
  const conv_geom *g = j->g;
  bool by_rows = g->group_out >= g->out_plane || g->out_plane <= GEMV_POSITIONS;
  int64_t extent = by_rows ? g->group_out : g->out_plane, blocks = 2 * (int64_t)threads;
  if (blocks > extent / MIN_BLOCK) blocks = extent / MIN_BLOCK;
  if (blocks < 1) blocks = 1;
  int64_t per_feature = g->tap_count * g->out_plane;
  for (int64_t item = 0; item < j->items; item++) {
    int64_t n = item / g->groups, grp = item % g->groups;
    split_item si = {.j = j, .n = n, .grp = grp, .by_rows = by_rows, .blocks = blocks, .extent = extent};
    si.planes = j->f64 ? (const void *)item_planes_double(j, n, grp) : (const void *)item_planes_float(j, n, grp);
    if (!g->direct)
      rt_parallel_for(g->group_features, per_feature >= GATHER_GRAIN ? 1 : GATHER_GRAIN / per_feature, split_gather, &si);
    rt_parallel_for(blocks, 1, split_product, &si);
  }
}

static bool finite_values(const rt_value *v) {
  for (int64_t i = 0; i < v->count; i++)
    if (!isfinite(rt_get_f64(v, i))) return false;
  return true;
}

/* Whether the work buffer y (f32 or f64, count elements) is all finite: typed, since this
 * runs on every call. */
static bool finite_work(const void *y, int64_t count, bool f64) {
  bool ok = true;
  if (f64) {
    const double *d = y;
    for (int64_t i = 0; i < count; i++) ok &= isfinite(d[i]) != 0;
  } else {
    const float *f = y;
    for (int64_t i = 0; i < count; i++) ok &= isfinite(f[i]) != 0;
  }
  return ok;
}

/* What one convolution needs, worked out from the shapes alone, so the plan can size the
 * scratch at compile time and the kernel lays it out the same way: the work-type copies of
 * operands not already in canonical order, the result before its store when that is not in
 * place, the tap table, and one im2col matrix per chunk. */
typedef struct conv_setup {
  conv_geom g;
  int in_perm[HLO_MAX_RANK], k_perm[HLO_MAX_RANK], out_perm[HLO_MAX_RANK];
  hlo_dtype work;
  bool in_place;
  int64_t items, chunks, grain;
  int64_t x_at, w_at, y_at, source_at, cols_at, col_bytes, tmp_at, bytes; /* scratch offsets, 0 = unused */
  /* a batch of planes smaller than FOLD_POSITIONS, one group: one product for the batch */
  bool folded;
} conv_setup;

enum { FOLD_POSITIONS = 256 };

static void conv_setup_for(const hlo_instr *instr, conv_setup *s) {
  const hlo_conv_dims *cd = instr->conv;
  const hlo_window *w = instr->window;
  const hlo_shape *xs = &instr->operands[0]->shape, *ks = &instr->operands[1]->shape, *ys = &instr->shape;
  conv_geom *g = &s->g;
  *s = (conv_setup){.g = {.spatial = cd->spatial_count}};
  s->in_perm[0] = (int)cd->input_batch;
  s->in_perm[1] = (int)cd->input_feature;
  s->k_perm[0] = (int)cd->kernel_output_feature;
  s->k_perm[1] = (int)cd->kernel_input_feature;
  s->out_perm[0] = (int)cd->output_batch;
  s->out_perm[1] = (int)cd->output_feature;
  g->in_plane = g->tap_count = g->out_plane = 1;
  bool direct = true;
  for (int d = 0; d < g->spatial; d++) {
    s->in_perm[2 + d] = (int)cd->input_spatial[d];
    s->k_perm[2 + d] = (int)cd->kernel_spatial[d];
    s->out_perm[2 + d] = (int)cd->output_spatial[d];
    g->in[d] = xs->dims[cd->input_spatial[d]];
    g->taps[d] = ks->dims[cd->kernel_spatial[d]];
    g->out[d] = ys->dims[cd->output_spatial[d]];
    g->in_plane *= g->in[d];
    g->tap_count *= g->taps[d];
    g->out_plane *= g->out[d];
    const hlo_window_dim *wd = &w->dims[d];
    direct = direct && g->taps[d] == 1 && wd->stride == 1 && wd->pad_low == 0 && wd->pad_high == 0 &&
             wd->lhs_dilate == 1 && g->in[d] == g->out[d];
  }
  g->direct = direct;
  g->in_batch = xs->dims[cd->input_batch];
  g->features = xs->dims[cd->input_feature];
  g->out_features = ks->dims[cd->kernel_output_feature];
  g->group_features = ks->dims[cd->kernel_input_feature];
  g->out_batch = ys->dims[cd->output_batch];
  g->feature_groups = instr->feature_group_count;
  g->batch_groups = instr->batch_group_count;
  g->groups = g->feature_groups * g->batch_groups;
  g->group_out = g->out_features / g->groups;
  g->depthwise = !g->direct && g->group_features == 1 && g->group_out <= 4;
  s->work = rt_work_dtype(ys->dtype);
  int64_t size = (int64_t)hlo_dtype_size(s->work);
  s->in_place = ys->dtype == s->work;
  for (int d = 0; d < ys->rank; d++) s->in_place = s->in_place && s->out_perm[d] == d;
  int64_t depth = g->group_features * g->tap_count;
  int64_t per_item = g->group_out * g->out_plane * depth;
  s->items = g->out_batch * g->groups;
  s->grain = per_item >= (1 << 18) ? 1 : (1 << 18) / (per_item ? per_item : 1);
  s->chunks = (s->items + s->grain - 1) / s->grain;
  if (s->chunks > rt_parallel_threads()) s->chunks = rt_parallel_threads();
  bool gather = !g->direct && !g->depthwise;
  s->folded = g->groups == 1 && !g->depthwise && g->out_batch > 1 && g->out_plane < FOLD_POSITIONS && depth > 0;
  /* offset 0 is never handed out, so 0 can mean "not needed" */
  int64_t at = 64;
  if (rt_work_view_copies(xs, s->in_perm, s->work)) s->x_at = at, at += rt_cpu_aligned(hlo_shape_elements(xs) * size);
  if (rt_work_view_copies(ks, s->k_perm, s->work)) s->w_at = at, at += rt_cpu_aligned(hlo_shape_elements(ks) * size);
  if (!s->in_place) s->y_at = at, at += rt_cpu_aligned(hlo_shape_elements(ys) * size);
  if (!g->direct) s->source_at = at, at += rt_cpu_aligned(g->tap_count * g->out_plane * (int64_t)sizeof(int64_t));
  if (s->folded) {
    s->col_bytes = rt_cpu_aligned(depth * g->out_batch * g->out_plane * size);
    s->cols_at = at, at += s->col_bytes;
    s->tmp_at = at, at += rt_cpu_aligned(g->out_features * g->out_batch * g->out_plane * size);
  } else if (gather) {
    s->col_bytes = rt_cpu_aligned(depth * g->out_plane * size);
    s->cols_at = at, at += s->col_bytes * s->chunks;
  }
  s->bytes = at;
}

/* The convolution with all its working memory in scratch (conv_setup's bytes). */
static bool conv_run(const hlo_instr *instr, const rt_value *const *in, rt_value *out, void *scratch) {
  conv_setup s;
  conv_setup_for(instr, &s);
  conv_geom *g = &s.g;
  char *base = scratch;
  size_t size = hlo_dtype_size(s.work);
  void *y = s.in_place ? out->data : base + s.y_at;
  const void *x = rt_work_view_into(in[0], s.in_perm, s.work, base + s.x_at);
  const void *k = rt_work_view_into(in[1], s.k_perm, s.work, base + s.w_at);
  if (!g->direct) {
    g->source = (int64_t *)(base + s.source_at);
    fill_source(g, instr->window);
  }
  int64_t depth = g->group_features * g->tap_count;
  bool zeros_read = false;
  if (depth == 0) {
    memset(y, 0, (size_t)out->count * size);
  } else if (out->count > 0) {
    conv_job job = {.g = g, .f64 = s.work == HLO_F64, .x = x, .w = k, .y = y, .cols = base + s.cols_at,
                    .col_bytes = s.col_bytes, .items = s.items, .chunks = s.chunks, .tmp = base + s.tmp_at};
    int threads = rt_parallel_threads();
    if (s.folded) run_folded(&job, threads);
    else if (s.items < threads && !g->depthwise) run_split_items(&job, threads);
    else rt_parallel_for(s.chunks, 1, conv_chunks, &job);
    /* padding zeros only exist where the gather runs (the depthwise sum skips them) */
    zeros_read = !g->direct && !g->depthwise;
  }
  if (zeros_read && !finite_work(y, out->count, s.work == HLO_F64) && !finite_values(in[1]))
    return rt_cpu_reference_conv(instr, in, out);
  if (!s.in_place) rt_work_store(out, s.out_perm, y, s.work);
  return true;
}

static bool supported(const hlo_instr *instr);

rt_cpu_scratch_kernel rt_cpu_pick_conv_scratch(const hlo_instr *instr, int64_t *scratch_bytes) {
  rt_cpu_scratch_kernel grad = rt_cpu_pick_conv_grad(instr, scratch_bytes);
  if (grad) return grad;
  rt_cpu_scratch_kernel bf16 = rt_cpu_pick_conv_bf16(instr, scratch_bytes);
  if (bf16) return bf16;
  if (!supported(instr)) return NULL;
  conv_setup s;
  conv_setup_for(instr, &s);
  *scratch_bytes = s.bytes;
  return conv_run;
}

static bool supported(const hlo_instr *instr) {
  if (instr->opcode != HLO_OP_CONVOLUTION || !instr->conv || !instr->window || instr->operand_count != 2)
    return false;
  hlo_dtype t = instr->shape.dtype;
  if (t != HLO_F32 && t != HLO_F64 && t != HLO_F16 && t != HLO_BF16) return false;
  const hlo_shape *x = &instr->operands[0]->shape, *k = &instr->operands[1]->shape;
  if (!hlo_shape_is_array(x) || !hlo_shape_is_array(k)) return false;
  /* operands of the result's type, or bf16 ones summed into f32 (widened in the copies) */
  bool widened = t == HLO_F32 && x->dtype == HLO_BF16 && k->dtype == HLO_BF16;
  if (!widened && (x->dtype != t || k->dtype != t)) return false;
  const hlo_conv_dims *cd = instr->conv;
  int rank = cd->spatial_count + 2;
  if (cd->spatial_count < 0 || x->rank != rank || k->rank != rank || instr->shape.rank != rank ||
      instr->window->rank != cd->spatial_count)
    return false;
  int64_t fg = instr->feature_group_count, bg = instr->batch_group_count;
  if (fg < 1 || bg < 1 || (fg > 1 && bg > 1) || k->dims[cd->kernel_output_feature] % (fg * bg)) return false;
  for (int d = 0; d < cd->spatial_count; d++) {
    const hlo_window_dim *wd = &instr->window->dims[d];
    if (wd->stride < 1 || wd->lhs_dilate < 1 || wd->rhs_dilate < 1) return false;
  }
  /* BLAS takes int sizes; im2col columns must fit too */
  if (hlo_shape_elements(x) > INT32_MAX / 16 || hlo_shape_elements(k) > INT32_MAX ||
      hlo_shape_elements(&instr->shape) > INT32_MAX)
    return false;
  return true;
}
