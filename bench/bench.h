/* bench/: the model zoo and the `latch bench` harness, written against the public API only.
 *
 * A model is a struct of weight tensors plus a step function with the shape a traced
 * function has (latch_function_new_step), so the same code runs op by op (eager), traced
 * every step (every) and traced once (once). */
#ifndef BENCH_H
#define BENCH_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "include/latch.h"

#define BENCH_MAX_INPUTS 32
#define BENCH_MAX_OUTPUTS 32
#define BENCH_MAX_WEIGHTS 1024

/* One step of a model: reads inputs (borrowed), returns new references in outputs. State
 * that changes shape across steps (a KV cache) is carried: its last inputs come back as
 * its last outputs, and the caller passes those to the next step (see bench_instance),
 * so the step stays a function of its inputs, as a trace-once function must be. Weights
 * are read from the model; trained weights are updated in place (latch_assign). */
typedef latch_status (*bench_step_fn)(void *model, latch_tensor *const *inputs, int input_count,
                                      latch_tensor **outputs, int output_count);

/* What the command line says about a model. Zero means the model's default. */
typedef struct bench_config {
  int batch;
  int size;               /* image side, sequence length, or context length */
  const char *weights;    /* directory of <state_dict key>.npy, or NULL for seeded weights */
  const char *input;      /* .npy file for input 0, or NULL for a seeded input */
  uint64_t seed;
  /* The tests' configuration: the 4096-wide classifiers of alexnet and vgg16 narrowed to
   * 256, the base transformers cut to 2 layers, so that every model builds in a second. */
  bool tiny;
} bench_config;

/* ---- errors: bench keeps its own message, as latch_last_error is latch's ---- */
void bench_set_error(const char *format, ...) __attribute__((format(printf, 1, 2)));
const char *bench_error(void);
/* The tensor's error (or latch_last_error) moved into bench's message; status to return. */
latch_status bench_fail_tensor(const char *what, const latch_tensor *t);

/* ---- weights: every tensor a model owns, by state_dict key ---- */
typedef enum bench_init {
  BENCH_INIT_UNIFORM, /* uniform in [-scale, scale) */
  BENCH_INIT_NORMAL,  /* standard deviation scale: made uniform in [-scale*sqrt(3), scale*sqrt(3)),
                       * as the normal generator's log and cosine per element made the
                       * large embedding tables take seconds */
  BENCH_INIT_CONST,   /* every element = scale (batch norm weight 1, var 1, biases 0) */
} bench_init;

typedef struct bench_store {
  latch_runtime *rt;
  const char *dir; /* NULL: seeded */
  uint64_t seed;
  int count;
  latch_tensor *tensors[BENCH_MAX_WEIGHTS];
  latch_status status; /* the first failure; later bench_param calls return NULL */
  bool trainable; /* weights are updated in place: keep PyTorch's layouts, pack nothing */
} bench_store;

void bench_store_init(bench_store *store, latch_runtime *rt, const bench_config *config);
/* The weight named key with the given dims: from DIR/key.npy (checked against dims: a
 * missing file or other dims is an error naming the key and both shapes), else made with
 * init and scale from a seed derived from key. The store owns it. NULL after a failure. */
latch_tensor *bench_param(bench_store *store, const char *key, int rank, const int64_t *dims, bench_init init,
                          double scale);
/* The same with a printf-style key. */
latch_tensor *bench_paramf(bench_store *store, int rank, const int64_t *dims, bench_init init, double scale,
                           const char *format, ...) __attribute__((format(printf, 6, 7)));
/* Keeps t (a state tensor or constant) to release with the store. */
latch_tensor *bench_keep(bench_store *store, latch_tensor *t);
/* Replaces old (owned by the store) with the value of next (a new reference, synced now);
 * returns next, or NULL after a failure. For weights repacked once at load time. */
latch_tensor *bench_store_replace(bench_store *store, latch_tensor *old, latch_tensor *next);
void bench_store_free(bench_store *store);

/* ---- a model made for one runtime ---- */
typedef struct bench_instance bench_instance;
/* Replaces in's inputs with new ones for config (its batch): what a batch sweep needs to
 * call one model, and so one traced function, at every batch size. */
