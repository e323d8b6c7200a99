/* Walking a cache directory: listing and verifying entries, least-recently-used eviction,
 * clearing. The directory is opened once (O_NOFOLLOW: not through a symlink) and every file
 * is reached relative to that descriptor (openat, fstatat, unlinkat), so a directory swapped
 * by path midway is not followed. Other processes may add, replace and remove files
 * meanwhile, so a file that vanishes between readdir and open is simply skipped. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "disk_internal.h"

/* A stream over the directory fd names (a descriptor of its own: fdopendir takes it), or
 * NULL with errno. */
static DIR *open_stream(int fd) {
  int own = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR *d = own >= 0 ? fdopendir(own) : NULL;
  if (!d && own >= 0) close(own);
  return d;
}

static hlo_status open_dir(const char *dir, DIR **out, hlo_diag *diag) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  *out = fd >= 0 ? fdopendir(fd) : NULL;
  if (!*out && fd >= 0) close(fd);
  if (*out || errno == ENOENT) return HLO_OK; /* no directory yet: an empty cache */
  return hlo_diag_set(diag, HLO_ERR_INTERNAL, "cannot read compile cache directory %s: %s", dir, strerror(errno));
}

hlo_status cache_disk_scan(const char *dir, bool check, bool fix, cache_disk_visit_fn visit, void *ctx,
                           cache_disk_summary *summary, hlo_diag *diag) {
  memset(summary, 0, sizeof *summary);
  DIR *d;
  if (open_dir(dir, &d, diag) != HLO_OK) return diag->status;
  if (!d) return HLO_OK;
  cache_disk_entry_info *info = hlo_malloc(sizeof *info); /* 4 KiB of fingerprint: not on the stack */
  if (!info) {
    closedir(d);
    return hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory");
  }
  struct dirent *ent;
  while ((ent = readdir(d))) {
    bool is_temp = cache_disk_is_temp_name(ent->d_name);
    size_t name_len = strlen(ent->d_name);
    if ((!is_temp && !cache_disk_is_entry_name(ent->d_name)) || name_len >= CACHE_DISK_NAME_MAX) continue;
    memset(info, 0, sizeof *info);
    memcpy(info->name, ent->d_name, name_len + 1);
    info->is_temp = is_temp;
    if (is_temp) {
      struct stat st;
      if (fstatat(dirfd(d), ent->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      info->file_bytes = (uint64_t)st.st_size;
      info->mtime = st.st_mtim;
      summary->temps++;
      summary->temp_bytes += info->file_bytes;
    } else {
      cache_disk_reading r = {.check_payload = check};
      info->problem = cache_disk_read_entry(dirfd(d), ent->d_name, &r, info);
      if (info->problem == CACHE_DISK_READ_ERROR && r.errnum == ENOENT) continue;
      /* A file named for a (key, fingerprint) must hold that pair: recompute its name. */
      if (!info->problem) {
        char want[CACHE_DISK_NAME_MAX];
        cache_disk_entry_name(info->key, info->fingerprint, want);
        if (strcmp(want, ent->d_name) != 0) info->problem = CACHE_DISK_MISMATCH;
      }
      summary->entries++;
      summary->entry_bytes += info->file_bytes;
      if (info->problem) {
        summary->bad_entries++;
        int failed = fix && info->problem != CACHE_DISK_READ_ERROR ? cache_disk_remove_if_same(dirfd(d), ent->d_name, r.dev, r.ino) : -1;
        if (failed == 0) {
          summary->removed++;
          summary->removed_bytes += info->file_bytes;
        } else if (failed > 0 && failed != ENOENT) { /* ENOENT: someone else removed it: gone all the same */
          if (!summary->remove_failed++) summary->remove_errno = failed;
        }
      }
    }
    if (visit) visit(ctx, info);
  }
  closedir(d);
  free(info);
  return HLO_OK;
}

hlo_status cache_disk_clear(const char *dir, cache_disk_summary *summary, hlo_diag *diag) {
  memset(summary, 0, sizeof *summary);
  DIR *d;
  if (open_dir(dir, &d, diag) != HLO_OK) return diag->status;
  if (!d) return HLO_OK;
  hlo_status status = HLO_OK;
  struct dirent *ent;
  while ((ent = readdir(d))) {
    bool is_temp = cache_disk_is_temp_name(ent->d_name);
    if (!is_temp && !cache_disk_is_entry_name(ent->d_name)) continue;
    struct stat st;
    if (fstatat(dirfd(d), ent->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (unlinkat(dirfd(d), ent->d_name, 0) != 0) {
      if (errno != ENOENT && status == HLO_OK)
        status = hlo_diag_set(diag, HLO_ERR_INTERNAL, "cannot remove %s/%s: %s", dir, ent->d_name, strerror(errno));
      continue;
    }
    if (is_temp) summary->temps++;
    else summary->entries++;
    summary->removed++;
    summary->removed_bytes += (uint64_t)st.st_size;
  }
  closedir(d);
  return status;
}

/* ---- eviction ---- */

typedef struct lru_item {
  char name[CACHE_DISK_NAME_MAX];
  uint64_t bytes;
  struct timespec mtime;
} lru_item;

static int older_first(const void *a, const void *b) {
  const lru_item *x = a, *y = b;
  if (x->mtime.tv_sec != y->mtime.tv_sec) return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
  if (x->mtime.tv_nsec != y->mtime.tv_nsec) return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : 1;
  return strcmp(x->name, y->name); /* a fixed order when times tie */
}

static double age_seconds(const struct timespec *mtime, const struct timespec *now) {
  return (double)(now->tv_sec - mtime->tv_sec) + (double)(now->tv_nsec - mtime->tv_nsec) * 1e-9;
}

uint64_t cache_disk_evict_at(int fd, uint64_t max_bytes, double stale_seconds, uint64_t *left_bytes) {
  if (left_bytes) *left_bytes = 0;
  DIR *d = open_stream(fd);
  if (!d) return 0;
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  lru_item *items = NULL;
  size_t count = 0, capacity = 0;
  uint64_t total = 0;
  struct dirent *ent;
  while ((ent = readdir(d))) {
    bool is_temp = cache_disk_is_temp_name(ent->d_name);
    if (!is_temp && !cache_disk_is_entry_name(ent->d_name)) continue;
    struct stat st;
    if (fstatat(dirfd(d), ent->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (is_temp) {
      /* A writer finishes in seconds; one this old was killed before its rename. */
      if (age_seconds(&st.st_mtim, &now) > stale_seconds) (void)unlinkat(dirfd(d), ent->d_name, 0);
      continue;
    }
    if (count == capacity) {
      size_t grown = capacity ? capacity * 2 : 64;
      lru_item *more = hlo_realloc(items, grown * sizeof *items);
      if (!more) break; /* out of memory: evict among those seen so far */
      items = more;
      capacity = grown;
    }
    memcpy(items[count].name, ent->d_name, strlen(ent->d_name) + 1); /* an entry name: 38 bytes */
    items[count].bytes = (uint64_t)st.st_size;
    items[count].mtime = st.st_mtim;
    total += items[count].bytes;
    count++;
  }
  uint64_t evicted = 0;
  if (total > max_bytes) {
    qsort(items, count, sizeof *items, older_first);
    for (size_t i = 0; i < count && total > max_bytes; i++) {
      /* ENOENT: another process evicted it first; it is gone either way. */
      if (unlinkat(dirfd(d), items[i].name, 0) == 0) evicted++;
      else if (errno != ENOENT) continue;
      total -= items[i].bytes;
    }
  }
  closedir(d);
  free(items);
  if (left_bytes) *left_bytes = total;
  return evicted;
}

uint64_t cache_disk_evict(const char *dir, uint64_t max_bytes, double stale_seconds, uint64_t *left_bytes) {
  if (left_bytes) *left_bytes = 0;
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return 0;
  uint64_t evicted = cache_disk_evict_at(fd, max_bytes, stale_seconds, left_bytes);
  close(fd);
  return evicted;
}
