/* Settings reach the layers below capture/ as arguments: set through latch_options alone (the
 * environment says otherwise, or nothing), the thread count, the cpu backend's fusion and
 * arena budget and the disk cache's size limit are what the parallel loops, the plan and the
 * cache use; the log words, the check's repro directory and size limit, and the test-only
 * faults (the backend's and the disk cache's) likewise. latch_options_init reads the
 * variables; a log word it does not know gets one warning, naming the ones it knows. */
#include <math.h>
#include <stdlib.h>

#include "capture/capture.h"
#include "disk_test_util.h"
#include "latch.h"
#include "runtime/cpu/exec_internal.h"
#include "runtime/runtime.h"
#include "test.h"

enum { N = 4096 };

static latch_runtime *open_cpu(latch_options *options) {
  options->backend = "cpu";
  latch_runtime *rt = latch_open(options);
  CHECK_MSG(rt != NULL, "%s", latch_last_error());
  return rt;
}

/* sum(tanh(-exp(x)) * x) over x = i / N: a chain of elementwise ops feeding a reduce, which
 * the cpu backend fuses into the reduce's step unless told not to. *allocations: what the
 * cpu executes allocated meanwhile (rt_cpu_allocation_count). */
static double run_chain(latch_runtime *rt, int64_t *allocations) {
  static float xs[N];
  for (int i = 0; i < N; i++) xs[i] = (float)i / N;
  int64_t dims[1] = {N};
  latch_tensor *x = latch_from_host(rt, LATCH_F32, 1, dims, xs);
  latch_tensor *e = latch_unary(LATCH_EXP, x), *n = latch_unary(LATCH_NEG, e), *t = latch_unary(LATCH_TANH, n);
  latch_tensor *m = latch_binary(LATCH_MUL, t, x), *s = latch_reduce(LATCH_SUM, m, 0, NULL, false);
  int64_t before = rt_cpu_allocation_count();
  double sum = NAN;
  CHECK_MSG(latch_read_f64(s, &sum, 1) == LATCH_OK, "%s", latch_last_error());
  *allocations = rt_cpu_allocation_count() - before;
  latch_release(x), latch_release(e), latch_release(n), latch_release(t), latch_release(m), latch_release(s);
  return sum;
}

static double chain_in_f64(void) {
  double sum = 0;
  for (int i = 0; i < N; i++) {
    double x = (double)(float)((float)i / N);
    sum += tanh(-exp(x)) * x;
  }
  return sum;
}

/* First in the program: the thread count is fixed by the first parallel loop. 3 is neither
 * this machine's default (one per core) nor what the environment says afterwards. */
static void test_threads(void) {
  unsetenv("LATCH_THREADS");
  latch_options options;
  CHECK(latch_options_init(&options) == LATCH_OK);
  options.threads = 3;
  setenv("LATCH_THREADS", "5", 1); /* read by latch_options_init only: too late here */
  latch_runtime *rt = open_cpu(&options);
  unsetenv("LATCH_THREADS");
  if (!rt) return;
  int64_t allocations;
  CHECK_NEAR(run_chain(rt, &allocations), chain_in_f64(), 1e-5);
  CHECK_EQ_INT(rt_parallel_threads(), 3);
  latch_close(rt);
}

/* The variables behind the new fields, and their errors. */
static void test_variables(void) {
  latch_options options;
  CHECK(latch_options_init(&options) == LATCH_OK);
  CHECK(!options.no_fusion);
  CHECK_EQ_INT(options.keep_arena_mb, -1);
  CHECK_EQ_INT(options.cache_max_bytes, (int64_t)1 << 30);
  setenv("LATCH_NO_FUSION", "1", 1);
  setenv("LATCH_KEEP_ARENA_MB", "12", 1);
  setenv("LATCH_CACHE_MAX_BYTES", "3M", 1);
  CHECK(latch_options_init(&options) == LATCH_OK);
  CHECK(options.no_fusion);
  CHECK_EQ_INT(options.keep_arena_mb, 12);
  CHECK_EQ_INT(options.cache_max_bytes, 3 << 20);
  rt_compile_options compile;
  cap_compile_options(&options, &compile);
  CHECK(compile.no_fusion);
  CHECK_EQ_INT(compile.keep_arena_bytes, 12 << 20);
  static const char *const names[] = {"LATCH_NO_FUSION", "LATCH_KEEP_ARENA_MB", "LATCH_CACHE_MAX_BYTES"};
  static const char *const bad[] = {"maybe", "-3", "lots"};
  for (int i = 0; i < 3; i++) {
    const char *good = getenv(names[i]);
    char saved[32];
    snprintf(saved, sizeof saved, "%s", good);
    setenv(names[i], bad[i], 1);
    CHECK_EQ_INT(latch_options_init(&options), LATCH_ERR_INPUT);
    CHECK_MSG(strstr(latch_last_error(), names[i]) != NULL, "%s", latch_last_error());
    setenv(names[i], saved, 1);
  }
  for (int i = 0; i < 3; i++) unsetenv(names[i]);
}

