/* The on-disk compile cache across processes: a fresh process (fork + exec) finds what another
 * wrote; 8 processes racing on the same keys, with room for all of them and with eviction
 * racing too, never see a wrong or partial entry and leave a consistent directory; a writer
 * killed with SIGKILL in the middle of a write leaves no visible entry, and its temporary file
 * is cleaned up. Children report through their exit status; nothing here is timed. */
#include <errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include "disk_test_util.h"
#include "test.h"

static const char *const FP = "backend=test/1 latch=0 arch=x cpu= options=";
enum { PROCS = 8, KEYS = 16 };

/* 1: a hit with the right bytes, 0: a miss, -1: a hit with wrong bytes (never allowed). */
static int get_state(cache_disk *disk, uint64_t i) {
  void *bytes = NULL;
  size_t len = 0;
  if (!cache_disk_get(disk, test_key(i), FP, &bytes, &len)) return 0;
  void *want = test_payload(i, test_len(i));
  int state = len == test_len(i) && memcmp(bytes, want, len) == 0 ? 1 : -1;
  free(want);
  free(bytes);
  return state;
}

static cache_disk *open_or_exit(const char *dir, uint64_t max_bytes, const cache_disk_test_hooks *hooks) {
  hlo_diag diag;
  hlo_diag_clear(&diag);
  cache_disk *disk = cache_disk_open(dir, max_bytes, hooks, &diag);
  if (!disk) {
    fprintf(stderr, "child: %s\n", diag.message);
    _exit(10);
  }
  return disk;
}

static int wait_status(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

/* ---- a fresh process ---- */

/* Runs as `test_disk_cache_procs child-get DIR`: a new program image, no state shared. */
static int child_get(const char *dir) {
  cache_disk *disk = open_or_exit(dir, 1 << 20, NULL);
  int wrong = 0;
  for (uint64_t i = 0; i < 4; i++) wrong += get_state(disk, i) != 1;
  cache_disk_stats s;
  cache_disk_get_stats(disk, &s);
  wrong += s.hits != 4 || s.misses != 0;
  cache_disk_close(disk);
  return wrong ? 1 : 0;
}

static void second_process_hits(void) {
  char dir[64];
  make_temp_dir(dir);
  fflush(NULL);
  pid_t writer = fork();
  if (writer == 0) {
    cache_disk *disk = open_or_exit(dir, 1 << 20, NULL);
    int failed = 0;
    for (uint64_t i = 0; i < 4; i++) failed += !put_payload(disk, i, FP);
    cache_disk_close(disk);
    _exit(failed);
  }
  int status = wait_status(writer);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  pid_t reader = fork();
  if (reader == 0) {
    execl("/proc/self/exe", "test_disk_cache_procs", "child-get", dir, (char *)NULL);
    _exit(20);
  }
  status = wait_status(reader);
  CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "reader status %d", status);
  remove_tree(dir);
}

/* ---- racing processes ---- */

/* Each child waits at the barrier (a pipe that the parent closes once all are forked), then
 * goes over every key a few times from its own starting point: get, and on a miss put and get
 * again. Exit status: 0, or which promise broke. */
static int racer(const char *dir, uint64_t max_bytes, int id, int barrier) {
  char byte;
  while (read(barrier, &byte, 1) < 0 && errno == EINTR) {
  }
  cache_disk *disk = open_or_exit(dir, max_bytes, NULL);
  bool roomy = max_bytes > (uint64_t)KEYS * 4096;
  int code = 0;
  for (int round = 0; round < 3 && !code; round++) {
    for (int k = 0; k < KEYS && !code; k++) {
      uint64_t i = (uint64_t)((k + id * 5) % KEYS);
      int state = get_state(disk, i);
      if (state < 0) code = 1; /* a wrong hit */
      if (state == 0) {
        if (!put_payload(disk, i, FP)) code = 2;
        state = get_state(disk, i);
        if (state < 0) code = 1;
        /* with room for every key nothing is evicted, so what was just put must be there */
        if (roomy && state != 1) code = 3;
      }
    }
  }
  cache_disk_stats s;
  cache_disk_get_stats(disk, &s);
  if (!code && s.corrupt) code = 4; /* a reader saw a partial or damaged file */
  if (!code && s.write_errors) code = 5;
  cache_disk_close(disk);
  return code;
}

