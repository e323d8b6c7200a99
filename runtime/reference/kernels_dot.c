/* dot, and the pieces convolution shares with it: copies into a work type with permuted
 * dimensions, and a small packed matrix multiply.
 *
 * A dot is a batch of matrix products once its operands are copied to [batch][free][contract]
 * and [batch][contract][free]. The product runs on packed operands so its inner loop is a
 * fixed 4x8 (or 1x8) block of accumulators that the compiler keeps in vector registers: A's
 * rows are interleaved in blocks of four, B is cut into panels of eight columns. That is
 * plain C with no BLAS, so the reference stays independent of the optimized backends.
 *
 * Accumulation is in the work type: double for f64 storage, float for f32, f16 and bf16 (as
 * XLA's evaluator does), rounded to the element type once at the end; integers accumulate
 * in 64-bit unsigned arithmetic, which wraps exactly as the narrower result type would. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reference.h"

enum { GEMM_ROWS = 4 };

/* ---------------------------------------------------------------------------------------
 * Work-type copies */

hlo_dtype rt_work_dtype(hlo_dtype storage) {
  if (storage == HLO_F64) return HLO_F64;
  if (hlo_dtype_is_float(storage)) return HLO_F32;
  return HLO_S64;
}

/* n elements of value from flat index `at`, `stride` apart, into dst as work elements. The
 * common same-type cases get plain loops; the rest convert element by element. */
static void load_row(const rt_value *value, int64_t at, int64_t stride, int64_t n, hlo_dtype work,
                     void *dst) {
  hlo_dtype from = value->shape.dtype;
  if (work == HLO_F32 && from == HLO_F32) {
    const float *s = (const float *)value->data + at;
    float *d = dst;
    for (int64_t i = 0; i < n; i++) d[i] = s[i * stride];
  } else if (work == HLO_F64 && from == HLO_F64) {
    const double *s = (const double *)value->data + at;
    double *d = dst;
    for (int64_t i = 0; i < n; i++) d[i] = s[i * stride];
  } else if (work == from && hlo_dtype_size(work) == 2 && hlo_dtype_is_float(work)) {
    /* f16 or bf16 kept as it is (a bf16 product's operands, for a library that takes them) */
    const uint16_t *s = (const uint16_t *)value->data + at;
    uint16_t *d = dst;
    for (int64_t i = 0; i < n; i++) d[i] = s[i * stride];
  } else if (work == HLO_F32 && from == HLO_BF16) {
    /* bf16 is f32's upper half: widened by a shift (a bf16 product's operands on the f32 path) */
    const uint16_t *s = (const uint16_t *)value->data + at;
    float *d = dst;
    for (int64_t i = 0; i < n; i++) {
      uint32_t bits = (uint32_t)s[i * stride] << 16;
      memcpy(&d[i], &bits, sizeof bits);
    }
  } else if (work == HLO_F64) {
    double *d = dst;
    for (int64_t i = 0; i < n; i++) d[i] = rt_get_f64(value, at + i * stride);
  } else if (work == HLO_F32) {
    float *d = dst;
    for (int64_t i = 0; i < n; i++) d[i] = (float)rt_get_f64(value, at + i * stride);
  } else {
    int64_t *d = dst;
    for (int64_t i = 0; i < n; i++) d[i] = rt_get_i64(value, at + i * stride);
  }
}

