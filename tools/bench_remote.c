/* latch bench --remote-lookups N: lookups per second against the remote tier (LATCH_CACHE_URL
 * or --cache-url), one connection as a process has: N gets of one entry (GET, checksums, key
 * check, signature when LATCH_CACHE_SECRET is set, the payload copied out), then N gets of a
 * key that is not there. The entry is written first under a fingerprint no runtime uses, and
 * left there ('latch cache clear --remote' removes it). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache.h"
#include "cli.h"

static double lookups_per_second(cache_remote *remote, cache_key key, const char *fingerprint, int count, int *hits) {
  double start = cli_now();
  *hits = 0;
  for (int i = 0; i < count; i++) {
    void *bytes = NULL;
    size_t len = 0;
    if (cache_remote_get(remote, key, fingerprint, &bytes, &len)) (*hits)++;
    free(bytes);
  }
  double seconds = cli_now() - start;
  return seconds > 0 ? count / seconds : 0;
}

int bench_remote_lookups(int count) {
  cache_remote *remote = NULL;
  int opened = cli_open_remote("bench: --remote-lookups", NULL, &remote);
  if (opened != CLI_OK) return opened;
  enum { PAYLOAD = 4096 };
  static const char fingerprint[] = "backend=bench/0 latch=bench build=0 arch=none cpu= options=";
  cache_key key = {0x6c61746368, 0x62656e6368}, absent = {1, 2};
  char *payload = malloc(PAYLOAD);
  int status = CLI_OK, hits = 0, none = 0;
  if (!payload || (memset(payload, 'x', PAYLOAD), !cache_remote_put(remote, key, fingerprint, payload, PAYLOAD))) {
    cli_error("bench: cannot write the test entry to %s", cache_remote_name(remote));
    status = CLI_INTERNAL;
  } else {
    double hit_rate = lookups_per_second(remote, key, fingerprint, count, &hits);
    double miss_rate = lookups_per_second(remote, absent, fingerprint, count, &none);
    printf("remote lookups against %s, one connection, %d each:\n", cache_remote_name(remote), count);
    printf("  hits (4 KiB entry):  %.0f lookups/s (%.1f us each), %d of %d hit\n", hit_rate, 1e6 / hit_rate, hits, count);
    printf("  misses (absent key): %.0f lookups/s (%.1f us each), %d of %d hit\n", miss_rate, 1e6 / miss_rate, none,
           count);
  }
  free(payload);
  cache_remote_close(remote);
  return status;
}