/* Fusion off through options: the same sum, and the unfused chain needs a buffer the fused
 * one does not (one arena of N floats, allocated by the first execute: the fused reduce
 * evaluates its chain tile by tile in registers). The environment says the opposite of each
 * runtime's options and is not read. */
static void test_fusion_option(void) {
  latch_options options;
  CHECK(latch_options_init(&options) == LATCH_OK);
  options.no_fusion = true;
  latch_runtime *unfused = open_cpu(&options);
  setenv("LATCH_NO_FUSION", "1", 1);
  options.no_fusion = false;
  latch_runtime *fused = open_cpu(&options);
  if (!unfused || !fused) return;
  int64_t unfused_allocations, fused_allocations;
  double want = chain_in_f64();
  CHECK_NEAR(run_chain(unfused, &unfused_allocations), want, 1e-5);
  CHECK_NEAR(run_chain(fused, &fused_allocations), want, 1e-5);
  unsetenv("LATCH_NO_FUSION");
  printf("first execute allocated %lld values and arenas fused, %lld unfused\n", (long long)fused_allocations,
         (long long)unfused_allocations);
  CHECK_EQ_INT(unfused_allocations, fused_allocations + 1);
  /* and the plans each runtime's compile options make */
  const char *hlo = "HloModule m\nadd {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] add(a, b)\n}\n"
                    "ENTRY e {\n x = f32[4096] parameter(0)\n a = f32[4096] exponential(x)\n b = f32[4096] negate(a)\n"
                    " c = f32[4096] tanh(b)\n d = f32[4096] multiply(c, x)\n z = f32[] constant(0)\n"
                    " ROOT r = f32[] reduce(d, z), dimensions={0}, to_apply=add\n}\n";
  hlo_diag diag = {0};
  hlo_module *module = hlo_parse_module(hlo, strlen(hlo), "t", &diag);
  CHECK_MSG(module != NULL, "%s", diag.message);
  rt_cpu_plan *plans[2] = {NULL, NULL};
  for (int i = 0; module && i < 2; i++) plans[i] = rt_cpu_plan_build(module, &(i ? fused : unfused)->compile_options, &diag);
  int fused_steps[2] = {0, 0};
  for (int i = 0; i < 2; i++)
    for (int s = 0; plans[i] && s < plans[i]->step_count; s++) fused_steps[i] += plans[i]->steps[s].kind == RT_STEP_FUSED;
  CHECK_EQ_INT(fused_steps[0], 0);
  CHECK_EQ_INT(fused_steps[1], 1);
  rt_cpu_plan_free(plans[0]);
  rt_cpu_plan_free(plans[1]);
  hlo_module_free(module);
  latch_close(unfused);
  latch_close(fused);
}

/* keep_arena_mb 0 through options: every execute allocates its arena again; by default the
 * second execute of the same graph reuses the first's. */
static void test_keep_arena_option(void) {
  latch_options options;
  CHECK(latch_options_init(&options) == LATCH_OK);
  options.no_fusion = true; /* so that the chain needs an arena */
  latch_runtime *keeping = open_cpu(&options);
  options.keep_arena_mb = 0;
  latch_runtime *keep_none = open_cpu(&options);
  if (!keeping || !keep_none) return;
  int64_t first, second, first_none, second_none;
  run_chain(keeping, &first);
  run_chain(keeping, &second);
  run_chain(keep_none, &first_none);
  run_chain(keep_none, &second_none);
  CHECK_EQ_INT(second, first - 1);
  CHECK_EQ_INT(first_none, first);
  CHECK_EQ_INT(second_none, first);
  latch_close(keeping);
  latch_close(keep_none);
}