static void store_row(rt_value *out, int64_t at, int64_t stride, int64_t n, hlo_dtype work,
                      const void *src) {
  hlo_dtype to = out->shape.dtype;
  if (work == HLO_F32 && to == HLO_F32) {
    float *d = (float *)out->data + at;
    const float *s = src;
    for (int64_t i = 0; i < n; i++) d[i * stride] = s[i];
  } else if (work == HLO_F64 && to == HLO_F64) {
    double *d = (double *)out->data + at;
    const double *s = src;
    for (int64_t i = 0; i < n; i++) d[i * stride] = s[i];
  } else if (work == HLO_F32 && to == HLO_BF16) {
    /* rounded as rt_set_f64 rounds an f32 value (hlo_f32_to_bf16 rounds alike), without the detour */
    uint16_t *d = (uint16_t *)out->data + at;
    const float *s = src;
    for (int64_t i = 0; i < n; i++) d[i * stride] = hlo_f32_to_bf16(s[i]);
  } else if (work == HLO_F64) {
    const double *s = src;
    for (int64_t i = 0; i < n; i++) rt_set_f64(out, at + i * stride, s[i]);
  } else if (work == HLO_F32) {
    const float *s = src;
    for (int64_t i = 0; i < n; i++) rt_set_f64(out, at + i * stride, s[i]);
  } else {
    const int64_t *s = src;
    for (int64_t i = 0; i < n; i++) rt_set_i64(out, at + i * stride, s[i]);
  }
}

/* A value seen through a permutation of its dimensions: view dimension j is the value's
 * dimension perm[j], with that dimension's stride in the value. */
typedef struct permuted_view {
  int rank;
  int64_t dims[HLO_MAX_RANK], strides[HLO_MAX_RANK], count;
} permuted_view;

static permuted_view view_of(const hlo_shape *shape, const int *perm) {
  permuted_view view = {.rank = shape->rank, .count = 1};
  int64_t strides[HLO_MAX_RANK];
  hlo_shape_strides(shape, strides);
  for (int j = 0; j < shape->rank; j++) {
    view.dims[j] = shape->dims[perm[j]];
    view.strides[j] = strides[perm[j]];
    view.count *= view.dims[j];
  }
  return view;
}

/* Runs BODY for each row (the last view dimension; 1 element for scalars) in row-major
 * order: `done` is the row's start in the dense view, `at` its first element's flat index in
 * the value, `row_len` and `row_stride` its length and stride in the value. */
#define FOR_EACH_ROW(view, row_len, row_stride, at, done, BODY)                           \
  do {                                                                                  \
    int last_ = (view).rank - 1;                                                        \
    int64_t row_len = last_ >= 0 ? (view).dims[last_] : 1;                              \
    int64_t row_stride = last_ >= 0 ? (view).strides[last_] : 0;                        \
    int64_t coords_[HLO_MAX_RANK] = {0}, at = 0;                                        \
    for (int64_t done = 0; row_len > 0 && done < (view).count; done += row_len) {       \
      BODY;                                                                             \
      for (int j_ = last_ - 1; j_ >= 0; j_--) {                                         \
        at += (view).strides[j_];                                                       \
        if (++coords_[j_] < (view).dims[j_]) break;                                     \
        at -= (view).strides[j_] * (view).dims[j_];                                     \
        coords_[j_] = 0;                                                                \
      }                                                                                 \
    }                                                                                   \
  } while (0)

static void work_fill(const rt_value *value, const int *perm, hlo_dtype work, char *dst) {
  permuted_view view = view_of(&value->shape, perm);
  size_t size = hlo_dtype_size(work);
  FOR_EACH_ROW(view, n, stride, at, done, load_row(value, at, stride, n, work, dst + (size_t)done * size));
}

static void *work_copy(const rt_value *value, const int *perm, hlo_dtype work) {
  int64_t count = hlo_shape_elements(&value->shape);
  char *dst = hlo_malloc((size_t)(count > 0 ? count : 1) * hlo_dtype_size(work));
  if (dst) work_fill(value, perm, work, dst);
  return dst;
}

bool rt_perm_is_identity(const int *perm, int rank) {
  for (int j = 0; j < rank; j++)
    if (perm[j] != j) return false;
  return true;
}

const void *rt_work_view(const rt_value *value, const int *perm, hlo_dtype work, void **owned) {
  *owned = NULL;
  if (value->shape.dtype == work && rt_perm_is_identity(perm, value->shape.rank)) return value->data;
  *owned = work_copy(value, perm, work);
  return *owned;
}

