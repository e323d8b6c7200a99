/* Running one model in one mode: its own runtime (eager is a runtime option), a fresh
 * model, warm-up and timed steps, the statistics of each span, output 0 of the last step. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"

const char *bench_mode_name(bench_mode mode) {
  static const char *const names[] = {"eager", "every", "once", "reference"};
  return (unsigned)mode < BENCH_MODE_COUNT ? names[mode] : "?";
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static double cpu_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static bench_counters counters_since(latch_runtime *rt, const latch_stats *before) {
  latch_stats s;
  latch_get_stats(rt, &s);
  return (bench_counters){s.syncs - before->syncs, s.ops_traced - before->ops_traced,
                          s.nodes_synced - before->nodes_synced, s.cache_hits - before->cache_hits,
                          s.cache_misses - before->cache_misses, s.compiles - before->compiles,
                          s.compile_failures - before->compile_failures, s.key_ns - before->key_ns,
                          s.compile_ns - before->compile_ns, s.execute_ns - before->execute_ns,
                          s.disk_loads - before->disk_loads};
}

/* One step: the model's step function (or, in once mode, a call of it as a traced
 * function: guards, then the cached executable), then a sync of everything left pending
 * (the outputs and any state it updated), as a frontend's mark_step. */
static latch_status one_step(latch_runtime *rt, bench_instance *in, latch_function *fn, latch_tensor **outputs,
                             double *trace_ms, double *total_ms, double *cpu_ms) {
  double cpu_start = cpu_now_ms(), start = now_ms();
  latch_status status = fn ? latch_call(fn, in->inputs, in->input_count, NULL, 0, outputs, in->output_count)
                           : in->step(in->model, in->inputs, in->input_count, outputs, in->output_count);
  if (status != LATCH_OK && fn) bench_set_error("call: %s", latch_last_error());
  double traced = now_ms();
  if (status == LATCH_OK && latch_sync(rt) != LATCH_OK) {
    bench_set_error("sync: %s", latch_last_error());
    status = LATCH_ERR_INTERNAL;
  }
  double end = now_ms();
  if (cpu_ms) *cpu_ms = cpu_now_ms() - cpu_start;
  if (trace_ms) *trace_ms = traced - start;
  if (total_ms) *total_ms = end - start;
  return status;
}

/* The carried state: the step's last outputs replace its last inputs. */
static void carry_state(bench_instance *in, latch_tensor **outputs) {
  for (int i = 0; i < in->carry; i++) {
    latch_tensor **slot = &in->inputs[in->input_count - in->carry + i];
    latch_release(*slot);
    *slot = latch_retain(outputs[in->output_count - in->carry + i]);
  }
}

static void release_outputs(latch_tensor **outputs, int count) {
  for (int i = 0; i < count; i++) {
    latch_release(outputs[i]);
    outputs[i] = NULL;
  }
}

static latch_status keep_output(latch_tensor *t, bench_result *result, const char *output_npy) {
  result->output_rank = latch_rank(t);
  for (int i = 0; i < result->output_rank; i++) result->output_dims[i] = latch_dim(t, i);
  result->output_count = latch_numel(t);
  result->output = malloc(sizeof(double) * (size_t)(result->output_count ? result->output_count : 1));
  if (!result->output) return bench_set_error("out of memory"), LATCH_ERR_INTERNAL;
  if (latch_read_f64(t, result->output, result->output_count) != LATCH_OK)
    return bench_set_error("reading the output: %s", latch_last_error()), LATCH_ERR_INTERNAL;
  if (output_npy && latch_save_npy(t, output_npy) != LATCH_OK)
    return bench_set_error("%s: %s", output_npy, latch_last_error()), LATCH_ERR_INPUT;
  return LATCH_OK;
}

latch_runtime *bench_open(bench_mode mode, const char *backend) { return bench_open_cache(mode, backend, NULL); }

latch_runtime *bench_open_cache(bench_mode mode, const char *backend, const char *cache) {
  latch_options options;
  if (latch_options_init(&options) != LATCH_OK) return bench_set_error("%s", latch_last_error()), NULL;
  options.eager = mode == BENCH_EAGER;
  if (!options.cache || !*options.cache) options.cache = cache ? cache : "disk"; /* LATCH_CACHE unset */
  if (mode == BENCH_REFERENCE) options.backend = "reference";
  else if (backend) options.backend = backend;
  latch_runtime *rt = latch_open(&options);
  if (!rt) bench_set_error("%s", latch_last_error());
  return rt;
}

