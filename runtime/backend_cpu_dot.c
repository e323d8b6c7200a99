/* dot through BLAS. Operands are seen as [batch][M][K] and [batch][K][N] (or [batch][N][K],
 * passed with the transpose flag instead of copied); rt_work_view from the reference
 * kernels makes the packing copy only when an operand is not already in one of those
 * orders, and converts f16/bf16 to f32 (the result is rounded once on store). The result's
 * dims are [batch, lhs free, rhs free]: row-major [batch][M][N] already. lhs as [batch][K][M]
 * goes by the transpose flag as well. Each (batch, block
 * of 64 rows) is one sgemm/dgemm call and one item of the parallel loop, with OpenBLAS
 * itself single-threaded, so large products use every core and small ones stay on the
 * caller's thread. A single-row product (batch-1 Linear layers) goes to gemv instead, split
 * into column blocks: gemm would pack the whole weight matrix first, for one row of
 * arithmetic, so the weights would cross memory three times instead of once. */
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "backend_cpu.h"
#include "kernels.h"
#include "parallel.h"

enum { ROW_BLOCK = 64, COL_BLOCK = 256 };

typedef struct dot_job {
  bool f64;
  const void *a, *b;
  void *c;
  int64_t m, n, k, blocks;
  bool a_transposed, b_transposed;
  const rt_cpu_epilogue *epilogue; /* f32 only: c is the output itself */
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
    else
      cblas_sgemv(CblasRowMajor, tb, rows, width, 1.0f, (const float *)j->b + b_at, ld, (const float *)j->a + a_at, 1,
                  0.0f, (float *)j->c + c_at, 1);
    if (j->epilogue) j->epilogue->run(j->epilogue->ctx, c_at, c_at + cols);
  }
}

static void dot_items(void *ctx, int64_t begin, int64_t end) {
  const dot_job *j = ctx;
  if (j->m == 1) {
    gemv_items(j, begin, end);
    return;
  }
  for (int64_t item = begin; item < end; item++) {
    int64_t batch = item / j->blocks, r0 = (item % j->blocks) * ROW_BLOCK;
    int64_t rows = j->m - r0 < ROW_BLOCK ? j->m - r0 : ROW_BLOCK;
    /* A is [m][k], or [k][m] whose rows r0.. are columns r0.. */
    int64_t a_at = j->a_transposed ? batch * j->m * j->k + r0 : (batch * j->m + r0) * j->k;
    int64_t b_at = batch * j->k * j->n, c_at = (batch * j->m + r0) * j->n;
    enum CBLAS_TRANSPOSE ta = j->a_transposed ? CblasTrans : CblasNoTrans;
    enum CBLAS_TRANSPOSE tb = j->b_transposed ? CblasTrans : CblasNoTrans;
    int lda = (int)(j->a_transposed ? j->m : j->k), ldb = (int)(j->b_transposed ? j->k : j->n);
    if (j->f64)
      cblas_dgemm(CblasRowMajor, ta, tb, (int)rows, (int)j->n, (int)j->k, 1.0, (const double *)j->a + a_at,
                  lda, (const double *)j->b + b_at, ldb, 0.0, (double *)j->c + c_at, (int)j->n);
    else
      cblas_sgemm(CblasRowMajor, ta, tb, (int)rows, (int)j->n, (int)j->k, 1.0f, (const float *)j->a + a_at,
                  lda, (const float *)j->b + b_at, ldb, 0.0f, (float *)j->c + c_at, (int)j->n);
    if (j->epilogue) j->epilogue->run(j->epilogue->ctx, c_at, c_at + rows * j->n);
  }
}