bool rt_work_view_copies(const hlo_shape *shape, const int *perm, hlo_dtype work) {
  return shape->dtype != work || !rt_perm_is_identity(perm, shape->rank);
}

const void *rt_work_view_into(const rt_value *value, const int *perm, hlo_dtype work, void *space) {
  if (!rt_work_view_copies(&value->shape, perm, work)) return value->data;
  work_fill(value, perm, work, space);
  return space;
}

void rt_work_store(rt_value *out, const int *perm, const void *data, hlo_dtype work) {
  permuted_view view = view_of(&out->shape, perm);
  size_t size = hlo_dtype_size(work);
  const char *src = data;
  FOR_EACH_ROW(view, n, stride, at, done, store_row(out, at, stride, n, work, src + (size_t)done * size));
}

/* ---------------------------------------------------------------------------------------
 * Packed matrix multiply. Rows of A come in blocks of four, each stored k-major
 * (block[q * 4 + r]); the m % 4 rows left over are stored plainly after the blocks. */

#define DEFINE_GEMM(T, S)                                                                  \
  static void pack_rows_##S(const T *a, int64_t m, int64_t k, int64_t row_stride, T *packed) { \
    int64_t blocks = m / GEMM_ROWS;                                                        \
    for (int64_t b = 0; b < blocks; b++, packed += GEMM_ROWS * k)                          \
      for (int r = 0; r < GEMM_ROWS; r++) {                                                \
        const T *row = a + (b * GEMM_ROWS + r) * row_stride;                               \
        for (int64_t q = 0; q < k; q++) packed[q * GEMM_ROWS + r] = row[q];                \
      }                                                                                    \
    for (int64_t r = blocks * GEMM_ROWS; r < m; r++, packed += k)                          \
      memcpy(packed, a + r * row_stride, (size_t)k * sizeof(T));                           \
  }                                                                                        \
  /* Fixed trip counts let the compiler keep acc in registers and vectorize over j. */    \
  static void block4_##S(const T *a, int64_t k, const T *panel, int cols, T *c, int64_t ldc, \
                         bool accumulate) {                                                \
    T acc[GEMM_ROWS][RT_GEMM_COLS] = {{0}};                                                \
    for (int r = 0; accumulate && r < GEMM_ROWS; r++)                                      \
      for (int j = 0; j < cols; j++) acc[r][j] = c[r * ldc + j];                           \
    for (int64_t q = 0; q < k; q++) {                                                      \
      const T *w = a + q * GEMM_ROWS, *b = panel + q * RT_GEMM_COLS;                       \
      for (int r = 0; r < GEMM_ROWS; r++)                                                  \
        for (int j = 0; j < RT_GEMM_COLS; j++) acc[r][j] += w[r] * b[j];                   \
    }                                                                                      \
    for (int r = 0; r < GEMM_ROWS; r++)                                                    \
      for (int j = 0; j < cols; j++) c[r * ldc + j] = acc[r][j];                           \
  }                                                                                        \
  static void block1_##S(const T *a, int64_t k, const T *panel, int cols, T *c, bool accumulate) { \
    T acc[RT_GEMM_COLS] = {0};                                                             \
    for (int j = 0; accumulate && j < cols; j++) acc[j] = c[j];                            \
    for (int64_t q = 0; q < k; q++) {                                                      \
      const T *b = panel + q * RT_GEMM_COLS;                                               \
      for (int j = 0; j < RT_GEMM_COLS; j++) acc[j] += a[q] * b[j];                        \
    }                                                                                      \
    for (int j = 0; j < cols; j++) c[j] = acc[j];                                          \
  }                                                                                        \
  static void panel_##S(const T *packed, int64_t m, int64_t k, const T *panel, int cols,    \
                        T *c, int64_t ldc, bool accumulate) {                              \
    int64_t blocks = m / GEMM_ROWS;                                                        \
    for (int64_t b = 0; b < blocks; b++)                                                   \
      block4_##S(packed + b * GEMM_ROWS * k, k, panel, cols, c + b * GEMM_ROWS * ldc, ldc, accumulate); \
    for (int64_t r = blocks * GEMM_ROWS; r < m; r++)                                       \
      block1_##S(packed + r * k, k, panel, cols, c + r * ldc, accumulate);                 \
  }

