/* cache/: canonical graph hashes, the in-memory compile-cache table and the on-disk store.
 * The layer's one header; uses hlo/, xxhash and ck. Private to the disk store:
 * disk_internal.h. */
#ifndef CACHE_H
#define CACHE_H
#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <time.h>

#include "hlo/hlo.h"

/* ---- hash.c ---- */
/* Canonical 128-bit hashes of HLO instructions, computations and modules: the compile cache's
 * keys. Two graphs get the same key exactly when they compute the same thing the same way, as
 * far as their IR can tell: names, metadata and pointers never enter a key; shapes, element
 * types, non-default layouts, every semantic attribute, constants' bytes, operand order and
 * called computations all do. Keys are stable across processes and machines (explicit
 * little-endian serialization, type and opcode names rather than enum values), so they can
 * name files in an on-disk cache. */

/* Bump when the canonical form changes: it seeds every hash, so keys written by an older
 * latch can never match a graph hashed by a newer one. */
#define CACHE_HASH_FORMAT 1

typedef struct cache_key {
  uint64_t lo, hi;
} cache_key;

static inline bool cache_key_equal(cache_key a, cache_key b) {
  return a.lo == b.lo && a.hi == b.hi;
}

/* The node hash: opcode, shape, attributes, called computations (hashed here) and
 * operand_keys[0..operand_count) in order. operand_keys may be NULL when the instruction has
 * no operands. This is what capture/ computes incrementally as ops are recorded. */
cache_key cache_hash_instr(const hlo_instr *instr, const cache_key *operand_keys);

/* A computation's hash: its parameters in parameter-number order, its root, and any other
 * instruction nothing uses (a dead side effect still matters); callees hashed once each. */
cache_key cache_hash_comp(const hlo_comp *comp);

/* A module's hash: its entry computation (parameters and outputs in order) and the header
 * attributes that can change execution (input_output_alias and the like); not its name. */
cache_key cache_hash_module(const hlo_module *module);

/* 32 lowercase hex digits, hi then lo, and a NUL. */
void cache_key_hex(cache_key key, char out[33]);

/* ---- table.c ---- */
/* The in-memory compile cache: cache_key -> compiled value, shared by every thread.
 *
 * A hit is lock-free and costs a few tens of nanoseconds. On a miss the first thread compiles
 * while the others asking for the same key wait for its result, so a key is compiled once
 * however many threads race for it; a failed compile is reported to every waiter and not
 * cached, so the next call tries again. The table holds at most `capacity` values and evicts
 * the least recently used (approximately) to make room.
 *
 * Values are opaque: the table calls the destroy function given at creation when the last
 * reference to an evicted (or, at cache_table_free, remaining) value goes away. Every entry
 * handed out is a counted reference: release it with cache_table_release when done, and the
 * value stays valid until then even if it is evicted meanwhile. */

typedef struct cache_table cache_table;
typedef struct cache_entry cache_entry; /* a held reference to one cached value */

/* Produces the value for a key, or returns NULL with diag set. Called with no lock held; it
 * must not ask the same table for the key it is compiling (it would wait for itself). */
typedef void *(*cache_compile_fn)(void *ctx, hlo_diag *diag);
/* Frees a value. Called with no lock held, from whichever thread drops the last reference. */
typedef void (*cache_destroy_fn)(void *value);

typedef struct cache_stats {
  uint64_t hits;             /* lookups that found the key */
  uint64_t misses;           /* lookups that did not, including those that then waited */
  uint64_t waits;            /* misses that waited for another thread's compile */
  uint64_t compiles;         /* calls to a compile function */
  uint64_t compile_failures; /* compiles that returned no value */
  uint64_t compile_ns;       /* total time inside compile functions */
  uint64_t evictions;
  uint64_t entries;          /* values in the table now */
  uint64_t capacity;
} cache_stats;

/* capacity: the most values kept, >= 1. NULL with diag on bad arguments or no memory. */
cache_table *cache_table_new(size_t capacity, cache_destroy_fn destroy, hlo_diag *diag);
/* Destroys the values no one holds; held ones are destroyed at their release. No other
 * thread may be inside a cache_table_* call on this table. */
void cache_table_free(cache_table *table);

/* The entry for key with a reference taken, or NULL on a miss. Never blocks. */
cache_entry *cache_table_get(cache_table *table, cache_key key);

/* The entry for key, compiling it with compile(ctx, diag) on a miss (see above). NULL with
 * diag set when the compile failed, here or in the thread this call waited for. was_hit
 * (optional) is true when the value was already cached: false for the compiling thread and
 * for threads that waited for it. */
cache_entry *cache_table_get_or_compile(cache_table *table, cache_key key,
                                        cache_compile_fn compile, void *ctx, hlo_diag *diag,
                                        bool *was_hit);

/* Drops a reference from get or get_or_compile; NULL is ignored. */
void cache_table_release(cache_table *table, cache_entry *entry);

void *cache_entry_value(const cache_entry *entry);
cache_key cache_entry_key(const cache_entry *entry);

void cache_table_stats(cache_table *table, cache_stats *stats);

/* ---- disk.c ---- */
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
  uint64_t remove_failed;         /* fix: bad entries that could not be removed */
  int remove_errno;               /* the first such failure's errno */
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

/* ---- disk_compile.c ---- */
/* Get or compile through the on-disk cache: what a caller with a backend does with a graph.
 * cache/ does not know backends (runtime/ is above it), so the caller hands over its compile,
 * serialize and deserialize steps as a codec.
 *
 * Stacked under the in-memory table (cache/table.h), the table's compile function calls
 * cache_disk_get_or_compile: threads racing on a key then reach the disk once per process, and
 * a warm process compiles nothing (tests/test_disk_cache_threads.c does exactly this). Two
 * processes that miss the same key at the same moment may both compile it; both entries are
 * whole, and the last rename wins. */

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
