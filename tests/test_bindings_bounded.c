/* Bindings of a symbolic entry are bounded: a traced function called with
 * 10,000 distinct sizes keeps at most CAP_BINDINGS_KEPT (64) of them, the least recently
 * used dropped and built again when its size comes back, with right values throughout; and
 * a mean over a symbolic dim binds instead of compiling once per size. The count is what is
 * checked, not RSS (memory follows the count). */
#include <stdio.h>

#include "function_util.h"

static latch_runtime *open_backend(const char *backend) {
  latch_options options;
  latch_options_init(&options);
  options.backend = backend;
  options.cache = "memory";
  options.check = "off";
  return latch_open(&options);
}

/* y = x * 2 + 1 */
static latch_status affine(void *user, latch_tensor *const *in, int n, latch_tensor **out, int m) {
  (void)n, (void)m;
  latch_runtime *rt = user;
  latch_tensor *two = latch_scalar(rt, LATCH_F32, 2), *one = latch_scalar(rt, LATCH_F32, 1);
  latch_tensor *a = latch_binary(LATCH_MUL, in[0], two);
  out[0] = latch_binary(LATCH_ADD, a, one);
  latch_release(two), latch_release(one), latch_release(a);
  return LATCH_OK;
}

/* One call on x[rows, cols], x[i][j] = i * cols + j; true when y = 2x + 1 exactly. */
static bool call_affine(latch_function *f, latch_runtime *rt, int64_t rows, int64_t cols) {
  int64_t dims[2] = {rows, cols};
  latch_tensor *x = fu_ramp(rt, 2, dims, 1, 0), *y = NULL;
  bool ok = latch_call(f, &x, 1, NULL, 0, &y, 1) == LATCH_OK;
  double *v = ok ? fu_read(y) : NULL;
  for (int64_t i = 0; v && ok && i < rows * cols; i++) ok = v[i] == 2.0 * (double)i + 1;
  free(v);
  latch_release(x), latch_release(y);
  return ok && v;
}

/* (2, 3) traces, (3, 4) traces again with both dims symbolic (unequal sizes: two symbols,
 * not one shared by "duck sizing"); then every (rows, cols) in
 * [2, side + 1]^2 but those two is a new binding: side^2 - 2 of them, of at most
 * (side + 1)^2 elements, so memory would only grow with what is kept. */
static void bound_over_many_sizes(const char *backend, int side) {
  latch_runtime *rt = open_backend(backend);
  latch_function *f = latch_function_new_step(rt, affine, rt, NULL);
  bool right = call_affine(f, rt, 2, 3) && call_affine(f, rt, 3, 4);
  int sizes = side * side;
  for (int64_t rows = 2; rows < 2 + side; rows++)
    for (int64_t cols = 2; cols < 2 + side; cols++) {
      if ((rows == 2 && cols == 3) || (rows == 3 && cols == 4)) continue;
      right = call_affine(f, rt, rows, cols) && right;
    }
  CHECK_MSG(right, "%s: a binding computed wrong values", backend);
  latch_function_stats s;
  latch_function_get_stats(f, &s);
  CHECK_EQ_INT(s.traces, 2);
  CHECK_EQ_INT(s.instantiations, sizes - 2);
  CHECK_EQ_INT(s.bindings_kept, 64);
  CHECK_EQ_INT(s.bindings_dropped, sizes - 2 - 64);
  /* the first bound sizes were dropped long ago: built again, right, dropping another */
  CHECK(call_affine(f, rt, 2, 2));
  latch_function_get_stats(f, &s);
  CHECK_EQ_INT(s.instantiations, sizes - 1);
  CHECK_EQ_INT(s.bindings_kept, 64);
  CHECK_EQ_INT(s.bindings_dropped, sizes - 1 - 64);
  /* the last one is still kept: a plain hit, nothing built */
  CHECK(call_affine(f, rt, 1 + side, 1 + side));
  latch_function_get_stats(f, &s);
  CHECK_EQ_INT(s.instantiations, sizes - 1);
  latch_stats rs;
  latch_get_stats(rt, &rs);
  CHECK_EQ_INT(rs.compiles, 2); /* the two traces' graphs; the reference backend compiles too */
  latch_function_free(f);
  latch_close(rt);
}

static void cpu_ten_thousand_sizes(void) { bound_over_many_sizes("cpu", 100); }
static void reference_modules_bounded(void) { bound_over_many_sizes("reference", 17); }

/* y = mean(x, dim 0) */
static latch_status mean0(void *user, latch_tensor *const *in, int n, latch_tensor **out, int m) {
  (void)user, (void)n, (void)m;
  int dim = 0;
  out[0] = latch_reduce(LATCH_MEAN, in[0], 1, &dim, false);
  return LATCH_OK;
}

/* x[i][j] = 3i + j over n rows: the mean of column j is 3(n-1)/2 + j. Every size from 4 on
 * binds the executable compiled at 3 (where the batch became symbolic): 2 compiles in all. */
static void mean_over_a_symbolic_dim_binds(void) {
  latch_runtime *rt = open_backend("cpu");
  latch_function *f = latch_function_new_step(rt, mean0, NULL, NULL);
  for (int64_t n = 2; n <= 40; n++) {
    int64_t dims[2] = {n, 3};
    latch_tensor *x = fu_ramp(rt, 2, dims, 1, 0), *y = NULL;
    CHECK(latch_call(f, &x, 1, NULL, 0, &y, 1) == LATCH_OK);
    double *v = fu_read(y);
    for (int j = 0; v && j < 3; j++) CHECK_NEAR(v[j], 3.0 * (double)(n - 1) / 2 + j, 1e-6);
    CHECK(v != NULL);
    free(v);
    latch_release(x), latch_release(y);
  }
  latch_function_stats s;
  latch_function_get_stats(f, &s);
  latch_stats rs;
  latch_get_stats(rt, &rs);
  CHECK_EQ_INT(s.traces, 2);
  CHECK_EQ_INT(s.specializations, 0);
  CHECK_EQ_INT(s.instantiations, 37);
  CHECK_EQ_INT(rs.compiles, 2);
  latch_function_free(f);
  latch_close(rt);
}

int main(void) {
  RUN(mean_over_a_symbolic_dim_binds);
  RUN(reference_modules_bounded);
  RUN(cpu_ten_thousand_sizes);
  return TEST_REPORT();
}
