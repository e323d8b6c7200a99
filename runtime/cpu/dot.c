/* dot through BLAS. Operands are seen as [batch][M][K] and [batch][K][N] (or [batch][N][K],
 * passed with the transpose flag instead of copied); rt_work_view_into from the reference
 * kernels makes the packing copy only when an operand is not already in one of those
 * orders, and converts f16/bf16 to f32 (the result is rounded once on store); copies and
 * an unstored result go in the step's planned scratch (dot_setup sizes it). The result's
 * dims are [batch, lhs free, rhs free]: row-major [batch][M][N] already. lhs as [batch][K][M]
 * goes by the transpose flag as well. Each (batch, block of rows and columns: split_grid)
 * is one sgemm/dgemm call and one item of the parallel loop, with the library itself
 * single-threaded inside the loop, so large products use every core and small ones stay on
 * the caller's thread. On a processor with AVX-512, f32 products go to oneDNN's sgemm,
 * which uses it (OpenBLAS's own choice of kernels on such a processor may be narrower, down
 * to SSE3 where it does not know the model); with AVX2 alone they stay on OpenBLAS, which
 * is as fast at large sizes and faster at few rows (alexnet's classifier at batch 8: 185
 * against 243 ms a step). f64 products stay on OpenBLAS. A batch of small f32 matrices is one
 * call of oneDNN's matmul instead (batched_on_dnnl). A single-row product (batch-1 Linear
 * layers) goes to gemv instead (OpenBLAS's sgemv, or oneDNN's sgemm with one row, which
 * takes its gemv kernels: 1.25-2x OpenBLAS's sgemv where OpenBLAS ran SSE3): gemm
 * would pack the whole weight matrix first, for one row of arithmetic, so the weights would
 * cross memory three times instead of once. gemv's items must read the weights in long
 * runs: a [n][k] matrix is split into blocks of rows (output columns), a large [k][n] one
 * (a weight stored [in, out]) into blocks of rows too, each summing its share of k into
 * partial results in scratch that are added up afterwards, in a fixed order; split into
 * column blocks instead, each item read a few hundred bytes from every row, one page apart,
 * and ran at a third of the memory's speed. Two to RT_CPU_DOT_ROWS rows of f32 against a
 * [n][k] matrix (a Linear layer at batch 8) go to dot_rows.c, which reads the weights once
 * where sgemm packs them first: alexnet's classifier at batch 8 from PyTorch (the transpose of
 * each nn.Linear weight folded into its dot), 27-33 -> 16-19 ms. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>
#include <dnnl.h>
#include <omp.h>

#include "kernel_internal.h"
#include "runtime/reference/reference.h"
#include "runtime/runtime.h"

enum { COL_BLOCK = 256, ROWS_COL_BLOCK = 96 };

/* A [k][n] gemv of at least twice SPLIT_WORK elements is split into at most MAX_K_BLOCKS
 * blocks of k, each at least SPLIT_WORK elements (512 KB of f32); the count depends on the
 * shape alone, so results do not change with the number of threads. A classifier's weights
 * at batch 1 (2048 x 1000 in resnet50, 512 x 1000 in resnet18) are 2 MB and up: with blocks
 * of 1M elements before, resnet18's went to column blocks (0.21 ms, against 0.16 now) and
 * resnet50's to two blocks (0.58 ms, 0.48 now). */
enum { SPLIT_WORK = 1 << 17, MAX_K_BLOCKS = 16 };

static int64_t k_blocks_for(int64_t batch, int64_t m, int64_t n, int64_t k, bool b_transposed) {
  if (batch != 1 || m != 1 || b_transposed || n * k < 2 * SPLIT_WORK) return 0;
  int64_t blocks = n * k / SPLIT_WORK;
  if (blocks > MAX_K_BLOCKS) blocks = MAX_K_BLOCKS;
  return blocks < k ? blocks : k;
}

typedef struct dot_job {
  bool f64;
  const void *a, *b;
  void *c;
  int64_t m, n, k, blocks;
  /* m > 1: each matrix is split into a grid of blocks of row_height rows by col_width
   * columns, col_blocks across (split_grid) */
  int64_t row_height, col_blocks, col_width;
  bool a_transposed, b_transposed;
  bool on_dnnl; /* f32 gemm through oneDNN (rt_cpu_dot_on_dnnl) */
  bool few_rows; /* f32, 2 to RT_CPU_DOT_ROWS rows, B [n][k]: items are (batch, ROWS_COL_BLOCK columns) */
  const rt_cpu_epilogue *epilogue; /* f32 only: c is the output itself */
  int64_t k_blocks; /* > 0: a [k][n] gemv summed in k_blocks blocks of k into partials */
  void *partials;   /* [k_blocks][n] */
} dot_job;

