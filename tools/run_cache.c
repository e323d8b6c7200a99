/* latch run's compile step through the compile cache, the tiers a runtime has below its
 * memory table: the disk cache (LATCH_CACHE, default disk) and the remote tier
 * (LATCH_CACHE_URL). The backend's compile, serialize and deserialize are wrapped as a cache
 * codec (cache/ cannot call runtime/ itself). */
#include "run_cache.h"

#include "capture/capture.h"
#include "cli.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *codec_compile(void *ctx, hlo_diag *diag) {
  const run_cache *c = ctx;
  return c->backend->compile(c->module, c->options, diag);
}

static hlo_status codec_serialize(void *ctx, const void *value, void **bytes, size_t *len, hlo_diag *diag) {
  const run_cache *c = ctx;
  return c->backend->serialize(value, bytes, len, diag);
}

static void *codec_deserialize(void *ctx, const void *bytes, size_t len, hlo_diag *diag) {
  const run_cache *c = ctx;
  return c->backend->deserialize(bytes, len, c->options, diag);
}

static void *codec_adopt(void *ctx, void *bytes, size_t len, hlo_diag *diag) {
  const run_cache *c = ctx;
  return c->backend->adopt(bytes, len, c->options, diag);
}

/* Compile time with its rate per 1,000 instructions (every computation's), the figure that
 * says whether compiling stays small as graphs grow. */
static void print_compile_time(const hlo_module *module, double seconds) {
  int64_t instrs = 0;
  for (int c = 0; c < module->comp_count; c++) instrs += module->comps[c]->instr_count;
  printf("compiled in %.2f ms (%" PRId64 " instructions, %.2f ms per 1,000)\n", seconds * 1e3, instrs,
         instrs ? seconds * 1e3 * 1000.0 / (double)instrs : 0.0);
}

/* The remote tier when LATCH_CACHE_URL names one, as latch_open opens it: a malformed URL is
 * an error (a typo should not turn the fleet's cache off unseen), a server that cannot be
 * reached only costs the tier, with a warning when it is first used. */
static hlo_status open_remote(run_cache *cache, hlo_diag *diag) {
  const char *url = getenv("LATCH_CACHE_URL");
  if (!url || !*url) return HLO_OK;
  latch_options options;
  if (latch_options_init(&options) != LATCH_OK)
    return hlo_diag_set(diag, HLO_ERR_INPUT, "%s", latch_last_error());
  cache_remote_config config;
  if (cap_remote_config(&options, url, &config, diag) != HLO_OK) {
    explicit_bzero(config.password, sizeof config.password);
    return diag->status;
  }
  cache->remote = cache_remote_open(&config, options.cache_secret, diag);
  return cache->remote ? HLO_OK : diag->status;
}

rt_executable *run_cache_compile(run_cache *cache, const rt_backend *backend, const hlo_module *module,
                                 const rt_compile_options *options, hlo_diag *diag) {
  memset(cache, 0, sizeof *cache);
  cache->backend = backend;
  cache->module = module;
  cache->options = options;
  cache->codec = (cache_codec){cache, codec_compile, codec_serialize, codec_deserialize,
                               backend->adopt ? codec_adopt : NULL};
  if (cap_env_cache_mode(CACHE_MODE_DISK, &cache->mode, diag) != HLO_OK) return NULL;
  char code[128];
  cap_code_options(options, code, sizeof code);
  bool fits = rt_fingerprint(backend, code, cache->fingerprint, sizeof cache->fingerprint) < sizeof cache->fingerprint;
  if (cache->mode != CACHE_MODE_DISK)
    cache->off_reason = cache->mode == CACHE_MODE_OFF ? "LATCH_CACHE=off" : "LATCH_CACHE=memory";
  else if (!backend->serialize || !backend->deserialize)
    cache->off_reason = "the backend cannot serialize";
  else if (!fits)
    cache->off_reason = "fingerprint too long";
  if (!cache->off_reason) {
    /* No directory to be had (HOME unset, say) only costs the cache, not the run; a bad
     * LATCH_CACHE_MAX_BYTES is a typo worth stopping for. */
    char dir[4096];
    hlo_diag dir_diag;
    hlo_diag_clear(&dir_diag);
    uint64_t max_bytes;
    cache_disk_test_hooks hooks = {getenv("LATCH_CACHE_TEST_FAULT"), getenv("LATCH_CACHE_TEST_WRITE_DELAY_MS")};
    if (cap_env_cache_dir(dir, sizeof dir, &dir_diag) != HLO_OK) {
      fprintf(stderr, "latch: warning: compile cache: %s; compiling without it\n", dir_diag.message);
      cache->off_reason = "no cache directory";
    } else if (cap_env_cache_max_bytes(&max_bytes, diag) != HLO_OK ||
               !(cache->disk = cache_disk_open(dir, max_bytes, &hooks, diag))) {
      return NULL;
    }
  }
  if (cache->mode != CACHE_MODE_OFF && backend->serialize && backend->deserialize && fits &&
      open_remote(cache, diag) != HLO_OK)
    return NULL;
  if (!cache_hash_module(module, &cache->key)) {
    hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory hashing module %s", module->name);
    return NULL;
  }
  double start = cli_now();
  rt_executable *exe;
  if (cache->remote) { /* a compile is saved to both tiers before the fleet's lease is let go */
    exe = cache_tiers_get_or_compile(cache->disk, cache->remote, cache->key, cache->fingerprint, &cache->codec,
                                     &cache->origin, NULL, diag);
    cache->saved = true;
  } else {
    exe = cache->disk ? cache_disk_load(cache->disk, cache->key, cache->fingerprint, &cache->codec) : NULL;
    cache->origin = exe ? CACHE_ORIGIN_DISK : CACHE_ORIGIN_COMPILED;
    if (!exe) exe = backend->compile(module, options, diag);
  }
  cache->seconds = cli_now() - start;
  if (exe && cache->origin == CACHE_ORIGIN_DISK)
    printf("loaded compiled graph from cache in %.2f ms\n", cache->seconds * 1e3);
  else if (exe && cache->origin == CACHE_ORIGIN_REMOTE)
    printf("loaded compiled graph from the remote cache %s in %.2f ms\n", cache_remote_name(cache->remote),
           cache->seconds * 1e3);
  else if (exe)
    print_compile_time(module, cache->seconds);
  if (exe && backend->work_so_far && (cap_log_flags(getenv("LATCH_LOG")) & CAP_LOG_COMPILES)) {
    char so_far[96];
    backend->work_so_far(so_far, sizeof so_far);
    printf("%s backend: %s\n", backend->name, so_far);
  }
  return exe;
}

