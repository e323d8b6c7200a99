/* f32 products of a few rows against a matrix stored [n][k] (a Linear layer's weight at a
 * small batch: alexnet's classifier at batch 8 is 8 rows against 4096 x 9216 weights).
 *
 * Why not BLAS: sgemm packs the whole weight matrix into its own layout on every call, so
 * 151 MB of weights cross memory twice for eight rows of arithmetic (alexnet's first layer:
 * 15.9 ms a call through OpenBLAS against 12.4 here). Here each output column is one row of
 * B, read once, in order, with every row of A against it: the weights are streamed from
 * memory a single time (rows of A stay in cache). Three columns and up to four rows at a
 * time: twelve vector sums in registers, three loads from B and four from A for every twelve
 * products.
 *
 * Order: c[r][j] sums k in eight lanes (lane l takes k = l, l + 8, ...), adds the lanes as
 * ((0+4)+(1+5))+((2+6)+(3+7)), then adds the k % 8 last products in order. That is fixed by
 * the shapes alone: the same bits at any thread count and from every instruction set's
 * variant (the vectors are eight lanes wide in each; products and sums stay separate
 * operations, as -std=c11 compiles them). */
#include "kernel_internal.h"

typedef float v8 __attribute__((vector_size(32)));

enum { COLS = 3, ROWS = 4 };
_Static_assert(COLS == 3, "the tiles below are named and made for three columns");

/* The eight lanes' sum, in the order the header gives. */
#define LANES(v) ((((v)[0] + (v)[4]) + ((v)[1] + (v)[5])) + (((v)[2] + (v)[6]) + ((v)[3] + (v)[7])))

/* NAME##_tileRxC: c[r][j0 + q] for r < R, q < C; the loops have constant bounds, so the
 * compiler unrolls them and keeps the R * C sums in registers. */
#define DEFINE_TILE(NAME, R, C, ATTR)                                                                        \
  static inline ATTR void NAME##_tile##R##x##C(const float *a, const float *b, float *c, int64_t n, int64_t k, \
                                               int64_t j0) {                                                 \
    v8 sum[R][C];                                                                                            \
    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)                                                      \
      _Pragma("GCC unroll 3") for (int q = 0; q < C; q++) sum[r][q] = (v8){0};                               \
    const float *col = b + j0 * k;                                                                           \
    int64_t at = 0;                                                                                          \
    for (; at + 8 <= k; at += 8) {                                                                           \
      v8 w[C];                                                                                               \
      _Pragma("GCC unroll 3") for (int q = 0; q < C; q++) __builtin_memcpy(&w[q], col + q * k + at, sizeof w[q]); \
      _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {                                                  \
        v8 x;                                                                                                \
        __builtin_memcpy(&x, a + r * k + at, sizeof x);                                                      \
        _Pragma("GCC unroll 3") for (int q = 0; q < C; q++) sum[r][q] += x * w[q];                           \
      }                                                                                                      \
    }                                                                                                        \
    for (int r = 0; r < R; r++)                                                                              \
      for (int q = 0; q < C; q++) {                                                                          \
        float total = LANES(sum[r][q]);                                                                      \
        for (int64_t t = at; t < k; t++) total += a[r * k + t] * col[q * k + t];                             \
        c[r * n + j0 + q] = total;                                                                           \
      }                                                                                                      \
  }

/* NAME: rows [0, m) (all of them, m <= RT_CPU_DOT_ROWS) of c, columns [j0, j1). Columns
 * past the last whole tile are one row and one column at a time (a 1x1 tile: the same sums
 * in the same order). */
#define DEFINE_ROWS(NAME, ATTR)                                                                            \
  DEFINE_TILE(NAME, 1, 3, ATTR) /* 3: COLS, spelled out for the names */                                   \
  DEFINE_TILE(NAME, 2, 3, ATTR)                                                                            \
  DEFINE_TILE(NAME, 3, 3, ATTR)                                                                            \
  DEFINE_TILE(NAME, 4, 3, ATTR)                                                                            \
  DEFINE_TILE(NAME, 1, 1, ATTR)                                                                            \
  static ATTR void NAME(const float *a, const float *b, float *c, int64_t m, int64_t n, int64_t k, int64_t j0, \
                        int64_t j1) {                                                                      \
    for (int64_t r0 = 0; r0 < m; r0 += ROWS) {                                                             \
      const float *ar = a + r0 * k;                                                                        \
      float *cr = c + r0 * n;                                                                              \
      int64_t rows = m - r0 < ROWS ? m - r0 : ROWS, j = j0;                                                \
      for (; j + COLS <= j1; j += COLS) switch (rows) {                                                    \
          case 1: NAME##_tile1x3(ar, b, cr, n, k, j); break;                                               \
          case 2: NAME##_tile2x3(ar, b, cr, n, k, j); break;                                               \
          case 3: NAME##_tile3x3(ar, b, cr, n, k, j); break;                                               \
          default: NAME##_tile4x3(ar, b, cr, n, k, j); break;                                              \
        }                                                                                                  \
      for (; j < j1; j++)                                                                                  \
        for (int64_t r = 0; r < rows; r++) NAME##_tile1x1(ar + r * k, b, cr + r * n, n, k, j);             \
    }                                                                                                      \
  }

DEFINE_ROWS(rows_portable, __attribute__((flatten)))
#if RT_CPU_X86_VARIANTS
DEFINE_ROWS(rows_avx2, __attribute__((target("avx2"), flatten)))
DEFINE_ROWS(rows_avx512, __attribute__((target("avx512f"), flatten)))
#endif

typedef void (*rows_kernel)(const float *, const float *, float *, int64_t, int64_t, int64_t, int64_t, int64_t);

static const rows_kernel kernels[RT_CPU_ISA_COUNT] = {
    [RT_CPU_ISA_PORTABLE] = rows_portable,
#if RT_CPU_X86_VARIANTS
    [RT_CPU_ISA_AVX2] = rows_avx2,
    [RT_CPU_ISA_AVX512] = rows_avx512,
#endif
};

void rt_cpu_dot_rows_f32(const float *a, const float *b, float *c, int64_t m, int64_t n, int64_t k, int64_t col0,
                         int64_t col1) {
  kernels[rt_cpu_isa_in_use()](a, b, c, m, n, k, col0, col1);
}
