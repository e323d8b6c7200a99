/* The accuracy check of accuracy.h. */
#include "runtime.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


typedef struct leaves {
  const rt_value **items;
  int count, capacity;
} leaves;

/* The array leaves of a value in order; NULL-safe on overflow (count still grows). */
static void flatten(const rt_value *value, leaves *out) {
  if (value->shape.dtype != HLO_TUPLE) {
    if (out->count < out->capacity) out->items[out->count] = value;
    out->count++;
    return;
  }
  for (int i = 0; i < value->tuple_count; i++) flatten(value->tuple[i], out);
}

static bool same_dims(const rt_value *a, const rt_value *b) {
  if (a->shape.rank != b->shape.rank || a->count != b->count) return false;
  for (int d = 0; d < a->shape.rank; d++)
    if (a->shape.dims[d] != b->shape.dims[d]) return false;
  return true;
}

static int nonfinite_class(double x) {
  if (isnan(x)) return 1;
  if (isinf(x)) return x > 0 ? 2 : 3;
  return 0;
}

static const char *class_name(int cls) {
  static const char *const names[] = {"a finite value", "NaN", "+inf", "-inf"};
  return names[cls];
}

/* One floating output; false with the message set when it fails. */
static bool compare_float(int index, const rt_value *r, const rt_value *d, const rt_value *f, double tol,
                          rt_accuracy_verdict *verdict) {
  double err_result = 0, err_reference = 0;
  int64_t counted = 0;
  for (int64_t i = 0; i < r->count; i++) {
    double rv = rt_get_f64(r, i), dv = rt_get_f64(d, i), fv = rt_get_f64(f, i);
    int rc = nonfinite_class(rv), dc = nonfinite_class(dv);
    if (rc != dc) {
      snprintf(verdict->message, sizeof verdict->message,
               "output %d: element %lld is %s, but the reference has %s there", index, (long long)i,
               class_name(rc), class_name(dc));
      return false;
    }
    /* Both non-finite alike, or the f64 truth itself is not finite: no distance to measure. */
    if (rc || !isfinite(fv)) continue;
    err_result += (rv - fv) * (rv - fv);
    err_reference += (dv - fv) * (dv - fv);
    counted++;
  }
  if (counted == 0) return true;
  double rmse_result = sqrt(err_result / (double)counted);
  double rmse_reference = sqrt(err_reference / (double)counted);
  hlo_dtype dtype = d->shape.dtype;
  double m = dtype == HLO_F16 || dtype == HLO_BF16 ? 3 : 2;
  double bound = m * rmse_reference + tol;
  if (rmse_result <= bound) return true;
  snprintf(verdict->message, sizeof verdict->message,
           "output %d (%s): rmse(result - fp64) = %.6g > %g * rmse(reference - fp64) + tol = %g * %.6g + %g = %.6g",
           index, hlo_dtype_name(dtype), rmse_result, m, m, rmse_reference, tol, bound);
  return false;
}

static bool compare_exact(int index, const rt_value *r, const rt_value *d, rt_accuracy_verdict *verdict) {
  for (int64_t i = 0; i < r->count; i++) {
    uint64_t rv = rt_get_u64(r, i), dv = rt_get_u64(d, i);
    if (rv == dv) continue;
    snprintf(verdict->message, sizeof verdict->message,
             "output %d (%s): element %lld is %lld, the reference has %lld", index,
             hlo_dtype_name(d->shape.dtype), (long long)i, (long long)rv, (long long)dv);
    return false;
  }
  return true;
}

static int count_leaves(const rt_value *value) {
  leaves none = {NULL, 0, 0};
  flatten(value, &none);
  return none.count;
}

static hlo_status compare_leaves(leaves *l, double tol, rt_accuracy_verdict *verdict) {
  verdict->passed = true;
  verdict->failed_output = -1;
  for (int i = 0; i < l[0].count; i++) {
    const rt_value *r = l[0].items[i], *d = l[1].items[i], *f = l[2].items[i];
    if (!same_dims(r, d) || !same_dims(d, f) || r->shape.dtype != d->shape.dtype) {
      char rs[128], ds[128];
      snprintf(verdict->message, sizeof verdict->message, "output %d: the result is %s, the reference %s", i,
               hlo_shape_str(&r->shape, rs, sizeof rs), hlo_shape_str(&d->shape, ds, sizeof ds));
      verdict->passed = false;
    } else if (hlo_dtype_is_float(d->shape.dtype)) {
      verdict->passed = compare_float(i, r, d, f, tol, verdict);
    } else {
      verdict->passed = compare_exact(i, r, d, verdict);
    }
    if (!verdict->passed) {
      verdict->failed_output = i;
      return HLO_OK;
    }
  }
  snprintf(verdict->message, sizeof verdict->message, "%d output%s within the accuracy bound", l[0].count,
           l[0].count == 1 ? "" : "s");
  return HLO_OK;
}

hlo_status rt_accuracy_compare(const rt_value *result, const rt_value *declared, const rt_value *fp64, double tol,
                               rt_accuracy_verdict *verdict, hlo_diag *diag) {
  int counts[3] = {count_leaves(result), count_leaves(declared), count_leaves(fp64)};
  if (counts[0] != counts[1] || counts[1] != counts[2])
    return hlo_diag_set(diag, HLO_ERR_INPUT, "accuracy check: the result has %d outputs, the reference %d",
                        counts[0], counts[1]);
  const rt_value **items = hlo_calloc((size_t)counts[0] * 3 + 1, sizeof *items);
  if (!items) return hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory in the accuracy check");
  leaves l[3] = {{items, 0, counts[0]}, {items + counts[0], 0, counts[0]}, {items + 2 * counts[0], 0, counts[0]}};
  flatten(result, &l[0]);
  flatten(declared, &l[1]);
  flatten(fp64, &l[2]);
  hlo_status status = compare_leaves(l, tol, verdict);
  free(items);
  return status;
}