latch_status bench_run(const bench_model *model, const bench_config *config, bench_mode mode, const char *backend,
                       int warmup, int repeat, const char *output_npy, bench_result *result) {
  memset(result, 0, sizeof *result);
  result->mode = mode;
  latch_runtime *rt = bench_open(mode, backend);
  if (!rt) return LATCH_ERR_INPUT;
  latch_status status = bench_run_in(rt, model, config, mode, warmup, repeat, output_npy, result);
  if (backend && mode != BENCH_REFERENCE) snprintf(result->backend, sizeof result->backend, "%s", backend);
  latch_close(rt);
  return status;
}

latch_status bench_run_in(latch_runtime *rt, const bench_model *model, const bench_config *config, bench_mode mode,
                          int warmup, int repeat, const char *output_npy, bench_result *result) {
  bench_session s;
  latch_status status = bench_session_open(&s, rt, model, config, mode, NULL);
  if (status == LATCH_OK) {
    status = bench_session_run(&s, warmup, repeat, output_npy, result);
  } else {
    memset(result, 0, sizeof *result);
    result->mode = mode;
    result->batch = s.in.batch;
    result->size = s.in.size;
  }
  bench_session_close(&s);
  return status;
}

latch_status bench_session_open(bench_session *s, latch_runtime *rt, const bench_model *model,
                                const bench_config *config, bench_mode mode, const latch_function_options *function) {
  memset(s, 0, sizeof *s);
  s->rt = rt;
  s->model = model;
  s->mode = mode;
  s->config = *config;
  if (!s->config.batch) s->config.batch = model->default_batch;
  if (!s->config.size) s->config.size = model->default_size;
  latch_status status = model->create(rt, &s->config, &s->in);
  if (status == LATCH_OK && mode == BENCH_ONCE) {
    latch_function_options fo;
    latch_function_options_init(&fo);
    if (function) fo = *function;
    fo.name = model->name;
    s->fn = latch_function_new_step(rt, s->in.step, s->in.model, &fo);
    if (!s->fn) status = (bench_set_error("%s", latch_last_error()), LATCH_ERR_INPUT);
  }
  return status;
}

latch_status bench_session_batch(bench_session *s, int batch) {
  if (batch == s->in.batch) return LATCH_OK;
  bench_config cfg = s->config;
  cfg.batch = batch;
  latch_status status = bench_instance_inputs(&s->in, s->model, s->rt, &cfg);
  if (status == LATCH_OK) s->config.batch = batch;
  return status;
}

void bench_session_close(bench_session *s) {
  release_outputs(s->outputs, BENCH_MAX_OUTPUTS);
  if (s->fn) latch_function_free(s->fn);
  bench_instance_free(&s->in);
  memset(s, 0, sizeof *s);
}

/* The function's counters over a span: after minus before (entries and trace_every are
 * states, kept as they are after). */
static latch_function_stats function_since(latch_function *fn, const latch_function_stats *b) {
  latch_function_stats a;
  latch_function_get_stats(fn, &a);
  a.calls -= b->calls, a.hits -= b->hits, a.traces -= b->traces, a.recompiles -= b->recompiles;
  a.fallback_calls -= b->fallback_calls, a.specializations -= b->specializations;
  a.instantiations -= b->instantiations, a.instantiate_ns -= b->instantiate_ns;
  a.guard_checks -= b->guard_checks, a.guard_ns -= b->guard_ns, a.trace_ns -= b->trace_ns;
  return a;
}

