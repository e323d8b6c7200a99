/* The attention step's kernel: out = softmax(ops(Q K^T)) V without the [Sq, Sk] scores in
 * memory, in the order of work of flash attention.
 *
 * One item of the parallel loop is a block of BQ query rows of one batch element (a head):
 * for each block of BK keys it computes the block's scores (one sgemm of Q's rows against
 * K's, both read in place through their row strides), applies the graph's ops (scale, masks)
 * row by row, and folds the block into a running max m and sum l per row: with m' the new
 * max, the row's sum and its output so far are scaled by exp(m - m'), the block's
 * probabilities are exp(x - m'), and their product with the block's rows of V (a second
 * sgemm) is added to the output rows. After the last block each output row is divided by
 * its sum. The output rows are the step's result itself; the only other memory is one
 * BQ x BK block of scores and the per-row m and l, on the stack of the thread running the
 * item: memory grows with neither Sq nor Sk. Under a causal mask computed from positions,
 * blocks of keys that are masked for every row of the item are skipped.
 *
 * Special values follow the graph: a row whose scores are all -inf (every key masked) or
 * hold a NaN or +inf comes out NaN, as exp(x - max) / sum does; a block where a row has
 * seen only -inf so far leaves that row's m, l and output alone (exp(-inf - -inf) would make
 * the sum NaN where later keys are finite). bf16 products (block_item_bf16, below) take the
 * same order over blocks of Q, K and V loaded and rounded on the stack. The element loops are compiled for AVX-512,
 * AVX2 and the build's baseline (isa.c), with exp from exp_f32_internal.h; they give the same
 * bits. */
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include <cblas.h>
#include <dnnl.h>
#include <omp.h>

#include "attention_internal.h"
#include "exp_f32_internal.h"

/* Blocks of BQ queries by BK keys; BK_MASKED keys where whole blocks may be skipped (a
 * causal mask): narrower blocks leave fewer computed scores above the diagonal. */
enum { BQ = 64, BK = 256, BK_MASKED = 128 };

static _Atomic int64_t runs;

int64_t rt_cpu_attention_run_count(void) { return atomic_load(&runs); }

typedef struct job {
  const rt_cpu_attention *a;
  const void *q, *k, *v; /* f32, or bf16 (block_item_bf16) */
  const void *masks[RT_ATTENTION_MAX_MASKS];
  float *out;
  int64_t q_blocks;
  bool on_dnnl;
} job;

/* The element offset of batch element b in view v. */
static int64_t batch_offset(const rt_cpu_attention_view *v, int64_t b) {
  int64_t at = 0;
  for (int i = v->batch_rank - 1; i >= 0; i--) {
    at += (b % v->batch_size[i]) * v->batch_stride[i];
    b /= v->batch_size[i];
  }
  return at;
}

/* c[rows x cols] (ldc) = a b (+ c when accumulate), row-major; a or b stored transposed
 * when a_transposed or b_transposed. */
static void gemm(bool on_dnnl, bool a_transposed, bool b_transposed, int64_t rows, int64_t cols, int64_t depth,
                 const float *a, int64_t lda, const float *b, int64_t ldb, bool accumulate, float *c, int64_t ldc) {
  float beta = accumulate ? 1.0f : 0.0f;
  if (on_dnnl)
    dnnl_sgemm(a_transposed ? 'T' : 'N', b_transposed ? 'T' : 'N', rows, cols, depth, 1.0f, a, lda, b, ldb, beta, c,
               ldc);
  else
    cblas_sgemm(CblasRowMajor, a_transposed ? CblasTrans : CblasNoTrans, b_transposed ? CblasTrans : CblasNoTrans,
                (int)rows, (int)cols, (int)depth, 1.0f, a, (int)lda, b, (int)ldb, beta, c, (int)ldc);
}

/* A view's matrix as BLAS takes it: its columns contiguous (leading dim the row stride),
 * or its rows (stored transposed: leading dim the column stride); the planner allows no
 * other. */
static bool stored_transposed(const rt_cpu_attention_view *v) { return v->col_stride != 1; }
static int64_t leading(const rt_cpu_attention_view *v) { return stored_transposed(v) ? v->col_stride : v->row_stride; }

