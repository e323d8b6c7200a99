/* The runtime: opening it with its options (settings.c reads their environment variables),
 * the backend, the shared compile cache, statistics, and the per-thread last error. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "minify/minify.h"
#include "runtime/runtime.h"

static _Thread_local char last_error[1024];

const char *latch_last_error(void) { return last_error; }

void cap_set_error(const char *format, ...) {
  va_list ap;
  va_start(ap, format);
  vsnprintf(last_error, sizeof last_error, format, ap);
  va_end(ap);
}

static void destroy_exe(void *value) {
  cap_exe *exe = value;
  exe->backend->destroy(exe->exe);
  free(exe);
}

size_t cap_code_options(const rt_compile_options *options, char *out, size_t size) {
  /* The thread count decides how the cpu backend's plans split products and convolutions;
   * the compile options whether it fuses. */
  bool fuse = !(options && options->no_fusion);
  int n = snprintf(out, size, "threads=%d fusion=%s", rt_parallel_threads(), fuse ? "on" : "off");
  /* choices limited or refused (bisecting) make other code: never the cache's usual entry */
  if (n >= 0 && (size_t)n < size && options && (options->limit_choices || options->choice_avoid))
    n += snprintf(out + n, size - (size_t)n, " choices=%lld avoid=%s",
                  options->limit_choices ? (long long)options->choice_limit : -1LL,
                  options->choice_avoid ? options->choice_avoid : "");
  return n < 0 ? 0 : (size_t)n;
}

/* The fingerprint the disk and remote tiers key entries with, besides the graph. */
static latch_status make_fingerprint(latch_runtime *rt, hlo_diag *diag) {
  char options[128];
  cap_code_options(&rt->compile_options, options, sizeof options);
  if (rt_fingerprint(rt->backend, options, rt->fingerprint, sizeof rt->fingerprint) >= sizeof rt->fingerprint) {
    hlo_diag_set(diag, HLO_ERR_INTERNAL, "backend fingerprint too long");
    return LATCH_ERR_INTERNAL;
  }
  return LATCH_OK;
}

/* The disk cache under the memory table. Trouble with the directory itself only costs the
 * cache (cache_disk_open warns and misses); a malformed test hook is an error. */
static latch_status open_disk(latch_runtime *rt, const latch_options *options, hlo_diag *diag) {
  const char *dir = options->cache_dir;
  if (!dir) {
    if (cap_default_cache_dir(rt->cache_dir, sizeof rt->cache_dir, diag) != HLO_OK) return LATCH_ERR_INPUT;
  } else {
    snprintf(rt->cache_dir, sizeof rt->cache_dir, "%s", dir);
  }
  rt->options.cache_dir = rt->cache_dir;
  if (make_fingerprint(rt, diag) != LATCH_OK) return LATCH_ERR_INTERNAL;
  cache_disk_test_hooks hooks = {.fault = options->test_cache_fault, .write_delay_ms = options->test_cache_write_delay_ms};
  rt->disk = cache_disk_open(rt->cache_dir, options->cache_max_bytes, &hooks, diag);
  return rt->disk ? LATCH_OK : LATCH_ERR_INPUT;
}

/* The remote tier under the disk cache. A malformed URL is an error (a typo should not turn
 * the fleet's cache off unseen); a server that cannot be reached only costs the tier, later. */
static latch_status open_remote(latch_runtime *rt, const latch_options *options, hlo_diag *diag) {
  cache_remote_config config;
  hlo_status status = cap_remote_config(options, options->cache_url, &config, diag);
  if (status == HLO_OK && !rt->disk && make_fingerprint(rt, diag) != LATCH_OK) status = HLO_ERR_INTERNAL;
  if (status != HLO_OK) {
    explicit_bzero(config.password, sizeof config.password);
    return status == HLO_ERR_INTERNAL ? LATCH_ERR_INTERNAL : LATCH_ERR_INPUT;
  }
  rt->remote = cache_remote_open(&config, options->cache_secret, diag); /* zeroes config's password */
  rt->options.cache_url = NULL; /* the caller's strings need not outlive the call */
  rt->options.cache_secret = NULL;
  rt->options.cache_namespace = rt->options.cache_password = rt->options.cache_password_file = NULL;
  return rt->remote ? LATCH_OK : LATCH_ERR_INTERNAL;
}

