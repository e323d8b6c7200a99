/* The on-disk cache's get and put (promises in disk.h). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "disk_internal.h"

enum { PATH_MAX_BYTES = 4096, DIR_MAX_BYTES = PATH_MAX_BYTES - 256 /* room left for "/" and a file name */ };

struct cache_disk {
  char dir[DIR_MAX_BYTES];
  uint64_t max_bytes;
  bool unusable; /* the directory could not be created: every get misses, every put is skipped */
  int dirfd;     /* the directory, opened once: every entry is reached relative to it (-1: unusable) */
  cache_disk_faults faults;
  atomic_uint_fast64_t hits, misses, writes, write_errors, corrupt, evictions, bytes_read, bytes_written;
  atomic_uint_fast64_t temp_counter;
  /* The directory's bytes at this process's last eviction scan (UNSCANNED before the first)
   * and what this process has written since (see maybe_evict). */
  atomic_uint_fast64_t scanned_bytes, written_since_scan;
};

#define UNSCANNED UINT64_MAX

cache_disk *cache_disk_open(const char *dir, uint64_t max_bytes, const cache_disk_test_hooks *hooks, hlo_diag *diag) {
  if (!dir || !*dir || strlen(dir) >= DIR_MAX_BYTES) {
    hlo_diag_set(diag, HLO_ERR_INPUT, "compile cache directory name is empty or too long");
    return NULL;
  }
  cache_disk *disk = hlo_calloc(1, sizeof *disk);
  if (!disk) {
    hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory opening the compile cache");
    return NULL;
  }
  snprintf(disk->dir, sizeof disk->dir, "%s", dir);
  if (max_bytes == 0) max_bytes = CACHE_DISK_DEFAULT_MAX_BYTES;
  if (cache_disk_faults_parse(hooks, &disk->faults, diag) != HLO_OK) {
    free(disk);
    return NULL;
  }
  disk->max_bytes = max_bytes;
  atomic_store(&disk->scanned_bytes, UNSCANNED);
  int err = cache_disk_mkdirs(disk->dir, &disk->faults);
  char why[300];
  disk->dirfd = err ? -1 : open(disk->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (!err && disk->dirfd < 0) err = errno;
  if (err) {
    disk->unusable = true;
    cache_disk_warn(CACHE_DISK_DIR_ERROR, "cannot create or open %s: %s; compiled graphs are neither loaded nor saved",
                    disk->dir, strerror(err));
  } else if (!cache_disk_dir_is_private(disk->dirfd, why, sizeof why) ||
             !cache_disk_parents_are_safe(disk->dir, why, sizeof why)) {
    disk->unusable = true;
    cache_disk_warn(CACHE_DISK_UNSAFE_DIR, "refusing %s: %s; compiled graphs are neither loaded nor saved there",
                    disk->dir, why);
  }
  return disk;
}

static void evict(cache_disk *disk) {
  uint64_t left = 0;
  atomic_store(&disk->written_since_scan, 0);
  if (disk->dirfd >= 0)
    atomic_fetch_add(&disk->evictions,
                     cache_disk_evict_at(disk->dirfd, disk->max_bytes, CACHE_DISK_STALE_TEMP_SECONDS, &left));
  atomic_store(&disk->scanned_bytes, left);
}

/* Listing the directory costs a stat per entry (20 ms for 6,000 entries here), which a write
 * per graph cannot pay each time: eager mode writes one per op. The scan runs at a process's
 * first write, then when its writes since the last scan could take the directory past the
 * limit, or come to a sixteenth of it: other processes' writes are seen at that scan, or at
 * their own. Closing after writes scans once more, so a process leaves the directory within
 * its limit. */
static void maybe_evict(cache_disk *disk, uint64_t file_bytes) {
  uint64_t since = atomic_fetch_add(&disk->written_since_scan, file_bytes) + file_bytes;
  uint64_t scanned = atomic_load(&disk->scanned_bytes);
  if (scanned == UNSCANNED || since >= disk->max_bytes / 16 || scanned + since > disk->max_bytes) evict(disk);
}

void cache_disk_close(cache_disk *disk) {
  if (disk && !disk->unusable && atomic_load(&disk->written_since_scan) > 0) evict(disk);
  if (disk && disk->dirfd >= 0) close(disk->dirfd);
  free(disk);
}

const char *cache_disk_dir(const cache_disk *disk) {
  return disk->dir;
}

uint64_t cache_disk_max_bytes(const cache_disk *disk) {
  return disk->max_bytes;
}

void cache_disk_get_stats(const cache_disk *disk, cache_disk_stats *stats) {
  /* The counters are read one by one: a snapshot taken while other threads work may be a
   * little inconsistent, which is fine for statistics. */
  cache_disk *d = (cache_disk *)disk;
  stats->hits = atomic_load(&d->hits);
  stats->misses = atomic_load(&d->misses);
  stats->writes = atomic_load(&d->writes);
  stats->write_errors = atomic_load(&d->write_errors);
  stats->corrupt = atomic_load(&d->corrupt);
  stats->evictions = atomic_load(&d->evictions);
  stats->bytes_read = atomic_load(&d->bytes_read);
  stats->bytes_written = atomic_load(&d->bytes_written);
}

/* The entry's name (relative to dirfd) and its path (for messages). */
static void entry_path(const cache_disk *disk, cache_key key, const char *fingerprint, char *path,
                       char name[CACHE_DISK_NAME_MAX]) {
  cache_disk_entry_name(key, fingerprint, name);
  snprintf(path, PATH_MAX_BYTES, "%s/%s", disk->dir, name);
}

static void damaged(cache_disk *disk, const char *path, cache_disk_problem problem) {
  atomic_fetch_add(&disk->corrupt, 1);
  cache_disk_warn(problem, "%s: %s; treated as a miss and removed", path, cache_disk_problem_name(problem));
}

bool cache_disk_get(cache_disk *disk, cache_key key, const char *fingerprint, void **bytes, size_t *len) {
  if (disk->unusable) {
    atomic_fetch_add(&disk->misses, 1);
    return false;
  }
  char path[PATH_MAX_BYTES], name[CACHE_DISK_NAME_MAX];
  entry_path(disk, key, fingerprint, path, name);
  cache_disk_entry_info info;
  memset(&info, 0, sizeof info);
  cache_disk_reading r = {.check_payload = true, .keep_payload = true, .touch = true, .faults = &disk->faults};
  cache_disk_problem problem = cache_disk_read_entry(disk->dirfd, name, &r, &info);
  void *payload = r.payload;
  if (!problem && (!cache_key_equal(info.key, key) || strcmp(info.fingerprint, fingerprint) != 0))
    problem = CACHE_DISK_MISMATCH;
  if (problem == CACHE_DISK_READ_ERROR) {
    if (r.errnum != ENOENT)
      cache_disk_warn(CACHE_DISK_READ_ERROR, "cannot read %s: %s; treated as a miss", path, strerror(r.errnum));
  } else if (problem == CACHE_DISK_FOREIGN) {
    atomic_fetch_add(&disk->corrupt, 1);
    cache_disk_warn(problem, "%s: %s; refused (treated as a miss) and left in place", path, cache_disk_problem_name(problem));
  } else if (problem) {
    damaged(disk, path, problem);
    cache_disk_remove_if_same(disk->dirfd, name, r.dev, r.ino);
  }
  if (problem) {
    free(payload);
    atomic_fetch_add(&disk->misses, 1);
    return false;
  }
  *bytes = payload;
  *len = (size_t)info.payload_bytes;
  atomic_fetch_add(&disk->hits, 1);
  atomic_fetch_add(&disk->bytes_read, info.payload_bytes);
  return true;
}

void cache_disk_reject(cache_disk *disk, cache_key key, const char *fingerprint, cache_disk_problem problem) {
  if (disk->unusable) return;
  char path[PATH_MAX_BYTES], name[CACHE_DISK_NAME_MAX];
  entry_path(disk, key, fingerprint, path, name);
  damaged(disk, path, problem);
  (void)unlinkat(disk->dirfd, name, 0);
}

/* A name (relative to dirfd) no other writer, in this process or another, can pick at the same time. */
static void temp_name(cache_disk *disk, const char *name, char *out) {
  uint64_t salt = 0;
  if (getrandom(&salt, sizeof salt, GRND_NONBLOCK) != (ssize_t)sizeof salt) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    salt = (uint64_t)now.tv_nsec * UINT64_C(0x9e3779b97f4a7c15) ^ (uint64_t)now.tv_sec;
  }
  salt ^= atomic_fetch_add(&disk->temp_counter, 1);
  snprintf(out, PATH_MAX_BYTES, CACHE_DISK_TEMP_PREFIX "%.32s-%ld-%016" PRIx64, name, (long)getpid(), salt);
}

