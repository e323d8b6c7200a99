/* cache/: canonical graph hashes and the compile cache's three tiers: the in-memory table,
 * the on-disk store, and the remote tier in Redis shared by a fleet. The layer's one header;
 * uses hlo/, xxhash, ck, hiredis (the protocol only), nettle and GnuTLS (rediss://). Private to the disk
 * store: disk_internal.h; to the remote tier: remote_internal.h.
 *
 * The files, each under its own heading below with what it exports: clock.c, hash.c,
 * table.c; the disk store (disk.c, disk_format.c, disk_io.c, disk_scan.c, disk_trust.c,
 * disk_compile.c); the remote tier (remote_url.c, remote.c, remote_conn.c, remote_tls.c,
 * remote_entry.c, remote_sign.c, remote_compile.c, remote_admin.c). disk_trust.c,
 * remote_conn.c, remote_tls.c, remote_entry.c and remote_sign.c export only through the
 * private headers. */
#ifndef CACHE_H
#define CACHE_H
#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <time.h>

#include "hlo/hlo.h"

/* ---- clock.c ---- */
/* Seconds on the monotonic clock. */
double cache_now_seconds(void);

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

/* Each hash below fills *key and returns true, or returns false when memory runs out (the
 * key is then meaningless: as SQLite's sqlite3OomFault, the failure is sticky through the
 * whole hash and comes out once, here). */

/* The node hash: opcode, shape, attributes, called computations (hashed here) and
 * operand_keys[0..operand_count) in order. operand_keys may be NULL when the instruction has
 * no operands. */
bool cache_hash_instr(const hlo_instr *instr, const cache_key *operand_keys, cache_key *key);

/* A computation's hash: its parameters in parameter-number order, its root, and any other
 * instruction nothing uses (a dead side effect still matters); callees hashed once each. */
bool cache_hash_comp(const hlo_comp *comp, cache_key *key);

/* A module's hash: its entry computation (parameters and outputs in order) and the header
 * attributes that can change execution (input_output_alias and the like); not its name. */
bool cache_hash_module(const hlo_module *module, cache_key *key);

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
/* Takes entry out of the table if it is still there (the caller's reference stays good until
 * released): the next lookup of its key compiles. False when it was already gone. */
bool cache_table_remove(cache_table *table, cache_entry *entry);

void *cache_entry_value(const cache_entry *entry);
cache_key cache_entry_key(const cache_entry *entry);

void cache_table_stats(cache_table *table, cache_stats *stats);

/* ---- the disk store (disk*.c) ----
 * The on-disk compile cache: a directory of opaque blobs (a backend's serialized executables)
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
  CACHE_DISK_UNSAFE_DIR,  /* the directory is another user's, or others may write to it */
  CACHE_DISK_UNSIGNED,    /* remote tier, with a secret: an entry without a signature */
  CACHE_DISK_BAD_SIGNATURE, /* remote tier, with a secret: signed with another secret, or altered */
  CACHE_DISK_FOREIGN,     /* an entry file owned by another user: refused, left in place */
  CACHE_DISK_PROBLEM_COUNT
} cache_disk_problem;

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

/* ---- disk_format.c ---- */
/* "checksum mismatch", ... */
const char *cache_disk_problem_name(cache_disk_problem problem);

/* ---- disk.c ---- */

/* Test-only hooks: latch_open fills them from latch_options' test_cache_fault and
 * test_cache_write_delay_ms (LATCH_CACHE_TEST_FAULT and LATCH_CACHE_TEST_WRITE_DELAY_MS; tests
 * may fill them directly); NULL or empty fields: none.
 * Tests run as root, for whom chmod does not make a directory read-only, so this is how they
 * reach those paths. */
typedef struct cache_disk_test_hooks {
  /* "OP:ERRNO": every call of OP fails with ERRNO without touching the disk. OP is mkdir, open
   * (for writing), write, fsync, rename or read (opening for reading); ERRNO is EROFS, ENOSPC,
   * EACCES, EIO or EDQUOT. */
  const char *fault;
  /* "N": sleeps N ms (0 to 600000) halfway through writing a payload, so a test can kill a
   * writer in the middle of a write. */
  const char *write_delay_ms;
} cache_disk_test_hooks;

