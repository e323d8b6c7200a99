/* The reference path inside the cpu backend: the reference evaluator's kernels for every op
 * without a fast kernel, and control flow that runs called computations through the
 * reference evaluator (rt_eval_comp). Correct and slow; the plan says which steps use it. */
#include <stdlib.h>

#include "backend_cpu.h"
#include "kernels.h"

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
  if (hlo_opcode_is_elementwise_unary(opcode)) return rt_kernel_unary;
  if (opcode == HLO_OP_COMPARE) return rt_kernel_compare;
  if (hlo_opcode_is_elementwise_binary(opcode) && opcode != HLO_OP_COMPLEX) return rt_kernel_binary;
  switch (opcode) {
    case HLO_OP_SELECT: return rt_kernel_select;
    case HLO_OP_CLAMP: return rt_kernel_clamp;
    case HLO_OP_CONVERT: return rt_kernel_convert;
    case HLO_OP_BITCAST_CONVERT: return rt_kernel_bitcast_convert;
    case HLO_OP_REDUCE_PRECISION: return rt_kernel_reduce_precision;
    case HLO_OP_MAP: return rt_kernel_map;
    case HLO_OP_BROADCAST: return rt_kernel_broadcast;
    case HLO_OP_RESHAPE: case HLO_OP_BITCAST: return rt_kernel_reshape;
    case HLO_OP_TRANSPOSE: return rt_kernel_transpose;
    case HLO_OP_SLICE: return rt_kernel_slice;
    case HLO_OP_DYNAMIC_SLICE: return rt_kernel_dynamic_slice;
    case HLO_OP_DYNAMIC_UPDATE_SLICE: return rt_kernel_dynamic_update_slice;
    case HLO_OP_CONCATENATE: return rt_kernel_concatenate;
    case HLO_OP_PAD: return rt_kernel_pad;
    case HLO_OP_REVERSE: return rt_kernel_reverse;
    case HLO_OP_IOTA: return rt_kernel_iota;
    case HLO_OP_DOT: return rt_kernel_dot;
    case HLO_OP_CONVOLUTION: return rt_kernel_convolution;
    case HLO_OP_REDUCE: return rt_kernel_reduce;
    case HLO_OP_REDUCE_WINDOW: return rt_kernel_reduce_window;
    case HLO_OP_SELECT_AND_SCATTER: return rt_kernel_select_and_scatter;
    case HLO_OP_GATHER: return rt_kernel_gather;
    case HLO_OP_SCATTER: return rt_kernel_scatter;
    case HLO_OP_SORT: return rt_kernel_sort;
    case HLO_OP_BATCH_NORM_INFERENCE: return rt_kernel_batch_norm_inference;
    case HLO_OP_BATCH_NORM_TRAINING: return rt_kernel_batch_norm_training;
    case HLO_OP_BATCH_NORM_GRAD: return rt_kernel_batch_norm_grad;
    case HLO_OP_RNG_BIT_GENERATOR: return rt_kernel_rng_bit_generator;
    case HLO_OP_RNG: return rt_kernel_rng;
    case HLO_OP_ALL_REDUCE: case HLO_OP_ALL_GATHER: case HLO_OP_ALL_TO_ALL:
    case HLO_OP_COLLECTIVE_PERMUTE: case HLO_OP_COLLECTIVE_BROADCAST:
    case HLO_OP_REDUCE_SCATTER: case HLO_OP_REPLICA_ID: case HLO_OP_PARTITION_ID:
    case HLO_OP_ALL_REDUCE_START: case HLO_OP_ALL_REDUCE_DONE:
    case HLO_OP_ALL_GATHER_START: case HLO_OP_ALL_GATHER_DONE:
    case HLO_OP_COLLECTIVE_PERMUTE_START: case HLO_OP_COLLECTIVE_PERMUTE_DONE:
      return rt_kernel_collective;
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
