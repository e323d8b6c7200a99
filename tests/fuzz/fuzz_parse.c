/* libFuzzer target for the HLO text parser: any input either parses into a module that meets
 * the IR's invariants or fails with one located message; never a crash, hang or leak.
 * Built and run by `make fuzz`. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hlo/hlo.h"

/* Invariants a caller relies on without checking: an entry, a root in every computation,
 * resolved operands and callees, parameters numbered 0..n-1. */
static void check_module(const hlo_module *module) {
  if (!module->entry || !module->entry->is_entry) abort();
  for (int c = 0; c < module->comp_count; c++) {
    const hlo_comp *comp = module->comps[c];
    if (!comp->root || comp->instr_count == 0) abort();
    for (int i = 0; i < comp->instr_count; i++) {
      const hlo_instr *instr = comp->instrs[i];
      for (int o = 0; o < instr->operand_count; o++)
        if (!instr->operands[o] || instr->operands[o]->id >= i) abort();
      for (int k = 0; k < instr->called_count; k++)
        if (!instr->called[k] || instr->called[k]->id >= c) abort();
    }
    for (int n = 0; n < comp->param_count; n++)
      if (!comp->params[n] || comp->params[n]->parameter_number != n) abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  hlo_module **modules = NULL;
  hlo_diag diag;
  hlo_diag_clear(&diag);
  int count = hlo_parse_modules((const char *)data, size, "fuzz.hlo", &modules, &diag);
  if (count < 0) {
    if (modules || diag.status != HLO_ERR_INPUT || strncmp(diag.message, "fuzz.hlo:", 9) != 0) abort();
    return 0;
  }
  if (count == 0 || !modules) abort();
  for (int i = 0; i < count; i++) {
    check_module(modules[i]);
    hlo_module_free(modules[i]);
  }
  free(modules);
  return 0;
}
