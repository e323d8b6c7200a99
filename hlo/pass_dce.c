/* Dead-code elimination: a mark from the root over operands, then the array of
 * instructions is compacted. Dead instructions stay in the arena (it frees everything at
 * once) but no longer belong to the computation. */
#include <stdlib.h>

#include "hlo.h"

static int dce_comp(hlo_comp *comp) {
  int count = comp->instr_count;
  if (!comp->root || count == 0) return 0;
  unsigned char *live = hlo_calloc((size_t)count, 1);
  if (!live) return 0; /* out of memory: removing nothing is still correct */
  /* instrs are sorted operands-first, so one backward sweep marks everything reachable */
  live[comp->root->id] = 1;
  for (int i = count - 1; i >= 0; i--) {
    const hlo_instr *instr = comp->instrs[i];
    if (instr->opcode == HLO_OP_PARAMETER) live[i] = 1;
    if (!live[i]) continue;
    for (int k = 0; k < instr->operand_count; k++) {
      const hlo_instr *operand = instr->operands[k];
      if (operand && operand->parent == comp) live[operand->id] = 1;
    }
  }
  int kept = 0;
  for (int i = 0; i < count; i++) {
    if (!live[i]) continue;
    hlo_instr *instr = comp->instrs[i];
    instr->id = kept;
    comp->instrs[kept++] = instr;
  }
  comp->instr_count = kept;
  free(live);
  return count - kept;
}

int hlo_pass_dce(hlo_module *module) {
  int removed = 0;
  for (int c = 0; c < module->comp_count; c++) removed += dce_comp(module->comps[c]);
  return removed;
}