/* cache_max_bytes reaches the disk cache, whatever LATCH_CACHE_MAX_BYTES says. */
static void test_cache_max_bytes_option(void) {
  char dir[64];
  make_temp_dir(dir);
  latch_options options;
  CHECK(latch_options_init(&options) == LATCH_OK);
  options.backend = "reference";
  options.cache = "disk";
  options.cache_dir = dir;
  options.cache_max_bytes = 12345;
  setenv("LATCH_CACHE_MAX_BYTES", "1G", 1);
  latch_runtime *rt = latch_open(&options);
  unsetenv("LATCH_CACHE_MAX_BYTES");
  CHECK_MSG(rt && rt->disk, "%s", latch_last_error());
  if (rt && rt->disk) CHECK_EQ_INT(cache_disk_max_bytes(rt->disk), 12345);
  latch_close(rt);
  remove_tree(dir);
}

static latch_status negate(void *user, latch_tensor *const *inputs, int input_count, latch_tensor **outputs,
                           int output_count) {
  (void)user, (void)input_count, (void)output_count;
  outputs[0] = latch_unary(LATCH_NEG, inputs[0]);
  return LATCH_OK;
}

/* Calls negate once on [1, 2] and checks the result is [-1, -2]. */
static void call_negate(latch_function *f, latch_runtime *rt) {
  float xs[2] = {1, 2};
  latch_tensor *x = latch_from_host(rt, LATCH_F32, 1, (int64_t[]){2}, xs), *y = NULL;
  latch_status called = f ? latch_call(f, &x, 1, NULL, 0, &y, 1) : LATCH_ERR_INTERNAL;
  CHECK_MSG(called == LATCH_OK, "%s", latch_last_error());
  double got[2] = {0, 0};
  CHECK(y && latch_read_f64(y, got, 2) == LATCH_OK && got[0] == -1 && got[1] == -2);
  latch_release(x), latch_release(y);
}

/* A word options.log does not know: one warning in the process, however many runtimes are
 * opened with it, naming the word and listing the known ones; the known word beside it still
 * works. */
static void test_log_unknown_word(void) {
  latch_options options;
  CHECK(latch_options_init(&options) == LATCH_OK);
  options.backend = "reference";
  options.log = "nosuchword,guards";
  capture_begin();
  latch_runtime *rt = latch_open(&options), *again = latch_open(&options);
  latch_function *a = rt ? latch_function_new_step(rt, negate, NULL, NULL) : NULL;
  latch_function *b = rt ? latch_function_new_step(rt, negate, NULL, NULL) : NULL;
  if (a) call_negate(a, rt);
  const char *text = capture_end();
  CHECK_MSG(rt && again, "%s", latch_last_error());
  CHECK_EQ_INT(count_occurrences(text, "latch: warning: LATCH_LOG"), 1);
  CHECK_MSG(strstr(text, "unknown word 'nosuchword'") != NULL, "%s", text);
  CHECK_MSG(strstr(text, "known: recompiles, guards, compiles") != NULL, "%s", text);
  CHECK_MSG(strstr(text, "entry 1 guards:") != NULL, "%s", text); /* guards still logged */
  latch_function_free(a);
  latch_function_free(b);
  latch_close(rt);
  latch_close(again);
}

/* The log comes from options alone: LATCH_LOG set after latch_options_init is not read when
 * the runtime opens, nor when a function is made or a graph compiled. */
static void test_log_option(void) {
  latch_options options;
  unsetenv("LATCH_LOG");
  CHECK(latch_options_init(&options) == LATCH_OK);
  CHECK(options.log == NULL);
  options.backend = "reference";
  latch_options logged = options;
  logged.log = "guards,compiles";
  setenv("LATCH_LOG", "recompiles,guards,compiles", 1);
  capture_begin();
  latch_runtime *quiet = latch_open(&options);
  latch_function *f = quiet ? latch_function_new_step(quiet, negate, NULL, NULL) : NULL;
  if (f) call_negate(f, quiet);
  const char *text = capture_end();
  CHECK_MSG(quiet != NULL, "%s", latch_last_error());
  CHECK_MSG(strstr(text, "latch:") == NULL, "%s", text);
  latch_function_free(f);
  latch_close(quiet);
  capture_begin();
  latch_runtime *loud = latch_open(&logged);
  f = loud ? latch_function_new_step(loud, negate, NULL, NULL) : NULL;
  if (f) call_negate(f, loud);
  text = capture_end();
  unsetenv("LATCH_LOG");
  CHECK_MSG(loud != NULL, "%s", latch_last_error());
  CHECK_MSG(strstr(text, "entry 1 guards:") != NULL, "%s", text);
  CHECK_MSG(strstr(text, " compiled in ") != NULL, "%s", text);
  latch_function_free(f);
  latch_close(loud);
}