/* Opens (creating it with its parents) the cache directory dir. max_bytes 0:
 * CACHE_DISK_DEFAULT_MAX_BYTES. hooks: NULL for none. A directory that cannot be created gives
 * a cache that misses and skips every put, with a warning: only bad arguments (no dir, a
 * malformed hook) and out-of-memory give NULL (with diag). The directory is created 0700; one
 * owned by another user or writable by group or others is refused the same way (entries are
 * code the process runs: whoever can write them can run code in it), as ssh refuses such a key
 * directory. Reads no environment: capture/ works out the directory (LATCH_CACHE_DIR,
 * XDG_CACHE_HOME, HOME) and the limit (LATCH_CACHE_MAX_BYTES). */
cache_disk *cache_disk_open(const char *dir, uint64_t max_bytes, const cache_disk_test_hooks *hooks, hlo_diag *diag);
void cache_disk_close(cache_disk *disk);

const char *cache_disk_dir(const cache_disk *disk);
uint64_t cache_disk_max_bytes(const cache_disk *disk);

/* On a hit, *bytes is a malloc'd copy of the payload (the caller frees it) and *len its length,
 * and the entry becomes the most recently used. A miss returns false and sets nothing. */
bool cache_disk_get(cache_disk *disk, cache_key key, const char *fingerprint, void **bytes, size_t *len);
/* Publishes an entry, replacing any older one, then evicts down to the size limit when this
 * process's writes since its last look at the directory could have taken it past the limit
 * (see put in disk.c). Returns false when the write was skipped (filesystem error, entry
 * larger than the limit). */
bool cache_disk_put(cache_disk *disk, cache_key key, const char *fingerprint, const void *bytes, size_t len);
/* The same without the fsync, for a copy of an entry kept elsewhere (a remote hit): a power
 * cut may lose it (its checksum then makes it a miss) and costs one fetch, while the fsync
 * would cost every fleet-warm start milliseconds per graph. */
bool cache_disk_put_copy(cache_disk *disk, cache_key key, const char *fingerprint, const void *bytes, size_t len);
/* Removes the entry because its payload turned out to be useless (problem says why, for the
 * statistics and the warning): the next put replaces it. */
void cache_disk_reject(cache_disk *disk, cache_key key, const char *fingerprint, cache_disk_problem problem);

void cache_disk_get_stats(const cache_disk *disk, cache_disk_stats *stats);

/* ---- disk_scan.c ---- */
/* Maintenance: what `latch cache` shows and does. */

typedef struct cache_disk_entry_info {
  char name[128];       /* file name inside the directory (remote: the Redis key) */
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
  /* remote, check: intact entries whose signature does not match this secret (signed with
   * another, or unsigned): counted in bad_entries, never removed by fix, since the secret
   * given may be what differs */
  uint64_t other_secret;
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
 * older than stale_seconds. Returns the number of entries removed; *left_bytes (may be NULL)
 * is what the entries it saw and kept hold. */
uint64_t cache_disk_evict(const char *dir, uint64_t max_bytes, double stale_seconds, uint64_t *left_bytes);

/* ---- disk_io.c ---- */
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
  /* Optional (NULL: deserialize): the same, but takes bytes (malloc'd) and frees them, on
   * failure too, now or with the value, so a value that keeps some of its bytes need not
   * copy them. The disk tier's loads use it. */
  void *(*adopt)(void *ctx, void *bytes, size_t len, hlo_diag *diag);
} cache_codec;

typedef enum cache_origin {
  CACHE_ORIGIN_DISK,     /* loaded from the disk cache */
  CACHE_ORIGIN_COMPILED, /* compiled here (and saved, when the disk cache is on) */
  CACHE_ORIGIN_REMOTE,   /* loaded from the remote tier (remote*.c), compiled by another process */
} cache_origin;

/* The value deserialized from the entry for (key, fingerprint), or NULL on a miss. An entry the
 * codec cannot deserialize is removed, counted as corrupt and warned about once: a miss. */
void *cache_disk_load(cache_disk *disk, cache_key key, const char *fingerprint, const cache_codec *codec);
/* value serialized (malloc'd, the caller frees it), or NULL after one warning per process. */
void *cache_codec_bytes(const cache_codec *codec, const void *value, size_t *len);
/* The value stored bytes hold, or NULL when the codec cannot load them (no message: the
 * caller rejects the entry, which is the cache's problem, not its caller's). The disk and
 * remote tiers' loads share it. */
void *cache_codec_value(const cache_codec *codec, const void *bytes, size_t len);
/* The same for bytes the caller gives up (malloc'd): freed here, or kept by the value. */
void *cache_codec_take(const cache_codec *codec, void *bytes, size_t len);
/* Serializes value and puts it; false (with one warning per process) when it was not saved. A
 * caller that wants its first result soon can run the value first and save it afterwards. */
