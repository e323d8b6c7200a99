/* Helpers shared by the on-disk cache tests: private temporary directories, deterministic
 * payloads, stderr capture, file surgery. Header-only so each test program stays one file. */
#ifndef LATCH_DISK_TEST_UTIL_H
#define LATCH_DISK_TEST_UTIL_H
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache/cache.h"
#include "cache/disk_internal.h"

/* A fresh directory under /tmp; removed by remove_tree. */
static inline void make_temp_dir(char out[64]) {
  snprintf(out, 64, "/tmp/latch-disk-XXXXXX");
  if (!mkdtemp(out)) {
    perror("mkdtemp");
    exit(2);
  }
}

static inline void remove_tree(const char *dir) {
  char command[256];
  snprintf(command, sizeof command, "rm -rf '%s'", dir);
  if (system(command) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

static inline cache_key test_key(uint64_t i) {
  return (cache_key){.lo = 0x1234567800000000u + i, .hi = 0xfeedface00000000u ^ (i * 0x9e3779b97f4a7c15u)};
}

/* len bytes that depend on (i, len): a wrong entry handed back cannot pass for the right one. */
static inline void *test_payload(uint64_t i, size_t len) {
  unsigned char *p = malloc(len ? len : 1);
  uint64_t x = i * 0x2545f4914f6cdd1du + len + 1;
  for (size_t k = 0; k < len; k++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    p[k] = (unsigned char)x;
  }
  return p;
}

static inline size_t test_len(uint64_t i) {
  return 1000 + (size_t)(i * 37 % 500);
}

/* Whether a get of (key i, fingerprint) hits with exactly test_payload(i). */
static inline bool get_matches(cache_disk *disk, uint64_t i, const char *fingerprint) {
  void *bytes = NULL;
  size_t len = 0;
  if (!cache_disk_get(disk, test_key(i), fingerprint, &bytes, &len)) return false;
  void *want = test_payload(i, test_len(i));
  bool same = len == test_len(i) && memcmp(bytes, want, len) == 0;
  free(want);
  free(bytes);
  return same;
}

static inline bool put_payload(cache_disk *disk, uint64_t i, const char *fingerprint) {
  void *payload = test_payload(i, test_len(i));
  bool ok = cache_disk_put(disk, test_key(i), fingerprint, payload, test_len(i));
  free(payload);
  return ok;
}

static inline void entry_file(const char *dir, uint64_t i, const char *fingerprint, char out[512]) {
  char name[CACHE_DISK_NAME_MAX];
  cache_disk_entry_name(test_key(i), fingerprint, name);
  snprintf(out, 512, "%s/%s", dir, name);
}

static inline bool file_exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

static inline long file_size(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

/* Counts the directory's files whose names start with prefix ("" for all but dot files). */
static inline int count_files(const char *dir, const char *prefix) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  int n = 0;
  struct dirent *ent;
  while ((ent = readdir(d))) {
    if (*prefix ? strncmp(ent->d_name, prefix, strlen(prefix)) == 0 : ent->d_name[0] != '.') n++;
  }
  closedir(d);
  return n;
}

/* ---- planting a crafted entry ---- */

/* The info and payload (malloc'd) of the one entry in dir; false unless there is exactly one
 * and it reads back intact. */
static inline bool sole_entry(const char *dir, cache_disk_entry_info *info, void **payload) {
  DIR *d = opendir(dir);
  char path[512] = "";
  int entries = 0;
  for (struct dirent *ent; d && (ent = readdir(d));)
    if (cache_disk_is_entry_name(ent->d_name) && ++entries == 1) snprintf(path, sizeof path, "%s/%s", dir, ent->d_name);
  if (d) closedir(d);
  cache_disk_reading r = {.check_payload = true, .keep_payload = true};
  if (entries != 1 || cache_disk_read_entry(AT_FDCWD, path, &r, info) != CACHE_DISK_OK) return false;
  *payload = r.payload;
  return true;
}

/* The payload of from's one entry written, with valid checksums and header, under the key and
 * fingerprint of to's one entry: what a writer of the cache directory could do. */
static inline bool plant_entry(const char *from, const char *to) {
  cache_disk_entry_info *a = malloc(sizeof *a), *b = malloc(sizeof *b);
  void *payload = NULL, *unused = NULL;
  bool ok = a && b && sole_entry(from, a, &payload) && sole_entry(to, b, &unused);
  hlo_diag diag;
  hlo_diag_clear(&diag);
  cache_disk *disk = ok ? cache_disk_open(to, 0, NULL, &diag) : NULL;
  ok = disk && cache_disk_put(disk, b->key, b->fingerprint, payload, (size_t)a->payload_bytes);
  cache_disk_close(disk);
  free(payload);
  free(unused);
  free(a);
  free(b);
  return ok;
}

/* The payload of from's one entry written, with valid checksums and header, over every
 * entry of to (its key and fingerprint kept); the number of entries replaced, -1 on a
 * failure. */
static inline int plant_everywhere(const char *from, const char *to) {
  cache_disk_entry_info *a = malloc(sizeof *a), *b = malloc(sizeof *b);
  void *payload = NULL;
  bool ok = a && b && sole_entry(from, a, &payload);
  hlo_diag diag;
  hlo_diag_clear(&diag);
  cache_disk *disk = ok ? cache_disk_open(to, 0, NULL, &diag) : NULL;
  DIR *d = disk ? opendir(to) : NULL;
  enum { MOST = 256 };
  static char paths[MOST][512];
  int count = 0, planted = 0;
  for (struct dirent *ent; d && (ent = readdir(d));) /* listed first: each put renames over its entry */
    if (cache_disk_is_entry_name(ent->d_name) && count < MOST && strlen(to) + strlen(ent->d_name) < 500)
      snprintf(paths[count++], sizeof paths[0], "%.250s/%.250s", to, ent->d_name);
  if (d) closedir(d);
  for (int k = 0; ok && disk && k < count; k++) {
    const char *path = paths[k];
    cache_disk_reading r = {.check_payload = true};
    ok = cache_disk_read_entry(AT_FDCWD, path, &r, b) == CACHE_DISK_OK &&
         cache_disk_put(disk, b->key, b->fingerprint, payload, (size_t)a->payload_bytes);
    planted += ok;
  }
  cache_disk_close(disk);
  free(payload);
  free(a);
  free(b);
  return ok && disk ? planted : -1;
}

/* ---- stderr capture, to see the warnings ---- */

static int saved_stderr = -1;
static char capture_path[128];

static inline void capture_begin(void) {
  snprintf(capture_path, sizeof capture_path, "/tmp/latch-disk-stderr-%ld", (long)getpid());
  fflush(stderr);
  saved_stderr = dup(2);
  int fd = open(capture_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  dup2(fd, 2);
  close(fd);
}

/* The captured text (static buffer). */
static inline const char *capture_end(void) {
  static char text[8192];
  fflush(stderr);
  dup2(saved_stderr, 2);
  close(saved_stderr);
  FILE *f = fopen(capture_path, "rb");
  size_t len = f ? fread(text, 1, sizeof text - 1, f) : 0;
  text[len] = '\0';
  if (f) fclose(f);
  unlink(capture_path);
  return text;
}

static inline int count_occurrences(const char *text, const char *fragment) {
  int n = 0;
  for (const char *p = strstr(text, fragment); p; p = strstr(p + 1, fragment)) n++;
  return n;
}

#endif
