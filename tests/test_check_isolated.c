/* LATCH_CHECK's isolation: the first compile and first execution of each
 * new graph run in a child process with a time limit, so a backend that crashes (abort) or
 * hangs while compiling, or computes wrong numbers, costs a repro directory and a warning,
 * never the program: its outputs are right each time, through a plain sync and through a
 * traced function, on the cpu backend (the default). Faults are injected with options.test_fault
 * on the cosine. The time limit is 2 s where the fault is a hang (each hanging check costs
 * it) and 30 s elsewhere, so that a loaded machine does not turn a slow check into a hang. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_util.h"
#include "latch.h"
#include "test.h"

static char base[64];

/* y = cos(x * 2) + 1 on x = [0, pi/6, pi/4, pi/2]: cos of [0, pi/3, pi/2, pi] plus one. */
static const float want[4] = {2, 1.5f, 1, 0};

typedef struct outcome {
  latch_status status;
  float y[2][4]; /* two runs: the second reuses what the first settled on */
  latch_stats stats;
  char repro[4096], error[1024];
} outcome;

static latch_tensor *graph(latch_runtime *rt, latch_tensor *x) {
  latch_tensor *two = latch_scalar(rt, LATCH_F32, 2), *one = latch_scalar(rt, LATCH_F32, 1);
  latch_tensor *a = latch_binary(LATCH_MUL, x, two), *c = latch_unary(LATCH_COS, a);
  latch_tensor *y = latch_binary(LATCH_ADD, c, one);
  latch_release(two), latch_release(one), latch_release(a), latch_release(c);
  return y;
}

static latch_status traced(void *user, latch_tensor *const *in, int n, latch_tensor **out, int m) {
  (void)n, (void)m;
  out[0] = graph(user, in[0]);
  return LATCH_OK;
}

static double budget = 60; /* LATCH_CHECK_BUDGET for the next runtime */
static int max_runs;        /* LATCH_CHECK_MAX_RUNS */
static bool bisect;         /* LATCH_BISECT */

static latch_runtime *open_checked(const char *check, const char *fault, double timeout, outcome *o) {
  latch_options options;
  latch_options_init(&options);
  options.check = check;
  options.check_timeout = timeout;
  options.check_budget = budget;
  options.check_max_runs = max_runs;
  options.check_bisect = bisect;
  options.cache = "memory";
  options.test_fault = fault;
  options.repro_dir = base;
  latch_runtime *rt = latch_open(&options);
  if (!rt) {
    o->status = LATCH_ERR_INPUT;
    snprintf(o->error, sizeof o->error, "%s", latch_last_error());
  }
  return rt;
}

static outcome run(const char *check, const char *fault, bool as_function) {
  outcome o;
  memset(&o, 0, sizeof o);
  latch_runtime *rt = open_checked(check, fault, fault && strncmp(fault, "hang:", 5) == 0 ? 2 : 30, &o);
  if (!rt) return o;
  const float pi = 3.14159265f;
  float x_data[4] = {0, pi / 6, pi / 4, pi / 2};
  int64_t dims[1] = {4};
  latch_function *f = as_function ? latch_function_new_step(rt, traced, rt, NULL) : NULL;
  for (int r = 0; r < 2 && o.status == LATCH_OK; r++) {
    latch_tensor *x = latch_from_host(rt, LATCH_F32, 1, dims, x_data), *y = NULL;
    if (f) o.status = latch_call(f, &x, 1, NULL, 0, &y, 1);
    else y = graph(rt, x), o.status = latch_sync(rt);
    if (o.status == LATCH_OK) o.status = latch_read(y, o.y[r], sizeof o.y[r]);
    if (o.status != LATCH_OK) snprintf(o.error, sizeof o.error, "%s", latch_last_error());
    latch_release(x), latch_release(y);
  }
  latch_get_stats(rt, &o.stats);
  snprintf(o.repro, sizeof o.repro, "%s", latch_last_repro(rt));
  latch_function_free(f);
  latch_close(rt);
  return o;
}

/* The program goes on with right values; one failure; a repro whose module keeps the
 * cosine and whose report names the failure kind. */
