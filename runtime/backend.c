/* What backends share: the module's text as a serialized executable. */
#include "runtime.h"

#include <string.h>

#include "hlo/hlo.h"

hlo_status rt_module_text_bytes(const hlo_module *module, void **bytes, size_t *len, hlo_diag *diag) {
  char *text = hlo_module_to_text(module);
  if (!text) return hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory serializing a module");
  *bytes = text;
  *len = strlen(text);
  return HLO_OK;
}
