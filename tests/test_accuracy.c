/* The accuracy check on hand-made results whose errors are worked out by hand. */
#include "eval_util.h"
#include "runtime/runtime.h"
#include "runtime/reference/reference.h"

static rt_value *vec(hlo_dtype dtype, int n, const double *x) {
  int64_t dims[1] = {n};
  return make_value(dtype, 1, dims, x);
}

static rt_accuracy_verdict compare(rt_value *r, rt_value *d, rt_value *f, double tol) {
  rt_accuracy_verdict v;
  hlo_diag diag = {HLO_OK, ""};
  CHECK_EQ_INT(rt_accuracy_compare(r, d, f, tol, &v, &diag), HLO_OK);
  rt_value_release(r);
  rt_value_release(d);
  rt_value_release(f);
  return v;
}

static void test_float_bound(void) {
  /* reference - fp64 = (0.1, -0.1): rmse 0.1, bound 2 * 0.1 + 0.001 = 0.201 */
  double truth[2] = {1, 2}, ref[2] = {1.1, 1.9};
  double ok[2] = {1.2, 1.8};     /* rmse 0.2 <= 0.201 */
  double bad[2] = {1.21, 1.79};  /* rmse 0.21 > 0.201 */
  rt_accuracy_verdict v = compare(vec(HLO_F64, 2, ok), vec(HLO_F64, 2, ref), vec(HLO_F64, 2, truth), 1e-3);
  CHECK(v.passed);
  CHECK_EQ_INT(v.failed_output, -1);
  v = compare(vec(HLO_F64, 2, bad), vec(HLO_F64, 2, ref), vec(HLO_F64, 2, truth), 1e-3);
  CHECK(!v.passed);
  CHECK_EQ_INT(v.failed_output, 0);
  CHECK(strstr(v.message, "output 0") != NULL);
  CHECK(strstr(v.message, "0.21") != NULL);
  /* f16 gets m = 3 (values f16 holds exactly): rmse 0.3125 against a reference's 0.125 */
  double t16[2] = {1, 2}, r16[2] = {1.125, 1.875}, x16[2] = {1.3125, 1.6875};
  v = compare(vec(HLO_F16, 2, x16), vec(HLO_F16, 2, r16), vec(HLO_F64, 2, t16), 0);
  CHECK(v.passed); /* 0.3125 <= 3 * 0.125 */
  v = compare(vec(HLO_F32, 2, x16), vec(HLO_F32, 2, r16), vec(HLO_F64, 2, t16), 0);
  CHECK(!v.passed); /* 0.3125 > 2 * 0.125 */
  /* tol alone lets an exact reference and a slightly off result pass */
  double near[2] = {1.0005, 2.0005};
  v = compare(vec(HLO_F32, 2, near), vec(HLO_F32, 2, truth), vec(HLO_F64, 2, truth), 1e-3);
  CHECK(v.passed);
  v = compare(vec(HLO_F32, 2, near), vec(HLO_F32, 2, truth), vec(HLO_F64, 2, truth), 1e-4);
  CHECK(!v.passed);
}

static void test_nonfinite(void) {
  double truth[3] = {1, INFINITY, NAN}, ref[3] = {1, INFINITY, NAN};
  double same[3] = {1, INFINITY, NAN}, nan_lost[3] = {1, INFINITY, 0}, sign[3] = {1, -INFINITY, NAN};
  rt_accuracy_verdict v = compare(vec(HLO_F32, 3, same), vec(HLO_F32, 3, ref), vec(HLO_F64, 3, truth), 0);
  CHECK(v.passed);
  v = compare(vec(HLO_F32, 3, nan_lost), vec(HLO_F32, 3, ref), vec(HLO_F64, 3, truth), 1e-3);
  CHECK(!v.passed);
  CHECK(strstr(v.message, "element 2") != NULL);
  v = compare(vec(HLO_F32, 3, sign), vec(HLO_F32, 3, ref), vec(HLO_F64, 3, truth), 1e-3);
  CHECK(!v.passed);
  CHECK(strstr(v.message, "-inf") != NULL);
}

static void test_integers_and_tuples(void) {
  double a[3] = {1, 2, 3}, b[3] = {1, 2, 4};
  rt_accuracy_verdict v = compare(vec(HLO_S32, 3, a), vec(HLO_S32, 3, a), vec(HLO_S32, 3, a), 0);
  CHECK(v.passed);
  v = compare(vec(HLO_S32, 3, b), vec(HLO_S32, 3, a), vec(HLO_S32, 3, a), 100);
  CHECK(!v.passed); /* integers must be equal, whatever tol says */
  CHECK(strstr(v.message, "element 2 is 4") != NULL);
  /* A tuple whose second output is off: the verdict names output 1. */
  rt_value *r[2] = {vec(HLO_F32, 3, a), vec(HLO_PRED, 3, (double[]){1, 0, 1})};
  rt_value *d[2] = {vec(HLO_F32, 3, a), vec(HLO_PRED, 3, (double[]){1, 1, 1})};
  rt_value *f[2] = {vec(HLO_F64, 3, a), vec(HLO_PRED, 3, (double[]){1, 1, 1})};
  v = compare(rt_value_new_tuple(2, r), rt_value_new_tuple(2, d), rt_value_new_tuple(2, f), 1e-3);
  CHECK(!v.passed);
  CHECK_EQ_INT(v.failed_output, 1);
}

static void test_check_runs_references(void) {
  const char *text = "HloModule m\nENTRY e {\n  x = f32[2] parameter(0)\n  ROOT y = f32[2] multiply(x, x)\n}\n";
  hlo_diag diag = {HLO_OK, ""};
  hlo_module *m = hlo_parse_module(text, strlen(text), "m", &diag);
  rt_value *x = vec(HLO_F32, 2, (double[]){3, -2});
  rt_value *good = vec(HLO_F32, 2, (double[]){9, 4}), *bad = vec(HLO_F32, 2, (double[]){9, 4.5});
  rt_accuracy_verdict v;
  CHECK_EQ_INT(rt_accuracy_check(m, &x, 1, good, 1e-3, &v, &diag), HLO_OK);
  CHECK(v.passed);
  CHECK_EQ_INT(rt_accuracy_check(m, &x, 1, bad, 1e-3, &v, &diag), HLO_OK);
  CHECK(!v.passed); /* rmse 0.5/sqrt(2) = 0.354 > 0.001 */
  rt_value_release(x);
  rt_value_release(good);
  rt_value_release(bad);
  hlo_module_free(m);
}

int main(void) {
  RUN(test_float_bound);
  RUN(test_nonfinite);
  RUN(test_integers_and_tuples);
  RUN(test_check_runs_references);
  return TEST_REPORT();
}