bool cache_disk_save(cache_disk *disk, cache_key key, const char *fingerprint, const cache_codec *codec,
                     const void *value);
/* The same without the fsync (cache_disk_put_copy), for a value made cheaply from another
 * entry (a binding of a compiled graph to other sizes): a power cut may lose it, which costs
 * making it again, while the fsync would cost each new binding milliseconds. */
bool cache_disk_save_copy(cache_disk *disk, cache_key key, const char *fingerprint, const cache_codec *codec,
                          const void *value);

/* The value for (key, fingerprint): deserialized from disk on a hit, else compiled and then
 * saved. disk NULL: just compile. Never fails for the cache's sake: an entry the codec cannot
 * deserialize is removed (counted as corrupt, warned about once) and compiled again, and a
 * value that cannot be serialized or saved is still returned. NULL with diag only when
 * compile fails. origin and seconds (time spent loading or compiling) are optional. */
void *cache_disk_get_or_compile(cache_disk *disk, cache_key key, const char *fingerprint, const cache_codec *codec,
                                cache_origin *origin, double *seconds, hlo_diag *diag);

/* ---- the remote tier (remote*.c) ----
 * The remote tier of the compile cache: entries in Redis, shared by every machine of a fleet,
 * under the in-memory table and the disk cache (lookups go memory -> disk -> Redis ->
 * compile; a compile is written to disk and to Redis, a remote hit to disk).
 *
 * An entry's Redis key is "latch:<namespace>:" and the 32 hex digits that name its disk file
 * (the graph key, the fingerprint with the build identity: disk.c above); its value is the
 * disk entry's bytes (cache/disk_internal.h), followed, when a secret is set, by "LATCHMAC"
 * and an HMAC-SHA256 of those bytes under the secret. The namespace (default: the user's
 * name) keeps teams and users sharing one server apart: maintenance (clear, verify --fix)
 * acts inside it only. Entries expire ttl_s after their last write or hit, so the keys of an
 * old build do not stay forever; an entry over max_entry_bytes is not written (one warning).
 *
 * A value is used only if its checksums hold and its header names the key and fingerprint
 * asked for, and only if it is signed with the secret; unsigned entries only when the URL
 * says unsigned=1 (anyone who can write to the server could otherwise feed every process
 * code). Without a secret and without unsigned=1 the tier is off (a warning at first use).
 * Anything else is a miss (and one warning per kind per process).
 *
 * One compile per key for the fleet: a process that misses takes a lease,
 * "latch:<namespace>:lease:<hex>" (SET NX with an expiry, renewed while the compile runs);
 * the others poll for the entry up to a bound, then compile themselves. A holder that dies
 * only delays them until its lease expires; a lease held past wait_ms is taken over.
 *
 * Failures never fail the caller: refused, lost or slow connections (every connect and every
 * command has a deadline), error replies (wrong password, out of memory) and garbage are a
 * miss or a skipped write, with one warning per kind per process; after failures_before_rest
 * failures in a row the tier rests for rest_ms, answering at once. Passwords and the secret
 * never appear in a message: messages name the server by cache_remote_name. A Redis Cluster
 * node or a Sentinel is refused when first connected to (its INFO says so), with a warning:
 * the tier wants one standalone server (or a proxy in front of a cluster).
 *
 * A cache_remote may be used by many threads at once: its one connection is used under a
 * lock, one command at a time. It connects on first use, not when opened. */
enum { CACHE_REMOTE_TEXT_MAX = 256, CACHE_REMOTE_NAMESPACE_MAX = 65 };

