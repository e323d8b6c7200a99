/* The on-disk compile cache: a directory of opaque blobs (a backend's serialized executables)
 * shared by every process that points at it, so a second run of a program compiles nothing.
 *
 * An entry is named by (key, fingerprint): key is the graph's canonical hash (cache/hash.h),
 * fingerprint a string the caller builds from everything else that changes the compiled code
 * (backend name and version, latch's version, code-changing options, CPU features; see
 * runtime/fingerprint.h). Two different fingerprints never share a file, and a reader checks
 * both again against the entry's header, so a change to any of them is a miss, never a wrong
 * hit.
 *
 * Promises, whatever other processes do to the same directory at the same time:
 *   - a reader sees a whole entry or none: writers write a private temporary file, fsync it and
 *     rename() it into place, which publishes it atomically;
 *   - a reader that finds a damaged entry (bad magic or version, short file, wrong length,
 *     checksum mismatch, another key or fingerprint) treats it as a miss, removes it so the
 *     next put replaces it, and warns once per process per kind of damage;
 *   - filesystem errors (read-only directory, full disk, no permission) never fail the caller:
 *     a get becomes a miss and a put is skipped, with one warning per process per kind;
 *   - the directory stays under its size limit: after each put the least recently used entries
 *     (oldest mtime; a hit refreshes it) are removed, and temporary files left by killed
 *     writers are removed once they are CACHE_DISK_STALE_TEMP_SECONDS old.
 *
 * A cache_disk may be used by many threads at once. */
#ifndef CACHE_DISK_H
#define CACHE_DISK_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "cache/hash.h"
#include "hlo/diag.h"

/* Bump when the entry layout changes (cache/disk_format.c): older entries then read as
 * "unknown format version", a miss. */
#define CACHE_DISK_FORMAT 1
#define CACHE_DISK_DEFAULT_MAX_BYTES (UINT64_C(1) << 30)
#define CACHE_DISK_FINGERPRINT_MAX 4096
/* Temporary files older than this belong to writers that died; eviction removes them. */
#define CACHE_DISK_STALE_TEMP_SECONDS 900

typedef enum cache_mode {
  CACHE_MODE_OFF,    /* no compile cache at all */
  CACHE_MODE_MEMORY, /* the in-memory table only, nothing on disk */
  CACHE_MODE_DISK,   /* memory and disk */
} cache_mode;

/* What can be wrong with an entry or with the filesystem; warnings are issued once per kind. */
typedef enum cache_disk_problem {
  CACHE_DISK_OK,
  CACHE_DISK_SHORT,       /* shorter than its header, or than the lengths it declares */
  CACHE_DISK_MAGIC,       /* not a latch cache entry at all (zeroed, random, foreign) */
  CACHE_DISK_VERSION,     /* written by another entry format */
  CACHE_DISK_HEADER,      /* header checksum mismatch */
  CACHE_DISK_LENGTH,      /* longer than the lengths it declares */
  CACHE_DISK_CHECKSUM,    /* payload checksum mismatch */
  CACHE_DISK_MISMATCH,    /* another key or fingerprint than its name promises */
  CACHE_DISK_UNLOADABLE,  /* intact, but the backend could not deserialize it */
  CACHE_DISK_READ_ERROR,  /* the filesystem refused a read */
  CACHE_DISK_WRITE_ERROR, /* the filesystem refused a write (read-only, full, no permission) */
  CACHE_DISK_DIR_ERROR,   /* the directory cannot be created or listed */
  CACHE_DISK_PROBLEM_COUNT
} cache_disk_problem;

/* "checksum mismatch", ... */
const char *cache_disk_problem_name(cache_disk_problem problem);

typedef struct cache_disk_stats {
  uint64_t hits;          /* gets that returned an entry */
  uint64_t misses;        /* gets that did not, damaged entries included */
  uint64_t writes;        /* entries published */
  uint64_t write_errors;  /* puts skipped: the filesystem refused, or the entry exceeds the limit */
  uint64_t corrupt;       /* damaged entries found (and removed) */
  uint64_t evictions;     /* entries removed to stay under the limit */
  uint64_t bytes_read;    /* payload bytes returned by hits */
  uint64_t bytes_written; /* payload bytes published */
} cache_disk_stats;

typedef struct cache_disk cache_disk;

/* ---- configuration from the environment ---- */