/* Where a mask's row of one block starts: element (b, row, col0). */
typedef struct mask_rows {
  const void *at[RT_ATTENTION_MAX_MASKS];
} mask_rows;

/* Whether position value v (row * index[0] + col * index[1] + index[2]) holds against 0. */
static inline bool holds(int direction, int64_t v) {
  switch (direction) {
    case HLO_DIR_EQ: return v == 0;
    case HLO_DIR_NE: return v != 0;
    case HLO_DIR_LT: return v < 0;
    case HLO_DIR_LE: return v <= 0;
    case HLO_DIR_GT: return v > 0;
    default: return v >= 0;
  }
}

/* x[j] = fill where cond holds (with `on`), for the keys of a block's row. */
#define SELECT_WHERE(cond)                                                                                     \
  for (int64_t j = 0; j < cols; j++) x[j] = (cond) == on ? fill : x[j]

/* The block's row x[0..cols) (query row `row`, keys from col0) after the graph's ops; masks
 * at their rows' first columns. */
#define DEFINE_OPS(NAME, ATTR)                                                                                 \
  static ATTR void NAME(const rt_cpu_attention *a, const mask_rows *mr, float *x, int64_t cols, int64_t row,   \
                        int64_t col0) {                                                                        \
    for (int o = 0; o < a->op_count; o++) {                                                                    \
      const rt_cpu_attention_op *op = &a->ops[o];                                                              \
      if (op->mask < 0 && op->code == RT_ATT_SELECT) {                                                         \
        int64_t v = row * op->index[0] + col0 * op->index[1] + op->index[2], step = op->index[1];              \
        float fill = op->imm;                                                                                  \
        bool on = op->fill_on_true;                                                                            \
        switch (op->direction) { /* one loop per direction, so each vectorizes */                           \
          case HLO_DIR_EQ: SELECT_WHERE(v + j * step == 0); break;                                            \
          case HLO_DIR_NE: SELECT_WHERE(v + j * step != 0); break;                                            \
          case HLO_DIR_LT: SELECT_WHERE(v + j * step < 0); break;                                             \
          case HLO_DIR_LE: SELECT_WHERE(v + j * step <= 0); break;                                            \
          case HLO_DIR_GT: SELECT_WHERE(v + j * step > 0); break;                                             \
          default: SELECT_WHERE(v + j * step >= 0); break;                                                    \
        }                                                                                                      \
        continue;                                                                                              \
      }                                                                                                        \
      if (op->mask < 0) {                                                                                      \
        float c = op->imm;                                                                                     \
        switch (op->code) {                                                                                    \
          case RT_ATT_ADD: for (int64_t j = 0; j < cols; j++) x[j] = x[j] + c; break;                          \
          case RT_ATT_SUBTRACT: for (int64_t j = 0; j < cols; j++) x[j] = x[j] - c; break;                     \
          case RT_ATT_MULTIPLY: for (int64_t j = 0; j < cols; j++) x[j] = x[j] * c; break;                     \
          case RT_ATT_DIVIDE: for (int64_t j = 0; j < cols; j++) x[j] = x[j] / c; break;                       \
          default: break;                                                                                      \
        }                                                                                                      \
        continue;                                                                                              \
      }                                                                                                        \
      int64_t s = a->masks[op->mask].col_stride;                                                               \
      if (op->code == RT_ATT_SELECT) {                                                                         \
        const unsigned char *p = mr->at[op->mask];                                                             \
        float fill = op->imm;                                                                                  \
        bool on = op->fill_on_true;                                                                            \
        for (int64_t j = 0; j < cols; j++) x[j] = (p[j * s] != 0) == on ? fill : x[j];                         \
        continue;                                                                                              \
      }                                                                                                        \
      const float *m = mr->at[op->mask];                                                                       \
      switch (op->code) {                                                                                      \
        case RT_ATT_ADD: for (int64_t j = 0; j < cols; j++) x[j] = x[j] + m[j * s]; break;                     \
        case RT_ATT_SUBTRACT: for (int64_t j = 0; j < cols; j++) x[j] = x[j] - m[j * s]; break;                \
        case RT_ATT_MULTIPLY: for (int64_t j = 0; j < cols; j++) x[j] = x[j] * m[j * s]; break;                \
        case RT_ATT_DIVIDE: for (int64_t j = 0; j < cols; j++) x[j] = x[j] / m[j * s]; break;                  \
        default: break;                                                                                        \
      }                                                                                                        \
    }                                                                                                          \
  }