/* m == 1: items are (batch, block of COL_BLOCK output columns); c[cols] = a . B[:, cols]. */
static void gemv_items(const dot_job *j, int64_t begin, int64_t end) {
  for (int64_t item = begin; item < end; item++) {
    int64_t batch = item / j->blocks, c0 = (item % j->blocks) * COL_BLOCK;
    int cols = (int)(j->n - c0 < COL_BLOCK ? j->n - c0 : COL_BLOCK);
    int64_t a_at = batch * j->k, c_at = batch * j->n + c0;
    /* B is [k][n] (columns c0.. of the row-major matrix, read transposed) or [n][k] (rows) */
    int64_t b_at = batch * j->k * j->n + (j->b_transposed ? c0 * j->k : c0);
    enum CBLAS_TRANSPOSE tb = j->b_transposed ? CblasNoTrans : CblasTrans;
    int rows = (int)(j->b_transposed ? cols : j->k), width = (int)(j->b_transposed ? j->k : cols);
    int ld = (int)(j->b_transposed ? j->k : j->n);
    if (j->f64)
      cblas_dgemv(CblasRowMajor, tb, rows, width, 1.0, (const double *)j->b + b_at, ld, (const double *)j->a + a_at, 1,
                  0.0, (double *)j->c + c_at, 1);
    else if (j->on_dnnl) /* one row by [k][cols] (or [cols][k] transposed) */
      dnnl_sgemm('N', j->b_transposed ? 'T' : 'N', 1, cols, j->k, 1.0f, (const float *)j->a + a_at, j->k,
                 (const float *)j->b + b_at, ld, 0.0f, (float *)j->c + c_at, cols);
    else
      cblas_sgemv(CblasRowMajor, tb, rows, width, 1.0f, (const float *)j->b + b_at, ld, (const float *)j->a + a_at, 1,
                  0.0f, (float *)j->c + c_at, 1);
    if (j->epilogue) j->epilogue->run(j->epilogue->ctx, c_at, c_at + cols);
  }
}

/* Items are blocks of k: partials[block] = a[k0..k1] . B[k0..k1][all n], a contiguous run of
 * whole rows. */
static void k_block_items(void *ctx, int64_t begin, int64_t end) {
  const dot_job *j = ctx;
  for (int64_t block = begin; block < end; block++) {
    int64_t k0 = block * j->k / j->k_blocks, k1 = (block + 1) * j->k / j->k_blocks;
    if (j->f64)
      cblas_dgemv(CblasRowMajor, CblasTrans, (int)(k1 - k0), (int)j->n, 1.0, (const double *)j->b + k0 * j->n,
                  (int)j->n, (const double *)j->a + k0, 1, 0.0, (double *)j->partials + block * j->n, 1);
    else if (j->on_dnnl)
      dnnl_sgemm('N', 'N', 1, j->n, k1 - k0, 1.0f, (const float *)j->a + k0, k1 - k0, (const float *)j->b + k0 * j->n,
                 j->n, 0.0f, (float *)j->partials + block * j->n, j->n);
    else
      cblas_sgemv(CblasRowMajor, CblasTrans, (int)(k1 - k0), (int)j->n, 1.0f, (const float *)j->b + k0 * j->n,
                  (int)j->n, (const float *)j->a + k0, 1, 0.0f, (float *)j->partials + block * j->n, 1);
  }
}

/* Items are columns: c = the sum of the partials in block order, then the epilogue. */
static void k_block_sums(void *ctx, int64_t begin, int64_t end) {
  const dot_job *j = ctx;
  for (int64_t col = begin; col < end; col++) {
    if (j->f64) {
      const double *p = (const double *)j->partials + col;
      double sum = p[0];
      for (int64_t block = 1; block < j->k_blocks; block++) sum += p[block * j->n];
      ((double *)j->c)[col] = sum;
    } else {
      const float *p = (const float *)j->partials + col;
      float sum = p[0];
      for (int64_t block = 1; block < j->k_blocks; block++) sum += p[block * j->n];
      ((float *)j->c)[col] = sum;
    }
  }
  if (j->epilogue) j->epilogue->run(j->epilogue->ctx, begin, end);
}