typedef latch_status (*bench_inputs_fn)(bench_instance *in, latch_runtime *rt, const bench_config *config);

struct bench_instance {
  void *model;
  bench_step_fn step;
  void (*destroy)(void *model);
  int input_count, output_count;
  int carry; /* the last carry outputs become the last carry inputs of the next step */
  latch_tensor *inputs[BENCH_MAX_INPUTS];
  int batch, size;       /* as resolved */
  const char *output_name; /* "logits", "loss", "hidden" */
  /* NULL: the model cannot remake its inputs alone (a sweep then takes them from a
   * throwaway instance of the same seed). */
  bench_inputs_fn make_inputs;
};

typedef latch_status (*bench_create_fn)(latch_runtime *rt, const bench_config *config, bench_instance *out);

typedef struct bench_model {
  const char *name;
  const char *about;
  bench_create_fn create;
  int default_batch, default_size; /* the short default run's sizes */
  int tiny_size;                   /* the smallest size the tests use */
} bench_model;

const bench_model *bench_models(int *count);
const bench_model *bench_find_model(const char *name);
/* Releases the inputs and the model. */
void bench_instance_free(bench_instance *instance);
/* in's inputs for config: make_inputs when the model has it, else those of a throwaway
 * instance made with config in rt (same seeds, so the same inputs). */
latch_status bench_instance_inputs(bench_instance *in, const bench_model *model, latch_runtime *rt,
                                   const bench_config *config);
/* Input 0 from config->input when given (checked against dims), else seeded uniform in
 * [low, high) (integers: the floor). NULL on failure, with bench_error saying why. */
latch_tensor *bench_input(latch_runtime *rt, const bench_config *config, latch_dtype dtype, int rank,
                          const int64_t *dims, double low, double high, uint64_t seed);

/* ---- running one model in one mode (run.c) ---- */
typedef enum bench_mode {
  BENCH_EAGER,     /* the runtime's eager option: every op runs as it is called */
  BENCH_EVERY,     /* trace the whole step, sync once; the compile is cached by hash */
  BENCH_ONCE,      /* a traced function: traced once, then guards and the cached executable */
  BENCH_REFERENCE, /* every, on the reference backend: the check of another backend */
  BENCH_MODE_COUNT
} bench_mode;

const char *bench_mode_name(bench_mode mode);

/* Counters over a span of steps: differences of latch_get_stats. */
typedef struct bench_counters {
  uint64_t syncs, ops_traced, nodes_synced, cache_hits, cache_misses, compiles, compile_failures;
  uint64_t key_ns, compile_ns, execute_ns;
  uint64_t disk_loads; /* misses answered by the disk cache (compiled by another runtime or process) */
} bench_counters;

typedef struct bench_result {
  bench_mode mode;
  char backend[64];
  int batch, size;
  int steps;             /* timed steps */
  double *step_ms;       /* [steps]: step function plus latch_sync, wall clock */
  double *trace_ms;      /* [steps]: inside the step function alone */
  double *cpu_ms;        /* [steps]: the process's CPU time over the step (every thread's:
                          * on a shared machine, what the step cost apart from waiting) */
  double first_ms;       /* the first (warm-up) step: compiles happen here */
  latch_function_stats function; /* once: the traced function's counters over every step */
  bench_counters warmup, timed;
  int output_rank;
  int64_t output_dims[LATCH_MAX_RANK];
  int64_t output_count;  /* elements of output 0 */
  double *output;        /* output 0 after the last step, as doubles */
  const char *output_name;
} bench_result;

/* Opens a runtime for mode (backend: NULL for the default), makes the model, runs warmup
 * untimed-for-the-median steps then repeat timed ones, keeps output 0 of the last step.
 * output_npy (may be NULL) receives output 0. On failure bench_error says why; result
 * is then empty but still freed by bench_result_free. */
latch_status bench_run(const bench_model *model, const bench_config *config, bench_mode mode, const char *backend,
                       int warmup, int repeat, const char *output_npy, bench_result *result);
