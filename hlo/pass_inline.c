/* Call inlining. Computations come callees first, so a callee's own calls are already
 * inlined when its callers copy it. The copies are appended to the caller and the caller is
 * sorted again, so operands still come before users; attributes (windows, dims, literals,
 * called reducers) are shared with the originals, which live in the same module arena. */
#include <stdlib.h>

#include "hlo.h"

/* Copies callee's instructions into comp for call; false when out of memory. */
static bool inline_one(hlo_comp *comp, hlo_instr *call) {
  const hlo_comp *callee = call->called[0];
  hlo_instr **map = hlo_calloc((size_t)callee->instr_count + 1, sizeof *map);
  hlo_instr *ops[64];
  if (!map) return false;
  bool ok = true;
  for (int i = 0; i < callee->instr_count && ok; i++) {
    const hlo_instr *src = callee->instrs[i];
    if (src->opcode == HLO_OP_PARAMETER) {
      ok = src->parameter_number >= 0 && src->parameter_number < call->operand_count;
      if (ok) map[i] = call->operands[src->parameter_number];
      continue;
    }
    ok = src->operand_count <= (int)(sizeof ops / sizeof *ops);
    for (int k = 0; ok && k < src->operand_count; k++) {
      const hlo_instr *operand = src->operands[k];
      ok = operand->parent == callee && map[operand->id];
      if (ok) ops[k] = map[operand->id];
    }
    hlo_instr *copy = ok ? hlo_comp_append(comp, src->opcode, hlo_fresh_name(comp->module, src->name),
                                           src->operand_count, ops)
                         : NULL;
    if (!copy) {
      ok = false;
      break;
    }
    /* every attribute as in src, origin included (a backend binding other sizes finds the
     * copy's shape through it); identity and operands as appended */
    hlo_instr own = *copy;
    *copy = *src;
    copy->name = own.name;
    copy->operand_count = own.operand_count;
    copy->operands = own.operands;
    copy->parent = own.parent;
    copy->id = own.id;
    map[i] = copy;
  }
  hlo_instr *result = ok && callee->root ? map[callee->root->id] : NULL;
  free(map);
  if (!result) return false;
  hlo_replace_uses(comp, call, result);
  return true;
}

static bool inlinable(const hlo_comp *comp, const hlo_instr *instr) {
  if (instr->opcode != HLO_OP_CALL || instr->called_count != 1) return false;
  const hlo_comp *callee = instr->called[0];
  return callee && callee != comp && callee->root && callee->param_count == instr->operand_count &&
         hlo_shape_equal(&callee->root->shape, &instr->shape);
}

int hlo_pass_inline_calls(hlo_module *module) {
  int inlined = 0;
  for (int c = 0; c < module->comp_count; c++) {
    hlo_comp *comp = module->comps[c];
    int count = comp->instr_count, here = 0; /* copies appended below are not revisited */
    for (int i = 0; i < count; i++)
      if (inlinable(comp, comp->instrs[i]) && hlo_choice("inline", comp->instrs[i]->name) &&
          inline_one(comp, comp->instrs[i]))
        here++;
    if (here) {
      hlo_diag diag = {0};
      if (!hlo_comp_sort(comp, &diag)) return inlined; /* out of memory (arena.failed set): copies add no cycle */
      inlined += here;
    }
  }
  return inlined;
}