/* The variables behind the log, repro and test-hook fields, and their errors. */
static void test_more_variables(void) {
  static const char *const names[] = {"LATCH_LOG", "LATCH_REPRO_DIR", "LATCH_REPRO_MAX_BYTES", "LATCH_FAULT",
                                      "LATCH_CACHE_TEST_FAULT", "LATCH_CACHE_TEST_WRITE_DELAY_MS"};
  static const char *const values[] = {"guards", "/nowhere", "1.5e3", "compile:cosine", "write:EIO", "7"};
  for (int i = 0; i < 6; i++) unsetenv(names[i]);
  latch_options options;
  CHECK(latch_options_init(&options) == LATCH_OK);
  CHECK(!options.log && !options.repro_dir && options.repro_max_bytes == 0 && !options.test_fault &&
        !options.test_cache_fault && !options.test_cache_write_delay_ms);
  for (int i = 0; i < 6; i++) setenv(names[i], values[i], 1);
  CHECK(latch_options_init(&options) == LATCH_OK);
  CHECK_STR(options.log, "guards");
  CHECK_STR(options.repro_dir, "/nowhere");
  CHECK(options.repro_max_bytes == 1500);
  CHECK_STR(options.test_fault, "compile:cosine");
  CHECK_STR(options.test_cache_fault, "write:EIO");
  CHECK_STR(options.test_cache_write_delay_ms, "7");
  static const char *const bad[] = {"lots", "0.5", "-3", "0"};
  for (int i = 0; i < 4; i++) {
    setenv("LATCH_REPRO_MAX_BYTES", bad[i], 1);
    CHECK_EQ_INT(latch_options_init(&options), LATCH_ERR_INPUT);
    CHECK_MSG(strstr(latch_last_error(), "LATCH_REPRO_MAX_BYTES") != NULL, "%s", latch_last_error());
  }
  for (int i = 0; i < 6; i++) unsetenv(names[i]);
}

/* sum(cos(x) + 1) over x = [0, 1, 2, 3] on rt, checked against fp64. */
static void run_cosine(latch_runtime *rt) {
  float xs[4] = {0, 1, 2, 3};
  latch_tensor *x = latch_from_host(rt, LATCH_F32, 1, (int64_t[]){4}, xs), *one = latch_scalar(rt, LATCH_F32, 1);
  latch_tensor *c = latch_unary(LATCH_COS, x), *y = latch_binary(LATCH_ADD, c, one);
  latch_tensor *s = latch_reduce(LATCH_SUM, y, 0, NULL, false);
  double got = NAN, want = 4 + cos(0.0) + cos(1.0) + cos(2.0) + cos(3.0);
  CHECK_MSG(latch_read_f64(s, &got, 1) == LATCH_OK, "%s", latch_last_error());
  CHECK_NEAR(got, want, 1e-5);
  latch_release(x), latch_release(one), latch_release(c), latch_release(y), latch_release(s);
}

static bool file_has(const char *path, const char *fragment) {
  static char text[1 << 14];
  FILE *f = fopen(path, "rb");
  size_t len = f ? fread(text, 1, sizeof text - 1, f) : 0;
  text[len] = 0;
  if (f) fclose(f);
  return strstr(text, fragment) != NULL;
}

/* test_fault, repro_dir and repro_max_bytes through options, the environment naming another
 * fault, another directory and no limit: the cosine fails the compile check, the result is
 * still right (the reference backend takes over), and the repro lands in the options'
 * directory, its report naming the options' limit of 1 byte. */