DEFINE_GEMM(float, f32)
DEFINE_GEMM(double, f64)

void rt_gemm_pack_rows(hlo_dtype work, const void *a, int64_t m, int64_t k, int64_t row_stride,
                       void *packed) {
  if (work == HLO_F64) pack_rows_f64(a, m, k, row_stride, packed);
  else pack_rows_f32(a, m, k, row_stride, packed);
}

void rt_gemm_panel(hlo_dtype work, const void *packed, int64_t m, int64_t k, const void *panel,
                   int cols, void *c, int64_t ldc, bool accumulate) {
  if (work == HLO_F64) panel_f64(packed, m, k, panel, cols, c, ldc, accumulate);
  else panel_f32(packed, m, k, panel, cols, c, ldc, accumulate);
}

/* Copies columns [n0, n0 + cols) of the k x n row-major matrix b into a panel, zero-filling
 * the columns past the end (their results are computed and dropped). */
static void fill_panel(hlo_dtype work, const void *b, int64_t k, int64_t n, int64_t n0, int cols,
                       void *panel) {
  size_t size = hlo_dtype_size(work);
  memset(panel, 0, (size_t)k * RT_GEMM_COLS * size);
  for (int64_t q = 0; q < k; q++)
    memcpy((char *)panel + (size_t)(q * RT_GEMM_COLS) * size,
           (const char *)b + (size_t)(q * n + n0) * size, (size_t)cols * size);
}

/* ---------------------------------------------------------------------------------------
 * dot */

/* The dimension numbers sorted into roles; free dims keep their operand order. */
typedef struct dot_plan {
  int batch_count, lhs_free_count, rhs_free_count, contract_count;
  int lhs_perm[HLO_MAX_RANK]; /* batch, free, contracting: gives [B][M][K] */
  int rhs_perm[HLO_MAX_RANK]; /* batch, contracting, free: gives [B][K][N] */
  int64_t batch, m, n, k;
  hlo_shape result;           /* dims only */
} dot_plan;

static const char *mark_dims(const hlo_ints *list, int rank, bool *used) {
  for (int i = 0; i < list->count; i++) {
    int64_t d = list->values[i];
    if (d < 0 || d >= rank) return "a dimension number is out of range";
    if (used[d]) return "a dimension is listed twice";
    used[d] = true;
  }
  return NULL;
}

