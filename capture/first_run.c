/* A loaded executable whose first run fails. An entry from the disk or remote tier passed
 * every check at load (header, checksums, signature, the loader's bounds) and can still fail
 * when it runs: made by another build of a library, for an instruction set this processor
 * lacks, or crafted by a writer of the cache. Every runtime that loads entries (the lazy sync,
 * traced functions and the segments of a symbolic one, latch run, the ranks of an SPMD job
 * other than 0, which load rank 0's bytes) comes here after such a failure, so they all
 * answer it the same way: said once per process, compiled afresh, and the tiers' entry
 * replaced, so the failure repeats neither in this process nor in the next one that loads
 * the key. In a world of several ranks that holds only while the failed run reached none of
 * its collectives; past one, the other ranks may have gone on without this one, so the entry
 * is named with the commands that remove it instead. */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>

#include "capture.h"

static atomic_bool said;

void cap_first_run_reset_warning(void) { atomic_store(&said, false); }

void cap_first_run_warn(const char *what, cache_key key, const char *failure, const char *remedy) {
  if (!atomic_exchange(&said, true))
    fprintf(stderr, "latch: warning: compile cache: %s %016" PRIx64 "%016" PRIx64 " loaded from a cache tier "
            "failed its first run (%s); %s (further warnings of this kind are not shown)\n", what, key.hi, key.lo,
            failure && *failure ? failure : "no message", remedy);
}

unsigned cap_first_run_mark(latch_runtime *rt) { return rt->comm ? rt_comm_collectives(rt->comm) : 0; }

bool cap_first_run_in_step(latch_runtime *rt, cache_key key, unsigned mark) {
  if (!rt->comm || rt_comm_collectives(rt->comm) == mark) return true;
  char failure[sizeof ((hlo_diag *)0)->message];
  snprintf(failure, sizeof failure, "%s", latch_last_error());
  cap_set_error("graph %016" PRIx64 "%016" PRIx64 ", loaded from a cache tier or from rank 0, failed its first run "
                "after its collectives began (%s); compiled afresh here it would leave the ranks out of step, so "
                "remove it and run the job again: 'latch cache clear' on each rank's cache directory, and "
                "'latch cache clear --remote' for a Redis tier", key.hi, key.lo, failure);
  return false;
}

void *cap_compile_afresh(cache_disk *disk, cache_remote *remote, cache_key key, const char *fingerprint,
                         const cache_codec *codec, const char *failure, hlo_diag *diag) {
  cap_first_run_warn("graph", key, failure, "compiling it afresh and replacing the cached entry");
  void *value = codec->compile(codec->ctx, diag);
  if (value) cache_tiers_replace(disk, remote, key, fingerprint, codec, value);
  return value;
}
