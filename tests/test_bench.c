/* The zoo and the bench harness: every model runs a tiny configuration with finite outputs
 * that agree between eager and trace-every (on the default backend, LATCH_BACKEND's) and,
 * for small models, with the reference backend; weight files that
 * are missing or misshapen are errors naming the key and both shapes; the training steps
 * lower their loss; `latch bench --json` writes the documented structure. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/bench.h"
#include "json_util.h"
#include "test.h"

static void test_every_model_tiny(void) {
  int count;
  const bench_model *models = bench_models(&count);
  for (int i = 0; i < count; i++) {
    const bench_model *m = &models[i];
    bench_config config = {.batch = m->default_batch > 1 ? 2 : 1, .size = m->tiny_size, .seed = 7, .tiny = true};
    bench_result eager, every;
    latch_status s1 = bench_run(m, &config, BENCH_EAGER, NULL, 0, 1, NULL, &eager);
    CHECK_MSG(s1 == LATCH_OK, "%s eager: %s", m->name, bench_error());
    latch_status s2 = bench_run(m, &config, BENCH_EVERY, NULL, 0, 1, NULL, &every);
    CHECK_MSG(s2 == LATCH_OK, "%s every: %s", m->name, bench_error());
    if (s1 == LATCH_OK && s2 == LATCH_OK) {
      CHECK_MSG(bench_finite(&eager) && bench_finite(&every), "%s: non-finite outputs", m->name);
      CHECK_MSG(eager.output_count > 0, "%s: empty output", m->name);
      double max_abs, max_rel;
      CHECK_MSG(bench_compare(&every, &eager, &max_abs, &max_rel), "%s: output shapes differ", m->name);
      CHECK_MSG(max_rel <= 1e-4, "%s: eager and every differ: max abs %g, rel %g", m->name, max_abs, max_rel);
      /* The whole step is one graph in every mode; op by op is one graph per op. */
      CHECK_MSG(every.timed.syncs == 1, "%s: %llu syncs per traced step", m->name, (unsigned long long)every.timed.syncs);
      CHECK_MSG(eager.timed.syncs > 1, "%s: eager ran %llu graphs", m->name, (unsigned long long)eager.timed.syncs);
    }
    bench_result_free(&eager);
    bench_result_free(&every);
  }
}

/* The default backend's trace-every against the reference backend, on small models (two
 * steps, so gpt2's grown cache and the training steps' updated weights count too). */
static void test_against_reference(void) {
  static const char *const names[] = {"mlp", "resnet18", "mobilenet_v2", "squeezenet1_1", "bert_small", "vit_tiny", "gpt2",
                                      "train_mlp", "train_cnn"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    const bench_model *m = bench_find_model(names[i]);
    bench_config config = {.batch = 2, .size = m->tiny_size, .seed = 11};
    bench_result got, want;
    CHECK_MSG(bench_run(m, &config, BENCH_EVERY, NULL, 1, 1, NULL, &got) == LATCH_OK, "%s: %s", names[i], bench_error());
    CHECK_MSG(bench_run(m, &config, BENCH_REFERENCE, NULL, 1, 1, NULL, &want) == LATCH_OK, "%s: %s", names[i],
              bench_error());
    double max_abs, max_rel;
    CHECK_MSG(bench_compare(&got, &want, &max_abs, &max_rel) && max_rel <= 1e-3, "%s: %s vs reference: abs %g, rel %g",
              names[i], got.backend, max_abs, max_rel);
    CHECK_STR(want.backend, "reference");
    bench_result_free(&got);
    bench_result_free(&want);
  }
}

