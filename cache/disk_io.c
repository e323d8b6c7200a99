/* The on-disk cache's filesystem calls: reading and checking one entry, writing loops, mkdir -p,
 * the test-only fault hooks, and warnings given once per process per kind of problem. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "disk_internal.h"

/* ---- test-only fault injection ---- */

static const char *const op_names[CACHE_OP_COUNT] = {"mkdir", "open", "write", "fsync", "rename", "read"};

static const struct {
  const char *name;
  int errnum;
} errnos[] = {{"EROFS", EROFS}, {"ENOSPC", ENOSPC}, {"EACCES", EACCES}, {"EIO", EIO}, {"EDQUOT", EDQUOT}};

hlo_status cache_disk_faults_parse(const cache_disk_test_hooks *hooks, cache_disk_faults *faults, hlo_diag *diag) {
  memset(faults, 0, sizeof *faults);
  const char *fault = hooks ? hooks->fault : NULL;
  if (fault && *fault) {
    const char *colon = strchr(fault, ':');
    int op = -1, errnum = 0;
    for (int i = 0; colon && i < CACHE_OP_COUNT; i++)
      if (strlen(op_names[i]) == (size_t)(colon - fault) && strncmp(fault, op_names[i], (size_t)(colon - fault)) == 0)
        op = i;
    for (size_t i = 0; colon && i < sizeof errnos / sizeof errnos[0]; i++)
      if (strcmp(colon + 1, errnos[i].name) == 0) errnum = errnos[i].errnum;
    if (op < 0 || !errnum)
      return hlo_diag_set(diag, HLO_ERR_INPUT,
                          "LATCH_CACHE_TEST_FAULT='%s': want OP:ERRNO, OP one of mkdir, open, write, fsync, "
                          "rename, read and ERRNO one of EROFS, ENOSPC, EACCES, EIO, EDQUOT", fault);
    faults->errnum[op] = errnum;
  }
  const char *delay = hooks ? hooks->write_delay_ms : NULL;
  if (delay && *delay) {
    char *end;
    long ms = strtol(delay, &end, 10);
    if (*end || ms < 0 || ms > 600000)
      return hlo_diag_set(diag, HLO_ERR_INPUT, "LATCH_CACHE_TEST_WRITE_DELAY_MS='%s': want 0 to 600000", delay);
    faults->write_delay_ms = (int)ms;
  }
  return HLO_OK;
}

int cache_disk_fault(const cache_disk_faults *faults, cache_disk_op op) {
  return faults ? faults->errnum[op] : 0;
}

/* ---- plain calls ---- */

int cache_disk_mkdirs(const char *path, const cache_disk_faults *faults) {
  int injected = cache_disk_fault(faults, CACHE_OP_MKDIR);
  if (injected) return injected;
  char buf[4096];
  size_t len = strlen(path);
  if (len == 0 || len >= sizeof buf) return ENAMETOOLONG;
  memcpy(buf, path, len + 1);
  /* Each prefix in turn; EEXIST is fine (another process may be creating the same path).
   * The cache directory itself is private (0700): entries are code this process will run. */
  for (size_t i = 1; i <= len; i++) {
    if (buf[i] != '/' && buf[i] != '\0') continue;
    char saved = buf[i];
    buf[i] = '\0';
    if (mkdir(buf, i == len ? 0700 : 0777) != 0 && errno != EEXIST) return errno;
    buf[i] = saved;
  }
  struct stat st;
  if (stat(path, &st) != 0) return errno;
  return S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
}

