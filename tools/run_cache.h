/* latch run's compile step through the compile cache (LATCH_CACHE, default disk). */
#ifndef LATCH_RUN_CACHE_H
#define LATCH_RUN_CACHE_H
#include "cache/disk.h"
#include "cache/disk_compile.h"
#include "runtime/backend.h"

typedef struct run_cache_report {
  cache_mode mode;
  cache_origin origin;
  double seconds;    /* loading or compiling */
  bool disk_used;    /* false: LATCH_CACHE off or memory, or a backend that cannot serialize */
  char dir[4096];
  cache_disk_stats stats;
} run_cache_report;

/* The module compiled by backend, or loaded from the disk cache. NULL with diag when the
 * compile fails or LATCH_CACHE and friends hold bad values; cache trouble is only warned about. */
rt_executable *run_cache_compile(const rt_backend *backend, const hlo_module *module, run_cache_report *report,
                                 hlo_diag *diag);

/* "cache: 1 hit, 0 compiles (...)" on stdout. */
void run_cache_print(const run_cache_report *report);

#endif
