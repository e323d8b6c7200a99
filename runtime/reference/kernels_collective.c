/* Collectives as one device sees them when it is the only participant: one replica and one
 * partition. Every reduction, gather, scatter or exchange over a group of one is the identity;
 * collective-permute delivers the operand only when the pair {0,0} sends it to itself, and
 * zeros otherwise (XLA's rule for a device that is no pair's target); replica-id and
 * partition-id are 0. A module declaring more replicas or partitions, or a group with more
 * than one member, is refused here: computing it needs the other devices' data, which
 * kernels_spmd.c moves when the evaluation has a world of ranks (rt_eval_options.comm).
 *
 * Async pairs: all-reduce-start has the all-reduce's shape and its -done passes it through;
 * all-gather-start and collective-permute-start return (operand, result, contexts...) and their
 * -done takes the result, element 1. */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reference.h"

static const char *module_attr(const hlo_instr *instr, const char *name) {
  const hlo_module *module = instr->parent ? instr->parent->module : NULL;
  for (int i = 0; module && i < module->raw_attr_count; i++)
    if (strcmp(module->raw_attrs[i].name, name) == 0) return module->raw_attrs[i].value;
  return NULL;
}

static long long attr_count(const hlo_instr *instr, const char *name) {
  const char *text = module_attr(instr, name);
  return text ? strtoll(text, NULL, 10) : 1;
}

/* Reads the decimal number starting at *p and moves *p past it. */
static long long read_number(const char **p) {
  char *end;
  long long value = strtoll(*p, &end, 10);
  *p = end;
  return value;
}

/* replica_groups: empty, {{0},...} or the iota form [groups,size]<=[...]. With one device the
 * only member a group may have is device 0, and only once. */
static bool groups_are_singletons(const char *text) {
  if (!text) return true;
  while (isspace((unsigned char)*text)) text++;
  if (*text == '[') { /* the last number in the first brackets is the group size */
    long long size = 1;
    for (const char *p = text + 1; *p && *p != ']';) {
      if (isdigit((unsigned char)*p)) size = read_number(&p);
      else p++;
    }
    return size <= 1;
  }
  int members = 0;
  for (const char *p = text; *p;) {
    if (!isdigit((unsigned char)*p)) {
      if (*p++ == '{') members = 0;
      continue;
    }
    if (read_number(&p) != 0 || ++members > 1) return false;
  }
  return true;
}

/* Whether source_target_pairs={{a,b},...} holds the pair {0,0}. */
static bool permutes_to_self(const char *text) {
  long long pair[2] = {-1, -1};
  int n = 0;
  for (const char *p = text ? text : ""; *p;) {
    if (!isdigit((unsigned char)*p)) {
      if (*p++ == '{') n = 0;
      continue;
    }
    long long id = read_number(&p);
    if (n < 2) pair[n] = id;
    if (++n == 2 && pair[0] == 0 && pair[1] == 0) return true;
  }
  return false;
}

static const char *check_single_device(const hlo_instr *instr) {
  if (attr_count(instr, "replica_count") > 1) return "the module declares more than one replica";
  if (attr_count(instr, "num_partitions") > 1) return "the module declares more than one partition";
  if (!groups_are_singletons(hlo_instr_raw_attr(instr, "replica_groups")))
    return "a replica group has more than one member";
  return NULL;
}

/* A zero value of a declared shape; tokens are empty tuples, as in the driver. */
static rt_value *zeros(rt_eval *eval, const hlo_instr *instr, const hlo_shape *shape) {
  if (shape->dtype == HLO_TOKEN) return rt_value_new_tuple(0, NULL);
  if (!hlo_shape_is_tuple(shape)) return rt_new_output(eval, instr, shape);
  rt_value *elements[64];
  if (shape->tuple_count > 64) {
    rt_kernel_fail(eval, instr, HLO_ERR_UNSUPPORTED, "tuples over 64 elements");
    return NULL;
  }
  for (int i = 0; i < shape->tuple_count; i++) {
    elements[i] = zeros(eval, instr, &shape->tuple[i]);
    if (!elements[i]) {
      while (i-- > 0) rt_value_release(elements[i]);
      return NULL;
    }
  }
  return rt_value_new_tuple(shape->tuple_count, elements);
}

static bool same_dims(const rt_value *value, const hlo_shape *shape) {
  if (value->shape.dtype == HLO_TUPLE || hlo_shape_is_tuple(shape)) return true; /* checked per element */
  if (value->shape.rank != shape->rank) return false;
  for (int d = 0; d < shape->rank; d++)
    if (value->shape.dims[d] != shape->dims[d]) return false;
  return true;
}

/* The result of a collective over a group of one, of the declared shape: the operands
 * themselves (a tuple of them when the shape is a tuple), or zeros for a permute that does
 * not send to itself. A result larger or smaller than its operand means several participants. */