latch_status bench_session_begin(bench_session *s, int warmup, int repeat, bench_result *result) {
  memset(result, 0, sizeof *result);
  result->mode = s->mode;
  if (warmup < 0 || repeat < 1) return bench_set_error("repeat must be at least 1, warm-up at least 0"), LATCH_ERR_INPUT;
  latch_runtime *rt = s->rt;
  bench_instance *in = &s->in;
  latch_options options;
  latch_options_init(&options);
  snprintf(result->backend, sizeof result->backend, "%s", s->mode == BENCH_REFERENCE ? "reference" : options.backend);
  result->batch = in->batch;
  result->size = in->size;
  result->output_name = in->output_name;
  result->step_ms = calloc((size_t)repeat, sizeof(double));
  result->trace_ms = calloc((size_t)repeat, sizeof(double));
  result->cpu_ms = calloc((size_t)repeat, sizeof(double));
  latch_status status = LATCH_OK;
  if (!result->step_ms || !result->trace_ms || !result->cpu_ms)
    status = (bench_set_error("out of memory"), LATCH_ERR_INTERNAL);
  /* Whatever creating the model or its inputs left pending (constants) runs now, outside
   * every span. */
  if (status == LATCH_OK && latch_sync(rt) != LATCH_OK)
    status = (bench_set_error("sync: %s", latch_last_error()), LATCH_ERR_INTERNAL);
  memset(s->outputs, 0, sizeof s->outputs);
  memset(&s->fn_before, 0, sizeof s->fn_before);
  if (s->fn) latch_function_get_stats(s->fn, &s->fn_before);
  latch_get_stats(rt, &s->before);
  for (int i = 0; status == LATCH_OK && i < warmup; i++) {
    double ms;
    status = one_step(rt, in, s->fn, s->outputs, NULL, &ms, NULL);
    if (i == 0) result->first_ms = ms;
    if (status == LATCH_OK) carry_state(in, s->outputs);
    if (status == LATCH_OK && i + 1 < warmup) release_outputs(s->outputs, in->output_count);
  }
  result->warmup = counters_since(rt, &s->before);
  latch_get_stats(rt, &s->before);
  s->warmed = warmup > 0;
  return status;
}

latch_status bench_session_step(bench_session *s, bench_result *result) {
  bench_instance *in = &s->in;
  int i = result->steps;
  release_outputs(s->outputs, in->output_count);
  latch_status status = one_step(s->rt, in, s->fn, s->outputs, &result->trace_ms[i], &result->step_ms[i], &result->cpu_ms[i]);
  if (status != LATCH_OK) return status;
  carry_state(in, s->outputs);
  result->steps = i + 1;
  if (!s->warmed && i == 0) result->first_ms = result->step_ms[0];
  return LATCH_OK;
}

latch_status bench_session_end(bench_session *s, const char *output_npy, bench_result *result) {
  result->timed = counters_since(s->rt, &s->before);
  latch_status status = s->outputs[0] ? keep_output(s->outputs[0], result, output_npy)
                                      : (bench_set_error("no step ran"), LATCH_ERR_INTERNAL);
  release_outputs(s->outputs, BENCH_MAX_OUTPUTS);
  if (s->fn) result->function = function_since(s->fn, &s->fn_before);
  return status;
}

latch_status bench_session_run(bench_session *s, int warmup, int repeat, const char *output_npy, bench_result *result) {
  latch_status status = bench_session_begin(s, warmup, repeat, result);
  for (int i = 0; status == LATCH_OK && i < repeat; i++) status = bench_session_step(s, result);
  if (status == LATCH_OK) return bench_session_end(s, output_npy, result);
  release_outputs(s->outputs, BENCH_MAX_OUTPUTS);
  return status;
}

void bench_result_free(bench_result *result) {
  free(result->step_ms);
  free(result->trace_ms);
  free(result->cpu_ms);
  free(result->output);
  memset(result, 0, sizeof *result);
}

static int compare_doubles(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

double bench_median(const double *values, int count) {
  if (count < 1) return 0;
  double *sorted = malloc(sizeof(double) * (size_t)count);
  if (!sorted) return values[0];
  memcpy(sorted, values, sizeof(double) * (size_t)count);
  qsort(sorted, (size_t)count, sizeof(double), compare_doubles);
  double m = count % 2 ? sorted[count / 2] : (sorted[count / 2 - 1] + sorted[count / 2]) / 2;
  free(sorted);
  return m;
}

bool bench_compare(const bench_result *a, const bench_result *b, double *max_abs, double *max_rel) {
  *max_abs = 0;
  *max_rel = 0;
  if (!a->output || !b->output || a->output_rank != b->output_rank || a->output_count != b->output_count) return false;
  for (int i = 0; i < a->output_rank; i++)
    if (a->output_dims[i] != b->output_dims[i]) return false;
  double scale = 0;
  for (int64_t i = 0; i < a->output_count; i++) {
    double d = fabs(a->output[i] - b->output[i]);
    if (!(d <= *max_abs)) *max_abs = d; /* NaN wins */
    if (fabs(b->output[i]) > scale) scale = fabs(b->output[i]);
  }
  *max_rel = scale > 0 ? *max_abs / scale : *max_abs;
  return true;
}

bool bench_finite(const bench_result *result) {
  if (!result->output) return false;
  for (int64_t i = 0; i < result->output_count; i++)
    if (!isfinite(result->output[i])) return false;
  return true;
}
