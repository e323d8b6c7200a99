/* Cloning through the text form: the printer and parser already round-trip every module
 * exactly (a tested fixed point), so a structural copier would be a second, untested way to
 * say the same thing. Parsing runs at several hundred MB/s, far below compile costs. */
#include "hlo.h"

#include <stdlib.h>
#include <string.h>


/* Origins are not text: they are carried by position, which the printer and parser keep
 * (computations and instructions in order). */
static void keep_origins(hlo_module *copy, const hlo_module *module) {
  if (copy->comp_count != module->comp_count) return;
  for (int c = 0; c < module->comp_count; c++)
    if (copy->comps[c]->instr_count != module->comps[c]->instr_count) return;
  for (int c = 0; c < module->comp_count; c++)
    for (int i = 0; i < module->comps[c]->instr_count; i++)
      copy->comps[c]->instrs[i]->origin = module->comps[c]->instrs[i]->origin;
}

hlo_module *hlo_module_clone(const hlo_module *module, hlo_diag *diag) {
  char *text = hlo_module_to_text(module);
  if (!text) {
    hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory copying module %s", module->name);
    return NULL;
  }
  hlo_module *copy = hlo_parse_module(text, strlen(text), "<clone>", diag);
  free(text);
  if (copy) keep_origins(copy, module);
  return copy;
}