static void sleep_ms(int ms) {
  struct timespec t = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
  while (nanosleep(&t, &t) != 0 && errno == EINTR) {
  }
}

/* Writes the whole entry to a new temporary file and renames it over name (both relative to dirfd); 0 or an errno. */
static int publish(cache_disk *disk, const char *name, cache_key key, const char *fingerprint, const void *bytes,
                   size_t len, bool sync) {
  char temp[PATH_MAX_BYTES];
  int fd = -1;
  int err = cache_disk_fault(&disk->faults, CACHE_OP_OPEN);
  for (int attempt = 0; !err && fd < 0 && attempt < 4; attempt++) {
    temp_name(disk, name, temp);
    fd = openat(disk->dirfd, temp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0 && errno != EEXIST) err = errno;
  }
  if (err || fd < 0) return err ? err : EEXIST;
  unsigned char header[CACHE_DISK_HEADER_BYTES];
  size_t fingerprint_len = strlen(fingerprint);
  cache_disk_header_encode(key, fingerprint, fingerprint_len, bytes, len, header);
  size_t half = len / 2;
  err = cache_disk_write_all(fd, header, sizeof header, &disk->faults);
  if (!err) err = cache_disk_write_all(fd, fingerprint, fingerprint_len, &disk->faults);
  if (!err) err = cache_disk_write_all(fd, bytes, half, &disk->faults);
  if (!err && disk->faults.write_delay_ms) sleep_ms(disk->faults.write_delay_ms);
  if (!err) err = cache_disk_write_all(fd, (const char *)bytes + half, len - half, &disk->faults);
  /* Without fsync a crash of the machine could leave the renamed name pointing at a file
   * whose blocks never reached the disk: a zero-filled entry. The checksum would catch it,
   * but a warm cache that loses entries on every power cut is not much of a cache. */
  if (!err && sync) err = cache_disk_fault(&disk->faults, CACHE_OP_FSYNC);
  if (!err && sync && fsync(fd) != 0) err = errno;
  if (close(fd) != 0 && !err) err = errno;
  if (!err) err = cache_disk_fault(&disk->faults, CACHE_OP_RENAME);
  if (!err && renameat(disk->dirfd, temp, disk->dirfd, name) != 0) err = errno;
  if (err) (void)unlinkat(disk->dirfd, temp, 0);
  return err;
}