typedef struct cache_remote_config {
  bool unix_socket;                  /* host is a socket's path */
  char host[CACHE_REMOTE_TEXT_MAX];  /* a name, an address, or the socket's path */
  int port;                          /* 6379 unless the URL says */
  char user[128], password[CACHE_REMOTE_TEXT_MAX]; /* "" when none; zeroed by cache_remote_close */
  int db;                            /* SELECTed when not 0 */
  char namespace_name[CACHE_REMOTE_NAMESPACE_MAX]; /* [A-Za-z0-9._-]; default the user's name */
  int ttl_s;              /* entries' expiry (EX), refreshed on each hit: a week; 0: never */
  int max_entry_bytes;    /* larger entries are not written: 256 MiB */
  bool allow_unsigned;    /* unsigned=1: entries without a signature are used (and written) */
  /* rediss://: TLS (GnuTLS), the server's certificate checked against tls_ca (a PEM file;
   * "": the system's trust store) and the host; tls_cert and tls_key: a client certificate. */
  bool tls;
  char tls_ca[CACHE_REMOTE_TEXT_MAX], tls_cert[CACHE_REMOTE_TEXT_MAX], tls_key[CACHE_REMOTE_TEXT_MAX];
  /* Bounds, in milliseconds; the URL's query may set each (?timeout_ms=100&...). */
  int connect_timeout_ms; /* a connection and its AUTH/SELECT: 250 */
  int timeout_ms;         /* one command, sent and answered: 250 */
  int lease_ms;           /* a compile lease's expiry: 10000 */
  int wait_ms;            /* how long a miss waits for another process's compile: 10000 */
  int rest_ms;            /* the rest after failures_before_rest failures in a row: 30000 */
  int failures_before_rest; /* 3 */
  char shown[CACHE_REMOTE_TEXT_MAX + 64]; /* the URL without credentials, for messages */
} cache_remote_config;

typedef struct cache_remote_stats {
  uint64_t hits;         /* gets that returned a valid entry */
  uint64_t misses;       /* gets that did not (rejected entries and failures included) */
  uint64_t writes;       /* entries written */
  uint64_t rejected;     /* entries found damaged, for another key, unsigned or mis-signed */
  uint64_t failures;     /* connects and commands that failed (refused, lost, timed out, garbage) */
  uint64_t rests;        /* times the tier went resting */
  uint64_t skipped;      /* calls answered at once while resting */
  uint64_t lease_waits;  /* misses that waited for another process's compile */
  uint64_t wait_timeouts; /* waits that ended without the entry */
  uint64_t oversized;     /* entries not written: over max_entry_bytes */
  uint64_t refused;       /* commands the server answered with an error (out of memory, read-only) */
} cache_remote_stats;

typedef struct cache_remote cache_remote;

/* ---- remote_url.c ---- */

/* redis://[user:password@]host[:port][/db][?name=value&...], the same with rediss:// (TLS), or
 * unix://[user:password@]/path[?db=N&...]; user and password may be %-encoded; names:
 * connect_timeout_ms, timeout_ms, lease_ms, wait_ms, rest_ms, namespace, ttl_s,
 * max_entry_bytes, unsigned, tls_ca, tls_cert, tls_key (and db for unix).
 * HLO_ERR_INPUT names what is wrong, never the password. */
hlo_status cache_remote_parse_url(const char *url, cache_remote_config *config, hlo_diag *diag);
/* Sets the namespace (HLO_ERR_INPUT when empty, too long or outside [A-Za-z0-9._-]). */
hlo_status cache_remote_set_namespace(cache_remote_config *config, const char *name, hlo_diag *diag);
/* Sets the password (HLO_ERR_INPUT when empty or too long) and the URL shown says there is one. */
hlo_status cache_remote_set_password(cache_remote_config *config, const char *password, hlo_diag *diag);

/* ---- remote.c ---- */

/* secret NULL or "": no signatures; the tier is then off unless config->allow_unsigned
 * (entries written unsigned and read whether signed or not). config's password is copied and
 * zeroed in config. Connects on first use; NULL only when memory runs out (with diag). */
cache_remote *cache_remote_open(cache_remote_config *config, const char *secret, hlo_diag *diag);
void cache_remote_close(cache_remote *remote);
/* The URL without credentials. */
const char *cache_remote_name(const cache_remote *remote);

/* On a hit, *bytes is a malloc'd copy of the payload and *len its length. */
bool cache_remote_get(cache_remote *remote, cache_key key, const char *fingerprint, void **bytes, size_t *len);
/* Writes (replaces) the entry; false when it was not written. */
bool cache_remote_put(cache_remote *remote, cache_key key, const char *fingerprint, const void *bytes, size_t len);
/* Counts and warns about an entry whose payload proved useless (the backend cannot load it). */
void cache_remote_reject(cache_remote *remote, cache_key key, const char *fingerprint, cache_disk_problem problem);

typedef enum cache_lease {
  CACHE_LEASE_WON,        /* this process compiles; release the lease after the put */
  CACHE_LEASE_HELD,       /* another process holds it: wait for its entry */
  CACHE_LEASE_UNAVAILABLE /* no answer from the server: compile, do not wait */
} cache_lease;
enum { CACHE_LEASE_TOKEN = 33 };
cache_lease cache_remote_lease(cache_remote *remote, cache_key key, const char *fingerprint,
                               char token[CACHE_LEASE_TOKEN]);