static void expect_survived(const char *check, const char *fault, bool as_function, const char *failure) {
  outcome o = run(check, fault, as_function);
  CHECK_MSG(o.status == LATCH_OK, "%s %s: %s", fault, as_function ? "function" : "sync", o.error);
  for (int r = 0; r < 2; r++)
    for (int i = 0; i < 4; i++) CHECK_NEAR(o.y[r][i], want[i], 1e-6);
  CHECK_EQ_INT(o.stats.check_failures, 1);
  CHECK_MSG(o.repro[0], "no repro for %s", fault);
  if (!o.repro[0]) return;
  char path[4200], text[1 << 14];
  snprintf(path, sizeof path, "%s/repro.hlo", o.repro);
  cli_read_text(path, text, sizeof text);
  CHECK_MSG(strstr(text, "cosine(") != NULL, "%s", text);
  snprintf(path, sizeof path, "%s/report.txt", o.repro);
  cli_read_text(path, text, sizeof text);
  CHECK_MSG(strstr(text, failure) != NULL, "no '%s' in %s", failure, text);
}

static void crash_in_compile_sync(void) { expect_survived("compile", "crash:cosine", false, "failure:    crash"); }
static void crash_in_compile_function(void) { expect_survived("compile", "crash:cosine", true, "failure:    crash"); }
static void hang_in_compile_sync(void) { expect_survived("compile", "hang:cosine", false, "failure:    hang"); }
static void hang_in_compile_function(void) { expect_survived("compile", "hang:cosine", true, "failure:    hang"); }
static void wrong_numbers_sync(void) { expect_survived("accuracy", "accuracy:cosine:0.1", false, "accuracy failure"); }
static void wrong_numbers_function(void) { expect_survived("accuracy", "accuracy:cosine:0.1", true, "accuracy failure"); }
/* A hang is recognised once: the check saw it, so the repro is the graph as it is, with no
 * candidate checked (each would wait out the time limit), and the unminified graph is
 * written before any minifying. */
static void hang_checked_once(void) {
  outcome o = run("compile", "hang:cosine", false);
  CHECK_EQ_INT(o.stats.check_failures, 1);
  CHECK_MSG(o.repro[0], "no repro");
  if (!o.repro[0]) return;
  char path[4200], text[1 << 14];
  snprintf(path, sizeof path, "%s/report.txt", o.repro);
  cli_read_text(path, text, sizeof text);
  CHECK_MSG(strstr(text, "checks:     0 ") != NULL, "%s", text);
  snprintf(path, sizeof path, "%s/unminified.hlo", o.repro);
  cli_read_text(path, text, sizeof text);
  CHECK_MSG(strstr(text, "cosine(") && strstr(text, "multiply(") && strstr(text, "add("), "%s", text);
}

/* LATCH_CHECK_BUDGET bounds the check itself: a hang with a time limit of an hour is cut
 * off by a budget of 2 s (before it, the check waited out the hour), the program goes on
 * with right values, and the unminified graph is the repro. */
static void budget_bounds_a_hang(void) {
  budget = 2;
  outcome o;
  memset(&o, 0, sizeof o);
  latch_runtime *rt = open_checked("compile", "hang:cosine", 3600, &o);
  budget = 60;
  if (!rt) return;
  const float pi = 3.14159265f;
  float x_data[4] = {0, pi / 6, pi / 4, pi / 2}, y[4];
  int64_t dims[1] = {4};
  latch_tensor *x = latch_from_host(rt, LATCH_F32, 1, dims, x_data), *t = graph(rt, x);
  CHECK(latch_sync(rt) == LATCH_OK && latch_read(t, y, sizeof y) == LATCH_OK);
  for (int i = 0; i < 4; i++) CHECK_NEAR(y[i], want[i], 1e-6);
  latch_get_stats(rt, &o.stats);
  CHECK_EQ_INT(o.stats.check_failures, 1);
  char path[4200], text[1 << 14];
  snprintf(path, sizeof path, "%s/unminified.hlo", latch_last_repro(rt));
  cli_read_text(path, text, sizeof text);
  CHECK_MSG(strstr(text, "cosine(") != NULL, "%s", text);
  latch_release(x), latch_release(t);
  latch_close(rt);
}

static void bad_budget_is_an_error(void) {
  setenv("LATCH_CHECK_BUDGET", "0", 1);
  latch_options options;
  CHECK(latch_options_init(&options) == LATCH_ERR_INPUT);
  CHECK(strstr(latch_last_error(), "LATCH_CHECK_BUDGET") != NULL);
  setenv("LATCH_CHECK_BUDGET", "7.5", 1);
  CHECK(latch_options_init(&options) == LATCH_OK && options.check_budget == 7.5);
  unsetenv("LATCH_CHECK_BUDGET");
  CHECK(latch_options_init(&options) == LATCH_OK && options.check_budget == 60);
}