static void race(uint64_t max_bytes) {
  char dir[64];
  make_temp_dir(dir);
  int barrier[2];
  CHECK(pipe(barrier) == 0);
  fflush(NULL);
  pid_t pids[PROCS];
  for (int p = 0; p < PROCS; p++) {
    pids[p] = fork();
    if (pids[p] == 0) {
      close(barrier[1]);
      _exit(racer(dir, max_bytes, p, barrier[0]));
    }
  }
  close(barrier[0]);
  close(barrier[1]); /* go */
  for (int p = 0; p < PROCS; p++) {
    int status = wait_status(pids[p]);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "racer %d: status %d (exit %d)", p, status,
              WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  }
  /* the directory is consistent: every entry intact, no temporary files, under the limit */
  cache_disk_summary summary;
  hlo_diag diag;
  hlo_diag_clear(&diag);
  CHECK(cache_disk_scan(dir, true, false, NULL, NULL, &summary, &diag) == HLO_OK);
  CHECK_EQ_INT(summary.bad_entries, 0);
  CHECK_EQ_INT(summary.temps, 0);
  CHECK(summary.entry_bytes <= max_bytes);
  CHECK(summary.entries <= KEYS);
  cache_disk *disk = open_or_exit(dir, max_bytes, NULL);
  int present = 0;
  for (uint64_t i = 0; i < KEYS; i++) {
    int state = get_state(disk, i);
    CHECK(state >= 0);
    present += state == 1;
  }
  CHECK_EQ_INT(present, (int)summary.entries);
  if (max_bytes > (uint64_t)KEYS * 4096) CHECK_EQ_INT(present, KEYS);
  else CHECK(present > 0 && present < KEYS);
  cache_disk_close(disk);
  remove_tree(dir);
}

static void racing_processes(void) {
  race(1 << 20);
}

static void racing_processes_with_eviction(void) {
  race(6 * 1600); /* room for about six of the sixteen entries */
}

/* ---- a writer killed mid-write ---- */

static bool temp_file_started(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return false;
  bool found = false;
  struct dirent *ent;
  while (!found && (ent = readdir(d))) {
    if (!cache_disk_is_temp_name(ent->d_name)) continue;
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, ent->d_name);
    found = file_size(path) > CACHE_DISK_HEADER_BYTES; /* the header and half a payload are out */
  }
  closedir(d);
  return found;
}

static void killed_writer(bool had_entry) {
  char dir[64];
  make_temp_dir(dir);
  const uint64_t key = 7;
  if (had_entry) {
    cache_disk *disk = open_or_exit(dir, 1 << 20, NULL);
    CHECK(put_payload(disk, key, FP));
    cache_disk_close(disk);
  }
  fflush(NULL);
  pid_t writer = fork();
  if (writer == 0) {
    /* test-only: sleep halfway through the payload, long enough to be killed there */
    cache_disk *disk = open_or_exit(dir, 1 << 20, &(cache_disk_test_hooks){.write_delay_ms = "60000"});
    size_t len = test_len(key);
    void *other = test_payload(1000 + key, len); /* different bytes under the same key */
    cache_disk_put(disk, test_key(key), FP, other, len);
    _exit(30); /* not reached: the parent kills it in the delay */
  }
  /* Wait (without a deadline that could fail a slow machine) for the write to begin; a
   * writer that exited instead shows up in its status below. */
  struct timespec tick = {0, 1000000};
  int polls = 0;
  while (!temp_file_started(dir) && waitpid(writer, NULL, WNOHANG) == 0 && polls++ < 60000) nanosleep(&tick, NULL);
  kill(writer, SIGKILL);
  int status = wait_status(writer);
  CHECK_MSG(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "writer status %d", status);

  cache_disk *disk = open_or_exit(dir, 1 << 20, NULL);
  int state = get_state(disk, key);
  CHECK_EQ_INT(state, had_entry ? 1 : 0); /* the old entry whole, or nothing; never half of the new */
  cache_disk_stats s;
  cache_disk_get_stats(disk, &s);
  CHECK_EQ_INT(s.corrupt, 0);
  cache_disk_summary summary;
  hlo_diag diag;
  hlo_diag_clear(&diag);
  CHECK(cache_disk_scan(dir, true, false, NULL, NULL, &summary, &diag) == HLO_OK);
  CHECK_EQ_INT(summary.entries, had_entry ? 1 : 0);
  CHECK_EQ_INT(summary.bad_entries, 0);
  CHECK_EQ_INT(summary.temps, 1); /* the dead writer's file, invisible to readers */
  /* once old enough (here: any age) eviction removes it; fresh ones are left to their writers */
  cache_disk_evict(dir, 1 << 20, CACHE_DISK_STALE_TEMP_SECONDS, NULL);
  CHECK_EQ_INT(count_files(dir, CACHE_DISK_TEMP_PREFIX), 1);
  cache_disk_evict(dir, 1 << 20, -1, NULL);
  CHECK_EQ_INT(count_files(dir, CACHE_DISK_TEMP_PREFIX), 0);
  /* and the key can be written again */
  CHECK(put_payload(disk, key, FP));
  CHECK_EQ_INT(get_state(disk, key), 1);
  cache_disk_close(disk);
  remove_tree(dir);
}

static void killed_writer_over_old_entry(void) {
  killed_writer(true);
}

static void killed_writer_first_entry(void) {
  killed_writer(false);
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "child-get") == 0) return child_get(argv[2]);
  unsetenv("LATCH_CACHE_TEST_FAULT");
  unsetenv("LATCH_CACHE_TEST_WRITE_DELAY_MS");
  RUN(second_process_hits);
  RUN(racing_processes);
  RUN(racing_processes_with_eviction);
  RUN(killed_writer_over_old_entry);
  RUN(killed_writer_first_entry);
  return TEST_REPORT();
}