/* fork() waits for every open runtime's repro lock, so a child never inherits it held by a
 * thread it does not have (latch_last_repro there would wait forever). */
static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
static latch_runtime *open_runtimes;

static void fork_prepare(void) {
  pthread_mutex_lock(&open_lock);
  for (latch_runtime *rt = open_runtimes; rt; rt = rt->next_open) pthread_mutex_lock(&rt->repro_lock);
}

static void fork_release(void) {
  for (latch_runtime *rt = open_runtimes; rt; rt = rt->next_open) pthread_mutex_unlock(&rt->repro_lock);
  pthread_mutex_unlock(&open_lock);
}

static void fork_setup(void) { pthread_atfork(fork_prepare, fork_release, fork_release); }

static void list_open(latch_runtime *rt) {
  pthread_once(&fork_once, fork_setup);
  pthread_mutex_lock(&open_lock);
  rt->next_open = open_runtimes;
  if (open_runtimes) open_runtimes->prev_open = rt;
  open_runtimes = rt;
  pthread_mutex_unlock(&open_lock);
}

static void unlist_open(latch_runtime *rt) {
  pthread_mutex_lock(&open_lock);
  if (rt->prev_open) rt->prev_open->next_open = rt->next_open;
  else if (open_runtimes == rt) open_runtimes = rt->next_open;
  if (rt->next_open) rt->next_open->prev_open = rt->prev_open;
  pthread_mutex_unlock(&open_lock);
}