/* The lease's current value (whoever holds it; a planted one may hold anything), cut to
 * CACHE_LEASE_TOKEN - 1 bytes; "" when there is none; false when the server does not answer. */
bool cache_remote_lease_holder(cache_remote *remote, cache_key key, const char *fingerprint,
                               char holder[CACHE_LEASE_TOKEN]);
/* Takes the lease over from holder, atomically, only if holder still holds it (so of many
 * waiters giving up on one holder exactly one takes over); WON with a new token, else HELD
 * (someone else holds it now) or UNAVAILABLE. */
cache_lease cache_remote_take_over(cache_remote *remote, cache_key key, const char *fingerprint,
                                   const char holder[CACHE_LEASE_TOKEN], char token[CACHE_LEASE_TOKEN]);
/* Extends the lease by lease_ms if token still holds it; false when it does not (or no answer). */
bool cache_remote_renew(cache_remote *remote, cache_key key, const char *fingerprint,
                        const char token[CACHE_LEASE_TOKEN]);
/* Deletes the lease if it is still the one token names. */
void cache_remote_release(cache_remote *remote, cache_key key, const char *fingerprint,
                          const char token[CACHE_LEASE_TOKEN]);
/* wait_ms and the other bounds, as configured. */
const cache_remote_config *cache_remote_config_of(const cache_remote *remote);

void cache_remote_get_stats(const cache_remote *remote, cache_remote_stats *stats);
/* Test-only: forget which warnings were already given. */
void cache_remote_reset_warnings(void);

/* ---- remote_compile.c ---- */

/* cache_disk_get_or_compile with the remote tier under the disk: disk, then Redis (a hit is
 * written to disk), then a lease and a bounded wait for another process's compile, then a
 * compile, written to disk and Redis. disk or remote may be NULL. origin and seconds as in
 * cache_disk_get_or_compile (CACHE_ORIGIN_REMOTE for a remote hit). */
void *cache_tiers_get_or_compile(cache_disk *disk, cache_remote *remote, cache_key key, const char *fingerprint,
                                 const cache_codec *codec, cache_origin *origin, double *seconds, hlo_diag *diag);
/* Writes value to both tiers (disk or remote may be NULL), replacing what they held for the
 * key: after a loaded entry proved useless and was compiled afresh. */
void cache_tiers_replace(cache_disk *disk, cache_remote *remote, cache_key key, const char *fingerprint,
                         const cache_codec *codec, const void *value);

/* ---- remote_admin.c ---- */
/* Maintenance: latch cache --remote. */

/* Calls visit for each entry of the namespace on the server (info->name is its Redis key), totalling them in
 * summary; check: verify checksums and signature (else the header only); fix: delete the bad
 * ones. A server that cannot be reached is HLO_ERR_INTERNAL naming it. */
hlo_status cache_remote_scan(cache_remote *remote, bool check, bool fix, cache_disk_visit_fn visit, void *ctx,
                             cache_disk_summary *summary, hlo_diag *diag);
/* Deletes every entry and lease of the namespace (other namespaces' keys are left alone). */
hlo_status cache_remote_clear(cache_remote *remote, cache_disk_summary *summary, hlo_diag *diag);

typedef struct cache_remote_server {
  char version[32];
  uint64_t used_memory, maxmemory, evicted_keys;
  char maxmemory_policy[32];
} cache_remote_server;
hlo_status cache_remote_server_info(cache_remote *remote, cache_remote_server *server, hlo_diag *diag);

/* Copies every valid entry of the disk cache in dir to the server (push) or the other way
 * (pull, keeping dir under max_bytes: 0 is CACHE_DISK_DEFAULT_MAX_BYTES); *copied counts
 * those written, *skipped those already there or not valid; push's *refused those the tier
 * did not write (over max_entry_bytes, refused by the server, no answer), which make it fail.
 * Without a secret both refuse to run unless the URL says unsigned=1. */
hlo_status cache_remote_push(cache_remote *remote, const char *dir, uint64_t *copied, uint64_t *skipped,
                             uint64_t *refused, hlo_diag *diag);
hlo_status cache_remote_pull(cache_remote *remote, const char *dir, uint64_t max_bytes, uint64_t *copied,
                             uint64_t *skipped, hlo_diag *diag);

#endif
