/* latch run's compile step through the compile cache: the backend's compile, serialize and
 * deserialize wrapped as a cache codec (cache/ cannot call runtime/ itself). */
#include "run_cache.h"

#include "capture/capture.h"
#include "cli.h"
#include "runtime/cpu/cpu.h"

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
  if (!cache_hash_module(module, &cache->key)) {
    hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory hashing module %s", module->name);
    return NULL;
  }
  double start = cli_now();
  rt_executable *exe = cache->disk ? cache_disk_load(cache->disk, cache->key, cache->fingerprint, &cache->codec) : NULL;
  cache->origin = exe ? CACHE_ORIGIN_DISK : CACHE_ORIGIN_COMPILED;
  if (!exe) exe = backend->compile(module, options, diag);
  cache->seconds = cli_now() - start;
  if (exe && cache->origin == CACHE_ORIGIN_DISK)
    printf("loaded compiled graph from cache in %.2f ms\n", cache->seconds * 1e3);
  else if (exe)
    print_compile_time(module, cache->seconds);
  if (exe && backend == &rt_backend_cpu && (cap_log_flags(getenv("LATCH_LOG")) & CAP_LOG_COMPILES)) /* a load runs no pass: 0 and 0 */
    printf("cpu backend: passes ran %" PRId64 " times, %" PRId64 " plans built\n", rt_cpu_pass_runs(),
           rt_cpu_plans_built());
  return exe;
}

void run_cache_finish(run_cache *cache, const rt_executable *exe) {
  if (!exe) { /* nothing was compiled or loaded: nothing to save or count */
    cache_disk_close(cache->disk);
    cache->disk = NULL;
    return;
  }
  bool hit = cache->origin == CACHE_ORIGIN_DISK;
  if (!hit && cache->disk) cache_disk_save(cache->disk, cache->key, cache->fingerprint, &cache->codec, exe);
  printf("cache: %d hit%s, %d compile%s", hit, hit ? "" : "s", !hit, hit ? "s" : "");
  if (!cache->disk) {
    printf(" (disk cache off: %s)\n", cache->off_reason ? cache->off_reason : "unknown");
    return;
  }
  cache_disk_stats s;
  cache_disk_get_stats(cache->disk, &s);
  printf(" (disk %s", cache_disk_dir(cache->disk));
  if (s.writes) printf(", saved %" PRIu64 " bytes", s.bytes_written);
  else if (!hit) printf(", not saved");
  if (s.corrupt) printf(", %" PRIu64 " damaged entr%s removed", s.corrupt, s.corrupt == 1 ? "y" : "ies");
  if (s.evictions) printf(", %" PRIu64 " evicted", s.evictions);
  printf(")\n");
  cache_disk_close(cache->disk);
  cache->disk = NULL;
}
