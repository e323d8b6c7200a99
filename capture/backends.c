/* The list of backends. It lives here, where the runtime is opened, because it names every
 * backend: runtime/ stays below its backend folders and never points up into them. */
#include "capture.h"

#include <string.h>

#include "runtime/cpu/cpu.h"
#include "runtime/reference/reference.h"

static const rt_backend *const backends[] = {&rt_backend_reference, &rt_backend_cpu};

const rt_backend *cap_backend_find(const char *name) {
  if (!name) return NULL;
  for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++)
    if (strcmp(backends[i]->name, name) == 0) return backends[i];
  return NULL;
}

const char *cap_backend_names(void) {
  return "reference, cpu";
}
