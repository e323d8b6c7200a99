/* The remote tier's password is kept (for reconnecting) while the runtime is open and zeroed
 * at latch_close: after it, no byte sequence of this process's writable memory (heap, stacks,
 * data; read back through /proc/self/mem) spells it. The password is random, made by a shell
 * into a private file the runtime reads (LATCH_CACHE_PASSWORD_FILE) and the server's own
 * config includes, and this test holds it only masked (each byte xor 0x5a), so its own copy
 * cannot be what the scan finds. The scan finds it while the runtime is open, which shows it
 * can. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "redis_test_util.h"
#include "remote_test_util.h"
#include "test.h"

enum { MASK = 0x5a, CHUNK = 1 << 20 };

static unsigned char masked[64];
static size_t masked_len;
static unsigned char *chunk; /* mmap'd: its own region is skipped */

/* Whether [at, at + len) of this process holds the password. */
static bool region_holds(int mem, uintptr_t at, uintptr_t end) {
  size_t n = masked_len;
  for (uintptr_t from = at; from < end;) {
    size_t want = end - from < CHUNK ? (size_t)(end - from) : CHUNK;
    ssize_t got = pread(mem, chunk, want, (off_t)from);
    if (got <= 0) return false;
    unsigned char first = masked[0] ^ MASK;
    for (unsigned char *p = chunk; p && p + n <= chunk + got; p = memchr(p + 1, first, (size_t)(chunk + got - p - 1))) {
      if (*p != first) continue;
      size_t k = 1;
      while (k < n && p[k] == (unsigned char)(masked[k] ^ MASK)) k++;
      if (k == n) return true;
    }
    if ((size_t)got < n || from + (size_t)got >= end) break;
    from += (size_t)got - (n - 1); /* a match across two chunks is seen in the next */
  }
  return false;
}

/* Whether any writable mapping of this process holds the password. */
static bool memory_holds_password(void) {
  FILE *maps = fopen("/proc/self/maps", "r");
  int mem = open("/proc/self/mem", O_RDONLY);
  bool found = false;
  char line[512];
  while (maps && mem >= 0 && !found && fgets(line, sizeof line, maps)) {
    unsigned long lo, hi;
    char perms[8];
    if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3 || perms[0] != 'r' || perms[1] != 'w') continue;
    if (strstr(line, "[vvar]") || strstr(line, "[vsyscall]")) continue;
    if ((uintptr_t)chunk >= lo && (uintptr_t)chunk < hi) continue;
    if (hi - lo > (1ul << 30)) continue; /* a sanitizer's shadow, reserved, not data */
    found = region_holds(mem, lo, hi);
  }
  if (maps) fclose(maps);
  if (mem >= 0) close(mem);
  return found;
}

/* Makes the password file and a server config that requires it; reads it back masked. */
static bool make_password(const char *dir, char *password_file, char *conf, size_t size) {
  snprintf(password_file, size, "%s/password", dir);
  snprintf(conf, size, "%s/auth.conf", dir);
  char command[1024];
  snprintf(command, sizeof command,
           "umask 077 && head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \\n' | head -c 32 > '%s' && "
           "printf 'requirepass %%s\\n' \"$(cat '%s')\" > '%s'", password_file, password_file, conf);
  if (system(command) != 0) return false;
  int fd = open(password_file, O_RDONLY);
  ssize_t n = fd >= 0 ? read(fd, masked, sizeof masked) : -1;
  if (fd >= 0) close(fd);
  for (ssize_t i = 0; i < n; i++) masked[i] ^= MASK; /* read straight into the one buffer, masked at once */
  masked_len = n > 0 ? (size_t)n : 0;
  return masked_len == 32;
}

static void password_zeroed_at_close(void) {
  char dir[64] = "/tmp/latch-secret-XXXXXX", password_file[128], conf[128], url[160];
  CHECK(mkdtemp(dir) != NULL);
  CHECK(make_password(dir, password_file, conf, sizeof conf));
  redis_server s;
  if (!redis_start(&s, NULL, "--include", conf, NULL)) {
    CHECK_MSG(false, "redis-server did not start");
    return;
  }
  redis_url(&s, NULL, "", url, sizeof url);
  latch_options options;
  latch_options_init(&options);
  options.backend = "reference";
  options.cache = "memory";
  options.cache_url = url;
  options.cache_password_file = password_file;
  latch_runtime *rt = latch_open(&options);
  CHECK(rt != NULL);
  if (rt) {
    CHECK_EQ_INT(run_graph(rt, 0), 0);
    CHECK_EQ_INT((int)stats_of(rt).remote_writes, 1); /* authenticated with it */
    CHECK(memory_holds_password());                   /* kept for reconnecting, and the scan sees it */
    latch_close(rt);
  }
  CHECK(!memory_holds_password());
  redis_stop(&s);
  char command[160];
  snprintf(command, sizeof command, "rm -rf '%s'", dir);
  CHECK(system(command) == 0);
}

int main(void) {
  chunk = mmap(NULL, CHUNK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (chunk == MAP_FAILED) return 1;
  unsetenv("LATCH_CACHE_PASSWORD");
  unsetenv("LATCH_CACHE_URL");
  RUN(password_zeroed_at_close);
  return TEST_REPORT();
}