/* A crash found by the compile-only check as well, under accuracy. */
static void crash_under_accuracy(void) { expect_survived("accuracy", "crash:cosine", true, "failure:    crash"); }

/* Graphs large enough that the cpu backend's loops split over threads, in the child and then
 * in this process, several times in turn: forking after the thread pool ran must not make a
 * clean graph look like a hang or a crash. x + 1 over 2^20 elements, then (x + 1) * 3. */
static void clean_large_graphs_pass(void) {
  outcome o;
  memset(&o, 0, sizeof o);
  latch_runtime *rt = open_checked("accuracy", NULL, 30, &o);
  if (!rt) return;
  int64_t dims[1] = {1 << 20};
  float *data = malloc(sizeof(float) << 20), *out = malloc(sizeof(float) << 20);
  for (int i = 0; i < 1 << 20; i++) data[i] = (float)(i % 7);
  for (int round = 0; round < 3; round++) {
    latch_tensor *x = latch_from_host(rt, LATCH_F32, 1, dims, data);
    latch_tensor *one = latch_scalar(rt, LATCH_F32, 1 + round), *three = latch_scalar(rt, LATCH_F32, 3);
    latch_tensor *a = latch_binary(LATCH_ADD, x, one), *b = latch_binary(LATCH_MUL, a, three);
    CHECK(latch_sync(rt) == LATCH_OK);
    CHECK(latch_read(b, out, sizeof(float) << 20) == LATCH_OK);
    bool right = true;
    for (int i = 0; i < 1 << 20 && right; i++) right = out[i] == (float)((i % 7 + 1 + round) * 3);
    CHECK(right);
    latch_release(x), latch_release(one), latch_release(three), latch_release(a), latch_release(b);
  }
  latch_get_stats(rt, &o.stats);
  CHECK_EQ_INT(o.stats.check_failures, 0);
  CHECK_EQ_INT(o.stats.compiles, 3);
  free(data);
  free(out);
  latch_close(rt);
}

static void bad_timeout_is_an_error(void) {
  setenv("LATCH_CHECK_TIMEOUT", "soon", 1);
  latch_options options;
  CHECK(latch_options_init(&options) == LATCH_ERR_INPUT);
  CHECK(strstr(latch_last_error(), "LATCH_CHECK_TIMEOUT") != NULL);
  setenv("LATCH_CHECK_TIMEOUT", "2.5", 1);
  CHECK(latch_options_init(&options) == LATCH_OK && options.check_timeout == 2.5);
  unsetenv("LATCH_CHECK_TIMEOUT");
}

/* LATCH_BISECT: a wrong fusion (LATCH_FAULT=choice:fusion:1 perturbs the outputs when the
 * compile fuses its first group) fails the accuracy check; the repro's report.txt and
 * culprit.txt name the fusion, and the repro, replayed by its repro.sh, fails with the
 * fault and passes with the fault and the setting the answer gives (LATCH_AVOID). Without
 * LATCH_BISECT there is no culprit line. */