/* One row of a block folded into the running max *m and sum *l: x becomes the row's
 * probabilities under the new max; returns the factor exp(m - m') that the row's output so
 * far must take (1 when the row has seen only -inf: then x is all zeros). The max, a NaN
 * flag and the sum are kept in LANES lanes (element j in lane j % LANES), combined in lane
 * order at the end, so the loops vectorize (a sum folded in order would not). */
enum { LANES = 16 };
#define DEFINE_FOLD(NAME, ATTR)                                                                               \
  static ATTR float NAME(float *x, int64_t cols, float *m, float *l) {                                       \
    float lane_top[LANES], lane_sum[LANES];                                                                   \
    unsigned lane_nan[LANES];                                                                                 \
    for (int q = 0; q < LANES; q++) lane_top[q] = -INFINITY, lane_sum[q] = 0.0f, lane_nan[q] = 0;             \
    int64_t whole = cols / LANES * LANES;                                                                     \
    for (int64_t j = 0; j < whole; j += LANES)                                                                \
      for (int q = 0; q < LANES; q++) {                                                                       \
        float v = x[j + q];                                                                                   \
        lane_top[q] = v > lane_top[q] ? v : lane_top[q];                                                      \
        lane_nan[q] |= v != v;                                                                                \
      }                                                                                                       \
    for (int64_t j = whole; j < cols; j++) {                                                                  \
      lane_top[j - whole] = x[j] > lane_top[j - whole] ? x[j] : lane_top[j - whole];                          \
      lane_nan[j - whole] |= x[j] != x[j];                                                                    \
    }                                                                                                         \
    float top = *m;                                                                                           \
    unsigned nan = 0;                                                                                         \
    for (int q = 0; q < LANES; q++) {                                                                         \
      top = lane_top[q] > top ? lane_top[q] : top;                                                            \
      nan |= lane_nan[q];                                                                                     \
    }                                                                                                         \
    if (nan) top = NAN;                                                                                       \
    if (top == -INFINITY) {                                                                                   \
      for (int64_t j = 0; j < cols; j++) x[j] = 0.0f;                                                         \
      return 1.0f;                                                                                            \
    }                                                                                                         \
    for (int64_t j = 0; j < cols; j++) x[j] = rt_exp_f32(x[j] - top);                                         \
    for (int64_t j = 0; j < whole; j += LANES)                                                                \
      for (int q = 0; q < LANES; q++) lane_sum[q] += x[j + q];                                                \
    for (int64_t j = whole; j < cols; j++) lane_sum[j - whole] += x[j];                                       \
    float sum = 0.0f;                                                                                         \
    for (int q = 0; q < LANES; q++) sum += lane_sum[q];                                                       \
    float scale = rt_exp_f32(*m - top);                                                                       \
    *l = *l * scale + sum;                                                                                    \
    *m = top;                                                                                                 \
    return scale;                                                                                             \
  }

DEFINE_OPS(ops_portable, )
DEFINE_FOLD(fold_portable, )
#if RT_CPU_X86_VARIANTS
DEFINE_OPS(ops_avx2, __attribute__((target("avx2"))))
DEFINE_FOLD(fold_avx2, __attribute__((target("avx2"))))
DEFINE_OPS(ops_avx512, __attribute__((target("avx512f"))))
DEFINE_FOLD(fold_avx512, __attribute__((target("avx512f"))))
#endif

typedef void (*ops_fn)(const rt_cpu_attention *, const mask_rows *, float *, int64_t, int64_t, int64_t);
typedef float (*fold_fn)(float *, int64_t, float *, float *);