/* few_rows: each item is every row of a batch against a block of columns. */
static void few_rows_items(const dot_job *j, int64_t begin, int64_t end) {
  for (int64_t item = begin; item < end; item++) {
    int64_t batch = item / j->blocks, c0 = (item % j->blocks) * ROWS_COL_BLOCK;
    int64_t c1 = j->n - c0 < ROWS_COL_BLOCK ? j->n : c0 + ROWS_COL_BLOCK, c_at = batch * j->m * j->n;
    rt_cpu_dot_rows_f32((const float *)j->a + batch * j->m * j->k, (const float *)j->b + batch * j->n * j->k,
                        (float *)j->c + c_at, j->m, j->n, j->k, c0, c1);
    if (j->epilogue)
      for (int64_t r = 0; r < j->m; r++) j->epilogue->run(j->epilogue->ctx, c_at + r * j->n + c0, c_at + r * j->n + c1);
  }
}

static void dot_items(void *ctx, int64_t begin, int64_t end) {
  const dot_job *j = ctx;
  if (j->m == 1) {
    gemv_items(j, begin, end);
    return;
  }
  if (j->few_rows) {
    few_rows_items(j, begin, end);
    return;
  }
  for (int64_t item = begin; item < end; item++) {
    int64_t batch = item / j->blocks, block = item % j->blocks;
    int64_t r0 = block / j->col_blocks * j->row_height, c0 = block % j->col_blocks * j->col_width;
    int64_t rows = j->m - r0 < j->row_height ? j->m - r0 : j->row_height;
    int64_t cols = j->n - c0 < j->col_width ? j->n - c0 : j->col_width;
    /* A is [m][k], or [k][m] whose rows r0.. are columns r0..; B is [k][n], or [n][k]
     * whose rows c0.. are columns c0.. */
    int64_t a_at = j->a_transposed ? batch * j->m * j->k + r0 : (batch * j->m + r0) * j->k;
    int64_t b_at = batch * j->k * j->n + (j->b_transposed ? c0 * j->k : c0), c_at = (batch * j->m + r0) * j->n + c0;
    enum CBLAS_TRANSPOSE ta = j->a_transposed ? CblasTrans : CblasNoTrans;
    enum CBLAS_TRANSPOSE tb = j->b_transposed ? CblasTrans : CblasNoTrans;
    int lda = (int)(j->a_transposed ? j->m : j->k), ldb = (int)(j->b_transposed ? j->k : j->n);
    if (j->f64)
      cblas_dgemm(CblasRowMajor, ta, tb, (int)rows, (int)cols, (int)j->k, 1.0, (const double *)j->a + a_at,
                  lda, (const double *)j->b + b_at, ldb, 0.0, (double *)j->c + c_at, (int)j->n);
    else if (j->on_dnnl)
      dnnl_sgemm(j->a_transposed ? 'T' : 'N', j->b_transposed ? 'T' : 'N', rows, cols, j->k, 1.0f,
                 (const float *)j->a + a_at, lda, (const float *)j->b + b_at, ldb, 0.0f, (float *)j->c + c_at, j->n);
    else
      cblas_sgemm(CblasRowMajor, ta, tb, (int)rows, (int)cols, (int)j->k, 1.0f, (const float *)j->a + a_at,
                  lda, (const float *)j->b + b_at, ldb, 0.0f, (float *)j->c + c_at, (int)j->n);
    if (j->epilogue && cols == j->n) j->epilogue->run(j->epilogue->ctx, c_at, c_at + rows * j->n);
    else if (j->epilogue) /* a column block is one run per row */
      for (int64_t r = 0; r < rows; r++) j->epilogue->run(j->epilogue->ctx, c_at + r * j->n, c_at + r * j->n + cols);
  }
}

/* Which library runs f32 gemm: -1 until the first product decides. */
static _Atomic int products_on_dnnl = -1;

bool rt_cpu_dot_on_dnnl(void) {
  int on = atomic_load_explicit(&products_on_dnnl, memory_order_relaxed);
  if (on < 0) {
#if RT_CPU_X86_VARIANTS
    on = __builtin_cpu_supports("avx512f");
#else
    on = 0;
#endif
    atomic_store_explicit(&products_on_dnnl, on, memory_order_relaxed);
  }
  return on;
}

void rt_cpu_dot_use_dnnl(bool on) { atomic_store_explicit(&products_on_dnnl, on, memory_order_relaxed); }

/* f32 gemm on oneDNN for this product: the processor's pick, unless its onednn_product
 * choice was refused (mark_choices.c). */