static void bisect_names_the_choice(void) {
  bisect = true;
  outcome o = run("accuracy", "choice:fusion:1", false);
  bisect = false;
  CHECK_MSG(o.status == LATCH_OK, "%s", o.error);
  for (int i = 0; i < 4; i++) CHECK_NEAR(o.y[0][i], want[i], 1e-6);
  CHECK_EQ_INT(o.stats.check_failures, 1);
  if (!o.repro[0]) return;
  char path[4200], report[1 << 14], culprit[4096];
  snprintf(path, sizeof path, "%s/report.txt", o.repro);
  cli_read_text(path, report, sizeof report);
  snprintf(path, sizeof path, "%s/culprit.txt", o.repro);
  cli_read_text(path, culprit, sizeof culprit);
  CHECK_MSG(strncmp(culprit, "culprit: fusion on %", 20) == 0, "%s", culprit);
  char line[512] = "";
  sscanf(culprit, "%511[^\n]", line);
  CHECK_MSG(line[0] && strstr(report, line) != NULL, "no '%s' in %s", line, report);
  char *setting = strstr(culprit, "LATCH_AVOID=");
  CHECK_MSG(setting != NULL, "%s", culprit);
  if (!setting) return;
  char refuse[256] = "", bin[1024], command[8192];
  sscanf(setting + strlen("LATCH_AVOID="), "%255s", refuse);
  /* the repro, replayed by its repro.sh (non-zero: the failure reproduces) */
  const char *build = getenv("BUILD");
  if (getenv("LATCH_BIN") && *getenv("LATCH_BIN")) snprintf(bin, sizeof bin, "%s", getenv("LATCH_BIN"));
  else snprintf(bin, sizeof bin, "%s/latch", build && *build ? build : "build");
  char *absolute = realpath(bin, NULL);
  if (absolute) snprintf(bin, sizeof bin, "%s", absolute);
  free(absolute);
  snprintf(command, sizeof command, "LATCH_BIN='%s' LATCH_FAULT=choice:fusion:1 '%s/repro.sh' >/dev/null 2>&1", bin,
           o.repro);
  CHECK_MSG(system(command) != 0, "the repro passes: %s", command);
  snprintf(command, sizeof command,
           "LATCH_BIN='%s' LATCH_FAULT=choice:fusion:1 LATCH_AVOID='%s' '%s/repro.sh' >/dev/null 2>&1", bin, refuse,
           o.repro);
  CHECK_MSG(system(command) == 0, "the repro fails with LATCH_AVOID=%s: %s", refuse, culprit);
  outcome plain = run("accuracy", "choice:fusion:1", false);
  CHECK_EQ_INT(plain.stats.check_failures, 1);
  if (!plain.repro[0]) return;
  snprintf(path, sizeof path, "%s/report.txt", plain.repro);
  cli_read_text(path, report, sizeof report);
  CHECK(strstr(report, "culprit:") == NULL);
  snprintf(path, sizeof path, "%s/culprit.txt", plain.repro);
  CHECK(access(path, F_OK) != 0);
}

/* LATCH_CHECK_MAX_RUNS bounds the minification's checks: with 1 the repro is the graph after
 * at most one candidate, and the report says the budget was spent. */
static void max_runs_bound_the_repro(void) {
  max_runs = 1;
  outcome o = run("accuracy", "accuracy:cosine:0.1", false);
  max_runs = 0;
  CHECK_EQ_INT(o.stats.check_failures, 1);
  if (!o.repro[0]) return;
  char path[4200], report[1 << 14];
  snprintf(path, sizeof path, "%s/report.txt", o.repro);
  cli_read_text(path, report, sizeof report);
  CHECK_MSG(strstr(report, "checks:     1 (") != NULL, "%s", report);
  CHECK_MSG(strstr(report, "budget:     spent") != NULL, "%s", report);
  setenv("LATCH_CHECK_MAX_RUNS", "-1", 1);
  latch_options options;
  CHECK(latch_options_init(&options) == LATCH_ERR_INPUT);
  CHECK(strstr(latch_last_error(), "LATCH_CHECK_MAX_RUNS") != NULL);
  setenv("LATCH_CHECK_MAX_RUNS", "7", 1);
  setenv("LATCH_BISECT", "1", 1);
  CHECK(latch_options_init(&options) == LATCH_OK && options.check_max_runs == 7 && options.check_bisect);
  unsetenv("LATCH_CHECK_MAX_RUNS");
  unsetenv("LATCH_BISECT");
}

int main(void) {
  snprintf(base, sizeof base, "/tmp/latch-isolated-XXXXXX");
  if (!mkdtemp(base)) return 1;
  unsetenv("LATCH_BACKEND"); /* the default: cpu */
  RUN(crash_in_compile_sync);
  RUN(crash_in_compile_function);
  RUN(hang_in_compile_sync);
  RUN(hang_in_compile_function);
  RUN(wrong_numbers_sync);
  RUN(wrong_numbers_function);
  RUN(crash_under_accuracy);
  RUN(clean_large_graphs_pass);
  RUN(bad_timeout_is_an_error);
  RUN(hang_checked_once);
  RUN(budget_bounds_a_hang);
  RUN(bad_budget_is_an_error);
  RUN(bisect_names_the_choice);
  RUN(max_runs_bound_the_repro);
  char command[128];
  snprintf(command, sizeof command, "rm -rf '%s'", base);
  if (system(command) != 0) fprintf(stderr, "could not remove %s\n", base);
  return TEST_REPORT();
}