static const ops_fn ops_kernels[RT_CPU_ISA_COUNT] = {
    [RT_CPU_ISA_PORTABLE] = ops_portable,
#if RT_CPU_X86_VARIANTS
    [RT_CPU_ISA_AVX2] = ops_avx2,
    [RT_CPU_ISA_AVX512] = ops_avx512,
#endif
};
static const fold_fn fold_kernels[RT_CPU_ISA_COUNT] = {
    [RT_CPU_ISA_PORTABLE] = fold_portable,
#if RT_CPU_X86_VARIANTS
    [RT_CPU_ISA_AVX2] = fold_avx2,
    [RT_CPU_ISA_AVX512] = fold_avx512,
#endif
};

/* The masks' rows for row `row` and keys from col0 of batch element b. */
static void mask_rows_at(const job *j, int64_t b, int64_t row, int64_t col0, mask_rows *mr) {
  const rt_cpu_attention *a = j->a;
  for (int k = 0; k < a->mask_count; k++) {
    const rt_cpu_attention_view *v = &a->masks[k];
    int64_t at = batch_offset(v, b) + row * v->row_stride + col0 * v->col_stride;
    mr->at[k] = a->mask_pred[k] ? (const void *)((const unsigned char *)j->masks[k] + at)
                                : (const void *)((const float *)j->masks[k] + at);
  }
}

/* Whether op (a select of -inf on an inequality of positions, the last op) fills every
 * score of the block: then the block adds nothing to any row (exp(-inf - m) is 0, and a row
 * that has seen only -inf stays so) and is skipped. A linear inequality that holds at the
 * block's four corners holds inside it. */
static bool masked_block(const rt_cpu_attention_op *op, int64_t r0, int64_t rows, int64_t c0, int64_t cols) {
  int64_t r[2] = {r0, r0 + rows - 1}, c[2] = {c0, c0 + cols - 1};
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 2; j++)
      if (holds(op->direction, r[i] * op->index[0] + c[j] * op->index[1] + op->index[2]) != op->fill_on_true)
        return false;
  return true;
}

/* One item's running state: query rows [r0, r0 + rows) of batch element b, their max m and
 * sum l so far, and their output rows o. */
typedef struct item_state {
  const job *j;
  int64_t b, r0, rows;
  ops_fn ops;
  fold_fn fold;
  float m[BQ], l[BQ];
  float *o;
} item_state;

static void item_begin(item_state *it) {
  const rt_cpu_attention *a = it->j->a;
  it->o = it->j->out + (it->b * a->sq + it->r0) * a->dv;
  for (int64_t r = 0; r < it->rows; r++) {
    it->m[r] = -INFINITY;
    it->l[r] = 0.0f;
  }
  memset(it->o, 0, sizeof(float) * (size_t)(it->rows * a->dv));
}

/* The block of scores for keys [c0, c0 + cols) (row r at scores + r * ld) through the graph's
 * ops, each row folded into its m and l and its output so far rescaled; the probabilities
 * rounded to bf16 when `rounded`. Whether any row has seen a score above -inf. */
static bool fold_block(item_state *it, float *scores, int64_t ld, int64_t c0, int64_t cols, bool rounded) {
  const rt_cpu_attention *a = it->j->a;
  bool any = false;
  for (int64_t r = 0; r < it->rows; r++) {
    float *x = scores + r * ld;
    if (a->op_count) {
      mask_rows mr;
      mask_rows_at(it->j, it->b, it->r0 + r, c0, &mr);
      it->ops(a, &mr, x, cols, it->r0 + r, c0);
    }
    float scale = it->fold(x, cols, &it->m[r], &it->l[r]);
    any = any || it->m[r] != -INFINITY;
    if (scale != 1.0f)
      for (int64_t t = 0; t < a->dv; t++) it->o[r * a->dv + t] *= scale;
    if (rounded)
      for (int64_t c = 0; c < cols; c++) x[c] = rt_cpu_bf16_value(rt_cpu_bf16_bits(x[c]));
  }
  return any;
}

/* Each output row over its sum; NaN where every key was masked (exp(-inf - -inf) is NaN in
 * the graph). */
static void item_end(const item_state *it) {
  int64_t dv = it->j->a->dv;
  for (int64_t r = 0; r < it->rows; r++) {
    float *row = it->o + r * dv;
    if (it->m[r] == -INFINITY)
      for (int64_t t = 0; t < dv; t++) row[t] = NAN;
    else
      for (int64_t t = 0; t < dv; t++) row[t] /= it->l[r];
  }
}

