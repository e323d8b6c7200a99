/* The disk cache under lazy capture: a second process running the same program compiles
 * nothing and says so in its statistics; damaged entries and the other cache modes. Each
 * "process" is a forked child with its own runtime, reporting through a pipe. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "latch.h"
#include "test.h"

typedef struct report {
  int ok;
  float out[4];
  latch_stats stats;
  char error[256];
} report;

/* The program: relu(x * 2 - 1) on [0, 0.25, 0.5, 1], expected [0, 0, 0, 1]. */
static report run_program(const char *mode, const char *dir) {
  report r;
  memset(&r, 0, sizeof r);
  latch_options options;
  latch_options_init(&options);
  options.backend = "reference";
  options.cache = mode;
  options.cache_dir = dir;
  latch_runtime *rt = latch_open(&options);
  if (!rt) {
    snprintf(r.error, sizeof r.error, "%s", latch_last_error());
    return r;
  }
  float x_data[4] = {0, 0.25f, 0.5f, 1};
  int64_t dims[1] = {4};
  latch_tensor *x = latch_from_host(rt, LATCH_F32, 1, dims, x_data);
  latch_tensor *two = latch_scalar(rt, LATCH_F32, 2), *one = latch_scalar(rt, LATCH_F32, 1);
  latch_tensor *a = latch_binary(LATCH_MUL, x, two), *b = latch_binary(LATCH_SUB, a, one);
  latch_tensor *y = latch_relu(b);
  r.ok = latch_read(y, r.out, sizeof r.out) == LATCH_OK;
  if (!r.ok) snprintf(r.error, sizeof r.error, "%s", latch_last_error());
  latch_get_stats(rt, &r.stats);
  latch_tensor *all[] = {x, two, one, a, b, y};
  for (int i = 0; i < 6; i++) latch_release(all[i]);
  latch_close(rt);
  return r;
}

/* Runs the program in a child process and returns what it reported. */
static report in_child(const char *mode, const char *dir) {
  int fds[2];
  report r;
  memset(&r, 0, sizeof r);
  if (pipe(fds) != 0) return r;
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    report mine = run_program(mode, dir);
    ssize_t written = write(fds[1], &mine, sizeof mine);
    _exit(written == (ssize_t)sizeof mine ? 0 : 1);
  }
  close(fds[1]);
  ssize_t got = read(fds[0], &r, sizeof r);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (got != (ssize_t)sizeof r || !WIFEXITED(status) || WEXITSTATUS(status) != 0) r.ok = 0;
  return r;
}

static void check_values(const report *r) {
  CHECK_MSG(r->ok, "%s", r->error);
  const float want[4] = {0, 0, 0, 1};
  for (int i = 0; i < 4; i++) CHECK_NEAR(r->out[i], want[i], 0);
}

/* The one entry file in dir (there is one graph), or "" when none. */
static void entry_path(const char *dir, char *out, size_t size) {
  out[0] = 0;
  DIR *d = opendir(dir);
  if (!d) return;
  for (struct dirent *e; (e = readdir(d));) {
    size_t n = strlen(e->d_name);
    if (n > 6 && strcmp(e->d_name + n - 6, ".latch") == 0) snprintf(out, size, "%s/%s", dir, e->d_name);
  }
  closedir(d);
}

static void test_warm_process_compiles_nothing(void) {
  char dir[] = "/tmp/latch-capture-disk-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  report cold = in_child("disk", dir);
  check_values(&cold);
  CHECK_EQ_INT(cold.stats.compiles, 1);
  CHECK_EQ_INT(cold.stats.disk_loads, 0);
  CHECK_EQ_INT(cold.stats.disk_writes, 1);
  report warm = in_child("disk", dir);
  check_values(&warm);
  CHECK_EQ_INT(warm.stats.compiles, 0);
  CHECK_EQ_INT(warm.stats.disk_loads, 1);
  CHECK_EQ_INT(warm.stats.disk_writes, 0);

  /* A damaged entry is a miss: the next process compiles again, gets the right values and
   * replaces the entry, and the one after loads it. */
  char path[4200];
  entry_path(dir, path, sizeof path);
  CHECK(path[0] != 0);
  int fd = open(path, O_WRONLY | O_TRUNC);
  CHECK(fd >= 0);
  if (fd >= 0) {
    CHECK(write(fd, "garbage", 7) == 7);
    close(fd);
  }
  report damaged = in_child("disk", dir);
  check_values(&damaged);
  CHECK_EQ_INT(damaged.stats.compiles, 1);
  CHECK_EQ_INT(damaged.stats.disk_writes, 1);
  report again = in_child("disk", dir);
  check_values(&again);
  CHECK_EQ_INT(again.stats.compiles, 0);

  /* memory and off never touch the directory: they compile in every process. */
  report memory = in_child("memory", dir);
  check_values(&memory);
  CHECK_EQ_INT(memory.stats.compiles, 1);
  CHECK_EQ_INT(memory.stats.disk_loads, 0);
  report off = in_child("off", dir);
  check_values(&off);
  CHECK_EQ_INT(off.stats.compiles, 1);

  char command[4200];
  snprintf(command, sizeof command, "rm -rf '%s'", dir);
  CHECK(system(command) == 0);
}

static void test_bad_mode_is_an_error(void) {
  report r = run_program("sometimes", NULL);
  CHECK(!r.ok);
  CHECK(strstr(r.error, "unknown cache mode 'sometimes'") != NULL);
}

int main(void) {
  RUN(test_warm_process_compiles_nothing);
  RUN(test_bad_mode_is_an_error);
  return TEST_REPORT();
}