static bool put(cache_disk *disk, cache_key key, const char *fingerprint, const void *bytes, size_t len, bool sync) {
  size_t fingerprint_len = strlen(fingerprint);
  uint64_t file_bytes = CACHE_DISK_HEADER_BYTES + (uint64_t)fingerprint_len + (uint64_t)len;
  if (disk->unusable || fingerprint_len > CACHE_DISK_FINGERPRINT_MAX || file_bytes > disk->max_bytes) {
    atomic_fetch_add(&disk->write_errors, 1);
    return false;
  }
  char path[PATH_MAX_BYTES];
  char name[CACHE_DISK_NAME_MAX];
  entry_path(disk, key, fingerprint, path, name);
  int err = publish(disk, name, key, fingerprint, bytes, len, sync);
  if (err) {
    atomic_fetch_add(&disk->write_errors, 1);
    cache_disk_warn(CACHE_DISK_WRITE_ERROR, "cannot write to %s: %s; compiled graphs are not being saved", disk->dir,
                    strerror(err));
    return false;
  }
  atomic_fetch_add(&disk->writes, 1);
  atomic_fetch_add(&disk->bytes_written, len);
  maybe_evict(disk, file_bytes);
  return true;
}

bool cache_disk_put(cache_disk *disk, cache_key key, const char *fingerprint, const void *bytes, size_t len) {
  return put(disk, key, fingerprint, bytes, len, true);
}

bool cache_disk_put_copy(cache_disk *disk, cache_key key, const char *fingerprint, const void *bytes, size_t len) {
  return put(disk, key, fingerprint, bytes, len, false);
}
