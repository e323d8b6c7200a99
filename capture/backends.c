/* The list of backends. It lives here, where the runtime is opened, because it names every
 * backend: runtime/ stays below its backend folders and never points up into them. */
#include "capture.h"

#include <pthread.h>
#include <stdio.h>
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

/* Joined once: the list never changes while the process runs. */
static char names[256];
static pthread_once_t names_once = PTHREAD_ONCE_INIT;

static void join_names(void) {
  size_t used = 0;
  for (size_t i = 0; i < sizeof backends / sizeof backends[0] && used < sizeof names; i++)
    used += (size_t)snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "", backends[i]->name);
}

const char *cap_backend_names(void) {
  pthread_once(&names_once, join_names);
  return names;
}
