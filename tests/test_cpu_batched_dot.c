/* Batched f32 products on the cpu backend: a batch of matrices as one oneDNN matmul call
 * (dot.c's batched path) and as one sgemm per matrix (its loop), each against the reference
 * evaluator over batch sizes, row and column counts, depths, operands stored plain or
 * transposed, two batch dims, an operand that needs the packing copy, and a product with
 * elementwise work fused after it; and which path ran, by oneDNN's count of f32 matmuls. */
#include <stdio.h>

#include "cpu_util.h"
#include "runtime/cpu/kernel_internal.h"
#include "test.h"

/* [batch, m, k] (or [batch, k, m], a_t) x [batch, k, n] (or [batch, n, k], b_t). */
static void batched_text(char *text, size_t size, int64_t batch, int64_t m, int64_t n, int64_t k, bool a_t,
                         bool b_t) {
  long long B = batch, M = m, N = n, K = k;
  snprintf(text, size,
           "HloModule m\nENTRY e {\n a = f32[%lld,%lld,%lld] parameter(0)\n b = f32[%lld,%lld,%lld] parameter(1)\n"
           " ROOT d = f32[%lld,%lld,%lld] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={%d},"
           " rhs_batch_dims={0}, rhs_contracting_dims={%d}\n}\n",
           B, a_t ? K : M, a_t ? M : K, B, b_t ? N : K, b_t ? K : N, B, M, N, a_t ? 1 : 2, b_t ? 2 : 1);
}

/* text on both paths against the reference; expect_batched: whether the forced batched path
 * should have made oneDNN matmul calls (one per run). */
static void expect_both_paths(const char *text, int seed, bool expect_batched) {
  rt_cpu_dot_use_batched(0);
  int64_t before = rt_cpu_matmul_f32_runs();
  expect_same_as_reference(text, seed);
  CHECK_MSG(rt_cpu_matmul_f32_runs() == before, "the per-matrix loop called oneDNN's matmul\n%s", text);
  rt_cpu_dot_use_batched(1);
  before = rt_cpu_matmul_f32_runs();
  expect_same_as_reference(text, seed);
  int64_t runs = rt_cpu_matmul_f32_runs() - before;
  CHECK_MSG(runs == (expect_batched ? 1 : 0), "%lld matmul calls, want %d\n%s", (long long)runs, expect_batched ? 1 : 0,
            text);
  rt_cpu_dot_use_batched(-1);
}

static void test_shapes(void) {
  static const int64_t batches[] = {2, 3, 12}, rows[] = {2, 7, 64, 130}, cols[] = {1, 5, 64, 200}, depths[] = {1, 9, 64};
  char text[1024];
  int seed = 1;
  for (int bi = 0; bi < 3; bi++)
    for (int mi = 0; mi < 4; mi++)
      for (int ni = 0; ni < 4; ni++)
        for (int ki = 0; ki < 3; ki++)
          for (int t = 0; t < 4; t++) {
            /* a sample of the grid: every shape once, the orders by turn */
            if ((bi + mi + ni + ki) % 4 != t) continue;
            bool a_t = t & 1, b_t = t & 2;
            int64_t m = rows[mi];
            batched_text(text, sizeof text, batches[bi], m, cols[ni], depths[ki], a_t, b_t);
            /* a few rows against a matrix stored [n][k] keep dot_rows.c's path */
            bool few_rows = m <= RT_CPU_DOT_ROWS && b_t && !a_t;
            expect_both_paths(text, seed++, !few_rows);
          }
}

/* Batch dims that are not one leading dim: [B, H, S, d] queries against keys of the same
 * layout (two batch dims, B taken transposed), and a batch dim in the middle of the lhs,
 * which the packing copy puts first. */
static void test_layouts(void) {
  expect_both_paths("HloModule m\nENTRY e {\n q = f32[2,3,17,8] parameter(0)\n k = f32[2,3,19,8] parameter(1)\n"
                    " ROOT s = f32[2,3,17,19] dot(q, k), lhs_batch_dims={0,1}, lhs_contracting_dims={3},"
                    " rhs_batch_dims={0,1}, rhs_contracting_dims={3}\n}\n",
                    101, true);
  expect_both_paths("HloModule m\nENTRY e {\n a = f32[17,4,8] parameter(0)\n b = f32[4,8,10] parameter(1)\n"
                    " ROOT d = f32[4,17,10] dot(a, b), lhs_batch_dims={1}, lhs_contracting_dims={2},"
                    " rhs_batch_dims={0}, rhs_contracting_dims={1}\n}\n",
                    102, true);
  /* a single row per matrix stays on gemv; one matrix is no batch */
  expect_both_paths("HloModule m\nENTRY e {\n a = f32[6,1,8] parameter(0)\n b = f32[6,8,10] parameter(1)\n"
                    " ROOT d = f32[6,1,10] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2},"
                    " rhs_batch_dims={0}, rhs_contracting_dims={1}\n}\n",
                    103, false);
  expect_both_paths("HloModule m\nENTRY e {\n a = f32[1,9,8] parameter(0)\n b = f32[1,8,10] parameter(1)\n"
                    " ROOT d = f32[1,9,10] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2},"
                    " rhs_batch_dims={0}, rhs_contracting_dims={1}\n}\n",
                    104, false);
}

/* Elementwise work after the product (a bias and tanh, fused after it where the plan fuses
 * them), and an f16 result, which the product computes in f32 scratch and rounds on store. */
static void test_after(void) {
  expect_both_paths("HloModule m\nENTRY e {\n a = f32[4,33,16] parameter(0)\n b = f32[4,16,40] parameter(1)\n"
                    " c = f32[40] parameter(2)\n"
                    " d = f32[4,33,40] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2},"
                    " rhs_batch_dims={0}, rhs_contracting_dims={1}\n"
                    " cb = f32[4,33,40] broadcast(c), dimensions={2}\n s = f32[4,33,40] add(d, cb)\n"
                    " ROOT t = f32[4,33,40] tanh(s)\n}\n",
                    201, true);
  /* f16 operands are widened to f32 copies first: the batched path takes those too */
  expect_both_paths("HloModule m\nENTRY e {\n a = f16[3,20,16] parameter(0)\n b = f16[3,16,12] parameter(1)\n"
                    " ROOT d = f16[3,20,12] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2},"
                    " rhs_batch_dims={0}, rhs_contracting_dims={1}\n}\n",
                    202, true);
}

int main(void) {
  /* oneDNN's f32 products are the batched path's precondition; on a processor whose f32
   * gemm stays on OpenBLAS they are turned on here, so every machine tests both paths */
  bool dnnl_products = rt_cpu_dot_on_dnnl();
  rt_cpu_dot_use_dnnl(true);
  RUN(test_shapes);
  RUN(test_layouts);
  RUN(test_after);
  rt_cpu_dot_use_dnnl(dnnl_products);
  return TEST_REPORT();
}