static bool product_on_dnnl(const hlo_instr *instr) {
  return rt_cpu_dot_on_dnnl() && !hlo_instr_raw_attr(instr, RT_CPU_ON_BLAS);
}

static int64_t gcd(int64_t a, int64_t b) { return b ? gcd(b, a % b) : a; }

/* Each matrix of a product large enough to share is split into `parts` blocks, so that the
 * items (batch times parts) are a multiple of the threads and come out even; one matrix of
 * a batch at least as large as the threads is one item. BLAS packs an item's rows of A and
 * its columns of B again for each call, so the grid of R row blocks by C column blocks is
 * the one with R * C = parts that packs least: A C times over, B R times, m * C + n * R. (A
 * split of rows alone, 64 at a time, packed the weight of a Linear layer over 256 tokens
 * four times: a tenth of bert_base's step; and 136 rows made three items for two threads.)
 * Columns come in whole vectors and no narrower than MIN_COLS, rows no fewer than MIN_ROWS. */
static void split_grid(dot_job *j, int64_t batch) {
  enum { MIN_COLS = 128, MIN_ROWS = 16, MIN_WORK = 1 << 20 };
  int64_t threads = rt_parallel_threads();
  int64_t parts = j->m * j->n * j->k < MIN_WORK ? 1 : threads / gcd(batch, threads);
  int64_t most_cols = j->n / MIN_COLS > 1 ? j->n / MIN_COLS : 1, most_rows = j->m / MIN_ROWS > 1 ? j->m / MIN_ROWS : 1;
  int64_t rows = 1, cols = 1, cost = -1;
  for (int64_t c = 1; c <= parts; c++) {
    if (parts % c || c > most_cols || parts / c > most_rows) continue;
    int64_t r = parts / c, packed = j->m * c + j->n * r;
    if (cost < 0 || packed < cost) rows = r, cols = c, cost = packed;
  }
  j->row_height = (j->m + rows - 1) / rows;
  j->col_width = (j->n + cols - 1) / cols;
  if (cols > 1) j->col_width = (j->col_width + 15) / 16 * 16; /* whole vectors per block */
  j->col_blocks = (j->n + j->col_width - 1) / j->col_width;
  j->blocks = (j->m + j->row_height - 1) / j->row_height * j->col_blocks;
}

/* perm = batch dims, then the free dims in order, then the contracting dims (free_first),
 * or batch, contracting, free. */
static void order(const hlo_shape *s, const hlo_ints *batch, const hlo_ints *contracting, bool free_first,
                  int *perm, int64_t *free_size) {
  bool used[HLO_MAX_RANK] = {false};
  int at = 0;
  *free_size = 1;
  for (int i = 0; i < batch->count; i++) used[batch->values[i]] = true, perm[at++] = (int)batch->values[i];
  for (int i = 0; i < contracting->count; i++) used[contracting->values[i]] = true;
  if (!free_first)
    for (int i = 0; i < contracting->count; i++) perm[at++] = (int)contracting->values[i];
  for (int d = 0; d < s->rank; d++)
    if (!used[d]) perm[at++] = d, *free_size *= s->dims[d];
  if (free_first)
    for (int i = 0; i < contracting->count; i++) perm[at++] = (int)contracting->values[i];
}

/* What one dot needs, from the shapes alone (the plan sizes the scratch with it): operand
 * orders, the matrix sizes, and where copies and the unstored result go in the scratch. */
typedef struct dot_setup {
  int a_perm[HLO_MAX_RANK], b_perm[HLO_MAX_RANK];
  bool a_transposed, b_transposed, in_place;
  bool bf16; /* bf16 operands multiplied by oneDNN's matmul (dnnl_matmul.c), the result written in place */
  bool b_widened; /* a bf16 rhs copied into f32 for the f32 path */
  hlo_dtype work, operand_work; /* the products' type; the operands' (bf16 for bf16, else work) */
  int64_t m, n, k, batch;
  int64_t k_blocks;                    /* k_blocks_for's */
  int64_t a_at, b_at, c_at, partials_at, bytes; /* scratch offsets, 0 = unused */
} dot_setup;

/* Whether a product of these sizes with bf16 operands goes to oneDNN's bf16 matmul: on a
 * processor with bf16 instructions, when oneDNN makes a primitive for it. */