rt_executable *run_cache_recompile(run_cache *cache, rt_executable *exe, const char *failure, hlo_diag *diag) {
  cache->backend->destroy(exe);
  double start = cli_now();
  exe = cap_compile_afresh(cache->disk, cache->remote, cache->key, cache->fingerprint, &cache->codec, failure, diag);
  cache->seconds = cli_now() - start;
  cache->origin = CACHE_ORIGIN_COMPILED;
  cache->saved = true; /* in both tiers already */
  if (exe) print_compile_time(cache->module, cache->seconds);
  return exe;
}

/* "; remote redis://host:port/0, stored" inside the cache line's parentheses. */
static void print_remote(const run_cache *cache, bool hit) {
  cache_remote_stats s;
  cache_remote_get_stats(cache->remote, &s);
  printf("; remote %s", cache_remote_name(cache->remote));
  if (s.writes) printf(", stored");
  else if (!hit && s.refused) printf(", not stored: the server refused the write");
  else if (!hit && s.oversized) printf(", not stored: over max_entry_bytes");
  else if (!hit) printf(", not stored");
  if (s.failures) printf(", %" PRIu64 " failed request%s", s.failures, s.failures == 1 ? "" : "s");
}

static void close_tiers(run_cache *cache) {
  cache_disk_close(cache->disk);
  cache->disk = NULL;
  cache_remote_close(cache->remote);
  cache->remote = NULL;
}

void run_cache_finish(run_cache *cache, const rt_executable *exe) {
  if (!exe) { /* nothing was compiled or loaded: nothing to save or count */
    close_tiers(cache);
    return;
  }
  bool hit = cache->origin != CACHE_ORIGIN_COMPILED;
  if (!hit && cache->disk && !cache->saved)
    cache_disk_save(cache->disk, cache->key, cache->fingerprint, &cache->codec, exe);
  printf("cache: %d hit%s, %d compile%s", hit, hit ? "" : "s", !hit, hit ? "s" : "");
  if (!cache->disk) {
    printf(" (disk cache off: %s", cache->off_reason ? cache->off_reason : "unknown");
  } else {
    cache_disk_stats s;
    cache_disk_get_stats(cache->disk, &s);
    printf(" (disk %s", cache_disk_dir(cache->disk));
    if (s.writes) printf(", saved %" PRIu64 " bytes", s.bytes_written);
    else if (!hit) printf(", not saved");
    if (s.corrupt) printf(", %" PRIu64 " damaged entr%s removed", s.corrupt, s.corrupt == 1 ? "y" : "ies");
    if (s.evictions) printf(", %" PRIu64 " evicted", s.evictions);
  }
  if (cache->remote) print_remote(cache, hit);
  printf(")\n");
  close_tiers(cache);
}