/* The runtime bench_run opens for mode: eager on for BENCH_EAGER, the reference backend
 * for BENCH_REFERENCE, else backend (NULL: LATCH_BACKEND's). The compile cache is on disk
 * unless LATCH_CACHE says otherwise, so a second run compiles nothing. NULL with
 * bench_error set. */
latch_runtime *bench_open(bench_mode mode, const char *backend);
/* The same with the compile cache given (NULL: "disk"); LATCH_CACHE still wins. */
latch_runtime *bench_open_cache(bench_mode mode, const char *backend, const char *cache);
/* bench_run in a runtime the caller keeps, with a fresh model (a bench_session opened,
 * run once and closed). */
latch_status bench_run_in(latch_runtime *rt, const bench_model *model, const bench_config *config, bench_mode mode,
                          int warmup, int repeat, const char *output_npy, bench_result *result);
void bench_result_free(bench_result *result);

/* One model kept across runs: its weights, and in once mode its traced function, so that a
 * batch sweep calls the same function at every batch size and the shape policy decides
 * what a new size costs. bench_run_in is open, run, close. */
typedef struct bench_session {
  latch_runtime *rt; /* borrowed */
  const bench_model *model;
  bench_mode mode;
  bench_config config; /* resolved: batch and size filled */
  bench_instance in;
  latch_function *fn; /* once mode */
  /* between bench_session_begin and _end: the last step's outputs, the counters before the
   * timed steps, whether a warm-up step ran */
  latch_tensor *outputs[BENCH_MAX_OUTPUTS];
  latch_stats before;
  latch_function_stats fn_before;
  bool warmed;
} bench_session;

/* Makes the model for config in rt; function (NULL: the defaults) configures once mode's
 * traced function. On failure bench_error says why; close the session anyway. */
latch_status bench_session_open(bench_session *s, latch_runtime *rt, const bench_model *model,
                                const bench_config *config, bench_mode mode, const latch_function_options *function);
/* New inputs for batch (the weights, and the function, stay). */
latch_status bench_session_batch(bench_session *s, int batch);
/* warmup then repeat timed steps at the current inputs; result->function holds the
 * function's counters over these steps only. */
latch_status bench_session_run(bench_session *s, int warmup, int repeat, const char *output_npy, bench_result *result);
/* bench_session_run in parts, so that sessions of several modes can take their timed steps
 * in turn: begin (the warm-up steps), step (one timed step, at most repeat of them), end
 * (counters and output 0; close the session after a failed part without calling end). */
latch_status bench_session_begin(bench_session *s, int warmup, int repeat, bench_result *result);
latch_status bench_session_step(bench_session *s, bench_result *result);
latch_status bench_session_end(bench_session *s, const char *output_npy, bench_result *result);
void bench_session_close(bench_session *s);
double bench_median(const double *values, int count);
/* Largest |a - b| and that over the largest |b|; false when the shapes differ. */
bool bench_compare(const bench_result *a, const bench_result *b, double *max_abs, double *max_rel);
/* Every element finite. */
bool bench_finite(const bench_result *result);

/* ---- traced-function micro-benchmark (function_micro.c): guard ns per call, dispatch
 * overhead of trace-once against trace-every on a tiny graph, an MLP batch sweep under the
 * static and automatic shape policies. Prints its tables; returns 0. ---- */
int bench_function_micro(void);

/* ---- the product peak (peak.c): an N x N f32 product through the runtime, median of
 * repeat wall times; prints GFLOP/s and writes them to json_path (may be NULL). Returns 0,
 * or 1 with the error printed. ---- */
int bench_peak(int n, int repeat, const char *json_path);

/* The machine's theoretical f32 peak from its /proc/cpuinfo (cpu_peak.c): false when the
 * file or one of its figures is missing (no "cpu MHz", no avx2 with fma). */
typedef struct bench_cpu_peak_info {
  int processors, cores, lanes, fma_units, flops_per_cycle; /* per core and cycle */
  double mhz, gflops;                                      /* gflops: every core's */
} bench_cpu_peak_info;
bool bench_cpu_peak(const char *cpuinfo_path, bench_cpu_peak_info *out);

/* ---- the harness (harness.c) ---- */
int bench_zoo_main(int argc, char **argv);
void bench_zoo_usage(void);

#endif
