/* The accuracy check: is a backend's result as close to the truth as the reference
 * evaluator's own result in the declared types? The truth is the reference evaluator in fp64
 * mode on the same inputs. A floating output passes when
 *
 *   rmse(result - fp64) <= m * rmse(reference - fp64) + tol
 *
 * with m = 3 for f16 and bf16 (their rounding makes reordered sums drift more) and 2 for
 * the others: a backend may round differently from the reference, but not much worse.
 * NaN and infinity positions (and signs) must agree with the reference in the declared
 * types; those positions are left out of the rmse. Integer and pred outputs must be equal.
 * Tuples are compared output by output, nested tuples flattened in order. */
#ifndef RT_ACCURACY_H
#define RT_ACCURACY_H
#include <stdbool.h>

#include "hlo/ir.h"
#include "value.h"

#define RT_ACCURACY_DEFAULT_TOL 1e-3

typedef struct rt_accuracy_verdict {
  bool passed;
  int failed_output; /* flat index of the first failing output, -1 when passed */
  /* The failing output with its figures, or a summary when passed. */
  char message[512];
} rt_accuracy_verdict;

/* Compares result against the reference in the declared types (declared) and in fp64
 * (fp64); all three share the module's output structure. HLO_ERR_INPUT when they do not
 * (different tuple structure or dims). */
hlo_status rt_accuracy_compare(const rt_value *result, const rt_value *declared, const rt_value *fp64, double tol,
                               rt_accuracy_verdict *verdict, hlo_diag *diag);

/* Runs module's reference in the declared types and in fp64 on args, then compares result
 * with them. An error (status with diag) when a reference run fails. */
hlo_status rt_accuracy_check(const hlo_module *module, rt_value *const *args, int arg_count, const rt_value *result,
                             double tol, rt_accuracy_verdict *verdict, hlo_diag *diag);

#endif
