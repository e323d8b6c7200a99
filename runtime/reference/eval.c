/* The reference evaluator's driver: walks a computation in order, dispatches each
 * instruction to its kernel, frees values after their last use, and runs control flow. */
#include "reference.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


enum { MAX_CALL_DEPTH = 200 };

hlo_dtype rt_storage_dtype(const rt_eval *eval, hlo_dtype declared) {
  if (eval->options && eval->options->fp64 && hlo_dtype_is_float(declared)) return HLO_F64;
  return declared;
}

hlo_status rt_kernel_fail(rt_eval *eval, const hlo_instr *instr, hlo_status code, const char *format, ...) {
  char message[768];
  va_list args;
  va_start(args, format);
  vsnprintf(message, sizeof message, format, args);
  va_end(args);
  return hlo_diag_set(eval->diag, code, "%s %%%s: %s", hlo_opcode_name(instr->opcode), instr->name, message);
}

static hlo_status unsupported_type(rt_eval *eval, const hlo_instr *instr, hlo_dtype dtype) {
  return hlo_diag_set(eval->diag, HLO_ERR_UNSUPPORTED,
                      "unsupported element type %s in %s %%%s", hlo_dtype_name(dtype),
                      hlo_opcode_name(instr->opcode), instr->name);
}

rt_value *rt_new_output(rt_eval *eval, const hlo_instr *instr, const hlo_shape *declared) {
  if (!hlo_dtype_is_computable(declared->dtype)) {
    unsupported_type(eval, instr, declared->dtype);
    return NULL;
  }
  hlo_shape storage = *declared;
  storage.dtype = rt_storage_dtype(eval, declared->dtype);
  rt_value *value = rt_value_new(&storage);
  if (!value)
    hlo_diag_set(eval->diag, HLO_ERR_INTERNAL, "out of memory for the result of %s %%%s",
                 hlo_opcode_name(instr->opcode), instr->name);
  return value;
}

rt_value *rt_to_storage(rt_eval *eval, rt_value *value, hlo_dtype declared) {
  hlo_dtype storage = rt_storage_dtype(eval, declared);
  if (value->shape.dtype == HLO_TUPLE || value->shape.dtype == storage)
    return rt_value_retain(value);
  rt_value *converted = rt_value_new_array(storage, value->shape.rank, value->shape.dims);
  if (!converted) return NULL;
  for (int64_t i = 0; i < value->count; i++) {
    if (hlo_dtype_is_float(storage) || hlo_dtype_is_float(value->shape.dtype))
      rt_set_f64(converted, i, rt_get_f64(value, i));
    else
      rt_set_i64(converted, i, rt_get_i64(value, i));
  }
  return converted;
}

/* Converts a value to the storage types of a declared shape, element by element for tuples. */
static rt_value *to_storage_shape(rt_eval *eval, rt_value *value, const hlo_shape *declared) {
  if (declared->dtype != HLO_TUPLE || value->shape.dtype != HLO_TUPLE)
    return rt_to_storage(eval, value, declared->dtype);
  rt_value **elements = hlo_calloc((size_t)value->tuple_count + 1, sizeof(rt_value *));
  if (!elements) return NULL;
  for (int i = 0; i < value->tuple_count; i++) {
    const hlo_shape *element_shape = i < declared->tuple_count ? &declared->tuple[i] : &value->tuple[i]->shape;
    elements[i] = to_storage_shape(eval, value->tuple[i], element_shape);
  }
  rt_value *result = rt_value_new_tuple(value->tuple_count, elements);
  free(elements);
  return result;
}

static rt_value *value_from_literal(rt_eval *eval, const hlo_instr *instr, const hlo_literal *literal) {
  if (literal->shape.dtype == HLO_TUPLE) {
    int count = literal->shape.tuple_count;
    rt_value **elements = hlo_calloc((size_t)count + 1, sizeof(rt_value *));
    if (!elements) return NULL;
    bool ok = true;
    for (int i = 0; i < count && ok; i++) {
      elements[i] = value_from_literal(eval, instr, &literal->elements[i]);
      ok = elements[i] != NULL;
    }
    rt_value *result = ok ? rt_value_new_tuple(count, elements) : NULL;
    if (!ok)
      for (int i = 0; i < count; i++) rt_value_release(elements[i]);
    free(elements);
    return result;
  }
  if (!hlo_dtype_is_computable(literal->shape.dtype) || !literal->data) {
    unsupported_type(eval, instr, literal->shape.dtype);
    return NULL;
  }
  rt_value *declared = rt_value_new(&literal->shape);
  if (!declared) {
    hlo_diag_set(eval->diag, HLO_ERR_INTERNAL, "out of memory for constant %%%s", instr->name);
    return NULL;
  }
  memcpy(declared->data, literal->data, (size_t)hlo_shape_bytes(&literal->shape));
  rt_value *stored = rt_to_storage(eval, declared, literal->shape.dtype);
  rt_value_release(declared);
  return stored;
}