static bool is_identity(const int *perm, int rank) {
  for (int i = 0; i < rank; i++)
    if (perm[i] != i) return false;
  return true;
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

bool rt_cpu_dot_with_epilogue(const hlo_instr *instr, const rt_value *const *in, rt_value *out,
                              const rt_cpu_epilogue *epilogue) {
  const hlo_dot_dims *dd = instr->dot;
  const rt_value *lhs = in[0], *rhs = in[1];
  hlo_dtype work = rt_work_dtype(out->shape.dtype);
  int lhs_perm[HLO_MAX_RANK], lhs_t_perm[HLO_MAX_RANK], rhs_perm[HLO_MAX_RANK], rhs_t_perm[HLO_MAX_RANK];
  int64_t m, n, batch = 1, k = 1;
  order(&lhs->shape, &dd->lhs_batch, &dd->lhs_contracting, true, lhs_perm, &m);
  order(&lhs->shape, &dd->lhs_batch, &dd->lhs_contracting, false, lhs_t_perm, &m);
  order(&rhs->shape, &dd->rhs_batch, &dd->rhs_contracting, false, rhs_perm, &n);
  order(&rhs->shape, &dd->rhs_batch, &dd->rhs_contracting, true, rhs_t_perm, &n);
  for (int i = 0; i < dd->lhs_batch.count; i++) batch *= lhs->shape.dims[dd->lhs_batch.values[i]];
  for (int i = 0; i < dd->lhs_contracting.count; i++) k *= lhs->shape.dims[dd->lhs_contracting.values[i]];
  size_t size = hlo_dtype_size(work);
  bool in_place = out->shape.dtype == work;
  void *c = in_place ? out->data : malloc((size_t)(out->count + 1) * size);
  if (!c) return false;
  /* a work buffer is no output yet: then the epilogue runs after the store */
  const rt_cpu_epilogue *late = in_place ? NULL : epilogue;
  if (!in_place) epilogue = NULL;
  if (m * n * batch == 0) {
    /* nothing to compute */
  } else if (k == 0) {
    memset(c, 0, (size_t)(m * n * batch) * size);
    if (epilogue) epilogue->run(epilogue->ctx, 0, m * n * batch);
  } else {
    void *a_copy = NULL, *b_copy = NULL;
    bool b_transposed = rhs->shape.dtype == work && is_identity(rhs_t_perm, rhs->shape.rank) &&
                        !is_identity(rhs_perm, rhs->shape.rank);
    /* a [k][m] lhs (a weight gradient, x^T dy) is passed transposed too; with m == 1 both
     * orders are the same bytes, and gemv reads A as a plain vector */
    bool a_transposed = m > 1 && lhs->shape.dtype == work && is_identity(lhs_t_perm, lhs->shape.rank) &&
                        !is_identity(lhs_perm, lhs->shape.rank);
    const void *a = rt_work_view(lhs, a_transposed ? lhs_t_perm : lhs_perm, work, &a_copy);
    const void *b = rt_work_view(rhs, b_transposed ? rhs_t_perm : rhs_perm, work, &b_copy);
    if (!a || !b) {
      free(a_copy);
      free(b_copy);
      if (!in_place) free(c);
      return false;
    }
    dot_job j = {.f64 = work == HLO_F64, .a = a, .b = b, .c = c, .m = m, .n = n, .k = k,
                 .blocks = m == 1 ? (n + COL_BLOCK - 1) / COL_BLOCK : (m + ROW_BLOCK - 1) / ROW_BLOCK,
                 .a_transposed = a_transposed, .b_transposed = b_transposed, .epilogue = epilogue};
    /* an item is at most ROW_BLOCK * n * k multiply-adds (COL_BLOCK * k for gemv); about a
     * million make a task */
    int64_t per_item = m == 1 ? (n < COL_BLOCK ? n : COL_BLOCK) * k : (m < ROW_BLOCK ? m : ROW_BLOCK) * n * k;
    int64_t grain = per_item >= (1 << 20) ? 1 : (1 << 20) / (per_item ? per_item : 1);
    rt_parallel_for(batch * j.blocks, grain, dot_items, &j);
    free(a_copy);
    free(b_copy);
  }
  if (!in_place) {
    int identity[HLO_MAX_RANK];
    for (int d = 0; d < HLO_MAX_RANK; d++) identity[d] = d;
    rt_work_store(out, identity, c, work);
    free(c);
    if (late) late->run(late->ctx, 0, out->count);
  }
  return true;
}

static bool dot_kernel(const hlo_instr *instr, const rt_value *const *in, rt_value *out) {
  return rt_cpu_dot_with_epilogue(instr, in, out, NULL);
}

bool rt_cpu_is_dot_kernel(rt_cpu_kernel kernel) { return kernel == dot_kernel; }

rt_cpu_kernel rt_cpu_pick_dot(const hlo_instr *instr) {
  if (instr->opcode != HLO_OP_DOT || !instr->dot || instr->operand_count != 2) return NULL;
  hlo_dtype t = instr->shape.dtype;
  if (t != HLO_F32 && t != HLO_F64 && t != HLO_F16 && t != HLO_BF16) return NULL;
  const hlo_shape *l = &instr->operands[0]->shape, *r = &instr->operands[1]->shape;
  if (!hlo_shape_is_array(l) || !hlo_shape_is_array(r) || l->dtype != t || r->dtype != t) return NULL;
  const hlo_dot_dims *dd = instr->dot;
  if (dd->lhs_batch.count != dd->rhs_batch.count || dd->lhs_contracting.count != dd->rhs_contracting.count)
    return NULL;
  /* BLAS takes int sizes */
  if (hlo_shape_elements(l) > INT32_MAX || hlo_shape_elements(r) > INT32_MAX || hlo_shape_elements(&instr->shape) > INT32_MAX)
    return NULL;
  return dot_kernel;
}
