/* The on-disk cache's settings from the environment: LATCH_CACHE, LATCH_CACHE_DIR,
 * LATCH_CACHE_MAX_BYTES. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"

hlo_status cache_mode_from_env(cache_mode default_mode, cache_mode *mode, hlo_diag *diag) {
  const char *value = getenv("LATCH_CACHE");
  *mode = default_mode;
  if (!value || !*value) return HLO_OK;
  if (strcmp(value, "off") == 0) *mode = CACHE_MODE_OFF;
  else if (strcmp(value, "memory") == 0) *mode = CACHE_MODE_MEMORY;
  else if (strcmp(value, "disk") == 0) *mode = CACHE_MODE_DISK;
  else return hlo_diag_set(diag, HLO_ERR_INPUT, "LATCH_CACHE='%s': want off, memory or disk", value);
  return HLO_OK;
}

static hlo_status join(char *out, size_t size, const char *base, const char *rest, hlo_diag *diag) {
  int n = snprintf(out, size, "%s%s", base, rest);
  if (n < 0 || (size_t)n >= size)
    return hlo_diag_set(diag, HLO_ERR_INPUT, "compile cache directory name is too long: %s%s", base, rest);
  return HLO_OK;
}

hlo_status cache_disk_default_dir(char *out, size_t size, hlo_diag *diag) {
  const char *dir = getenv("LATCH_CACHE_DIR");
  if (dir && *dir) return join(out, size, dir, "", diag);
  /* XDG says a relative XDG_CACHE_HOME is invalid and must be ignored. */
  const char *xdg = getenv("XDG_CACHE_HOME");
  if (xdg && xdg[0] == '/') return join(out, size, xdg, "/latch", diag);
  const char *home = getenv("HOME");
  if (home && *home) return join(out, size, home, "/.cache/latch", diag);
  return hlo_diag_set(diag, HLO_ERR_INPUT,
                      "no compile cache directory: set LATCH_CACHE_DIR (HOME and XDG_CACHE_HOME are unset)");
}

hlo_status cache_disk_max_bytes_from_env(uint64_t *max_bytes, hlo_diag *diag) {
  const char *value = getenv("LATCH_CACHE_MAX_BYTES");
  *max_bytes = CACHE_DISK_DEFAULT_MAX_BYTES;
  if (!value || !*value) return HLO_OK;
  char *end;
  errno = 0;
  unsigned long long n = strtoull(value, &end, 10);
  int shift = 0;
  switch (*end) {
  case 'K': case 'k': shift = 10; end++; break;
  case 'M': case 'm': shift = 20; end++; break;
  case 'G': case 'g': shift = 30; end++; break;
  case 'T': case 't': shift = 40; end++; break;
  default: break;
  }
  if (errno || end == value || *end || value[0] == '-' || n == 0 || n > (UINT64_MAX >> shift))
    return hlo_diag_set(diag, HLO_ERR_INPUT,
                        "LATCH_CACHE_MAX_BYTES='%s': want a positive byte count, optionally with K, M, G or T",
                        value);
  *max_bytes = (uint64_t)n << shift;
  return HLO_OK;
}