int cache_disk_write_all(int fd, const void *data, size_t len, const cache_disk_faults *faults) {
  int injected = cache_disk_fault(faults, CACHE_OP_WRITE);
  if (injected) return injected;
  const char *p = data;
  while (len > 0) {
    ssize_t n = write(fd, p, len);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

int cache_disk_read_at(int fd, void *data, size_t len, uint64_t offset) {
  char *p = data;
  while (len > 0) {
    ssize_t n = pread(fd, p, len, (off_t)offset);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return -1;
    p += n;
    len -= (size_t)n;
    offset += (uint64_t)n;
  }
  return 0;
}

/* ---- warn once ---- */

static atomic_bool warned[CACHE_DISK_PROBLEM_COUNT];

void cache_disk_warn(cache_disk_problem problem, const char *format, ...) {
  if ((unsigned)problem >= CACHE_DISK_PROBLEM_COUNT || atomic_exchange(&warned[problem], true)) return;
  char line[1200];
  va_list args;
  va_start(args, format);
  vsnprintf(line, sizeof line, format, args);
  va_end(args);
  /* One fprintf so lines from racing threads do not interleave. */
  fprintf(stderr, "latch: warning: compile cache: %s (further warnings of this kind are not shown)\n", line);
}

void cache_disk_reset_warnings(void) {
  for (int i = 0; i < CACHE_DISK_PROBLEM_COUNT; i++) atomic_store(&warned[i], false);
}

/* ---- one entry ---- */

/* Reads the header at the start of fd, a file of size bytes, and decodes it. */
static cache_disk_problem read_header(int fd, uint64_t size, unsigned char raw[CACHE_DISK_HEADER_BYTES],
                                      cache_disk_header *header, int *errnum) {
  if (size < CACHE_DISK_HEADER_BYTES) return CACHE_DISK_SHORT;
  int status = cache_disk_read_at(fd, raw, CACHE_DISK_HEADER_BYTES, 0);
  if (status > 0) *errnum = status;
  if (status) return status > 0 ? CACHE_DISK_READ_ERROR : CACHE_DISK_SHORT; /* short: shrank since fstat */
  return cache_disk_header_decode(raw, size, header);
}

/* Reads what follows the header: the fingerprint into info, and (check_payload) the payload
 * into *data (malloc'd; its size was checked against the file's, so the allocation is bounded
 * by it), and checks them against the header. */
static cache_disk_problem read_body(int fd, const cache_disk_header *header,
                                    const unsigned char raw[CACHE_DISK_HEADER_BYTES], bool check_payload,
                                    cache_disk_entry_info *info, void **data, int *errnum) {
  char *fingerprint = hlo_malloc((size_t)header->fingerprint_len + 1);
  *data = check_payload ? hlo_malloc(header->payload_len ? (size_t)header->payload_len : 1) : NULL;
  cache_disk_problem problem = CACHE_DISK_OK;
  if (!fingerprint || (check_payload && !*data)) {
    *errnum = ENOMEM;
    problem = CACHE_DISK_READ_ERROR;
  }
  int status = problem ? 0 : cache_disk_read_at(fd, fingerprint, header->fingerprint_len, CACHE_DISK_HEADER_BYTES);
  if (!problem && !status && check_payload)
    status = cache_disk_read_at(fd, *data, (size_t)header->payload_len,
                                CACHE_DISK_HEADER_BYTES + (uint64_t)header->fingerprint_len);
  if (status > 0) *errnum = status;
  if (!problem) problem = status > 0 ? CACHE_DISK_READ_ERROR : status < 0 ? CACHE_DISK_SHORT : CACHE_DISK_OK;
  if (!problem) {
    fingerprint[header->fingerprint_len] = '\0';
    problem = cache_disk_check_body(header, raw, fingerprint, *data);
  }
  if (!problem) {
    info->key = header->key;
    info->payload_bytes = header->payload_len;
    memcpy(info->fingerprint, fingerprint, (size_t)header->fingerprint_len + 1);
  }
  free(fingerprint);
  return problem;
}

cache_disk_problem cache_disk_read_entry(int dirfd, const char *path, cache_disk_reading *r, cache_disk_entry_info *info) {
  r->payload = NULL;
  r->errnum = cache_disk_fault(r->faults, CACHE_OP_READ);
  if (r->errnum) return CACHE_DISK_READ_ERROR;
  int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    r->errnum = errno;
    if (fd >= 0) close(fd);
    return CACHE_DISK_READ_ERROR;
  }
  r->dev = st.st_dev;
  r->ino = st.st_ino;
  info->file_bytes = (uint64_t)st.st_size;
  info->mtime = st.st_mtim;
  unsigned char raw[CACHE_DISK_HEADER_BYTES];
  cache_disk_header header;
  void *data = NULL;
  cache_disk_problem problem = CACHE_DISK_OK;
  if (st.st_uid != geteuid()) problem = CACHE_DISK_FOREIGN; /* whoever owns it chose its code */
  if (!problem) problem = read_header(fd, (uint64_t)st.st_size, raw, &header, &r->errnum);
  if (!problem) problem = read_body(fd, &header, raw, r->check_payload, info, &data, &r->errnum);
  /* A hit makes the entry the most recently used. Failure (someone else's file on a
   * read-only mount) only makes eviction's order less exact. */
  if (!problem && r->touch) (void)futimens(fd, NULL);
  close(fd);
  if (!problem && r->keep_payload) r->payload = data;
  else free(data);
  return problem;
}

int cache_disk_remove_if_same(int dirfd, const char *path, dev_t dev, ino_t ino) {
  struct stat st;
  if (fstatat(dirfd, path, &st, AT_SYMLINK_NOFOLLOW) != 0) return errno;
  if (st.st_dev != dev || st.st_ino != ino) return EEXIST; /* replaced since: not ours to remove */
  return unlinkat(dirfd, path, 0) == 0 ? 0 : errno;
}
