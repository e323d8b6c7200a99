/* Settings reach the layers below capture/ as arguments: set through latch_options alone (the
 * environment says otherwise, or nothing), the thread count, the cpu backend's fusion and
 * arena budget and the disk cache's size limit are what the parallel loops, the plan and the
 * cache use. latch_options_init reads the new variables; LATCH_LOG warns once about a word it
 * does not know, naming the ones it does. */
#include <math.h>
#include <stdlib.h>

#include "capture/capture.h"
#include "disk_test_util.h"
#include "latch.h"
#include "runtime/cpu/cpu_internal.h"
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

/* A word LATCH_LOG does not know: one warning in the process, however many functions read
 * it, naming the word and listing the known ones; the known word beside it still works. */
static void test_log_unknown_word(void) {
  latch_options options;
  CHECK(latch_options_init(&options) == LATCH_OK);
  options.backend = "reference";
  latch_runtime *rt = latch_open(&options);
  if (!rt) return;
  setenv("LATCH_LOG", "nosuchword,guards", 1);
  capture_begin();
  latch_function *a = latch_function_new_step(rt, negate, NULL, NULL);
  latch_function *b = latch_function_new_step(rt, negate, NULL, NULL);
  float xs[2] = {1, 2};
  latch_tensor *x = latch_from_host(rt, LATCH_F32, 1, (int64_t[]){2}, xs), *y = NULL;
  latch_status called = a ? latch_call(a, &x, 1, NULL, 0, &y, 1) : LATCH_ERR_INTERNAL;
  const char *text = capture_end();
  unsetenv("LATCH_LOG");
  CHECK_EQ_INT(called, LATCH_OK);
  double got[2] = {0, 0};
  CHECK(y && latch_read_f64(y, got, 2) == LATCH_OK && got[0] == -1 && got[1] == -2);
  CHECK_EQ_INT(count_occurrences(text, "latch: warning: LATCH_LOG"), 1);
  CHECK_MSG(strstr(text, "unknown word 'nosuchword'") != NULL, "%s", text);
  CHECK_MSG(strstr(text, "known: recompiles, guards, compiles") != NULL, "%s", text);
  CHECK_MSG(strstr(text, "entry 1 guards:") != NULL, "%s", text); /* guards still logged */
  latch_release(x), latch_release(y);
  latch_function_free(a);
  latch_function_free(b);
  latch_close(rt);
}

int main(void) {
  RUN(test_threads);
  RUN(test_variables);
  RUN(test_fusion_option);
  RUN(test_keep_arena_option);
  RUN(test_cache_max_bytes_option);
  RUN(test_log_unknown_word);
  return TEST_REPORT();
}