static bool bf16_on_dnnl(const hlo_instr *instr, const dot_setup *s) {
  const hlo_shape *lhs = &instr->operands[0]->shape, *rhs = &instr->operands[1]->shape;
  if (lhs->dtype != HLO_BF16 || rhs->dtype != HLO_BF16 || s->m * s->n * s->batch == 0 || s->k == 0 ||
      !rt_cpu_bf16_native_for(s->batch * s->m))
    return false;
  rt_cpu_matmul mm = {.batch = s->batch, .m = s->m, .n = s->n, .k = s->k, .a_transposed = s->a_transposed,
                      .b_transposed = s->b_transposed, .c_type = instr->shape.dtype};
  return rt_cpu_matmul_bf16_ready(&mm);
}

/* The operands' orders: [batch][M][K] and [batch][K][N], or either transposed by flag when its
 * bytes are in that order already and of the operand work type. */
static void operand_orders(const hlo_instr *instr, dot_setup *s) {
  const hlo_dot_dims *dd = instr->dot;
  const hlo_shape *lhs = &instr->operands[0]->shape, *rhs = &instr->operands[1]->shape;
  int lhs_perm[HLO_MAX_RANK], lhs_t_perm[HLO_MAX_RANK], rhs_perm[HLO_MAX_RANK], rhs_t_perm[HLO_MAX_RANK];
  order(lhs, &dd->lhs_batch, &dd->lhs_contracting, true, lhs_perm, &s->m);
  order(lhs, &dd->lhs_batch, &dd->lhs_contracting, false, lhs_t_perm, &s->m);
  order(rhs, &dd->rhs_batch, &dd->rhs_contracting, false, rhs_perm, &s->n);
  order(rhs, &dd->rhs_batch, &dd->rhs_contracting, true, rhs_t_perm, &s->n);
  hlo_dtype w = s->operand_work;
  s->b_transposed = rhs->dtype == w && rt_perm_is_identity(rhs_t_perm, rhs->rank) && !rt_perm_is_identity(rhs_perm, rhs->rank);
  /* a [k][m] lhs (a weight gradient, x^T dy) is passed transposed too; with m == 1 both
   * orders are the same bytes, and gemv reads A as a plain vector */
  s->a_transposed = s->m > 1 && lhs->dtype == w && rt_perm_is_identity(lhs_t_perm, lhs->rank) &&
                    !rt_perm_is_identity(lhs_perm, lhs->rank);
  memcpy(s->a_perm, s->a_transposed ? lhs_t_perm : lhs_perm, sizeof s->a_perm);
  memcpy(s->b_perm, s->b_transposed ? rhs_t_perm : rhs_perm, sizeof s->b_perm);
}

static void dot_setup_for(const hlo_instr *instr, dot_setup *s) {
  const hlo_dot_dims *dd = instr->dot;
  const hlo_shape *lhs = &instr->operands[0]->shape, *rhs = &instr->operands[1]->shape;
  *s = (dot_setup){.batch = 1, .k = 1, .work = rt_work_dtype(instr->shape.dtype)};
  for (int i = 0; i < dd->lhs_batch.count; i++) s->batch *= lhs->dims[dd->lhs_batch.values[i]];
  for (int i = 0; i < dd->lhs_contracting.count; i++) s->k *= lhs->dims[dd->lhs_contracting.values[i]];
  /* bf16 operands first as they are, for oneDNN; as f32 when it does not take them */
  s->operand_work = HLO_BF16;
  operand_orders(instr, s);
  s->bf16 = bf16_on_dnnl(instr, s);
  if (!s->bf16) {
    s->operand_work = s->work;
    operand_orders(instr, s);
  }
  s->in_place = s->bf16 || instr->shape.dtype == s->work;
  int64_t size = (int64_t)hlo_dtype_size(s->work), operand_size = (int64_t)hlo_dtype_size(s->operand_work);
  int64_t at = 64; /* offset 0 means unused */
  bool computes = s->m * s->n * s->batch != 0 && s->k != 0;
  if (computes && rt_work_view_copies(lhs, s->a_perm, s->operand_work))
    s->a_at = at, at += rt_cpu_aligned(hlo_shape_elements(lhs) * operand_size);
  if (computes && rt_work_view_copies(rhs, s->b_perm, s->operand_work))
    s->b_at = at, at += rt_cpu_aligned(hlo_shape_elements(rhs) * operand_size);
  s->b_widened = computes && !s->bf16 && rhs->dtype == HLO_BF16 && s->operand_work == HLO_F32;
  if (!s->in_place) s->c_at = at, at += rt_cpu_aligned(hlo_shape_elements(&instr->shape) * size);
  s->k_blocks = computes && !s->bf16 ? k_blocks_for(s->batch, s->m, s->n, s->k, s->b_transposed) : 0;
  if (s->k_blocks) s->partials_at = at, at += rt_cpu_aligned(s->k_blocks * s->n * size);
  s->bytes = at > 64 ? at : 0; /* nothing to copy or store: no scratch at all */
}

