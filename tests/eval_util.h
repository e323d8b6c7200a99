/* Helpers for evaluator tests: run a module written as HLO text on values built from
 * literals, and compare the result with expected numbers worked out independently. */
#ifndef LATCH_EVAL_UTIL_H
#define LATCH_EVAL_UTIL_H
#include <stdarg.h>
#include <stdlib.h>

#include "hlo/hlo.h"
#include "runtime/reference/reference.h"
#include "test.h"

/* A value of dtype and dims filled from doubles (converted with the element type's rules). */
static inline rt_value *make_value(hlo_dtype dtype, int rank, const int64_t *dims, const double *elements) {
  rt_value *value = rt_value_new_array(dtype, rank, dims);
  for (int64_t i = 0; i < value->count; i++) {
    if (hlo_dtype_is_float(dtype)) rt_set_f64(value, i, elements[i]);
    else rt_set_i64(value, i, (int64_t)elements[i]);
  }
  return value;
}

/* Parses text, evaluates the entry on args; returns the result or NULL (message in diag). */
static inline rt_value *run_text(const char *text, rt_value *const *args, int arg_count, bool fp64,
                          hlo_diag *diag) {
  hlo_diag_clear(diag);
  hlo_module *module = hlo_parse_module(text, strlen(text), "test", diag);
  if (!module) return NULL;
  rt_eval_options options = {.fp64 = fp64};
  rt_value *result = NULL;
  rt_evaluate(module, args, arg_count, &options, &result, diag);
  hlo_module_free(module);
  return result;
}

/* Checks an array value's element count and elements against want: equal, both NaN, or
 * within tol * (1 + |want|) (tol 0: exact). Messages carry the caller's line. */
static inline void expect_values(int line, const rt_value *array, const double *want, int64_t want_count, double tol) {
  CHECK_MSG(array->shape.dtype != HLO_TUPLE && array->count == want_count, "line %d: got %lld elements, want %lld",
            line, (long long)array->count, (long long)want_count);
  for (int64_t i = 0; array->shape.dtype != HLO_TUPLE && i < array->count && i < want_count; i++) {
    double value = rt_get_f64(array, i);
    bool ok = value == want[i] || (value != value && want[i] != want[i]) ||
              fabs(value - want[i]) <= tol * (1 + fabs(want[i]));
    CHECK_MSG(ok, "line %d: element %lld is %.9g, want %.9g", line, (long long)i, value, want[i]);
  }
}

/* Runs text and checks the (array) result's elements against want, within tol. */
#define CHECK_RUN(text, args, arg_count, want, want_count, tol)                          \
  do {                                                                                  \
    hlo_diag diag_;                                                                     \
    rt_value *got_ = run_text((text), (args), (arg_count), false, &diag_);              \
    CHECK_MSG(got_ != NULL, "evaluation failed: %s", diag_.message);                    \
    if (got_) {                                                                         \
      CHECK_EQ_INT(got_->count, (want_count));                                          \
      for (int64_t i_ = 0; i_ < got_->count && i_ < (want_count); i_++)                 \
        CHECK_NEAR(rt_get_f64(got_, i_), (want)[i_], (tol));                            \
      rt_value_release(got_);                                                           \
    }                                                                                   \
  } while (0)

#endif
