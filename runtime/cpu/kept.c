/* Which steps of a cpu plan are kept: work that depends on parameters alone, computed once
 * per version of those parameters' contents instead of once per execute.
 *
 * A kept step's buffer is never reused: the arena holds its result from one execute to the
 * next, with the stamps (rt_value.stamp) of the arguments it was computed from, and an
 * execute whose arguments have the same stamps skips the step. An argument written in place
 * (latch_assign, a training step's write-back) gets a new stamp, so its users run again.
 *
 * Every value depends on parameters alone, the inputs too; what is worth keeping is what
 * prepares a weight. So the search starts from the weight operands of products (a
 * convolution's kernel, a dot's rhs) and from reduces of one parameter (a weight summed by
 * rt_cpu_pass_dot_of_repeats) and from small values a broadcast spreads (a bias, a folded
 * batch norm's shift over [C]: resnet50 computed 53 of them per call), and walks back
 * through cheap ops (elementwise, layout, reduces: never through a product, whose result is
 * an activation, and from a small value only through small ones); a step is kept when it
 * is found so and everything it reads is too, or a parameter or a constant. That covers the
 * batch norm that rt_cpu_pass_fold_affine moved into a convolution's weights (the scale and the
 * scaled weights), a transposed weight, a weight converted to bf16 for a bf16 product, the
 * summed weight of dot_of_repeats. */
#include <stdlib.h>

#include "plan_internal.h"

static bool cheap(const hlo_instr *instr) {
  hlo_opcode op = instr->opcode;
  if (hlo_opcode_is_elementwise_unary(op) || hlo_opcode_is_elementwise_binary(op)) return true;
  switch (op) {
    case HLO_OP_SELECT: case HLO_OP_CLAMP: case HLO_OP_BROADCAST: case HLO_OP_RESHAPE: case HLO_OP_BITCAST:
    case HLO_OP_COPY: case HLO_OP_TRANSPOSE: case HLO_OP_REDUCE: case HLO_OP_SLICE: case HLO_OP_CONCATENATE:
    case HLO_OP_PAD: case HLO_OP_REVERSE: case HLO_OP_CONVERT:
      return true;
    default:
      return false;
  }
}

static bool leaf(const hlo_instr *instr) {
  hlo_opcode op = instr->opcode;
  return (op == HLO_OP_PARAMETER && hlo_shape_is_array(&instr->shape)) || op == HLO_OP_CONSTANT || op == HLO_OP_IOTA;
}

/* Whether instr views an array parameter through reshapes, bitcasts and copies. */
static bool views_parameter(const hlo_instr *instr) {
  const hlo_instr *under = hlo_under_views(instr);
  return under->opcode == HLO_OP_PARAMETER && hlo_shape_is_array(&under->shape);
}

/* A per-feature value: what a broadcast spreads at least 8-fold, of at most this many
 * elements (a bias, a batch norm's scale and shift over [C]). */
enum { PER_FEATURE_MAX = 1 << 16 };

static bool spread_small(const hlo_instr *instr) {
  if (instr->opcode != HLO_OP_BROADCAST || instr->operand_count != 1 || !hlo_shape_is_array(&instr->shape)) return false;
  int64_t from = hlo_shape_elements(&instr->operands[0]->shape);
  return from <= PER_FEATURE_MAX && from * 8 <= hlo_shape_elements(&instr->shape);
}

/* wanted[i]: instruction i prepares a weight (see the header), or a per-feature value:
 * walked back from there through values no larger than PER_FEATURE_MAX, so an activation
 * (the input of a batch's statistics) is never kept. */
static void find_wanted(const hlo_comp *entry, bool *wanted, bool *small) {
  int n = entry->instr_count;
  for (int i = 0; i < n; i++) {
    const hlo_instr *instr = entry->instrs[i];
    bool product = instr->opcode == HLO_OP_CONVOLUTION || instr->opcode == HLO_OP_DOT;
    if (product && instr->operand_count == 2) wanted[instr->operands[1]->id] = true;
    if (instr->opcode == HLO_OP_REDUCE && instr->operand_count == 2 && views_parameter(instr->operands[0]) &&
        instr->operands[1]->opcode == HLO_OP_CONSTANT)
      wanted[i] = true;
    if (spread_small(instr)) small[instr->operands[0]->id] = true;
  }
  for (int i = n - 1; i >= 0; i--) {
    const hlo_instr *instr = entry->instrs[i];
    small[i] = small[i] && hlo_shape_is_array(&instr->shape) && hlo_shape_elements(&instr->shape) <= PER_FEATURE_MAX;
    for (int k = 0; small[i] && cheap(instr) && k < instr->operand_count; k++) small[instr->operands[k]->id] = true;
    if (!wanted[i] || !cheap(instr)) continue;
    for (int k = 0; k < instr->operand_count; k++) wanted[instr->operands[k]->id] = true;
  }
  for (int i = 0; i < n; i++) wanted[i] = wanted[i] || small[i];
}

/* The parameters step i depends on (through instructions that depend on weights alone),
 * each once, into its kept_params. */
static bool list_params(rt_cpu_plan *plan, const hlo_comp *entry, int i, const bool *alone, int *seen, int *stack) {
  rt_cpu_step *step = &plan->steps[i];
  int top = 0, count = 0;
  stack[top++] = i;
  seen[i] = i;
  while (top) {
    const hlo_instr *instr = entry->instrs[stack[--top]];
    if (instr->opcode == HLO_OP_PARAMETER) count++;
    for (int k = 0; k < instr->operand_count; k++) {
      int o = instr->operands[k]->id;
      if (seen[o] == i || !alone[o]) continue;
      seen[o] = i;
      stack[top++] = o;
    }
  }
  step->kept_params = hlo_malloc(sizeof(int) * ((size_t)count + 1));
  if (!step->kept_params) return false;
  for (int o = 0; o <= i; o++)
    if (seen[o] == i && entry->instrs[o]->opcode == HLO_OP_PARAMETER)
      step->kept_params[step->kept_param_count++] = (int)entry->instrs[o]->parameter_number;
  step->kept = true;
  return true;
}

bool rt_cpu_find_kept(rt_cpu_plan *plan, const hlo_comp *entry) {
  int n = plan->step_count;
  bool *wanted = hlo_calloc((size_t)n + 1, sizeof(bool)), *alone = hlo_calloc((size_t)n + 1, sizeof(bool));
  bool *small = hlo_calloc((size_t)n + 1, sizeof(bool));
  int *seen = hlo_malloc(sizeof(int) * ((size_t)n + 1)), *stack = hlo_malloc(sizeof(int) * ((size_t)n + 1));
  bool ok = wanted && alone && small && seen && stack;
  if (ok) find_wanted(entry, wanted, small);
  for (int i = 0; ok && i < n; i++) seen[i] = -1;
  for (int i = 0; ok && i < n; i++) {
    const hlo_instr *instr = entry->instrs[i];
    alone[i] = wanted[i] && (leaf(instr) || cheap(instr));
    for (int k = 0; alone[i] && !leaf(instr) && k < instr->operand_count; k++) alone[i] = alone[instr->operands[k]->id];
    rt_cpu_step *step = &plan->steps[i];
    if (!alone[i] || leaf(instr) || !rt_cpu_step_writes_buffer(step) || step->output || step->part_count) continue;
    ok = list_params(plan, entry, i, alone, seen, stack);
    plan->kept_count++;
    plan->kept_slots += 1 + step->kept_param_count;
  }
  free(wanted);
  free(alone);
  free(small);
  free(seen);
  free(stack);
  return ok;
}