/* 2 to RT_CPU_DOT_ROWS rows of f32 against a matrix stored [n][k]: dot_rows.c, which reads
 * it once. */
static bool few_rows(const dot_setup *s) {
  return s->work != HLO_F64 && s->m >= 2 && s->m <= RT_CPU_DOT_ROWS && s->b_transposed && !s->a_transposed;
}

/* Whether an f32 batch of products goes to oneDNN's matmul as one call: -1 the rule below,
 * else forced (rt_cpu_dot_use_batched). */
static _Atomic int batched_forced = -1;

void rt_cpu_dot_use_batched(int on) { atomic_store_explicit(&batched_forced, on < 0 ? -1 : on > 0, memory_order_relaxed); }

/* A batch of f32 matrices on the gemm path (not one row, not a few rows against [n][k],
 * not split sums), with f32 gemm on oneDNN, each matrix under BATCHED_MOST multiply-adds:
 * one matmul call, oneDNN splitting the batch over the team itself, where dot_items makes
 * one sgemm per matrix (or block of one). Measured on 2 threads with AVX-512, one call
 * against the loop: 9 x 64 by 64 x 200 matrices, 12 of them, 0.08x the time; 16 x 16 x 16,
 * 24 of them, 0.35-0.45x; attention-sized ones (12 heads of 128 or 197 positions by 64)
 * 0.75-0.9x. Each matrix of 512 x 512 x 64 (16M multiply-adds) took 1.1-1.3x as long in
 * one call as in the loop, which splits a large matrix into blocks that pack least. */
enum { BATCHED_MOST = 1 << 22 };
static bool batched_on_dnnl(const hlo_instr *instr, const dot_setup *s) {
  if (s->work != HLO_F32 || s->operand_work != HLO_F32 || s->bf16 || s->batch < 2 || s->m < 2 || few_rows(s) ||
      s->k_blocks || s->k == 0 || !product_on_dnnl(instr))
    return false;
  int forced = atomic_load_explicit(&batched_forced, memory_order_relaxed);
  if (forced >= 0) return forced;
  return s->m * s->n * s->k < BATCHED_MOST;
}

/* Runs an epilogue over [begin, end) of the output: rt_parallel_for's items. */
static void epilogue_items(void *ctx, int64_t begin, int64_t end) {
  const rt_cpu_epilogue *e = ctx;
  e->run(e->ctx, begin, end);
}

static _Atomic int64_t packs;

int64_t rt_cpu_dot_packs(void) { return atomic_load(&packs); }

/* Whether a product of this setup may read its rhs prepacked: one matrix on oneDNN's bf16
 * matmul, the rhs in order as it is (no copy); or one matrix whose bf16 rhs is widened to f32
 * for the f32 path (the widened copy kept instead of made on every call). */
static bool packable(const dot_setup *s) { return s->batch == 1 && (s->bf16 ? !s->b_at : s->b_widened); }

/* The bf16 product on oneDNN, into out, then the epilogue over the whole result; the rhs read
 * from packed, packed first when its stamp changed. */
static bool dot_bf16(const dot_setup *s, const rt_value *const *in, rt_value *out, const rt_cpu_epilogue *epilogue,
                     char *base, const rt_cpu_packed *packed) {
  rt_cpu_matmul mm = {.batch = s->batch, .m = s->m, .n = s->n, .k = s->k, .a_transposed = s->a_transposed,
                      .b_transposed = s->b_transposed, .c_type = out->shape.dtype, .c = out->data};
  mm.a = rt_work_view_into(in[0], s->a_perm, HLO_BF16, s->a_at ? base + s->a_at : NULL);
  mm.b = rt_work_view_into(in[1], s->b_perm, HLO_BF16, s->b_at ? base + s->b_at : NULL);
  if (packed && packable(s)) {
    if (!packed->stamp || *packed->slot != packed->stamp) {
      *packed->slot = 0;
      atomic_fetch_add(&packs, 1);
      if (!rt_cpu_matmul_bf16_pack(&mm, packed->data)) return false;
      *packed->slot = packed->stamp;
    }
    mm.b = packed->data;
    mm.b_packed = true;
  }
  if (!rt_cpu_matmul_bf16(&mm)) return false;
  if (epilogue) rt_parallel_for(out->count, RT_CPU_GRAIN, epilogue_items, (void *)epilogue);
  return true;
}

