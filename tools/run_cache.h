/* latch run's compile step through the compile cache (LATCH_CACHE, default disk, and the
 * remote tier when LATCH_CACHE_URL is set): load the executable or compile it, run it, and
 * only then save it to the disk, so a cold run's first result does not wait for the write and
 * fsync. With the remote tier, a compile is saved to both tiers before it runs, as a runtime
 * does: the fleet's other processes wait on its lease for that entry. */
#ifndef LATCH_RUN_CACHE_H
#define LATCH_RUN_CACHE_H
#include "cache/cache.h"
#include "runtime/runtime.h"

typedef struct run_cache {
  cache_mode mode;
  cache_disk *disk; /* NULL: no disk cache, for off_reason */
  const char *off_reason;
  cache_remote *remote; /* NULL: no LATCH_CACHE_URL */
  bool saved;           /* the tiers saved the compile already */
  const rt_backend *backend;
  const hlo_module *module;
  const rt_compile_options *options;
  cache_codec codec;
  cache_key key;
  char fingerprint[RT_FINGERPRINT_MAX];
  cache_origin origin;
  double seconds; /* loading or compiling */
} run_cache;

/* The module compiled by backend, or loaded from the disk cache or the remote tier; says
 * which on stdout. cache points at itself (its codec's context) and must stay where it is
 * until run_cache_finish. NULL with diag when the compile fails or LATCH_CACHE and friends
 * (LATCH_CACHE_URL included) hold bad values; trouble with the cache itself is only warned
 * about. Call run_cache_finish afterwards either way. */
rt_executable *run_cache_compile(run_cache *cache, const rt_backend *backend, const hlo_module *module,
                                 const rt_compile_options *options, hlo_diag *diag);

/* exe (loaded from a tier, given up here) failed its first run with failure: compiled afresh
 * and put in the tiers in its place (cap_compile_afresh); the new executable, or NULL with
 * diag. The cache line then counts a compile. */
rt_executable *run_cache_recompile(run_cache *cache, rt_executable *exe, const char *failure, hlo_diag *diag);

/* Saves a freshly compiled exe (may be NULL) and prints "cache: 0 hits, 1 compile (...)". */
void run_cache_finish(run_cache *cache, const rt_executable *exe);

#endif
