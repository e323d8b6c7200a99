/* The table of backends. */
#include "backend.h"

#include <string.h>

#include "hlo/print.h"

static const rt_backend *const backends[] = {&rt_backend_reference, &rt_backend_cpu};

const rt_backend *rt_backend_find(const char *name) {
  if (!name) return NULL;
  for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++)
    if (strcmp(backends[i]->name, name) == 0) return backends[i];
  return NULL;
}

const char *rt_backend_names(void) {
  return "reference, cpu";
}

hlo_status rt_module_text_bytes(const hlo_module *module, void **bytes, size_t *len, hlo_diag *diag) {
  char *text = hlo_module_to_text(module);
  if (!text) return hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory serializing a module");
  *bytes = text;
  *len = strlen(text);
  return HLO_OK;
}