static hlo_status check_args(rt_eval *eval, const hlo_comp *comp, rt_value *const *args, int arg_count) {
  if (arg_count != comp->param_count)
    return hlo_diag_set(eval->diag, HLO_ERR_INPUT, "computation %s takes %d arguments, got %d",
                        comp->name, comp->param_count, arg_count);
  for (int i = 0; i < arg_count; i++) {
    const hlo_shape *want = &comp->params[i]->shape;
    const hlo_shape *have = &args[i]->shape;
    if (want->dtype == HLO_TUPLE) {
      if (have->dtype != HLO_TUPLE || args[i]->tuple_count != want->tuple_count)
        return hlo_diag_set(eval->diag, HLO_ERR_INPUT,
                            "argument %d of %s: expected a tuple of %d elements", i, comp->name,
                            want->tuple_count);
      continue;
    }
    bool dims_match = have->rank == want->rank;
    for (int d = 0; dims_match && d < want->rank; d++)
      dims_match = have->dims[d] == want->dims[d] ||
                   (want->dim_kind[d] != HLO_DIM_STATIC && (want->dims[d] < 0 || have->dims[d] <= want->dims[d]));
    bool type_match = have->dtype == want->dtype || have->dtype == rt_storage_dtype(eval, want->dtype);
    if (!dims_match || !type_match) {
      char want_text[128], have_text[128];
      return hlo_diag_set(eval->diag, HLO_ERR_INPUT, "argument %d of %s: expected %s, got %s", i,
                          comp->name, hlo_shape_str(want, want_text, sizeof want_text),
                          hlo_shape_str(have, have_text, sizeof have_text));
    }
  }
  return HLO_OK;
}

static hlo_status eval_call_like(rt_eval *eval, const hlo_instr *instr, rt_value *const *args,
                                 rt_value **out) {
  if (instr->called_count < 1)
    return hlo_diag_set(eval->diag, HLO_ERR_INPUT, "%s %%%s calls no computation",
                        hlo_opcode_name(instr->opcode), instr->name);
  return rt_eval_comp(eval, instr->called[0], args, instr->operand_count, out);
}

static hlo_status eval_while(rt_eval *eval, const hlo_instr *instr, rt_value *const *args,
                             rt_value **out) {
  if (instr->called_count != 2)
    return hlo_diag_set(eval->diag, HLO_ERR_INPUT, "while %%%s needs condition and body", instr->name);
  const hlo_comp *condition = instr->called[0];
  const hlo_comp *body = instr->called[1];
  rt_value *state = rt_value_retain(args[0]);
  for (;;) {
    rt_value *keep_going = NULL;
    hlo_status status = rt_eval_comp(eval, condition, &state, 1, &keep_going);
    if (status != HLO_OK) {
      rt_value_release(state);
      return status;
    }
    bool again = keep_going->count > 0 && rt_get_i64(keep_going, 0) != 0;
    rt_value_release(keep_going);
    if (!again) break;
    rt_value *next = NULL;
    status = rt_eval_comp(eval, body, &state, 1, &next);
    rt_value_release(state);
    if (status != HLO_OK) return status;
    state = next;
  }
  *out = state;
  return HLO_OK;
}

static hlo_status eval_conditional(rt_eval *eval, const hlo_instr *instr, rt_value *const *args,
                                   rt_value **out) {
  int branch_count = instr->called_count;
  if (branch_count < 1 || instr->operand_count != branch_count + 1)
    return hlo_diag_set(eval->diag, HLO_ERR_INPUT,
                        "conditional %%%s: %d branches need %d operands, it has %d", instr->name,
                        branch_count, branch_count + 1, instr->operand_count);
  int branch;
  if (args[0]->shape.dtype == HLO_PRED) {
    branch = rt_get_i64(args[0], 0) ? 0 : 1; /* true_computation comes first */
  } else {
    int64_t index = rt_get_i64(args[0], 0);
    branch = index < 0 || index >= branch_count ? branch_count - 1 : (int)index; /* XLA: out of range runs the last */
  }
  return rt_eval_comp(eval, instr->called[branch], &args[branch + 1], 1, out);
}

