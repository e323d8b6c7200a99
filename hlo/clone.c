/* Cloning through the text form: the printer and parser already round-trip every module
 * exactly (a tested fixed point), so a structural copier would be a second, untested way to
 * say the same thing. Parsing runs at several hundred MB/s, far below compile costs. */
#include "clone.h"

#include <stdlib.h>
#include <string.h>

#include "parse.h"
#include "print.h"

hlo_module *hlo_module_clone(const hlo_module *module, hlo_diag *diag) {
  char *text = hlo_module_to_text(module);
  if (!text) {
    hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory copying module %s", module->name);
    return NULL;
  }
  hlo_module *copy = hlo_parse_module(text, strlen(text), "<clone>", diag);
  free(text);
  return copy;
}