/* The bf16 rhs widened to f32 in packed, widened again only when its stamp changed. */
static const void *widened_rhs(const dot_setup *s, const rt_value *rhs, const rt_cpu_packed *packed) {
  if (!packed->stamp || *packed->slot != packed->stamp) {
    atomic_fetch_add(&packs, 1);
    rt_work_view_into(rhs, s->b_perm, HLO_F32, packed->data);
    *packed->slot = packed->stamp;
  }
  return packed->data;
}

/* The batch as one oneDNN matmul, then the epilogue over the whole result; false when
 * oneDNN made no primitive or failed (the caller's loop computes it instead). */
static bool dot_batched(const dot_setup *s, const void *a, const void *b, float *c, const rt_cpu_epilogue *epilogue) {
  rt_cpu_matmul mm = {.batch = s->batch, .m = s->m, .n = s->n, .k = s->k, .a_transposed = s->a_transposed,
                      .b_transposed = s->b_transposed, .c_type = HLO_F32, .a = a, .b = b, .c = c};
  if (!rt_cpu_matmul_f32(&mm)) return false;
  if (epilogue) rt_parallel_for(s->batch * s->m * s->n, RT_CPU_GRAIN, epilogue_items, (void *)epilogue);
  return true;
}

/* c = a x b for k > 0 and a non-empty result, a and b in the orders s says, the epilogue
 * (when c is the output) over what is computed. */
static void dot_products(const hlo_instr *instr, const dot_setup *s, const void *a, const void *b, void *c,
                         const rt_cpu_epilogue *epilogue, char *base) {
  int64_t m = s->m, n = s->n, k = s->k;
  dot_job j = {.f64 = s->work == HLO_F64, .a = a, .b = b, .c = c, .m = m, .n = n, .k = k,
               .blocks = (n + COL_BLOCK - 1) / COL_BLOCK, /* gemv's; split_grid sets the rest */
               .a_transposed = s->a_transposed, .b_transposed = s->b_transposed, .on_dnnl = product_on_dnnl(instr),
               .epilogue = epilogue};
  if (s->k_blocks) {
    j.k_blocks = s->k_blocks;
    j.partials = base + s->partials_at;
    /* each block one oneDNN call on the thread running it, never a team of its own */
    int team = j.on_dnnl ? omp_get_max_threads() : 0;
    if (j.on_dnnl) omp_set_num_threads(1);
    rt_parallel_for(s->k_blocks, 1, k_block_items, &j);
    if (j.on_dnnl) omp_set_num_threads(team);
    rt_parallel_for(n, 4096, k_block_sums, &j);
    return;
  }
  j.few_rows = few_rows(s);
  if (batched_on_dnnl(instr, s) && dot_batched(s, a, b, c, epilogue)) return;
  if (j.few_rows) j.blocks = (n + ROWS_COL_BLOCK - 1) / ROWS_COL_BLOCK;
  else if (m > 1) split_grid(&j, s->batch);
  /* an item is at most row_height * col_width * k multiply-adds (COL_BLOCK * k for
   * gemv, m * ROWS_COL_BLOCK * k for few rows); about a million make a task */
  int64_t per_item = m == 1       ? (n < COL_BLOCK ? n : COL_BLOCK) * k
                     : j.few_rows ? m * (n < ROWS_COL_BLOCK ? n : ROWS_COL_BLOCK) * k
                                  : j.row_height * j.col_width * k;
  int64_t grain = per_item >= (1 << 20) ? 1 : (1 << 20) / (per_item ? per_item : 1);
  /* oneDNN's sgemm on an item run on this thread uses the caller's team; a product too
   * small to split (under about a million multiply-adds) keeps to this thread: a team
   * woken for it costs more than the product, and far more on a busy machine, where
   * the woken thread waits for a core (an LSTM's step took 30x longer) */
  int team = j.on_dnnl ? rt_cpu_dnnl_team_begin() : 0;
  if (j.on_dnnl && s->batch * j.blocks <= grain) omp_set_num_threads(1);
  rt_parallel_for(s->batch * j.blocks, grain, dot_items, &j);
  if (j.on_dnnl) omp_set_num_threads(team);
}