static hlo_status eval_get_tuple_element(rt_eval *eval, const hlo_instr *instr,
                                         rt_value *const *args, rt_value **out) {
  const rt_value *tuple = args[0];
  if (tuple->shape.dtype != HLO_TUPLE || instr->index < 0 || instr->index >= tuple->tuple_count)
    return hlo_diag_set(eval->diag, HLO_ERR_INPUT, "get-tuple-element %%%s: index %lld out of range",
                        instr->name, (long long)instr->index);
  *out = rt_value_retain(tuple->tuple[instr->index]);
  return HLO_OK;
}

static hlo_status eval_tuple(rt_eval *eval, const hlo_instr *instr, rt_value *const *args,
                             rt_value **out) {
  rt_value **elements = hlo_calloc((size_t)instr->operand_count + 1, sizeof(rt_value *));
  if (!elements) return hlo_diag_set(eval->diag, HLO_ERR_INTERNAL, "out of memory");
  for (int i = 0; i < instr->operand_count; i++) elements[i] = rt_value_retain(args[i]);
  *out = rt_value_new_tuple(instr->operand_count, elements);
  if (!*out)
    for (int i = 0; i < instr->operand_count; i++) rt_value_release(elements[i]);
  free(elements);
  return *out ? HLO_OK : hlo_diag_set(eval->diag, HLO_ERR_INTERNAL, "out of memory making tuple %%%s", instr->name);
}

static hlo_status eval_get_dimension_size(rt_eval *eval, const hlo_instr *instr,
                                          rt_value *const *args, rt_value **out) {
  if (instr->index < 0 || instr->index >= args[0]->shape.rank)
    return hlo_diag_set(eval->diag, HLO_ERR_INPUT, "get-dimension-size %%%s: no dimension %lld",
                        instr->name, (long long)instr->index);
  *out = rt_new_output(eval, instr, &instr->shape);
  if (!*out) return eval->diag->status;
  rt_set_i64(*out, 0, args[0]->shape.dims[instr->index]);
  return HLO_OK;
}

/* The value passes through: copy, opt-barrier, add-dependency (first operand), bitcast of a
 * tuple, and the like. Values are immutable once made, so sharing is safe. */
static hlo_status eval_forward(rt_eval *eval, const hlo_instr *instr, rt_value *const *args,
                               rt_value **out) {
  (void)eval;
  (void)instr;
  *out = rt_value_retain(args[0]);
  return HLO_OK;
}

static hlo_status eval_after_all(rt_eval *eval, const hlo_instr *instr, rt_value *const *args,
                                 rt_value **out) {
  (void)args;
  /* A token carries no data: an empty tuple stands for it. */
  *out = rt_value_new_tuple(0, NULL);
  return *out ? HLO_OK : hlo_diag_set(eval->diag, HLO_ERR_INTERNAL, "out of memory making after-all %%%s", instr->name);
}

rt_kernel rt_array_kernel(hlo_opcode opcode) {
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
    default: return NULL;
  }
}

rt_kernel rt_eval_kernel(hlo_opcode opcode) {
  rt_kernel array = rt_array_kernel(opcode);
  if (array) return array;
  switch (opcode) {
    case HLO_OP_CALL: case HLO_OP_FUSION: return eval_call_like;
    case HLO_OP_WHILE: return eval_while;
    case HLO_OP_CONDITIONAL: return eval_conditional;
    case HLO_OP_TUPLE: return eval_tuple;
    case HLO_OP_GET_TUPLE_ELEMENT: return eval_get_tuple_element;
    case HLO_OP_GET_DIMENSION_SIZE: return eval_get_dimension_size;
    case HLO_OP_COPY: case HLO_OP_OPTIMIZATION_BARRIER: case HLO_OP_ADD_DEPENDENCY:
    case HLO_OP_DOMAIN:
      return eval_forward;
    case HLO_OP_AFTER_ALL: return eval_after_all;
    default: return NULL;
  }
}

/* How many times each instruction's value is still needed, so it can be freed early. */
static int *count_uses(const hlo_comp *comp) {
  int *uses = hlo_calloc((size_t)comp->instr_count + 1, sizeof(int));
  if (!uses) return NULL;
  for (int i = 0; i < comp->instr_count; i++) {
    const hlo_instr *instr = comp->instrs[i];
    for (int k = 0; k < instr->operand_count; k++) uses[instr->operands[k]->id]++;
  }
  if (comp->root) uses[comp->root->id]++;
  return uses;
}

