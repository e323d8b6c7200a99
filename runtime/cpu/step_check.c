/* A loaded plan's steps checked for what the executor takes for granted of them
 * (deserialize.c calls it once the steps are read): each step kind is one its instruction
 * may have, and every step that reads a value finds one there. The executor keeps one cell
 * per step: INSIDE steps and a FAST step with a tuple result leave theirs empty, and a
 * step's frees empty the cells of the storages it reads last. A planner's plan never reads
 * an empty cell; a blob whose checksums were recomputed after an edit may claim to, and is
 * refused here instead of reaching a kernel with no value. */
#include <stdlib.h>

#include "plan_internal.h"

/* Views share their storage's bytes: reshape, bitcast and copy, and a broadcast that only
 * adds dims of size 1 (fusion_groups.c), each over an array at least as large; or an element
 * of a tuple (get-tuple-element). */
static bool alias_fits(const hlo_instr *instr) {
  hlo_opcode op = instr->opcode;
  if (op == HLO_OP_GET_TUPLE_ELEMENT) return instr->operand_count == 1;
  if (op != HLO_OP_RESHAPE && op != HLO_OP_BITCAST && op != HLO_OP_COPY && op != HLO_OP_BROADCAST) return false;
  const hlo_shape *from = instr->operand_count == 1 ? &instr->operands[0]->shape : NULL;
  return from && hlo_shape_is_array(from) && hlo_shape_is_array(&instr->shape) &&
         hlo_shape_bytes(&instr->shape) <= hlo_shape_bytes(from);
}

static bool kind_fits(const rt_cpu_step *s) {
  switch (s->kind) {
    case RT_STEP_ALIAS: return alias_fits(s->instr);
    case RT_STEP_TUPLE: return s->instr->opcode == HLO_OP_TUPLE;
    case RT_STEP_PART: return s->instr->opcode == HLO_OP_GET_TUPLE_ELEMENT;
    default: return true; /* the others: checked as they are read */
  }
}

/* Whether s reads its inputs' values (PART views the arena where its tuple step wrote). */
static bool reads_values(const rt_cpu_step *s) {
  return s->kind != RT_STEP_PARAM && s->kind != RT_STEP_CONST && s->kind != RT_STEP_INSIDE && s->kind != RT_STEP_PART;
}

static bool makes_value(const rt_cpu_step *s) {
  return s->kind != RT_STEP_INSIDE && !(s->kind == RT_STEP_FAST && s->part_count);
}

const char *rt_cpu_steps_check(const rt_cpu_plan *plan, const hlo_comp *entry, int *bad, bool *oom) {
  int n = plan->step_count;
  *oom = false;
  *bad = -1;
  if (n == 0) return NULL; /* dynamic: the reference evaluator runs the module */
  /* owner[i]: the step whose cell holds the storage i views (plan.c's storage_step);
   * filled[i]: i's cell holds a value */
  int *owner = hlo_malloc(sizeof(int) * (size_t)n);
  bool *filled = hlo_calloc((size_t)n, sizeof(bool));
  const char *what = NULL;
  if (!owner || !filled) {
    *oom = true;
    what = "out of memory";
  }
  for (int i = 0; !what && i < n; i++) {
    const rt_cpu_step *s = &plan->steps[i];
    *bad = i;
    if (!kind_fits(s)) what = "a kind its instruction cannot have";
    for (int k = 0; !what && reads_values(s) && k < rt_cpu_step_input_count(s); k++) {
      int from = rt_cpu_step_input(s, k);
      if (!filled[from] || !filled[owner[from]]) what = "an input with no value at that point";
    }
    if (what) break; /* a step refused: what follows may lean on what it got wrong */
    bool view = s->kind == RT_STEP_ALIAS && s->instr->opcode != HLO_OP_GET_TUPLE_ELEMENT;
    owner[i] = view ? owner[s->instr->operands[0]->id] : i;
    filled[i] = makes_value(s);
    for (int f = 0; f < s->free_count; f++) filled[s->frees[f]] = false;
  }
  if (!what && !filled[entry->root->id]) what = "a result with no value", *bad = entry->root->id;
  free(owner);
  free(filled);
  return what;
}
