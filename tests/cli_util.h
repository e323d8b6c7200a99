/* Running the latch command from a test as a user runs it: `ENV latch ARGS` through sh with
 * stdout and stderr captured in cli_out and cli_err. The binary is $LATCH_BIN, else
 * $BUILD/latch, else build/latch, made absolute (commands may run from other directories). */
#ifndef CLI_UTIL_H
#define CLI_UTIL_H
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static char cli_bin[1024], cli_dir[64];
static char cli_out[1 << 16], cli_err[1 << 16];

static inline void cli_read_text(const char *path, char *out, size_t size) {
  FILE *f = fopen(path, "rb");
  size_t len = f ? fread(out, 1, size - 1, f) : 0;
  out[len] = 0;
  if (f) fclose(f);
}

static inline void cli_write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (f) {
    fputs(text, f);
    fclose(f);
  }
}

/* Finds the binary and makes the test's private directory; false when either fails. */
static inline bool cli_setup(void) {
  const char *env_bin = getenv("LATCH_BIN"), *build = getenv("BUILD");
  if (env_bin && *env_bin) snprintf(cli_bin, sizeof cli_bin, "%s", env_bin);
  else snprintf(cli_bin, sizeof cli_bin, "%s/latch", build && *build ? build : "build");
  char *absolute = realpath(cli_bin, NULL);
  if (absolute) {
    snprintf(cli_bin, sizeof cli_bin, "%s", absolute);
    free(absolute);
  }
  snprintf(cli_dir, sizeof cli_dir, "/tmp/latch-test-XXXXXX");
  return mkdtemp(cli_dir) != NULL;
}

static inline void cli_cleanup(void) {
  char command[128];
  snprintf(command, sizeof command, "rm -rf '%s'", cli_dir);
  if (system(command) != 0) fprintf(stderr, "could not remove %s\n", cli_dir);
}

/* A path in the private directory; four can be live at once. */
static inline const char *cli_path(const char *name) {
  static char paths[4][512];
  static int next;
  char *path = paths[next++ % 4];
  snprintf(path, 512, "%s/%s", cli_dir, name);
  return path;
}

/* Runs the shell line `ENV 'BIN' ARGS` (env may be "") with output captured; the exit
 * status, or 128 + signal when it crashed. */
static inline int cli_run(const char *env, const char *format, ...) __attribute__((format(printf, 2, 3)));
static inline int cli_run(const char *env, const char *format, ...) {
  char args[2048], command[4096], out_path[128], err_path[128];
  va_list list;
  va_start(list, format);
  vsnprintf(args, sizeof args, format, list);
  va_end(list);
  snprintf(out_path, sizeof out_path, "%s/.stdout", cli_dir);
  snprintf(err_path, sizeof err_path, "%s/.stderr", cli_dir);
  snprintf(command, sizeof command, "%s '%s' %s >'%s' 2>'%s'", env, cli_bin, args, out_path, err_path);
  int status = system(command);
  cli_read_text(out_path, cli_out, sizeof cli_out);
  cli_read_text(err_path, cli_err, sizeof cli_err);
  if (status == -1) return -1;
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

/* The exit status of a plain shell line (no capture). */
static inline int cli_sh(const char *format, ...) __attribute__((format(printf, 1, 2)));
static inline int cli_sh(const char *format, ...) {
  char command[4096];
  va_list list;
  va_start(list, format);
  vsnprintf(command, sizeof command, format, list);
  va_end(list);
  int status = system(command);
  if (status == -1) return -1;
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

#define CLI_CHECK(want_status, ...)                                                                  \
  do {                                                                                               \
    int got_status_ = cli_run(__VA_ARGS__);                                                          \
    CHECK_MSG(got_status_ == (want_status), "exit %d, want %d\nstdout: %s\nstderr: %s", got_status_, \
              (want_status), cli_out, cli_err);                                                      \
  } while (0)

#define CLI_HAS(text, fragment) CHECK_MSG(strstr((text), (fragment)) != NULL, "no \"%s\" in: %s", (fragment), (text))
#define CLI_LACKS(text, fragment) CHECK_MSG(strstr((text), (fragment)) == NULL, "\"%s\" in: %s", (fragment), (text))

#endif