static const char *plan_dot(const hlo_dot_dims *dims, const hlo_shape *lhs, const hlo_shape *rhs,
                            dot_plan *plan) {
  static const hlo_ints none = {0, NULL};
  const hlo_ints *lb = dims ? &dims->lhs_batch : &none, *lc = dims ? &dims->lhs_contracting : &none;
  const hlo_ints *rb = dims ? &dims->rhs_batch : &none, *rc = dims ? &dims->rhs_contracting : &none;
  if (lb->count != rb->count) return "lhs and rhs have different numbers of batch dimensions";
  if (lc->count != rc->count) return "lhs and rhs have different numbers of contracting dimensions";
  bool lhs_used[HLO_MAX_RANK] = {false}, rhs_used[HLO_MAX_RANK] = {false};
  const char *error = mark_dims(lb, lhs->rank, lhs_used);
  if (!error) error = mark_dims(lc, lhs->rank, lhs_used);
  if (!error) error = mark_dims(rb, rhs->rank, rhs_used);
  if (!error) error = mark_dims(rc, rhs->rank, rhs_used);
  if (error) return error;
  *plan = (dot_plan){.batch = 1, .m = 1, .n = 1, .k = 1};
  plan->result.dtype = HLO_INVALID;
  int lp = 0, rp = 0, rank = 0;
  for (int i = 0; i < lb->count; i++) {
    int64_t size = lhs->dims[lb->values[i]];
    if (size != rhs->dims[rb->values[i]]) return "batch dimension sizes differ";
    plan->lhs_perm[lp++] = (int)lb->values[i];
    plan->rhs_perm[rp++] = (int)rb->values[i];
    plan->result.dims[rank++] = size;
    plan->batch *= size;
  }
  for (int d = 0; d < lhs->rank; d++)
    if (!lhs_used[d]) {
      plan->lhs_perm[lp++] = d;
      plan->result.dims[rank++] = lhs->dims[d];
      plan->m *= lhs->dims[d];
      plan->lhs_free_count++;
    }
  for (int i = 0; i < lc->count; i++) {
    int64_t size = lhs->dims[lc->values[i]];
    if (size != rhs->dims[rc->values[i]]) return "contracting dimension sizes differ";
    plan->lhs_perm[lp++] = (int)lc->values[i];
    plan->rhs_perm[rp++] = (int)rc->values[i];
    plan->k *= size;
  }
  for (int d = 0; d < rhs->rank; d++)
    if (!rhs_used[d]) {
      plan->rhs_perm[rp++] = d;
      plan->result.dims[rank++] = rhs->dims[d];
      plan->n *= rhs->dims[d];
      plan->rhs_free_count++;
    }
  plan->batch_count = lb->count;
  plan->contract_count = lc->count;
  plan->result.rank = rank;
  return NULL;
}

/* C[b] = A[b] x B[b] for integers: 64-bit unsigned products and sums wrap like the result. */
static void matmul_int(const dot_plan *p, const int64_t *a, const int64_t *b, int64_t *c) {
  for (int64_t t = 0; t < p->batch; t++) {
    const uint64_t *at = (const uint64_t *)a + t * p->m * p->k;
    const uint64_t *bt = (const uint64_t *)b + t * p->k * p->n;
    uint64_t *ct = (uint64_t *)c + t * p->m * p->n;
    for (int64_t i = 0; i < p->m; i++)
      for (int64_t q = 0; q < p->k; q++) {
        uint64_t x = at[i * p->k + q];
        for (int64_t j = 0; j < p->n; j++) ct[i * p->n + j] += x * bt[q * p->n + j];
      }
  }
}

/* C[b] (m x n) = A[b] (m x k) x B[b] (k x n) in a float work type. */
static bool matmul_float(hlo_dtype work, int64_t batch, int64_t m, int64_t n, int64_t k,
                         const void *a, const void *b, void *c) {
  size_t size = hlo_dtype_size(work);
  void *packed = hlo_malloc((size_t)(m * k > 0 ? m * k : 1) * size);
  void *panel = hlo_malloc((size_t)(k > 0 ? k : 1) * RT_GEMM_COLS * size);
  bool ok = packed && panel;
  for (int64_t t = 0; ok && t < batch; t++) {
    const char *bt = (const char *)b + (size_t)(t * k * n) * size;
    char *ct = (char *)c + (size_t)(t * m * n) * size;
    rt_gemm_pack_rows(work, (const char *)a + (size_t)(t * m * k) * size, m, k, k, packed);
    for (int64_t n0 = 0; n0 < n; n0 += RT_GEMM_COLS) {
      int cols = (int)(n - n0 < RT_GEMM_COLS ? n - n0 : RT_GEMM_COLS);
      fill_panel(work, bt, k, n, n0, cols, panel);
      rt_gemm_panel(work, packed, m, k, panel, cols, ct + (size_t)n0 * size, n, false);
    }
  }
  free(packed);
  free(panel);
  return ok;
}

