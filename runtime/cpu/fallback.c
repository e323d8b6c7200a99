/* The reference path inside the cpu backend: the reference evaluator's kernels for every op
 * without a fast kernel, and control flow that runs called computations through the
 * reference evaluator (rt_eval_comp). Correct and slow; the plan says which steps use it. */
#include <stdlib.h>

#include "kernel_internal.h"
#include "runtime/reference/reference.h"

static hlo_status run_called(rt_eval *eval, const hlo_instr *instr, rt_value *const *args, rt_value **out) {
  if (instr->called_count < 1)
    return hlo_diag_set(eval->diag, HLO_ERR_INPUT, "%s %%%s calls no computation",
                        hlo_opcode_name(instr->opcode), instr->name);
  return rt_eval_comp(eval, instr->called[0], args, instr->operand_count, out);
}

static hlo_status run_while(rt_eval *eval, const hlo_instr *instr, rt_value *const *args, rt_value **out) {
  if (instr->called_count != 2)
    return hlo_diag_set(eval->diag, HLO_ERR_INPUT, "while %%%s needs condition and body", instr->name);
  /* The loop state is copied first: args[0] may be a view the loop must not keep. */
  rt_value *state = rt_value_copy(args[0]);
  if (!state) return hlo_diag_set(eval->diag, HLO_ERR_INTERNAL, "out of memory in while %%%s", instr->name);
  for (;;) {
    rt_value *keep_going = NULL;
    hlo_status status = rt_eval_comp(eval, instr->called[0], &state, 1, &keep_going);
    if (status != HLO_OK) {
      rt_value_release(state);
      return status;
    }
    bool again = keep_going->count > 0 && rt_get_i64(keep_going, 0) != 0;
    rt_value_release(keep_going);
    if (!again) break;
    rt_value *next = NULL;
    status = rt_eval_comp(eval, instr->called[1], &state, 1, &next);
    rt_value_release(state);
    if (status != HLO_OK) return status;
    state = next;
  }
  *out = state;
  return HLO_OK;
}

static hlo_status run_conditional(rt_eval *eval, const hlo_instr *instr, rt_value *const *args, rt_value **out) {
  int branches = instr->called_count;
  if (branches < 1 || instr->operand_count != branches + 1)
    return hlo_diag_set(eval->diag, HLO_ERR_INPUT, "conditional %%%s: %d branches need %d operands",
                        instr->name, branches, branches + 1);
  int branch;
  if (args[0]->shape.dtype == HLO_PRED) {
    branch = rt_get_i64(args[0], 0) ? 0 : 1;
  } else {
    int64_t index = rt_get_i64(args[0], 0);
    branch = index < 0 || index >= branches ? branches - 1 : (int)index; /* XLA runs the last */
  }
  return rt_eval_comp(eval, instr->called[branch], &args[branch + 1], 1, out);
}

static hlo_status run_dimension_size(rt_eval *eval, const hlo_instr *instr, rt_value *const *args, rt_value **out) {
  if (instr->index < 0 || instr->index >= args[0]->shape.rank)
    return hlo_diag_set(eval->diag, HLO_ERR_INPUT, "get-dimension-size %%%s: no dimension %lld",
                        instr->name, (long long)instr->index);
  *out = rt_new_output(eval, instr, &instr->shape);
  if (!*out) return eval->diag->status;
  rt_set_i64(*out, 0, args[0]->shape.dims[instr->index]);
  return HLO_OK;
}

/* Passes the first operand on; the executor copies it when it is a view. */
static hlo_status run_forward(rt_eval *eval, const hlo_instr *instr, rt_value *const *args, rt_value **out) {
  (void)eval;
  (void)instr;
  *out = rt_value_retain(args[0]);
  return HLO_OK;
}

static hlo_status run_after_all(rt_eval *eval, const hlo_instr *instr, rt_value *const *args, rt_value **out) {
  (void)eval;
  (void)instr;
  (void)args;
  *out = rt_value_new_tuple(0, NULL); /* a token carries no data */
  return *out ? HLO_OK : HLO_ERR_INTERNAL;
}

rt_kernel rt_cpu_slow_kernel(hlo_opcode opcode) {
  rt_kernel array = rt_array_kernel(opcode);
  if (array) return array;
  switch (opcode) {
    case HLO_OP_CALL: case HLO_OP_FUSION: return run_called;
    case HLO_OP_WHILE: return run_while;
    case HLO_OP_CONDITIONAL: return run_conditional;
    case HLO_OP_GET_DIMENSION_SIZE: return run_dimension_size;
    case HLO_OP_COPY: case HLO_OP_OPTIMIZATION_BARRIER: case HLO_OP_ADD_DEPENDENCY:
    case HLO_OP_DOMAIN: case HLO_OP_GET_TUPLE_ELEMENT: case HLO_OP_TUPLE:
      return run_forward; /* tuple and get-tuple-element never get here (the plan handles them) */
    case HLO_OP_AFTER_ALL: return run_after_all;
    default: return NULL;
  }
}