/* The item's rows, f32 products on Q, K and V where they lie. */
static void block_item(item_state *it) {
  const job *j = it->j;
  const rt_cpu_attention *a = j->a;
  float scores[BQ * BK];
  const float *q = (const float *)j->q + batch_offset(&a->q, it->b) + it->r0 * a->q.row_stride;
  const float *k = (const float *)j->k + batch_offset(&a->k, it->b);
  const float *v = (const float *)j->v + batch_offset(&a->v, it->b);
  item_begin(it);
  int64_t bk = a->skip_masked_blocks ? BK_MASKED : BK;
  for (int64_t c0 = 0; c0 < a->sk; c0 += bk) {
    int64_t cols = a->sk - c0 < bk ? a->sk - c0 : bk;
    if (a->skip_masked_blocks && masked_block(&a->ops[a->op_count - 1], it->r0, it->rows, c0, cols)) continue;
    /* scores = Q's rows times K's rows, transposed: K stored [keys][d] goes by the flag */
    gemm(j->on_dnnl, stored_transposed(&a->q), !stored_transposed(&a->k), it->rows, cols, a->d, q, leading(&a->q),
         k + c0 * a->k.row_stride, leading(&a->k), false, scores, BK);
    if (fold_block(it, scores, BK, c0, cols, false))
      gemm(j->on_dnnl, false, stored_transposed(&a->v), it->rows, a->dv, cols, scores, BK, v + c0 * a->v.row_stride,
           leading(&a->v), true, it->o, a->dv);
  }
  item_end(it);
}

/* ---- bf16 products ----
 * The operands come as bf16 values, or as f32 values the graph rounds to bf16 (its convert,
 * computed here on the way); each block of Q, K and V is loaded into f32 on the stack, rounded
 * so, and the probabilities are rounded before their product with V. A product of two bf16
 * values is exact in f32, so sgemm over the rounded values multiplies exactly what the
 * graph's bf16 products multiply, and sums in f32 as they do. */

/* rows x cols of view v from (b, row0, 0), read as type, into dst [rows][cols]. */
static void load_block(const void *data, rt_attention_type type, const rt_cpu_attention_view *v, int64_t b,
                       int64_t row0, int64_t rows, int64_t cols, float *dst) {
  int64_t at = batch_offset(v, b) + row0 * v->row_stride;
  for (int64_t r = 0; r < rows; r++, at += v->row_stride) {
    float *out = dst + r * cols;
    if (type == RT_ATT_BF16) {
      const uint16_t *src = (const uint16_t *)data + at;
      for (int64_t c = 0; c < cols; c++) out[c] = rt_cpu_bf16_value(src[c * v->col_stride]);
    } else {
      const float *src = (const float *)data + at;
      for (int64_t c = 0; c < cols; c++) out[c] = src[c * v->col_stride];
      if (type == RT_ATT_F32_ROUNDED)
        for (int64_t c = 0; c < cols; c++) out[c] = rt_cpu_bf16_value(rt_cpu_bf16_bits(out[c]));
    }
  }
}

enum { BK_BF16 = 64, MAX_D = RT_ATTENTION_BF16_MAX_D };

/* block_item's order of work over blocks of BK_BF16 keys loaded (and rounded) on the stack. */
static void block_item_bf16(item_state *it) {
  const job *j = it->j;
  const rt_cpu_attention *a = j->a;
  float qb[BQ * MAX_D], kb[BK_BF16 * MAX_D], vb[BK_BF16 * MAX_D], scores[BQ * BK_BF16];
  load_block(j->q, a->q_type, &a->q, it->b, it->r0, it->rows, a->d, qb);
  item_begin(it);
  for (int64_t c0 = 0; c0 < a->sk; c0 += BK_BF16) {
    int64_t cols = a->sk - c0 < BK_BF16 ? a->sk - c0 : BK_BF16;
    if (a->skip_masked_blocks && masked_block(&a->ops[a->op_count - 1], it->r0, it->rows, c0, cols)) continue;
    load_block(j->k, a->k_type, &a->k, it->b, c0, cols, a->d, kb);
    gemm(j->on_dnnl, false, true, it->rows, cols, a->d, qb, a->d, kb, a->d, false, scores, BK_BF16);
    if (!fold_block(it, scores, BK_BF16, c0, cols, a->p_rounded)) continue;
    load_block(j->v, a->v_type, &a->v, it->b, c0, cols, a->dv, vb);
    gemm(j->on_dnnl, false, false, it->rows, a->dv, cols, scores, BK_BF16, vb, a->dv, true, it->o, a->dv);
  }
  item_end(it);
}

