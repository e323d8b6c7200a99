/* The accuracy check proper: the reference evaluator runs the module in the declared types
 * and in fp64, and rt_accuracy_compare (runtime/accuracy.c) judges a backend's result
 * against both. */
#include "reference.h"

hlo_status rt_accuracy_check(const hlo_module *module, rt_value *const *args, int arg_count, const rt_value *result,
                             double tol, rt_accuracy_verdict *verdict, hlo_diag *diag) {
  rt_value *declared = NULL, *fp64 = NULL;
  rt_eval_options declared_options = {.fp64 = false}, fp64_options = {.fp64 = true};
  hlo_status status = rt_evaluate(module, args, arg_count, &declared_options, &declared, diag);
  if (status == HLO_OK) status = rt_evaluate(module, args, arg_count, &fp64_options, &fp64, diag);
  if (status == HLO_OK) status = rt_accuracy_compare(result, declared, fp64, tol, verdict, diag);
  rt_value_release(declared);
  rt_value_release(fp64);
  return status;
}
