/* LATCH_CHECK end to end through the public API: a traced program whose backend has an
 * injected compile fault, or an injected accuracy fault, keeps running with correct results
 * and leaves a repro whose repro.sh reproduces the failure with the fault set and passes
 * without it. The latch binary for repro.sh is $LATCH_BIN, else $BUILD/latch. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli_util.h"
#include "latch.h"
#include "test.h"

static char base[64], bin[1024];

/* y = cos(x * 2) + 1 on x = [0, pi/6, pi/4, pi/2]: cos of [0, pi/3, pi/2, pi] plus one. */
static const float want[4] = {2, 1.5f, 1, 0};

typedef struct outcome {
  latch_status sync;
  float y[4];
  latch_stats stats;
  char repro[4096];
  char error[1024];
} outcome;

static outcome run_program(const char *check, const char *fault, int runs) {
  outcome o;
  memset(&o, 0, sizeof o);
  latch_options options;
  latch_options_init(&options);
  options.backend = "reference";
  options.check = check;
  options.test_fault = fault;
  options.repro_dir = base;
  latch_runtime *rt = latch_open(&options);
  if (!rt) {
    o.sync = LATCH_ERR_INPUT;
    snprintf(o.error, sizeof o.error, "%s", latch_last_error());
    return o;
  }
  const float pi = 3.14159265f;
  float x_data[4] = {0, pi / 6, pi / 4, pi / 2};
  int64_t dims[1] = {4};
  for (int run = 0; run < runs; run++) { /* the second run hits the cache: no new check */
    latch_tensor *x = latch_from_host(rt, LATCH_F32, 1, dims, x_data);
    latch_tensor *two = latch_scalar(rt, LATCH_F32, 2), *one = latch_scalar(rt, LATCH_F32, 1);
    latch_tensor *a = latch_binary(LATCH_MUL, x, two), *c = latch_unary(LATCH_COS, a);
    latch_tensor *y = latch_binary(LATCH_ADD, c, one);
    o.sync = latch_sync(rt);
    if (o.sync == LATCH_OK) o.sync = latch_read(y, o.y, sizeof o.y);
    if (o.sync != LATCH_OK) snprintf(o.error, sizeof o.error, "%s", latch_last_error());
    latch_tensor *all[] = {x, two, one, a, c, y};
    for (int i = 0; i < 6; i++) latch_release(all[i]);
  }
  latch_get_stats(rt, &o.stats);
  snprintf(o.repro, sizeof o.repro, "%s", latch_last_repro(rt));
  latch_close(rt);
  return o;
}

/* Exit status of repro.sh in dir, with fault set (or LATCH_FAULT unset when NULL). */
static int run_repro(const char *dir, const char *fault) {
  char command[8192];
  snprintf(command, sizeof command, "cd / && %s%s%s LATCH_BIN='%s' sh '%s/repro.sh' >/dev/null 2>&1",
           fault ? "LATCH_FAULT='" : "env -u LATCH_FAULT", fault ? fault : "", fault ? "'" : "", bin, dir);
  int status = system(command);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void check_fault(const char *check, const char *fault) {
  outcome o = run_program(check, fault, 2);
  CHECK_MSG(o.sync == LATCH_OK, "%s", o.error);
  for (int i = 0; i < 4; i++) CHECK_NEAR(o.y[i], want[i], 1e-6);
  CHECK_EQ_INT(o.stats.check_failures, 1); /* once: the second run reuses the fallback */
  CHECK_EQ_INT(o.stats.cache_hits, 1);
  CHECK_MSG(o.repro[0] != 0, "no repro for %s", fault);
  if (!o.repro[0]) return;
  char path[4200], text[1 << 14];
  snprintf(path, sizeof path, "%s/repro.hlo", o.repro);
  cli_read_text(path, text, sizeof text);
  CHECK(strstr(text, "cosine(") != NULL); /* the culprit alone: no multiply or add left */
  CHECK(strstr(text, "multiply(") == NULL);
  CHECK(strstr(text, "add(") == NULL);
  CHECK_MSG(run_repro(o.repro, fault) != 0, "repro.sh does not fail with LATCH_FAULT=%s", fault);
  CHECK_EQ_INT(run_repro(o.repro, NULL), 0);
}

static void test_compile_fault(void) { check_fault("compile", "compile:cosine"); }
static void test_accuracy_fault(void) { check_fault("accuracy", "accuracy:cosine:0.1"); }

/* Without LATCH_CHECK a compile error is the sync's error, naming the op; never a crash. */
static void test_unchecked_compile_error(void) {
  outcome o = run_program("off", "compile:cosine", 1);
  CHECK(o.sync != LATCH_OK);
  CHECK(strstr(o.error, "cosine") != NULL);
  CHECK_EQ_INT(o.stats.check_failures, 0);
}

/* A clean backend passes both checks: no failure, no repro. */
static void test_clean_backend(void) {
  outcome o = run_program("accuracy", NULL, 1);
  CHECK_MSG(o.sync == LATCH_OK, "%s", o.error);
  for (int i = 0; i < 4; i++) CHECK_NEAR(o.y[i], want[i], 1e-6);
  CHECK_EQ_INT(o.stats.check_failures, 0);
  CHECK_STR(o.repro, "");
}

static void test_bad_check_mode(void) {
  outcome o = run_program("sometimes", NULL, 1);
  CHECK(o.sync != LATCH_OK);
  CHECK(strstr(o.error, "sometimes") != NULL);
}

int main(void) {
  const char *env_bin = getenv("LATCH_BIN"), *build = getenv("BUILD");
  if (env_bin && *env_bin) snprintf(bin, sizeof bin, "%s", env_bin);
  else snprintf(bin, sizeof bin, "%s/latch", build && *build ? build : "build");
  char *absolute = realpath(bin, NULL); /* repro.sh runs from another directory */
  if (absolute) {
    snprintf(bin, sizeof bin, "%s", absolute);
    free(absolute);
  }
  snprintf(base, sizeof base, "/tmp/latch-check-XXXXXX");
  if (!mkdtemp(base)) return 1;
  RUN(test_compile_fault);
  RUN(test_accuracy_fault);
  RUN(test_unchecked_compile_error);
  RUN(test_clean_backend);
  RUN(test_bad_check_mode);
  char command[256];
  snprintf(command, sizeof command, "rm -rf '%s'", base);
  if (system(command) != 0) return 1;
  return TEST_REPORT();
}