/* A second step of trace-every hits the compile cache, except for gpt2, whose cache grows. */
static void test_every_mode_hits_cache(void) {
  bench_config config = {.batch = 2, .size = 28, .seed = 1};
  bench_result r;
  CHECK(bench_run(bench_find_model("mlp"), &config, BENCH_EVERY, "reference", 1, 2, NULL, &r) == LATCH_OK);
  CHECK_EQ_INT(r.warmup.compiles, 1);
  CHECK_EQ_INT(r.timed.compiles, 0);
  CHECK_EQ_INT(r.timed.cache_hits, 2);
  bench_result_free(&r);
  config.size = 4;
  CHECK(bench_run(bench_find_model("gpt2"), &config, BENCH_EVERY, "reference", 1, 2, NULL, &r) == LATCH_OK);
  CHECK_EQ_INT(r.timed.compiles, 2); /* the KV cache grew: new shapes each step */
  bench_result_free(&r);
}

/* Trace-once: the step function runs once, later steps are guard checks and the cached
 * graph, and the outputs equal trace-every's, in-place weight updates of the training
 * steps included (replayed on every hit). */
static void test_once_mode(void) {
  static const char *const names[] = {"mlp", "train_mlp", "train_cnn", "squeezenet1_1"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    const bench_model *m = bench_find_model(names[i]);
    bench_config config = {.batch = 2, .size = m->tiny_size, .seed = 5};
    bench_result once, every;
    CHECK_MSG(bench_run(m, &config, BENCH_ONCE, "reference", 1, 3, NULL, &once) == LATCH_OK, "%s: %s", names[i],
              bench_error());
    CHECK_MSG(bench_run(m, &config, BENCH_EVERY, "reference", 1, 3, NULL, &every) == LATCH_OK, "%s: %s", names[i],
              bench_error());
    double max_abs, max_rel;
    CHECK_MSG(bench_compare(&once, &every, &max_abs, &max_rel) && max_abs == 0, "%s: once vs every: abs %g", names[i],
              max_abs);
    CHECK_EQ_INT(once.function.calls, 4);
    CHECK_EQ_INT(once.function.traces, 1);
    CHECK_EQ_INT(once.function.hits, 3);
    CHECK_EQ_INT(once.timed.compiles, 0);
    bench_result_free(&once);
    bench_result_free(&every);
  }
}

/* One model over the batch sizes in one session (one traced function in once mode) on the
 * reference backend; out[i] is size i's result, *traces the function's traces. */
static void sweep_session(const bench_model *m, bench_mode mode, latch_shape_policy shapes, const int *sizes, int count,
                          bench_result *out, uint64_t *traces) {
  latch_options lo;
  latch_options_init(&lo);
  lo.backend = "reference";
  latch_runtime *rt = latch_open(&lo);
  latch_function_options fo;
  latch_function_options_init(&fo);
  fo.shapes = shapes;
  fo.recompile_limit = 2 * count; /* gpt2 traces every step under static shapes */
  bench_config cfg = {.batch = sizes[0], .size = m->tiny_size, .seed = 9};
  bench_session s;
  latch_status status = bench_session_open(&s, rt, m, &cfg, mode, &fo);
  CHECK_MSG(status == LATCH_OK, "%s: %s", m->name, bench_error());
  *traces = 0;
  for (int i = 0; i < count; i++) {
    memset(&out[i], 0, sizeof out[i]);
    if (status == LATCH_OK) status = bench_session_batch(&s, sizes[i]);
    if (status == LATCH_OK) status = bench_session_run(&s, 1, 1, NULL, &out[i]);
    CHECK_MSG(status == LATCH_OK, "%s batch %d: %s", m->name, sizes[i], bench_error());
    CHECK_EQ_INT(out[i].batch, sizes[i]);
    *traces += out[i].function.traces;
  }
  bench_session_close(&s);
  latch_close(rt);
}

/* The batch sweep: one traced function per model over batch sizes 1, 2, 3, 8 traces at
 * most twice under the automatic policy (the batch becomes symbolic: the models read it
 * through -1 reshapes, not latch_dim) and once per size under the static one; every
 * size's output equals trace-every's, the training step's updated weights and gpt2's
 * grown KV cache included. */
