/* Get or compile through the on-disk cache: what a caller with a backend does with a graph.
 * cache/ does not know backends (runtime/ is above it), so the caller hands over its compile,
 * serialize and deserialize steps as a codec.
 *
 * Stacked under the in-memory table (cache/table.h), the table's compile function calls
 * cache_disk_get_or_compile: threads racing on a key then reach the disk once per process, and
 * a warm process compiles nothing (tests/test_disk_cache_threads.c does exactly this). Two
 * processes that miss the same key at the same moment may both compile it; both entries are
 * whole, and the last rename wins. */
#ifndef CACHE_DISK_COMPILE_H
#define CACHE_DISK_COMPILE_H
#include <stddef.h>

#include "cache/disk.h"

typedef struct cache_codec {
  void *ctx; /* passed to every callback */
  /* Builds the value (e.g. a backend's compile of a module); NULL with diag on failure. */
  void *(*compile)(void *ctx, hlo_diag *diag);
  /* The value as bytes: a malloc'd buffer in *bytes, its length in *len. */
  hlo_status (*serialize)(void *ctx, const void *value, void **bytes, size_t *len, hlo_diag *diag);
  /* A value equal to the one serialized; NULL with diag when the bytes are unusable. */
  void *(*deserialize)(void *ctx, const void *bytes, size_t len, hlo_diag *diag);
} cache_codec;

typedef enum cache_origin {
  CACHE_ORIGIN_DISK,     /* loaded from the disk cache */
  CACHE_ORIGIN_COMPILED, /* compiled here (and saved, when the disk cache is on) */
} cache_origin;

/* The value deserialized from the entry for (key, fingerprint), or NULL on a miss. An entry the
 * codec cannot deserialize is removed, counted as corrupt and warned about once: a miss. */
void *cache_disk_load(cache_disk *disk, cache_key key, const char *fingerprint, const cache_codec *codec);
/* Serializes value and puts it; false (with one warning per process) when it was not saved. A
 * caller that wants its first result soon can run the value first and save it afterwards. */
bool cache_disk_save(cache_disk *disk, cache_key key, const char *fingerprint, const cache_codec *codec,
                     const void *value);

/* The value for (key, fingerprint): deserialized from disk on a hit, else compiled and then
 * saved. disk NULL: just compile. Never fails for the cache's sake: an entry the codec cannot
 * deserialize is removed (counted as corrupt, warned about once) and compiled again, and a
 * value that cannot be serialized or saved is still returned. NULL with diag only when
 * compile fails. origin and seconds (time spent loading or compiling) are optional. */
void *cache_disk_get_or_compile(cache_disk *disk, cache_key key, const char *fingerprint, const cache_codec *codec,
                                cache_origin *origin, double *seconds, hlo_diag *diag);

#endif