static hlo_status eval_instr(rt_eval *eval, const hlo_instr *instr, rt_value *const *args,
                             rt_value *const *operand_values, rt_value **out) {
  switch (instr->opcode) {
    case HLO_OP_PARAMETER: {
      rt_value *arg = args[instr->parameter_number];
      *out = to_storage_shape(eval, arg, &instr->shape);
      return *out ? HLO_OK : hlo_diag_set(eval->diag, HLO_ERR_INTERNAL, "out of memory");
    }
    case HLO_OP_CONSTANT:
      if (!instr->literal)
        return hlo_diag_set(eval->diag, HLO_ERR_INPUT, "constant %%%s has no value", instr->name);
      *out = value_from_literal(eval, instr, instr->literal);
      return *out ? HLO_OK : eval->diag->status;
    default: break;
  }
  rt_kernel kernel = rt_eval_kernel(instr->opcode);
  if (!kernel)
    return hlo_diag_set(eval->diag, HLO_ERR_UNSUPPORTED,
                        "the reference evaluator does not support %s (instruction %%%s in %s)",
                        hlo_opcode_name(instr->opcode), instr->name, instr->parent->name);
  return kernel(eval, instr, operand_values, out);
}

hlo_status rt_eval_comp(rt_eval *eval, const hlo_comp *comp, rt_value *const *args, int arg_count,
                        rt_value **result) {
  *result = NULL;
  hlo_status status = check_args(eval, comp, args, arg_count);
  if (status != HLO_OK) return status;
  if (!comp->root)
    return hlo_diag_set(eval->diag, HLO_ERR_INPUT, "computation %s has no root", comp->name);
  if (eval->call_depth >= MAX_CALL_DEPTH)
    return hlo_diag_set(eval->diag, HLO_ERR_INPUT, "calls nested deeper than %d in %s",
                        MAX_CALL_DEPTH, comp->name);
  eval->call_depth++;
  int count = comp->instr_count;
  rt_value **values = hlo_calloc((size_t)count + 1, sizeof(rt_value *));
  int *uses = count_uses(comp);
  int max_operands = 1;
  for (int i = 0; i < count; i++)
    if (comp->instrs[i]->operand_count > max_operands) max_operands = comp->instrs[i]->operand_count;
  rt_value **operand_values = hlo_calloc((size_t)max_operands, sizeof(rt_value *));
  if (!values || !uses || !operand_values)
    status = hlo_diag_set(eval->diag, HLO_ERR_INTERNAL, "out of memory in %s", comp->name);
  for (int i = 0; status == HLO_OK && i < count; i++) {
    const hlo_instr *instr = comp->instrs[i];
    if (uses[i] == 0 && instr != comp->root) continue; /* dead code is not run */
    for (int k = 0; k < instr->operand_count; k++) operand_values[k] = values[instr->operands[k]->id];
    status = eval_instr(eval, instr, args, operand_values, &values[i]);
    if (status == HLO_OK && !values[i])
      status = hlo_diag_set(eval->diag, HLO_ERR_INTERNAL, "%s %%%s produced no value",
                            hlo_opcode_name(instr->opcode), instr->name);
    if (status == HLO_OK && eval->call_depth == 1 && eval->options->observe)
      eval->options->observe(eval->options->observe_context, instr, values[i]);
    for (int k = 0; k < instr->operand_count; k++) {
      int id = instr->operands[k]->id;
      if (--uses[id] == 0) {
        rt_value_release(values[id]);
        values[id] = NULL;
      }
    }
  }
  if (status == HLO_OK) {
    *result = values[comp->root->id];
    values[comp->root->id] = NULL;
  }
  for (int i = 0; values && i < count; i++) rt_value_release(values[i]);
  free(values);
  free(uses);
  free(operand_values);
  eval->call_depth--;
  return status;
}

hlo_status rt_evaluate(const hlo_module *module, rt_value *const *args, int arg_count,
                       const rt_eval_options *options, rt_value **result, hlo_diag *diag) {
  rt_eval_options defaults = {0};
  rt_eval eval = {.options = options ? options : &defaults, .diag = diag, .call_depth = 0};
  if (!module->entry) return hlo_diag_set(diag, HLO_ERR_INPUT, "module %s has no entry computation", module->name);
  return rt_eval_comp(&eval, module->entry, args, arg_count, result);
}