static void test_sweep_policies(void) {
  static const char *const names[] = {"mlp", "train_cnn", "gpt2"};
  static const int sizes[] = {1, 2, 3, 8};
  enum { COUNT = 4 };
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    const bench_model *m = bench_find_model(names[i]);
    bench_result every[COUNT], once[COUNT];
    uint64_t traces;
    sweep_session(m, BENCH_EVERY, LATCH_SHAPES_AUTOMATIC, sizes, COUNT, every, &traces);
    for (int policy = 0; policy < 2; policy++) {
      latch_shape_policy shapes = policy ? LATCH_SHAPES_STATIC : LATCH_SHAPES_AUTOMATIC;
      sweep_session(m, BENCH_ONCE, shapes, sizes, COUNT, once, &traces);
      /* gpt2's KV cache grows every step (a warm-up and a timed one per size): static traces
       * each step, automatic makes the cache length symbolic too (one more trace). */
      bool grows = !strcmp(m->name, "gpt2");
      if (shapes == LATCH_SHAPES_STATIC)
        CHECK_MSG(traces == (grows ? 2 * COUNT : COUNT), "%s static: %llu traces", m->name, (unsigned long long)traces);
      else
        CHECK_MSG(traces <= (grows ? 3u : 2u), "%s automatic: %llu traces", m->name, (unsigned long long)traces);
      for (int b = 0; b < COUNT; b++) {
        double max_abs, max_rel;
        CHECK_MSG(bench_compare(&once[b], &every[b], &max_abs, &max_rel) && max_abs == 0,
                  "%s policy %d batch %d: once vs every: abs %g", m->name, policy, sizes[b], max_abs);
        CHECK(bench_finite(&once[b]));
        bench_result_free(&once[b]);
      }
    }
    for (int b = 0; b < COUNT; b++) {
      if (!strcmp(m->name, "mlp")) CHECK_EQ_INT(every[b].output_dims[0], sizes[b]); /* logits [B, 10] */
      bench_result_free(&every[b]);
    }
  }
}

/* Writes the mlp's weights as .npy files under dir, fc2.weight with the wrong shape when
 * bad_shape, fc3.bias left out when missing. */
static void write_mlp_weights(latch_runtime *rt, const char *dir, bool bad_shape, bool missing) {
  static const struct { const char *key; int rank; int64_t dims[2]; } keys[] = {
      {"fc1.weight", 2, {512, 784}}, {"fc1.bias", 1, {512}}, {"fc2.weight", 2, {512, 512}},
      {"fc2.bias", 1, {512}},        {"fc3.weight", 2, {10, 512}}, {"fc3.bias", 1, {10}}};
  mkdir(dir, 0755);
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s.npy", dir, keys[i].key);
    unlink(path);
    if (missing && !strcmp(keys[i].key, "fc3.bias")) continue;
    int64_t dims[2] = {keys[i].dims[0], keys[i].dims[1]};
    if (bad_shape && !strcmp(keys[i].key, "fc2.weight")) dims[1] = 256;
    latch_tensor *t = latch_rand_uniform(rt, LATCH_F32, keys[i].rank, dims, -0.1, 0.1, i);
    CHECK(latch_save_npy(t, path) == LATCH_OK);
    latch_release(t);
  }
}