RT_KERNEL(rt_kernel_dot) {
  if (instr->operand_count != 2) return rt_kernel_fail(eval, instr, HLO_ERR_INPUT, "needs two operands");
  const rt_value *lhs = args[0], *rhs = args[1];
  if (lhs->shape.dtype == HLO_TUPLE || rhs->shape.dtype == HLO_TUPLE)
    return rt_kernel_fail(eval, instr, HLO_ERR_INPUT, "operands must be arrays");
  dot_plan plan;
  const char *error = plan_dot(instr->dot, &lhs->shape, &rhs->shape, &plan);
  if (error) return rt_kernel_fail(eval, instr, HLO_ERR_INPUT, "%s", error);
  bool same = plan.result.rank == instr->shape.rank;
  for (int d = 0; same && d < plan.result.rank; d++) same = plan.result.dims[d] == instr->shape.dims[d];
  if (!same) return rt_kernel_fail(eval, instr, HLO_ERR_INPUT, "the result shape does not match the dimension numbers");
  rt_value *result = rt_new_output(eval, instr, &instr->shape);
  if (!result) return eval->diag->status;
  hlo_dtype work = rt_work_dtype(result->shape.dtype);

  /* The panels are RT_GEMM_COLS wide, so a thin right operand (a matrix-vector product)
   * would waste most of each; computing the transposed product instead, C^T = B^T A^T,
   * puts the wide side in the panels. */
  bool swap = work != HLO_S64 && plan.n < RT_GEMM_COLS && plan.m > plan.n;
  int a_perm[HLO_MAX_RANK], b_perm[HLO_MAX_RANK], c_perm[HLO_MAX_RANK];
  int nb = plan.batch_count, nc = plan.contract_count, nlf = plan.lhs_free_count, nrf = plan.rhs_free_count;
  for (int i = 0; i < nb + nlf + nrf; i++) c_perm[i] = i;
  const rt_value *a_value = lhs, *b_value = rhs;
  memcpy(a_perm, plan.lhs_perm, sizeof a_perm);
  memcpy(b_perm, plan.rhs_perm, sizeof b_perm);
  int64_t m = plan.m, n = plan.n;
  if (swap) {
    a_value = rhs;
    b_value = lhs;
    /* rhs as [batch][rhs free][contracting], lhs as [batch][contracting][lhs free] */
    memcpy(a_perm, plan.rhs_perm, sizeof(int) * (size_t)nb);
    memcpy(a_perm + nb, plan.rhs_perm + nb + nc, sizeof(int) * (size_t)nrf);
    memcpy(a_perm + nb + nrf, plan.rhs_perm + nb, sizeof(int) * (size_t)nc);
    memcpy(b_perm, plan.lhs_perm, sizeof(int) * (size_t)nb);
    memcpy(b_perm + nb, plan.lhs_perm + nb + nlf, sizeof(int) * (size_t)nc);
    memcpy(b_perm + nb + nc, plan.lhs_perm + nb, sizeof(int) * (size_t)nlf);
    for (int i = 0; i < nrf; i++) c_perm[nb + i] = nb + nlf + i;
    for (int i = 0; i < nlf; i++) c_perm[nb + nrf + i] = nb + i;
    m = plan.n;
    n = plan.m;
  }
  void *a_copy = NULL, *b_copy = NULL;
  const void *a = rt_work_view(a_value, a_perm, work, &a_copy);
  const void *b = rt_work_view(b_value, b_perm, work, &b_copy);
  void *c = hlo_calloc((size_t)(result->count > 0 ? result->count : 1), hlo_dtype_size(work));
  bool ok = a && b && c;
  if (ok && work == HLO_S64) matmul_int(&plan, a, b, c);
  else if (ok) ok = matmul_float(work, plan.batch, m, n, plan.k, a, b, c);
  if (ok) rt_work_store(result, c_perm, c, work);
  free(a_copy);
  free(b_copy);
  free(c);
  if (!ok) {
    rt_value_release(result);
    return rt_kernel_fail(eval, instr, HLO_ERR_INTERNAL, "out of memory");
  }
  *out = result;
  return HLO_OK;
}