static void items(void *ctx, int64_t begin, int64_t end) {
  const job *j = ctx;
  rt_cpu_isa isa = rt_cpu_isa_in_use();
  const rt_cpu_attention *a = j->a;
  bool bf16 = a->q_type != RT_ATT_F32 || a->v_type != RT_ATT_F32 || a->p_rounded;
  for (int64_t item = begin; item < end; item++) {
    item_state it = {.j = j, .b = item / j->q_blocks, .r0 = item % j->q_blocks * BQ, .ops = ops_kernels[isa],
                     .fold = fold_kernels[isa]};
    it.rows = a->sq - it.r0 < BQ ? a->sq - it.r0 : BQ;
    if (bf16) block_item_bf16(&it);
    else block_item(&it);
  }
}

/* Softmax rows [begin, end) alone: each row copied to the result, folded there as a block
 * of keys is (max, exp, sum in one sweep of a row that stays in cache), then divided. */
static void softmax_items(void *ctx, int64_t begin, int64_t end) {
  const job *j = ctx;
  int64_t cols = j->a->sk;
  fold_fn fold = fold_kernels[rt_cpu_isa_in_use()];
  for (int64_t r = begin; r < end; r++) {
    float *y = j->out + r * cols, m = -INFINITY, l = 0.0f;
    memcpy(y, (const float *)j->q + r * cols, sizeof(float) * (size_t)cols);
    fold(y, cols, &m, &l);
    if (m == -INFINITY) /* every value -inf: exp(-inf - -inf) is NaN in the graph */
      for (int64_t t = 0; t < cols; t++) y[t] = NAN;
    else
      for (int64_t t = 0; t < cols; t++) y[t] /= l;
  }
}

void rt_cpu_attention_run(const rt_cpu_attention *a, const rt_value *const *in, rt_value *out) {
  if (a->layer_norm) {
    rt_cpu_layer_norm_run(a, in, out);
    return;
  }
  atomic_fetch_add(&runs, 1);
  if (a->softmax_only) {
    job j = {.a = a, .q = in[0]->data, .out = out->data};
    int64_t grain = a->sk >= RT_CPU_GRAIN ? 1 : RT_CPU_GRAIN / a->sk;
    rt_parallel_for(a->sq, grain, softmax_items, &j);
    return;
  }
  job j = {.a = a, .q = in[0]->data, .k = in[1]->data, .v = in[2]->data, .out = out->data,
           .q_blocks = (a->sq + BQ - 1) / BQ, .on_dnnl = rt_cpu_dot_on_dnnl() && !a->on_blas};
  for (int k = 0; k < a->mask_count; k++) j.masks[k] = in[3 + k]->data;
  if (a->batch == 0 || a->sq == 0 || a->dv == 0) return;
  /* an item is about rows * sk * (d + dv) multiply-adds (rows: BQ, or all the queries when
   * fewer, as in a decoder's step); about a million make a task */
  int64_t per_item = (a->sq < BQ ? a->sq : BQ) * a->sk * (a->d + a->dv);
  int64_t grain = per_item >= (1 << 20) ? 1 : (1 << 20) / (per_item ? per_item : 1);
  int team = j.on_dnnl ? rt_cpu_dnnl_team_begin() : 0; /* oneDNN's sgemm uses the caller's team */
  /* work too small to share stays on this thread, its sgemm calls too: a team woken for a
   * decoder step's one query row per head costs more than the row */
  if (j.on_dnnl && a->batch * j.q_blocks <= grain) omp_set_num_threads(1);
  rt_parallel_for(a->batch * j.q_blocks, grain, items, &j);
  if (j.on_dnnl) omp_set_num_threads(team);
}