/* LATCH_CACHE: off, memory or disk; unset or empty gives default_mode. Anything else is
 * HLO_ERR_INPUT naming the value, rather than a typo silently turning the cache off. */
hlo_status cache_mode_from_env(cache_mode default_mode, cache_mode *mode, hlo_diag *diag);
/* LATCH_CACHE_DIR, else $XDG_CACHE_HOME/latch, else $HOME/.cache/latch. */
hlo_status cache_disk_default_dir(char *out, size_t size, hlo_diag *diag);
/* LATCH_CACHE_MAX_BYTES (a byte count, with an optional K, M, G or T suffix: powers of 1024),
 * else CACHE_DISK_DEFAULT_MAX_BYTES. */
hlo_status cache_disk_max_bytes_from_env(uint64_t *max_bytes, hlo_diag *diag);

/* ---- the store ---- */

/* Opens (creating it with its parents) the cache directory. dir NULL: cache_disk_default_dir;
 * max_bytes 0: cache_disk_max_bytes_from_env. A directory that cannot be created gives a cache
 * that misses and skips every put, with a warning: only bad arguments, bad environment values
 * and out-of-memory give NULL (with diag). */
cache_disk *cache_disk_open(const char *dir, uint64_t max_bytes, hlo_diag *diag);
void cache_disk_close(cache_disk *disk);

const char *cache_disk_dir(const cache_disk *disk);
uint64_t cache_disk_max_bytes(const cache_disk *disk);

/* On a hit, *bytes is a malloc'd copy of the payload (the caller frees it) and *len its length,
 * and the entry becomes the most recently used. A miss returns false and sets nothing. */
bool cache_disk_get(cache_disk *disk, cache_key key, const char *fingerprint, void **bytes, size_t *len);
/* Publishes an entry, replacing any older one, then evicts down to the size limit. Returns
 * false when the write was skipped (filesystem error, entry larger than the limit). */
bool cache_disk_put(cache_disk *disk, cache_key key, const char *fingerprint, const void *bytes, size_t len);
/* Removes the entry because its payload turned out to be useless (problem says why, for the
 * statistics and the warning): the next put replaces it. */
void cache_disk_reject(cache_disk *disk, cache_key key, const char *fingerprint, cache_disk_problem problem);

void cache_disk_get_stats(const cache_disk *disk, cache_disk_stats *stats);

/* ---- maintenance: what `latch cache` shows and does ---- */

typedef struct cache_disk_entry_info {
  char name[80];        /* file name inside the directory */
  bool is_temp;         /* a writer's temporary file, not an entry */
  cache_disk_problem problem;
  cache_key key;        /* from the header, when it could be read */
  char fingerprint[CACHE_DISK_FINGERPRINT_MAX + 1];
  uint64_t file_bytes, payload_bytes;
  struct timespec mtime;
} cache_disk_entry_info;

typedef struct cache_disk_summary {
  uint64_t entries, entry_bytes;  /* entries (intact or not) */
  uint64_t bad_entries;           /* entries whose check failed */
  uint64_t temps, temp_bytes;     /* temporary files */
  uint64_t removed, removed_bytes;
} cache_disk_summary;

/* Calls visit (may be NULL) for each entry and temporary file in dir, in no particular order,
 * and totals them in *summary. check: read every entry whole and verify its checksum (else
 * only its header is read). fix: remove the entries that fail. A directory that does not exist
 * is empty; one that cannot be read is HLO_ERR_INTERNAL. */
typedef void (*cache_disk_visit_fn)(void *ctx, const cache_disk_entry_info *info);
hlo_status cache_disk_scan(const char *dir, bool check, bool fix, cache_disk_visit_fn visit, void *ctx,
                           cache_disk_summary *summary, hlo_diag *diag);
/* Removes every entry and every temporary file (fresh ones too: a writer whose file goes just
 * skips its put). Other files in dir are left alone. */
hlo_status cache_disk_clear(const char *dir, cache_disk_summary *summary, hlo_diag *diag);
/* Removes the least recently used entries until the total is <= max_bytes, and temporary files
 * older than stale_seconds. Returns the number of entries removed. */
uint64_t cache_disk_evict(const char *dir, uint64_t max_bytes, double stale_seconds);

/* Test-only: forget which warnings were already given, so a test can see the next one. */
void cache_disk_reset_warnings(void);

#endif