static void test_weight_errors(void) {
  latch_runtime *rt = latch_open(NULL);
  char dir[256];
  snprintf(dir, sizeof dir, "/tmp/latch_test_bench_%d", (int)getpid());
  const bench_model *mlp = bench_find_model("mlp");
  bench_config config = {.batch = 2, .weights = dir};
  bench_result r;

  write_mlp_weights(rt, dir, false, false);
  CHECK(bench_run(mlp, &config, BENCH_EVERY, "reference", 0, 1, NULL, &r) == LATCH_OK);
  bench_result_free(&r);

  write_mlp_weights(rt, dir, true, false);
  CHECK(bench_run(mlp, &config, BENCH_EVERY, "reference", 0, 1, NULL, &r) == LATCH_ERR_INPUT);
  CHECK_MSG(strstr(bench_error(), "fc2.weight") && strstr(bench_error(), "[512, 256]") &&
                strstr(bench_error(), "[512, 512]"),
            "message: %s", bench_error());
  bench_result_free(&r);

  write_mlp_weights(rt, dir, false, true);
  CHECK(bench_run(mlp, &config, BENCH_EVERY, "reference", 0, 1, NULL, &r) == LATCH_ERR_INPUT);
  CHECK_MSG(strstr(bench_error(), "fc3.bias") && strstr(bench_error(), "missing") && strstr(bench_error(), "[10]"),
            "message: %s", bench_error());
  bench_result_free(&r);

  /* An input of the wrong shape names both shapes too. */
  write_mlp_weights(rt, dir, false, false);
  char input[300];
  snprintf(input, sizeof input, "%s/input.npy", dir);
  latch_tensor *x = latch_zeros(rt, LATCH_F32, 2, (const int64_t[]){3, 784});
  CHECK(latch_save_npy(x, input) == LATCH_OK);
  latch_release(x);
  config.input = input;
  CHECK(bench_run(mlp, &config, BENCH_EVERY, "reference", 0, 1, NULL, &r) == LATCH_ERR_INPUT);
  CHECK_MSG(strstr(bench_error(), "[3, 784]") && strstr(bench_error(), "[2, 784]"), "message: %s", bench_error());
  bench_result_free(&r);
  latch_close(rt);
  char command[600];
  snprintf(command, sizeof command, "rm -rf %s", dir);
  CHECK(system(command) == 0);
}

/* Five steps on one fixed batch: the loss each step reports (before its update) falls. */
static void check_training(const char *name, bench_mode mode) {
  latch_options options;
  latch_options_init(&options);
  options.backend = "reference";
  options.eager = mode == BENCH_EAGER;
  latch_runtime *rt = latch_open(&options);
  const bench_model *m = bench_find_model(name);
  bench_config config = {.batch = 8, .size = m->tiny_size, .seed = 3};
  bench_instance in;
  latch_status status = m->create(rt, &config, &in);
  CHECK_MSG(status == LATCH_OK, "%s: %s", name, bench_error());
  double losses[5] = {0};
  for (int step = 0; status == LATCH_OK && step < 5; step++) {
    latch_tensor *loss = NULL;
    status = in.step(in.model, in.inputs, in.input_count, &loss, 1);
    CHECK_MSG(status == LATCH_OK, "%s step %d: %s", name, step, bench_error());
    if (status == LATCH_OK) CHECK(latch_sync(rt) == LATCH_OK);
    if (status == LATCH_OK) CHECK(latch_read_f64(loss, &losses[step], 1) == LATCH_OK);
    latch_release(loss);
  }
  CHECK_MSG(isfinite(losses[0]) && losses[0] > 0, "%s: first loss %g", name, losses[0]);
  for (int step = 1; step < 5; step++)
    CHECK_MSG(losses[step] < losses[step - 1], "%s %s: loss %g after %g", name, bench_mode_name(mode), losses[step],
              losses[step - 1]);
  bench_instance_free(&in);
  latch_close(rt);
}

static void test_training_lowers_loss(void) {
  check_training("train_mlp", BENCH_EVERY);
  check_training("train_mlp", BENCH_EAGER);
  check_training("train_cnn", BENCH_EVERY);
  check_training("train_cnn", BENCH_EAGER);
}

/* Whether the file at path holds fragment. */
static bool output_has(const char *path, const char *fragment) {
  static char text[1 << 16];
  FILE *f = fopen(path, "rb");
  size_t len = f ? fread(text, 1, sizeof text - 1, f) : 0;
  text[len] = 0;
  if (f) fclose(f);
  return strstr(text, fragment) != NULL;
}

/* The line under the table says where graphs loaded from the disk cache were compiled. On an
 * empty cache nothing was compiled by an earlier run: the modes (eager, every, once) store
 * graphs and later modes load some of them (once's graph is every's), so the line names this
 * run's other modes. A second run on the same cache starts by loading what the first stored:
 * an earlier run. */
