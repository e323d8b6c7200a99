/* The runtime: options and their environment variables, the backend, the shared compile
 * cache, statistics, and the per-thread last error. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cap.h"

static _Thread_local char last_error[1024];

const char *latch_last_error(void) { return last_error; }

void cap_set_error(const char *format, ...) {
  va_list ap;
  va_start(ap, format);
  vsnprintf(last_error, sizeof last_error, format, ap);
  va_end(ap);
}

/* A non-negative integer variable; false (with the error set) when present but unreadable. */
static bool env_int(const char *name, int *out) {
  const char *text = getenv(name);
  if (!text || !*text) return true;
  char *end;
  errno = 0;
  long value = strtol(text, &end, 10);
  if (errno || *end || value < 0 || value > 1 << 30) {
    cap_set_error("%s=%s: expected a non-negative integer", name, text);
    return false;
  }
  *out = (int)value;
  return true;
}

static bool env_bool(const char *name, bool *out) {
  const char *text = getenv(name);
  if (!text || !*text) return true;
  if (!strcmp(text, "1") || !strcmp(text, "true") || !strcmp(text, "yes"))
    *out = true;
  else if (!strcmp(text, "0") || !strcmp(text, "false") || !strcmp(text, "no"))
    *out = false;
  else {
    cap_set_error("%s=%s: expected 1 or 0", name, text);
    return false;
  }
  return true;
}

latch_status latch_options_init(latch_options *options) {
  memset(options, 0, sizeof *options);
  options->backend = rt_backend_find("cpu") ? "cpu" : "reference";
  options->cache_capacity = 2048;
  const char *backend = getenv("LATCH_BACKEND");
  if (backend && *backend) options->backend = backend;
  bool ok = env_int("LATCH_THREADS", &options->threads);
  ok = env_int("LATCH_CACHE_CAPACITY", &options->cache_capacity) && ok;
  ok = env_bool("LATCH_EAGER", &options->eager) && ok;
  return ok ? LATCH_OK : LATCH_ERR_INPUT;
}

static void destroy_exe(void *value) {
  cap_exe *exe = value;
  exe->backend->destroy(exe->exe);
  free(exe);
}

latch_runtime *latch_open(const latch_options *options) {
  latch_options defaults;
  if (!options) {
    if (latch_options_init(&defaults) != LATCH_OK) return NULL;
    options = &defaults;
  }
  const char *name = options->backend ? options->backend : "reference";
  const rt_backend *backend = rt_backend_find(name);
  if (!backend) {
    cap_set_error("unknown backend '%s' (backends: %s)", name, rt_backend_names());
    return NULL;
  }
  if (options->cache_capacity < 1 || options->threads < 0) {
    cap_set_error("latch_open: cache_capacity must be at least 1 and threads non-negative");
    return NULL;
  }
  latch_runtime *rt = calloc(1, sizeof *rt);
  if (!rt) {
    cap_set_error("latch_open: out of memory");
    return NULL;
  }
  rt->options = *options;
  snprintf(rt->backend_name, sizeof rt->backend_name, "%s", backend->name);
  rt->options.backend = rt->backend_name; /* the caller's string need not outlive the call */
  rt->backend = backend;
  hlo_diag diag = {0};
  rt->cache = cache_table_new((size_t)options->cache_capacity, destroy_exe, &diag);
  if (!rt->cache) {
    cap_set_error("latch_open: %s", diag.message);
    free(rt);
    return NULL;
  }
  return rt;
}

void latch_close(latch_runtime *rt) {
  if (!rt) return;
  cache_table_free(rt->cache);
  free(rt);
  cap_pool_drain();
}

void latch_get_stats(latch_runtime *rt, latch_stats *stats) {
  memset(stats, 0, sizeof *stats);
  cache_stats cs;
  cache_table_stats(rt->cache, &cs);
  stats->syncs = atomic_load(&rt->syncs);
  stats->ops_traced = atomic_load(&rt->ops_traced);
  stats->nodes_synced = atomic_load(&rt->nodes_synced);
  stats->cache_hits = cs.hits;
  stats->cache_misses = cs.misses;
  stats->compiles = cs.compiles;
  stats->compile_failures = cs.compile_failures;
  stats->evictions = cs.evictions;
  stats->cache_entries = cs.entries;
  stats->compile_ns = cs.compile_ns;
  stats->key_ns = atomic_load(&rt->key_ns);
  stats->execute_ns = atomic_load(&rt->execute_ns);
}