bool rt_cpu_dot_with_epilogue(const hlo_instr *instr, const rt_value *const *in, rt_value *out,
                              const rt_cpu_epilogue *epilogue, void *scratch, const rt_cpu_packed *packed) {
  dot_setup s;
  dot_setup_for(instr, &s);
  char *base = scratch;
  if (s.bf16) return dot_bf16(&s, in, out, epilogue, base, packed);
  size_t size = hlo_dtype_size(s.work);
  void *c = s.in_place ? out->data : base + s.c_at;
  /* a work buffer is no output yet: then the epilogue runs after the store */
  const rt_cpu_epilogue *late = s.in_place ? NULL : epilogue;
  if (!s.in_place) epilogue = NULL;
  if (s.m * s.n * s.batch == 0) {
    /* nothing to compute */
  } else if (s.k == 0) {
    memset(c, 0, (size_t)(s.m * s.n * s.batch) * size);
    if (epilogue) epilogue->run(epilogue->ctx, 0, s.m * s.n * s.batch);
  } else {
    const void *a = rt_work_view_into(in[0], s.a_perm, s.operand_work, s.a_at ? base + s.a_at : NULL);
    const void *b = packed && packable(&s) ? widened_rhs(&s, in[1], packed)
                                           : rt_work_view_into(in[1], s.b_perm, s.operand_work, s.b_at ? base + s.b_at : NULL);
    dot_products(instr, &s, a, b, c, epilogue, base);
  }
  if (!s.in_place) {
    int identity[HLO_MAX_RANK];
    for (int d = 0; d < HLO_MAX_RANK; d++) identity[d] = d;
    rt_work_store(out, identity, c, s.work);
    if (late) late->run(late->ctx, 0, out->count);
  }
  return true;
}

/* The dot with all its working memory in scratch (dot_setup's bytes). */
static bool dot_run(const hlo_instr *instr, const rt_value *const *in, rt_value *out, void *scratch) {
  return rt_cpu_dot_with_epilogue(instr, in, out, NULL, scratch, NULL);
}

bool rt_cpu_is_dot_kernel(rt_cpu_scratch_kernel kernel) { return kernel == dot_run; }

static bool supported(const hlo_instr *instr) {
  if (instr->opcode != HLO_OP_DOT || !instr->dot || instr->operand_count != 2) return false;
  hlo_dtype t = instr->shape.dtype;
  if (t != HLO_F32 && t != HLO_F64 && t != HLO_F16 && t != HLO_BF16) return false;
  const hlo_shape *l = &instr->operands[0]->shape, *r = &instr->operands[1]->shape;
  if (!hlo_shape_is_array(l) || !hlo_shape_is_array(r)) return false;
  /* operands of the result's type, or bf16 ones summed into f32 (XLA's preferred element type) */
  bool widened = t == HLO_F32 && l->dtype == HLO_BF16 && r->dtype == HLO_BF16;
  if (!widened && (l->dtype != t || r->dtype != t)) return false;
  const hlo_dot_dims *dd = instr->dot;
  if (dd->lhs_batch.count != dd->rhs_batch.count || dd->lhs_contracting.count != dd->rhs_contracting.count)
    return false;
  /* BLAS takes int sizes */
  if (hlo_shape_elements(l) > INT32_MAX || hlo_shape_elements(r) > INT32_MAX || hlo_shape_elements(&instr->shape) > INT32_MAX)
    return false;
  return true;
}

rt_cpu_scratch_kernel rt_cpu_pick_dot_scratch(const hlo_instr *instr, int64_t *scratch_bytes) {
  if (!supported(instr)) return NULL;
  dot_setup s;
  dot_setup_for(instr, &s);
  *scratch_bytes = s.bytes;
  return dot_run;
}

bool rt_cpu_dot_product_on_dnnl(const hlo_instr *instr) {
  if (!rt_cpu_dot_on_dnnl() || !supported(instr) || instr->shape.dtype != HLO_F32) return false;
  dot_setup s;
  dot_setup_for(instr, &s);
  return s.work == HLO_F32 && !s.bf16 && s.m * s.n * s.batch != 0 && s.k != 0 && !few_rows(&s);
}

int64_t rt_cpu_dot_packed_bytes(const hlo_instr *instr) {
  if (!supported(instr)) return 0;
  dot_setup s;
  dot_setup_for(instr, &s);
  if (!packable(&s)) return 0;
  if (!s.bf16) return rt_cpu_aligned(s.k * s.n * (int64_t)sizeof(float)); /* the widened rhs */
  rt_cpu_matmul mm = {.batch = s.batch, .m = s.m, .n = s.n, .k = s.k, .a_transposed = s.a_transposed,
                      .b_transposed = s.b_transposed, .c_type = instr->shape.dtype};
  return rt_cpu_matmul_bf16_packed_bytes(&mm);
}