static void test_check_options(void) {
  char dir[64], elsewhere[64];
  make_temp_dir(dir);
  make_temp_dir(elsewhere);
  latch_options options;
  CHECK(latch_options_init(&options) == LATCH_OK);
  options.backend = "reference";
  options.check = "compile";
  options.test_fault = "compile:cosine";
  options.repro_dir = dir;
  options.repro_max_bytes = 1;
  setenv("LATCH_FAULT", "bogus", 1);
  setenv("LATCH_REPRO_DIR", elsewhere, 1);
  capture_begin();
  latch_runtime *rt = latch_open(&options);
  if (rt) run_cosine(rt);
  const char *text = capture_end();
  unsetenv("LATCH_FAULT");
  unsetenv("LATCH_REPRO_DIR");
  CHECK_MSG(rt != NULL, "%s", latch_last_error());
  if (rt) {
    latch_stats stats;
    latch_get_stats(rt, &stats);
    CHECK_EQ_INT(stats.check_failures, 1);
    const char *repro = latch_last_repro(rt);
    CHECK_MSG(strncmp(repro, dir, strlen(dir)) == 0, "repro %s not under %s (%s)", repro, dir, text);
    char report[4200];
    snprintf(report, sizeof report, "%s/report.txt", repro);
    CHECK_MSG(file_has(report, "written as .npy (limit 1)"), "%s does not name the limit 1", report);
    CHECK_EQ_INT(count_files(elsewhere, ""), 0);
  }
  latch_close(rt);
  options.repro_max_bytes = 0.5;
  CHECK(latch_open(&options) == NULL);
  CHECK_MSG(strstr(latch_last_error(), "repro_max_bytes") != NULL, "%s", latch_last_error());
  options.repro_max_bytes = 0;
  options.test_fault = "bogus";
  CHECK(latch_open(&options) == NULL);
  CHECK_MSG(strstr(latch_last_error(), "bogus") != NULL, "%s", latch_last_error());
  remove_tree(dir);
  remove_tree(elsewhere);
}

/* The disk cache's test hooks through options: a write that fails with EIO stores nothing
 * (and warns), where the environment's hooks are malformed and not read; malformed hooks in
 * options are latch_open's error, naming them. */
static void test_cache_hook_options(void) {
  char dir[64];
  make_temp_dir(dir);
  latch_options options;
  CHECK(latch_options_init(&options) == LATCH_OK);
  options.backend = "cpu";
  options.cache = "disk";
  options.cache_dir = dir;
  options.test_cache_fault = "write:EIO";
  setenv("LATCH_CACHE_TEST_FAULT", "nonsense", 1);
  setenv("LATCH_CACHE_TEST_WRITE_DELAY_MS", "-1", 1);
  capture_begin();
  latch_runtime *rt = latch_open(&options);
  if (rt) run_cosine(rt);
  const char *text = capture_end();
  CHECK_MSG(rt != NULL, "%s", latch_last_error());
  if (rt) {
    latch_stats stats;
    latch_get_stats(rt, &stats);
    CHECK_EQ_INT(stats.compiles, 1);
    CHECK_EQ_INT(stats.disk_writes, 0);
    CHECK_MSG(strstr(text, "latch: warning:") != NULL, "no warning: %s", text);
  }
  latch_close(rt);
  options.test_cache_fault = NULL;
  rt = latch_open(&options); /* the same graph, now written */
  if (rt) run_cosine(rt);
  CHECK_MSG(rt != NULL, "%s", latch_last_error());
  if (rt) {
    latch_stats stats;
    latch_get_stats(rt, &stats);
    CHECK_EQ_INT(stats.disk_writes, 1);
  }
  latch_close(rt);
  unsetenv("LATCH_CACHE_TEST_FAULT");
  unsetenv("LATCH_CACHE_TEST_WRITE_DELAY_MS");
  options.test_cache_fault = "write:EWHAT";
  CHECK(latch_open(&options) == NULL);
  CHECK_MSG(strstr(latch_last_error(), "LATCH_CACHE_TEST_FAULT") != NULL, "%s", latch_last_error());
  options.test_cache_fault = NULL;
  options.test_cache_write_delay_ms = "-1";
  CHECK(latch_open(&options) == NULL);
  CHECK_MSG(strstr(latch_last_error(), "LATCH_CACHE_TEST_WRITE_DELAY_MS") != NULL, "%s", latch_last_error());
  remove_tree(dir);
}

int main(void) {
  RUN(test_threads);
  RUN(test_variables);
  RUN(test_fusion_option);
  RUN(test_keep_arena_option);
  RUN(test_cache_max_bytes_option);
  RUN(test_log_unknown_word);
  RUN(test_log_option);
  RUN(test_more_variables);
  RUN(test_check_options);
  RUN(test_cache_hook_options);
  return TEST_REPORT();
}