static hlo_status single_result(rt_eval *eval, const hlo_instr *instr, const hlo_shape *shape,
                                rt_value *const *args, int count, bool self, rt_value **out) {
  if (!self) {
    *out = zeros(eval, instr, shape);
    return *out ? HLO_OK : eval->diag->status;
  }
  bool tuple = hlo_shape_is_tuple(shape) && !(count == 1 && args[0]->shape.dtype == HLO_TUPLE);
  if (tuple ? shape->tuple_count != count : count != 1)
    return rt_kernel_fail(eval, instr, HLO_ERR_INPUT, "%d operands for a result of %d elements", count,
                tuple ? shape->tuple_count : 1);
  for (int i = 0; i < count; i++)
    if (!same_dims(args[i], tuple ? &shape->tuple[i] : shape))
      return rt_kernel_fail(eval, instr, HLO_ERR_UNSUPPORTED,
                  "its result differs in shape from its operand: that needs more than one participant");
  if (!tuple) {
    *out = rt_value_retain(args[0]);
    return HLO_OK;
  }
  rt_value *elements[64];
  if (count > 64) return rt_kernel_fail(eval, instr, HLO_ERR_UNSUPPORTED, "more than 64 operands");
  for (int i = 0; i < count; i++) elements[i] = rt_value_retain(args[i]);
  *out = rt_value_new_tuple(count, elements);
  return *out ? HLO_OK : rt_kernel_fail(eval, instr, HLO_ERR_INTERNAL, "out of memory");
}

/* all-gather-start / collective-permute-start: (operand, result, extra context elements). */
static hlo_status start_tuple(rt_eval *eval, const hlo_instr *instr, rt_value *const *args, bool self,
                              rt_value **out) {
  const hlo_shape *shape = &instr->shape;
  int count = instr->operand_count;
  if (!hlo_shape_is_tuple(shape) || shape->tuple_count < 2 || shape->tuple_count > 64)
    return rt_kernel_fail(eval, instr, HLO_ERR_INPUT, "an async start must return (operand, result, ...)");
  rt_value *parts[64] = {0};
  hlo_status status = single_result(eval, instr, &shape->tuple[0], args, count, true, &parts[0]);
  if (status == HLO_OK) status = single_result(eval, instr, &shape->tuple[1], args, count, self, &parts[1]);
  for (int i = 2; status == HLO_OK && i < shape->tuple_count; i++) {
    parts[i] = zeros(eval, instr, &shape->tuple[i]);
    if (!parts[i]) status = eval->diag->status;
  }
  if (status == HLO_OK) {
    *out = rt_value_new_tuple(shape->tuple_count, parts);
    if (*out) return HLO_OK;
    status = rt_kernel_fail(eval, instr, HLO_ERR_INTERNAL, "out of memory");
  }
  for (int i = 0; i < shape->tuple_count; i++) rt_value_release(parts[i]);
  return status;
}

RT_KERNEL(rt_kernel_collective) {
  const hlo_module *module = instr->parent ? instr->parent->module : NULL;
  if (eval->options && eval->options->comm && module && rt_module_is_spmd(module))
    return rt_kernel_collective_spmd(eval, instr, args, out);
  const char *why = check_single_device(instr);
  if (why)
    return rt_kernel_fail(eval, instr, HLO_ERR_UNSUPPORTED,
                          "%s; one process evaluates one device (run it under mpirun with one rank per device: "
                          "latch run --spmd, or LATCH_MPI=1)", why);
  int count = instr->operand_count;
  switch (instr->opcode) {
    case HLO_OP_REPLICA_ID: case HLO_OP_PARTITION_ID:
      *out = rt_new_output(eval, instr, &instr->shape);
      return *out ? HLO_OK : eval->diag->status;
    case HLO_OP_ALL_REDUCE: case HLO_OP_ALL_REDUCE_START: case HLO_OP_ALL_GATHER:
    case HLO_OP_REDUCE_SCATTER: case HLO_OP_ALL_TO_ALL: case HLO_OP_COLLECTIVE_BROADCAST:
      return single_result(eval, instr, &instr->shape, args, count, true, out);
    case HLO_OP_COLLECTIVE_PERMUTE:
      return single_result(eval, instr, &instr->shape, args, count,
                           permutes_to_self(hlo_instr_raw_attr(instr, "source_target_pairs")), out);
    case HLO_OP_ALL_GATHER_START:
      return start_tuple(eval, instr, args, true, out);
    case HLO_OP_COLLECTIVE_PERMUTE_START:
      return start_tuple(eval, instr, args, permutes_to_self(hlo_instr_raw_attr(instr, "source_target_pairs")),
                         out);
    case HLO_OP_ALL_REDUCE_DONE:
      *out = rt_value_retain(args[0]);
      return HLO_OK;
    case HLO_OP_ALL_GATHER_DONE: case HLO_OP_COLLECTIVE_PERMUTE_DONE:
      if (args[0]->shape.dtype != HLO_TUPLE || args[0]->tuple_count < 2)
        return rt_kernel_fail(eval, instr, HLO_ERR_INPUT, "its operand must be the tuple of an async start");
      *out = rt_value_retain(args[0]->tuple[1]);
      return HLO_OK;
    default:
      return rt_kernel_fail(eval, instr, HLO_ERR_UNSUPPORTED, "not a collective latch evaluates");
  }
}