static void test_command_cache_line(void) {
  const char *bin = getenv("LATCH_BIN"), *build = getenv("BUILD");
  char latch[512], dir[64] = "/tmp/latch_test_bench_cache_XXXXXX", out[128], command[1400];
  if (bin) snprintf(latch, sizeof latch, "%s", bin);
  else snprintf(latch, sizeof latch, "%s/latch", build ? build : "build");
  CHECK(mkdtemp(dir) != NULL);
  snprintf(out, sizeof out, "%s/out.txt", dir);
  snprintf(command, sizeof command,
           "LATCH_BACKEND=reference LATCH_CACHE=disk LATCH_CACHE_DIR=%s/cache %s bench --model mlp --batch 2 "
           "--repeat 1 --warmup 1 >%s 2>/dev/null", dir, latch, out);
  CHECK_EQ_INT(system(command), 0);
  CHECK_MSG(output_has(out, "came from the disk compile cache, compiled by another mode of this run"),
            "first run: no line naming this run's modes");
  CHECK_MSG(!output_has(out, "compiled by an earlier run"), "first run: an earlier run named on an empty cache");
  CHECK_EQ_INT(system(command), 0);
  CHECK_MSG(output_has(out, "came from the disk compile cache, compiled by an earlier run"),
            "second run: no line naming the earlier run");
  snprintf(command, sizeof command, "rm -rf %s", dir);
  CHECK(system(command) == 0);
}

