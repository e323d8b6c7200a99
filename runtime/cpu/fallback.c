/* The reference path inside the cpu backend: the reference evaluator's kernels for every op
 * without a fast kernel, control flow included (its called computations run on the
 * evaluator, rt_eval_comp). Correct and slow; the plan says which steps use it. */
#include <string.h>

#include "kernel_internal.h"
#include "runtime/reference/reference.h"

/* The evaluator's while, on a copy of the loop state: args[0] may be a view of the arena,
 * which the loop's result must not keep. */
static hlo_status run_while(rt_eval *eval, const hlo_instr *instr, rt_value *const *args, rt_value **out) {
  rt_value *state = rt_value_copy(args[0]);
  if (!state) return hlo_diag_set(eval->diag, HLO_ERR_INTERNAL, "out of memory in while %%%s", instr->name);
  hlo_status status = rt_eval_kernel(HLO_OP_WHILE)(eval, instr, &state, out);
  rt_value_release(state);
  return status;
}

rt_kernel rt_cpu_slow_kernel(hlo_opcode opcode) {
  return opcode == HLO_OP_WHILE ? run_while : rt_eval_kernel(opcode);
}

bool rt_cpu_reference_conv(const hlo_instr *instr, const rt_value *const *in, rt_value *out) {
  rt_eval_options options = {.fp64 = false};
  hlo_diag diag = {0};
  rt_eval eval = {.options = &options, .diag = &diag};
  rt_value *result = NULL;
  if (rt_kernel_convolution(&eval, instr, (rt_value *const *)in, &result) != HLO_OK) return false;
  memcpy(out->data, result->data, (size_t)hlo_shape_bytes(&out->shape));
  rt_value_release(result);
  return true;
}
