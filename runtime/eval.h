/* The reference evaluator: runs a module op by op with XLA's semantics, in the declared
 * element types, or in fp64 mode where every floating-point value is computed in f64. */
#ifndef RT_EVAL_H
#define RT_EVAL_H
#include <stdbool.h>

#include "hlo/ir.h"
#include "value.h"

typedef struct rt_eval_options {
  bool fp64; /* floats are stored and computed as f64; results come back as f64 */
  /* When set, called with each entry-computation instruction's value (borrowed) right after
   * it is computed; the minifier keeps the ones it promotes to parameters or constants. */
  void (*observe)(void *context, const hlo_instr *instr, rt_value *value);
  void *observe_context;
} rt_eval_options;

/* Runs module's entry computation. args are in the declared parameter types (in fp64 mode
 * floats may also be passed as f64). On success *result holds a new reference. */
hlo_status rt_evaluate(const hlo_module *module, rt_value *const *args, int arg_count,
                       const rt_eval_options *options, rt_value **result, hlo_diag *diag);

/* State of one evaluation, passed to every kernel. */
typedef struct rt_eval {
  const rt_eval_options *options;
  hlo_diag *diag;
  int call_depth;
} rt_eval;

/* Evaluates a computation on arguments (borrowed); *result is a new reference. */
hlo_status rt_eval_comp(rt_eval *eval, const hlo_comp *comp, rt_value *const *args, int arg_count,
                        rt_value **result);

/* The type values of a declared type are stored in: f64 for floats in fp64 mode. */
hlo_dtype rt_storage_dtype(const rt_eval *eval, hlo_dtype declared);
/* A zeroed output for an instruction's declared (array) shape in its storage type; NULL
 * with an error in eval->diag when the type is not computable or memory runs out. */
rt_value *rt_new_output(rt_eval *eval, const hlo_instr *instr, const hlo_shape *declared);
/* Converts a value to the storage type for declared (a no-op reference when equal). */
rt_value *rt_to_storage(rt_eval *eval, rt_value *value, hlo_dtype declared);

/* Sets eval->diag to "OPCODE %NAME: message" and returns code: how kernels report errors. */
hlo_status rt_kernel_fail(rt_eval *eval, const hlo_instr *instr, hlo_status code, const char *format, ...)
    __attribute__((format(printf, 4, 5)));

/* A kernel computes one instruction from its operands' values (borrowed) into a new value. */
typedef hlo_status (*rt_kernel)(rt_eval *eval, const hlo_instr *instr, rt_value *const *args,
                                rt_value **out);

#endif
