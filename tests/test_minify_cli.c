/* latch run --check and latch minify as a user runs them, with injected faults: the repro
 * directory's repro.sh fails with the fault set and passes without it. The binary is
 * $LATCH_BIN, else $BUILD/latch, else build/latch. */
#include <dirent.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"
#include "cli_util.h"

static char err_text[1 << 16];

/* Runs a shell command line (with $L the latch binary and $D the test's directory); returns
 * its exit status, 128 + signal when killed; its stderr goes to err_text. */
static int sh(const char *format, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *format, ...) {
  char line[2048], command[4096];
  va_list list;
  va_start(list, format);
  vsnprintf(line, sizeof line, format, list);
  va_end(list);
  snprintf(command, sizeof command, "L='%s'; D='%s'; ( %s ) >'%s/out' 2>'%s/err'", cli_bin, cli_dir, line, cli_dir,
           cli_dir);
  int status = system(command);
  cli_read_text(cli_path("err"), err_text, sizeof err_text);
  if (status == -1) return -1;
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

#define CHECK_SH(want, ...)                                                                     \
  do {                                                                                          \
    int got_ = sh(__VA_ARGS__);                                                                 \
    CHECK_MSG(got_ == (want), "exit %d, want %d; stderr: %s", got_, (want), err_text);          \
  } while (0)

static void write_module(void) {
  cli_write_text(cli_path("m.hlo"),
        "HloModule m\n"
        "ENTRY e {\n"
        "  x = f32[4] parameter(0)\n"
        "  y = f32[4] parameter(1)\n"
        "  a = f32[4] add(x, y)\n"
        "  b = f32[4] multiply(a, x)\n"
        "  c = f32[4] cosine(b)\n"
        "  d = f32[4] subtract(c, y)\n"
        "  e = f32[4] tanh(d)\n"
        "  ROOT r = (f32[4], f32[4]) tuple(e, a)\n"
        "}\n");
}

static void run_checks(void) {
  CHECK_SH(0, "$L run $D/m.hlo --check compile");
  CHECK_SH(0, "$L run $D/m.hlo --check accuracy");
  CHECK_SH(2, "LATCH_FAULT=compile:cosine $L run $D/m.hlo --check compile");
  CHECK(strstr(err_text, "check failed: compile") && strstr(err_text, "cosine %c"));
  CHECK_SH(4, "LATCH_FAULT=accuracy:cosine:0.5 $L run $D/m.hlo --check accuracy");
  CHECK(strstr(err_text, "check failed: accuracy: output 0"));
  CHECK_SH(1, "LATCH_FAULT=bogus $L run $D/m.hlo --check compile");
  CHECK_SH(1, "$L run $D/m.hlo --check speed");
  CHECK_SH(128 + 6, "LATCH_FAULT=crash:cosine $L run $D/m.hlo --check compile");
}

/* Minifies with the fault, then checks the repro directory and repro.sh both ways. */
static void minify_and_reproduce(const char *fault, const char *check, const char *extra) {
  CHECK_SH(0, "rm -rf $D/r && LATCH_FAULT=%s $L minify $D/m.hlo --check %s -o $D/r %s", fault, check, extra);
  CHECK(strstr(err_text, "minify: [") != NULL); /* progress lines */
  char text[4096];
  cli_read_text(cli_path("r/repro.hlo"), text, sizeof text);
  CHECK_MSG(strstr(text, "ROOT %c = f32[4] cosine(%b)") != NULL, "%s", text);
  CHECK(strstr(text, "add(") == NULL && strstr(text, "tanh(") == NULL);
  CHECK_SH(0, "test -f $D/r/inputs/0.npy && test ! -f $D/r/inputs/1.npy && test -x $D/r/repro.sh");
  cli_read_text(cli_path("r/report.txt"), text, sizeof text);
  CHECK(strstr(text, "before:     8 instructions (6 ops)") != NULL);
  CHECK(strstr(text, "after:      2 instructions (1 ops), 1 parameters") != NULL);
  CHECK(strstr(text, "checks:") && strstr(text, "time:") && strstr(text, "strategies that worked: "));
  /* The repro fails with the fault and passes without it, wherever it is run from. */
  int with = sh("cd / && LATCH_FAULT=%s LATCH_BIN=$L $D/r/repro.sh", fault);
  CHECK_MSG(with != 0, "repro.sh passed with LATCH_FAULT=%s", fault);
  CHECK_SH(0, "cd / && LATCH_BIN=$L $D/r/repro.sh");
  /* Without LATCH_BIN it falls back on the binary that wrote it. */
  CHECK_SH(0, "env -u LATCH_BIN PATH=/usr/bin:/bin $D/r/repro.sh");
}

static void minify_command(void) {
  minify_and_reproduce("compile:cosine", "compile", "");
  minify_and_reproduce("accuracy:cosine:0.5", "accuracy", "");
  minify_and_reproduce("crash:cosine", "compile", "");
  minify_and_reproduce("hang:cosine", "compile", "--timeout 0.5");
  /* --test: exit 0 means still failing */
  CHECK_SH(0, "rm -rf $D/t && $L minify $D/m.hlo --test 'grep -q cosine' -o $D/t --quiet");
  CHECK_SH(0, "grep -q 'ROOT %%c = f32\\[4\\] cosine' $D/t/repro.hlo");
  CHECK_SH(1, "$D/t/repro.sh"); /* grep finds cosine: the failure reproduces */
  /* A --test repro names no absolute path: the directory the command ran in is reached from
   * the repro's, so the two move together. */
  CHECK_SH(0, "cd $D && rm -rf t2 && $L minify m.hlo --test 'test -f m.hlo && grep -q cosine' -o t2 --quiet");
  CHECK_SH(0, "grep -q '^cd \"$here\"/'\\''..'\\'' ' $D/t2/repro.sh");
  CHECK_SH(1, "grep -q \"$D\" $D/t2/repro.sh");
  CHECK_SH(1, "rm -rf $D/t3 && mv $D/t2 $D/t3 && cd / && $D/t3/repro.sh");
  /* Usage errors and a module that does not fail. */
  CHECK_SH(1, "$L minify $D/m.hlo");
  CHECK_SH(1, "$L minify $D/m.hlo --check compile --test true");
  CHECK_SH(1, "$L minify $D/m.hlo --check compile -o $D/none --quiet");
  CHECK(strstr(err_text, "does not fail the check") != NULL);
  CHECK_SH(0, "$L minify --help | grep -q -- '--test-nonzero'");
  CHECK_SH(0, "$L --help | grep -q minify");
}

/* --single-file, the byte limit, a compile repro of a step too large to run, the progress
 * line on a terminal. */
static void minify_options(void) {
  /* One file: the inputs are constants, nothing is read from inputs/. */
  CHECK_SH(0, "rm -rf $D/s && LATCH_FAULT=accuracy:cosine:0.5 $L minify $D/m.hlo --check accuracy -o $D/s "
              "--single-file --quiet");
  CHECK_SH(1, "grep -q ' parameter(' $D/s/repro.hlo");
  CHECK_SH(0, "grep -q 'constant({' $D/s/repro.hlo && test ! -f $D/s/inputs/0.npy");
  CHECK_SH(0, "grep -q 'run repro.hlo --backend' $D/s/repro.sh");
  CHECK_SH(4, "LATCH_FAULT=accuracy:cosine:0.5 $L run $D/s/repro.hlo --check accuracy");
  CHECK_SH(0, "$L run $D/s/repro.hlo --check accuracy");
  /* Past the limit (16 bytes of input, 8 allowed, shapes kept) the input is left out. */
  CHECK_SH(0, "rm -rf $D/l && LATCH_FAULT=accuracy:cosine:0.5 LATCH_REPRO_MAX_BYTES=8 $L minify $D/m.hlo "
              "--check accuracy -o $D/l --keep-shapes --quiet");
  CHECK_SH(0, "grep -q 'left out:   input 0 (f32\\[4\\], 16 bytes)' $D/l/report.txt");
  CHECK_SH(0, "grep -q 'run repro.hlo --seed 0' $D/l/repro.sh && test ! -f $D/l/inputs/0.npy");
  /* With shapes free to shrink, the input fits: f32[1], 4 bytes. */
  CHECK_SH(0, "rm -rf $D/f && LATCH_FAULT=accuracy:cosine:0.5 $L minify $D/m.hlo --check accuracy -o $D/f "
              "--max-bytes 8 --quiet");
  CHECK_SH(0, "grep -q 'inputs:     32 bytes before, 4 bytes after' $D/f/report.txt");
  CHECK_SH(1, "LATCH_REPRO_MAX_BYTES=lots $L minify $D/m.hlo --check compile -o $D/x --quiet");
  /* A failure constant data hides (shift:cosine moves the cosine's results one place): the
   * cosine's input shrinks to f32[2] and becomes the seeded array, so the repro reads no
   * input, says so, and replays with the fault only. */
  CHECK_SH(0, "rm -rf $D/g && LATCH_FAULT=shift:cosine $L minify $D/m.hlo --check accuracy -o $D/g "
              "--max-bytes 1 --quiet");
  CHECK_SH(0, "grep -q 'inputs:     32 bytes before, 0 bytes after' $D/g/report.txt");
  CHECK_SH(0, "grep -q 'replaced:   %%b (f32\\[2\\]) by a seeded array' $D/g/report.txt");
  CHECK_SH(1, "grep -q ' parameter(' $D/g/repro.hlo");
  CHECK_SH(4, "LATCH_FAULT=shift:cosine $L run $D/g/repro.hlo --check accuracy");
  CHECK_SH(0, "$L run $D/g/repro.hlo --check accuracy");
  /* A compile failure in a step whose parameters take 16 TiB: no data is made anywhere. */
  cli_write_text(cli_path("huge.hlo"), "HloModule huge\nENTRY e {\n  x = f32[2097152,2097152] parameter(0)\n"
                                       "  c = f32[2097152,2097152] cosine(x)\n  ROOT t = f32[2097152,2097152] tanh(c)\n}\n");
  CHECK_SH(0, "$L run $D/huge.hlo --check compile");
  CHECK_SH(0, "rm -rf $D/h && LATCH_FAULT=compile:cosine $L minify $D/huge.hlo --check compile -o $D/h "
              "--keep-shapes --quiet");
  CHECK_SH(0, "grep -q 'run repro.hlo --seed 0' $D/h/repro.sh");
  CHECK_SH(2, "LATCH_FAULT=compile:cosine LATCH_BIN=$L $D/h/repro.sh");
  CHECK_SH(0, "LATCH_BIN=$L $D/h/repro.sh");
  /* On a terminal (script gives it one): one line rewritten in place (erase-line escapes);
   * plain lines otherwise. */
  CHECK_SH(0, "rm -rf $D/t2 && LATCH_FAULT=compile:cosine script -qec \"$L minify $D/m.hlo --check compile "
              "-o $D/t2\" /dev/null > $D/tty.txt && grep -qF \"$(printf '\\033[K')\" $D/tty.txt && "
              "grep -q 'checks, 8 instructions' $D/tty.txt");
  CHECK_SH(1, "rm -rf $D/t2 && LATCH_FAULT=compile:cosine $L minify $D/m.hlo --check compile -o $D/t2 2>&1 | "
              "grep -qF \"$(printf '\\033[K')\"");
}

/* A module that does not fail gets no repro: cosine times zero under an accuracy fault on
 * cosine passes `latch run --check accuracy`, so `latch minify` says so and exits 1, writing
 * nothing. */
static void minify_masked(void) {
  cli_write_text(cli_path("masked.hlo"), "HloModule masked\nENTRY e {\n  x = f32[4] parameter(0)\n"
                                         "  c = f32[4] cosine(x)\n  z = f32[] constant(0)\n"
                                         "  zb = f32[4] broadcast(z), dimensions={}\n"
                                         "  ROOT m = f32[4] multiply(c, zb)\n}\n");
  CHECK_SH(0, "LATCH_FAULT=accuracy:cosine:0.1 $L run $D/masked.hlo --check accuracy");
  CHECK_SH(1, "rm -rf $D/mk && LATCH_FAULT=accuracy:cosine:0.1 $L minify $D/masked.hlo --check accuracy -o $D/mk");
  CHECK_MSG(strstr(err_text, "does not fail the check") != NULL, "%s", err_text);
  CHECK_SH(0, "test ! -e $D/mk");
  /* --any-failure takes any failure of a candidate, but the module itself must still fail */
  CHECK_SH(1, "LATCH_FAULT=accuracy:cosine:0.1 $L minify $D/masked.hlo --check accuracy --any-failure -o $D/mk");
  CHECK_SH(0, "test ! -e $D/mk");
}

/* latch bisect names the injected choice, writes it next to a repro's graph, and its
 * settings reproduce it: all choices fail, the culprit refused passes. */
static void bisect_command(void) {
  CHECK_SH(0, "LATCH_FAULT=choice:fusion:1 $L bisect $D/m.hlo --check accuracy -o $D > $D/b.txt");
  CHECK_SH(0, "grep -qx 'culprit: fusion on %%e' $D/b.txt && grep -v 'parsed in' $D/b.txt | cmp -s - $D/culprit.txt");
  CHECK_SH(0, "grep -q 'LATCH_CHOICES=1 fails, LATCH_CHOICES=0 passes' $D/b.txt");
  CHECK_SH(4, "LATCH_FAULT=choice:fusion:1 $L run $D/m.hlo --check accuracy");
  CHECK_SH(4, "LATCH_FAULT=choice:fusion:1 LATCH_CHOICES=1 $L run $D/m.hlo --check accuracy");
  CHECK_SH(0, "LATCH_FAULT=choice:fusion:1 LATCH_CHOICES=0 $L run $D/m.hlo --check accuracy");
  CHECK_SH(0, "LATCH_FAULT=choice:fusion:1 LATCH_AVOID=fusion@e $L run $D/m.hlo --check accuracy");
  /* the same through a --test command, which passes LATCH_CHOICES on to the latch it runs */
  CHECK_SH(0, "$L bisect $D/m.hlo --test 'LATCH_FAULT=choice:fusion:1 '$L' run --check accuracy' --test-nonzero "
              "> $D/b2.txt");
  CHECK_SH(0, "grep -qx 'culprit: fusion on %%e' $D/b2.txt");
  /* a repro's graph: the answer lands in its directory */
  CHECK_SH(0, "rm -rf $D/rb && LATCH_FAULT=choice:fusion:1 $L minify $D/m.hlo --check accuracy -o $D/rb --quiet "
              "--keep-shapes");
  CHECK_SH(0, "LATCH_FAULT=choice:fusion:1 $L bisect $D/rb/repro.hlo --check accuracy --inputs $D/rb/inputs");
  CHECK_SH(0, "grep -q '^culprit: fusion on %%' $D/rb/culprit.txt");
  /* no failure, a failure no choice causes, bad usage */
  CHECK_SH(1, "$L bisect $D/m.hlo --check accuracy");
  CHECK(strstr(err_text, "does not fail the check") != NULL);
  CHECK_SH(0, "LATCH_FAULT=accuracy:cosine:0.5 $L bisect $D/m.hlo --check accuracy > $D/b3.txt");
  CHECK_SH(0, "grep -q '^culprit: none of the backend' $D/b3.txt");
  CHECK_SH(1, "$L bisect $D/m.hlo");
  CHECK_SH(1, "LATCH_FAULT=choice:fusion $L bisect $D/m.hlo --check accuracy");
  CHECK_SH(1, "LATCH_CHOICES=some $L run $D/m.hlo");
  CHECK_SH(0, "$L bisect --help | grep -q LATCH_CHOICES && $L --help | grep -q bisect");
}

/* A process's parent and state from /proc/PID/stat; false when there is no such process. */
static bool proc_stat(pid_t pid, pid_t *parent, char *state) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f) return false;
  char text[1024] = "";
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = 0;
  const char *after = strrchr(text, ')'); /* the name may hold spaces */
  int ppid = 0;
  return after && sscanf(after + 1, " %c %d", state, &ppid) == 2 && (*parent = ppid, true);
}