latch_runtime *latch_open(const latch_options *options) {
  latch_options defaults;
  if (!options) {
    if (latch_options_init(&defaults) != LATCH_OK) return NULL;
    options = &defaults;
  }
  const char *name = options->backend ? options->backend : "reference";
  const rt_backend *backend = cap_backend_find(name);
  if (!backend) {
    cap_set_error("unknown backend '%s' (backends: %s)", name, cap_backend_names());
    return NULL;
  }
  const char *cache = options->cache && *options->cache ? options->cache : "memory";
  if (strcmp(cache, "off") && strcmp(cache, "memory") && strcmp(cache, "disk")) {
    cap_set_error("latch_open: unknown cache mode '%s' (off, memory or disk)", cache);
    return NULL;
  }
  min_check_mode check_mode = MIN_MODE_OFF;
  hlo_diag check_diag = {0};
  if (min_check_mode_parse(options->check, &check_mode, &check_diag) != HLO_OK) {
    cap_set_error("latch_open: %s", check_diag.message);
    return NULL;
  }
  /* LATCH_FAULT (tests only) makes the backend misbehave on demand. */
  backend = cap_fault_wrap(backend, options->test_fault, &check_diag);
  if (!backend) {
    cap_set_error("latch_open: %s", check_diag.message);
    return NULL;
  }
  bool bf16_products;
  if (!cap_precision_parse("latch_open", options->precision, &bf16_products)) return NULL;
  if (options->cache_capacity < 1 || options->threads < 0) {
    cap_set_error("latch_open: cache_capacity must be at least 1 and threads non-negative");
    return NULL;
  }
  if (!(options->repro_max_bytes == 0 || options->repro_max_bytes >= 1)) {
    cap_set_error("latch_open: repro_max_bytes must be 0 or at least 1");
    return NULL;
  }
  latch_runtime *rt = hlo_calloc(1, sizeof *rt);
  if (!rt) {
    cap_set_error("latch_open: out of memory");
    return NULL;
  }
  rt->options = *options;
  snprintf(rt->backend_name, sizeof rt->backend_name, "%s", backend->name);
  rt->options.backend = rt->backend_name; /* the caller's string need not outlive the call */
  rt->backend = backend;
  if (options->threads > 0) rt_parallel_request_threads(options->threads);
  cap_compile_options(options, &rt->compile_options);
  snprintf(rt->cache_mode, sizeof rt->cache_mode, "%s", cache);
  rt->options.cache = rt->cache_mode;
  rt->options.cache_dir = NULL;
  rt->options.check = NULL; /* the caller's strings need not outlive the call */
  rt->log = cap_log_flags(options->log);
  rt->bf16_products = bf16_products;
  rt->options.precision = bf16_products ? "bf16" : "f32"; /* the caller's string need not outlive the call */
  snprintf(rt->repro_dir, sizeof rt->repro_dir, "%s", options->repro_dir ? options->repro_dir : "");
  rt->options.log = rt->options.repro_dir = NULL;
  rt->options.test_fault = rt->options.test_cache_fault = rt->options.test_cache_write_delay_ms = NULL;
  rt->check_mode = check_mode;
  rt->check_tol = options->check_tol > 0 ? options->check_tol : RT_ACCURACY_DEFAULT_TOL;
  rt->check_timeout = options->check_timeout > 0 ? options->check_timeout : CAP_CHECK_DEFAULT_TIMEOUT;
  rt->check_budget = options->check_budget > 0 ? options->check_budget : CAP_CHECK_DEFAULT_BUDGET;
  pthread_mutex_init(&rt->repro_lock, NULL);
  hlo_diag diag = {0};
  bool off = strcmp(cache, "off") == 0;
  rt->cache = cache_table_new(off ? 1 : (size_t)options->cache_capacity, destroy_exe, &diag);
  if (rt->cache && strcmp(cache, "disk") == 0 && open_disk(rt, options, &diag) != LATCH_OK) {
    cache_table_free(rt->cache);
    rt->cache = NULL;
  }
  if (rt->cache && !off && options->cache_url && *options->cache_url &&
      open_remote(rt, options, &diag) != LATCH_OK) {
    cache_table_free(rt->cache);
    cache_disk_close(rt->disk);
    rt->cache = NULL;
  }
  if (rt->cache && options->mpi && !(rt->comm = rt_comm_open(options->collective_timeout, &diag))) {
    cache_table_free(rt->cache);
    cache_disk_close(rt->disk);
    cache_remote_close(rt->remote);
    rt->cache = NULL;
  }
  if (!rt->cache) {
    cap_set_error("latch_open: %s", diag.message);
    free(rt);
    return NULL;
  }
  rt->compile_options.comm = rt->comm;
  list_open(rt);
  return rt;
}

void latch_close(latch_runtime *rt) {
  if (!rt) return;
  unlist_open(rt);
  cache_table_free(rt->cache);
  cache_disk_close(rt->disk);
  cache_remote_close(rt->remote);
  rt_comm_close(rt->comm); /* after the executables that borrow it */
  pthread_mutex_destroy(&rt->repro_lock);
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
  stats->compiles = atomic_load(&rt->compiles);
  stats->disk_loads = atomic_load(&rt->disk_loads);
  stats->check_failures = atomic_load(&rt->check_failures);
  if (rt->disk) {
    cache_disk_stats ds;
    cache_disk_get_stats(rt->disk, &ds);
    stats->disk_writes = ds.writes;
  }
  stats->remote_loads = atomic_load(&rt->remote_loads);
  if (rt->remote) {
    cache_remote_stats rs;
    cache_remote_get_stats(rt->remote, &rs);
    stats->remote_writes = rs.writes;
  }
  stats->compile_failures = cs.compile_failures;
  stats->evictions = cs.evictions;
  stats->cache_entries = cs.entries;
  stats->compile_ns = cs.compile_ns;
  stats->key_ns = atomic_load(&rt->key_ns);
  stats->execute_ns = atomic_load(&rt->execute_ns);
}

const char *latch_last_repro(latch_runtime *rt) {
  static _Thread_local char copy[4096];
  pthread_mutex_lock(&rt->repro_lock);
  snprintf(copy, sizeof copy, "%s", rt->last_repro);
  pthread_mutex_unlock(&rt->repro_lock);
  return copy;
}