/* The command: --json writes what docs/benchmarking.md documents; an unknown model is status 1. */
static void test_command_json(void) {
  /* $LATCH_BIN, else the command of this build ($BUILD: build-san under make sanitize). */
  const char *bin = getenv("LATCH_BIN"), *build = getenv("BUILD");
  char latch[512], path[256], command[1200];
  if (bin) snprintf(latch, sizeof latch, "%s", bin);
  else snprintf(latch, sizeof latch, "%s/latch", build ? build : "build");
  snprintf(path, sizeof path, "/tmp/latch_test_bench_%d.json", (int)getpid());
  snprintf(command, sizeof command, "LATCH_BACKEND=reference %s bench --model mlp,train_cnn --batch 2 --repeat 2 --json %s >/dev/null 2>&1",
           latch, path);
  CHECK_EQ_INT(system(command), 0);
  json_doc doc;
  CHECK_MSG(json_load(&doc, path), "%s: %s", path, doc.error);
  static const char *const numbers[] = {
      "latch_bench", "repeat", "warmup", "models.0.batch", "models.0.size", "models.0.output_shape.0",
      "models.0.modes.eager.median_ms", "models.0.modes.eager.min_ms", "models.0.modes.eager.max_ms",
      "models.0.modes.eager.spread_ms", "models.0.modes.eager.first_step_ms", "models.0.modes.eager.trace_ms",
      "models.0.modes.eager.steps", "models.0.modes.eager.samples_ms.1", "models.0.modes.every.median_ms",
      "models.0.modes.every.timed.syncs", "models.0.modes.every.timed.ops_traced",
      "models.0.modes.every.timed.cache_hits", "models.0.modes.every.timed.cache_misses",
      "models.0.modes.every.timed.compiles", "models.0.modes.every.timed.key_ms",
      "models.0.modes.every.timed.compile_ms", "models.0.modes.every.timed.execute_ms",
      "models.0.modes.every.warmup.compiles", "models.0.modes.every.max_rel_diff", "models.0.speedup.every",
      "models.0.modes.every.cpu_median_ms", "models.0.modes.every.cpu_samples_ms.0", "models.0.speedup.every_cpu",
      "geomean_speedup.every_cpu", "models.0.modes.once.median_ms", "models.0.modes.once.function.traces",
      "models.0.modes.once.function.hits", "models.0.modes.once.function.guard_ns", "models.0.speedup.once",
      "geomean_speedup.once",
      "models.1.modes.every.median_ms", "geomean_speedup.every"};
  for (size_t i = 0; i < sizeof numbers / sizeof numbers[0]; i++)
    CHECK_MSG(json_number(&doc, numbers[i]) != NULL, "no number at %s", numbers[i]);
  CHECK(json_string_is(&doc, "models.0.name", "mlp"));
  CHECK(json_string_is(&doc, "models.1.name", "train_cnn"));
  CHECK(json_string_is(&doc, "backend", "reference"));
  CHECK(json_literal_is(&doc, "models.0.modes.every.agrees", "true"));
  const double *compiles = json_number(&doc, "models.0.modes.every.warmup.compiles");
  CHECK(compiles && *compiles == 1);
  json_free(&doc);
  unlink(path);
  /* The sweep runs both batch sizes in one runtime: trace-every compiles once per size. */
  snprintf(command, sizeof command,
           "LATCH_BACKEND=reference %s bench --model mlp --mode every --sweep 1,2 --repeat 1 --json %s >/dev/null 2>&1", latch,
           path);
  CHECK_EQ_INT(system(command), 0);
  CHECK_MSG(json_load(&doc, path), "%s: %s", path, doc.error);
  const double *b = json_number(&doc, "sweep.1.batch"), *c = json_number(&doc, "sweep.1.compiles"),
               *t = json_number(&doc, "sweep.1.total_compiles");
  CHECK(b && *b == 2 && c && *c == 1 && t && *t == 2);
  CHECK(json_number(&doc, "sweep.0.median_ms") && json_number(&doc, "sweep.0.per_sample_ms"));
  json_free(&doc);
  unlink(path);
  /* The default sweep modes: every, then once under the static and automatic policies,
   * one function each over the three sizes. */
  snprintf(command, sizeof command,
           "LATCH_BACKEND=reference %s bench --model mlp --sweep 1,2,3 --repeat 1 --json %s >/dev/null 2>&1", latch, path);
  CHECK_EQ_INT(system(command), 0);
  CHECK_MSG(json_load(&doc, path), "%s: %s", path, doc.error);
  CHECK(json_string_is(&doc, "sweep.0.mode", "every") && json_literal_is(&doc, "sweep.0.policy", "null"));
  CHECK(json_string_is(&doc, "sweep.3.mode", "once") && json_string_is(&doc, "sweep.3.policy", "static"));
  CHECK(json_string_is(&doc, "sweep.8.mode", "once") && json_string_is(&doc, "sweep.8.policy", "auto"));
  const double *static_traces = json_number(&doc, "sweep.5.total_traces"), *auto_traces = json_number(&doc, "sweep.8.total_traces");
  CHECK(static_traces && *static_traces == 3 && auto_traces && *auto_traces == 2);
  CHECK(json_number(&doc, "sweep.7.traces") && json_number(&doc, "sweep.7.specializations"));
  CHECK(json_literal_is(&doc, "sweep.8.agrees", "true") && json_number(&doc, "sweep.8.max_rel_diff"));
  CHECK(!json_string_is(&doc, "sweep.9.mode", "every"));
  json_free(&doc);
  unlink(path);
  int rc;
  snprintf(command, sizeof command, "%s bench --model nosuch >/dev/null 2>&1", latch);
  rc = system(command);
  CHECK_EQ_INT(WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, 1);
}

int main(void) {
  /* Compile counts below are this process's: no graphs from an earlier run's disk cache. */
  setenv("LATCH_CACHE", "memory", 1);
  RUN(test_every_model_tiny);
  RUN(test_against_reference);
  RUN(test_every_mode_hits_cache);
  RUN(test_once_mode);
  RUN(test_sweep_policies);
  RUN(test_weight_errors);
  RUN(test_training_lowers_loss);
  RUN(test_command_json);
  RUN(test_command_cache_line);
  return TEST_REPORT();
}