/* A live child of pid, 0 when none. */
static pid_t child_of(pid_t pid) {
  DIR *dir = opendir("/proc");
  pid_t found = 0;
  for (struct dirent *e; dir && !found && (e = readdir(dir));) {
    pid_t p = (pid_t)atoi(e->d_name), parent;
    char state;
    if (p > 0 && proc_stat(p, &parent, &state) && parent == pid && state != 'Z') found = p;
  }
  if (dir) closedir(dir);
  return found;
}

static bool alive(pid_t pid) {
  pid_t parent;
  char state;
  return proc_stat(pid, &parent, &state) && state != 'Z';
}

/* latch minify stopped by sig while its check hangs (LATCH_FAULT=hang:cosine, which sleeps
 * forever in the check's own process group): the check dies with it (by the command's
 * handler for SIGTERM, by the parent's death for SIGKILL), and the command ends by the
 * signal. */
static void minify_killed_by(int sig) {
  fflush(NULL);
  pid_t latch = fork();
  if (latch == 0) {
    setenv("LATCH_FAULT", "hang:cosine", 1);
    if (!freopen("/dev/null", "w", stderr)) _exit(127);
    execl(cli_bin, "latch", "minify", cli_path("m.hlo"), "--check", "compile", "--timeout", "600", "-o",
          cli_path("killed"), "--quiet", (char *)NULL);
    _exit(127);
  }
  pid_t check = 0;
  for (int i = 0; i < 600 && !check; i++) /* the module is parsed, then the check forked */
    if (!(check = child_of(latch))) usleep(50000);
  CHECK_MSG(check > 0, "no check started under latch minify");
  kill(latch, sig);
  int status = 0;
  waitpid(latch, &status, 0);
  CHECK(WIFSIGNALED(status) && WTERMSIG(status) == sig);
  bool gone = check == 0;
  for (int i = 0; i < 100 && !gone; i++) /* SIGKILL is delivered, not waited for */
    if (!(gone = !alive(check))) usleep(50000);
  CHECK_MSG(gone, "the check %d outlived latch minify", (int)check);
  if (!gone) kill(-check, SIGKILL);
}

static void killed_minify_leaves_no_check(void) {
  minify_killed_by(SIGTERM);
  minify_killed_by(SIGKILL);
}

int main(void) {
  if (!cli_setup()) {
    perror("mkdtemp");
    return 1;
  }
  CHECK_MSG(access(cli_bin, X_OK) == 0, "no latch binary at %s", cli_bin);
  write_module();
  RUN(run_checks);
  RUN(minify_command);
  RUN(minify_options);
  RUN(minify_masked);
  RUN(bisect_command);
  RUN(killed_minify_leaves_no_check);
  cli_cleanup();
  return TEST_REPORT();
}
