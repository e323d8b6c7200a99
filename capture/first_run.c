/* A loaded executable whose first run fails. An entry from the disk or remote tier passed
 * every check at load (header, checksums, signature, the loader's bounds) and can still fail
 * when it runs: made by another build of a library, for an instruction set this processor
 * lacks, or crafted by a writer of the cache. Every runtime that loads entries (the lazy sync,
 * traced functions, latch run) comes here after such a failure, so they all answer it the
 * same way: said once per process, compiled afresh, and the tiers' entry replaced, so the
 * failure repeats neither in this process nor in the next one that loads the key. */
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

void *cap_compile_afresh(cache_disk *disk, cache_remote *remote, cache_key key, const char *fingerprint,
                         const cache_codec *codec, const char *failure, hlo_diag *diag) {
  cap_first_run_warn("graph", key, failure, "compiling it afresh and replacing the cached entry");
  void *value = codec->compile(codec->ctx, diag);
  if (value) cache_tiers_replace(disk, remote, key, fingerprint, codec, value);
  return value;
}
