/* Pieces the on-disk cache's files share: the entry format, file names, the test-only fault
 * hooks and warn-once. Not for use outside cache/disk*.c. */
#ifndef CACHE_DISK_INTERNAL_H
#define CACHE_DISK_INTERNAL_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cache.h"

/* ---- entry format (disk_format.c) ----
 *
 * An entry file is a 64-byte header, the fingerprint string (no NUL), then the payload. All
 * integers little-endian:
 *
 *   0  magic "LATCHCE\n"            8 bytes
 *   8  format version               u32 (CACHE_DISK_FORMAT)
 *  12  fingerprint length           u32 (<= CACHE_DISK_FINGERPRINT_MAX)
 *  16  key lo, key hi               u64, u64
 *  32  payload length               u64
 *  40  payload checksum             u64, XXH3-64 of the payload
 *  48  reserved                     u64, zero
 *  56  header checksum              u64, XXH3-64 of bytes 0..55 and the fingerprint
 *
 * The file is exactly 64 + fingerprint length + payload length bytes long. */
enum { CACHE_DISK_HEADER_BYTES = 64 };

typedef struct cache_disk_header {
  uint32_t version;
  uint32_t fingerprint_len;
  cache_key key;
  uint64_t payload_len;
  uint64_t payload_sum;
  uint64_t header_sum;
} cache_disk_header;

void cache_disk_header_encode(cache_key key, const char *fingerprint, size_t fingerprint_len,
                              const void *payload, size_t payload_len,
                              unsigned char out[CACHE_DISK_HEADER_BYTES]);
/* Checks the fixed part against the file's size: magic, version, lengths. */
cache_disk_problem cache_disk_header_decode(const unsigned char *bytes, uint64_t file_size,
                                            cache_disk_header *header);
/* Checks the checksums, given the header bytes and what follows them. */
cache_disk_problem cache_disk_check_body(const cache_disk_header *header,
                                         const unsigned char raw[CACHE_DISK_HEADER_BYTES],
                                         const char *fingerprint, const void *payload);

/* ---- names (disk_format.c) ---- */

/* "<32 hex digits of XXH3-128(key, fingerprint)>.latch" */
enum { CACHE_DISK_NAME_MAX = 80 };
void cache_disk_entry_name(cache_key key, const char *fingerprint, char out[CACHE_DISK_NAME_MAX]);
bool cache_disk_is_entry_name(const char *name);
/* Temporary files start with this, so listings, eviction and clear can tell them apart. */
#define CACHE_DISK_TEMP_PREFIX ".latch-tmp-"
bool cache_disk_is_temp_name(const char *name);

/* ---- filesystem calls with test-only fault injection (disk_io.c) ----
 *
 * The hooks (cache_disk_test_hooks, cache.h) parsed: the errno each operation fails with,
 * and the delay in the middle of a payload. */
typedef enum cache_disk_op {
  CACHE_OP_MKDIR,
  CACHE_OP_OPEN,
  CACHE_OP_WRITE,
  CACHE_OP_FSYNC,
  CACHE_OP_RENAME,
  CACHE_OP_READ,
  CACHE_OP_COUNT
} cache_disk_op;

typedef struct cache_disk_faults {
  int errnum[CACHE_OP_COUNT]; /* 0: no fault */
  int write_delay_ms;
} cache_disk_faults;

/* Parses the hooks (NULL or empty fields: none); a malformed value is HLO_ERR_INPUT naming
 * the variable that carries it. */
hlo_status cache_disk_faults_parse(const cache_disk_test_hooks *hooks, cache_disk_faults *faults, hlo_diag *diag);
/* The injected errno for op, or 0. */
int cache_disk_fault(const cache_disk_faults *faults, cache_disk_op op);

/* mkdir -p; 0 or an errno. */
int cache_disk_mkdirs(const char *path, const cache_disk_faults *faults);
/* (disk_trust.c) Whether dir may hold entries this process will run: true when it is owned
 * by this user and not writable by group or others; else false with the reason in why. */
bool cache_disk_dir_is_private(int dirfd, char *why, size_t why_size);
/* Each parent of dir, up to the first root owns, is this user's or root's and writable by
 * nobody else (a root-owned sticky directory such as /tmp excepted); false with why. */
bool cache_disk_parents_are_safe(const char *dir, char *why, size_t why_size);
/* (disk_io.c) Writes all of data; 0 or an errno. */
int cache_disk_write_all(int fd, const void *data, size_t len, const cache_disk_faults *faults);
/* Reads exactly len bytes at offset; 0, an errno, or -1 when the file is shorter. */
int cache_disk_read_at(int fd, void *data, size_t len, uint64_t offset);

/* One line on stderr the first time a kind of problem is seen in this process:
 * "latch: warning: compile cache: <what>". */
void cache_disk_warn(cache_disk_problem problem, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

/* Reading one entry: what is asked, and what comes back besides the entry's info. */
typedef struct cache_disk_reading {
  bool check_payload; /* read the payload whole and check it (false: the header only, for listings) */
  bool keep_payload;  /* on CACHE_DISK_OK, hand the payload over in payload */
  bool touch;         /* on CACHE_DISK_OK, make the entry the most recently used */
  const cache_disk_faults *faults; /* test-only injected errors, or NULL */
  void *payload;      /* malloc'd, when kept */
  int errnum;         /* why, on CACHE_DISK_READ_ERROR */
  /* The file that was read, so a damaged one is removed only if it is still the one in place. */
  dev_t dev;
  ino_t ino;
} cache_disk_reading;

/* Reads and checks the entry at path (relative to dirfd, or AT_FDCWD) as r asks; a file another
 * user owns is CACHE_DISK_FOREIGN, unread; info gets the file's size and time and, on
 * CACHE_DISK_OK, its key, fingerprint and payload size. An unreadable file gives
 * CACHE_DISK_READ_ERROR with r->errnum set. */
cache_disk_problem cache_disk_read_entry(int dirfd, const char *path, cache_disk_reading *r, cache_disk_entry_info *info);
/* Unlinks path if it is still the file (dev, ino): a writer may have replaced it since.
 * 0 when it was removed, else why not (an errno; EEXIST: replaced since). */
int cache_disk_remove_if_same(int dirfd, const char *path, dev_t dev, ino_t ino);

/* ---- walking the directory (disk_scan.c) ---- */
/* cache_disk_evict on the directory fd names (the runtime's, opened once). */
uint64_t cache_disk_evict_at(int fd, uint64_t max_bytes, double stale_seconds, uint64_t *left_bytes);

#endif
