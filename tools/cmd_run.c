/* latch run: evaluates a module's entry computation on inputs read from .npy files or made
 * from a seed, prints each output's shape, first values and checksums, and can write the
 * outputs back as .npy files. With --spmd, under mpirun, each rank runs one device of a
 * module with several replicas or partitions. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "hlo/hlo.h"
#include "runtime/runtime.h"
#include "runtime/reference/reference.h"
#include "run_cache.h"
#include "capture/capture.h"

void cmd_run_usage(void) {
  fputs("usage: latch run FILE [--inputs DIR] [--seed N] [--output DIR] [--backend NAME] [--fp64]\n"
        "                 [--compile] [--check compile|execute|accuracy] [--tol X] [--spmd]\n"
        "\n"
        "Runs the entry computation of the HLO module in FILE and prints, for each output\n"
        "(tuples flattened in order), its shape, up to 8 first values, the sum and the sum of\n"
        "absolute values (as doubles) and an FNV-1a hash of its bytes, then the run time.\n"
        "\n"
        "  --inputs DIR    parameter i is read from DIR/i.npy; its type and dims must match the\n"
        "                  parameter (f32 files are accepted for bf16 parameters and rounded)\n"
        "  --seed N        without --inputs, parameters are made from seed N (default 0):\n"
        "                  floats uniform in [-1,1), integers in [0,8), pred random\n"
        "  --output DIR    write the outputs as DIR/0.npy, DIR/1.npy, ... (DIR is created;\n"
        "                  bf16 outputs are written as exact f32, since .npy has no bf16)\n"
        "  --backend NAME  where to run (default reference; with --check, cpu)\n"
        "  --fp64          compute every floating-point value in f64; outputs come back as f64\n"
        "  --compile       compile through the backend interface even for the reference backend\n"
        "                  (its compiled form is the module itself), so the compile cache is used\n"
        "\n"
        "Every backend but the reference evaluator (and the reference one with --compile) compiles\n"
        "the module first, through the compile cache: LATCH_CACHE=disk (the default) loads the\n"
        "compiled graph from the cache directory (LATCH_CACHE_DIR, else $XDG_CACHE_HOME/latch or\n"
        "~/.cache/latch; at most LATCH_CACHE_MAX_BYTES, default 1G) or saves it there after\n"
        "compiling; LATCH_CACHE=memory or off compiles without touching the disk. With\n"
        "LATCH_CACHE_URL (and LATCH_CACHE_SECRET) a miss on disk asks the fleet's Redis cache\n"
        "next, and a compile is stored there too, as a runtime does; LATCH_CACHE=off uses\n"
        "neither. A line says which: 'cache: 1 hit, 0 compiles (...)'. 'latch cache --help'\n"
        "manages the directory and the remote tier.\n"
        "  --check compile compile with the backend, nothing more (no inputs are made); a compile\n"
        "                  error (or crash) is the failure\n"
        "  --check execute compile and run it once; an error (or crash) is the failure\n"
        "  --check accuracy also run it and compare each output with the reference evaluator\n"
        "                  in fp64: floats pass when rmse(result - fp64) <= m * rmse(reference\n"
        "                  - fp64) + tol (m = 2, 3 for f16/bf16), NaN and inf positions must\n"
        "                  agree, integers and pred must be equal; exit 4 when they do not\n"
        "  --tol X         the accuracy check's absolute tolerance (default 0.001)\n"
        "  --spmd          run under mpirun with one rank per device of a module that declares\n"
        "                  replica_count * num_partitions devices (rank = replica * num_partitions\n"
        "                  + partition); collectives go through Open MPI. Rank r reads DIR/r/i.npy\n"
        "                  with --inputs, uses seed N + r with --seed, writes DIR/r/ with --output.\n"
        "                  A collective waits LATCH_COLLECTIVE_TIMEOUT seconds (default 60) for the\n"
        "                  other ranks, then fails naming the rank (docs/distributed.md)\n"
        "\n"
        "LATCH_FAULT (for tests only) injects a backend bug: compile:OP, accuracy:OP:EPS,\n"
        "crash:OP, hang:OP, shift:OP or choice:KIND:N (the Nth choice of KIND the cpu backend\n"
        "takes is wrong; see runtime/runtime.h and 'latch bisect --help'); runs with it set go\n"
        "through the backend.\n"
        "\n"
        "Constants elided in the text (constant({...})) are filled deterministically, and a\n"
        "note says so. Exit status: 0 ok, 1 usage or input error (bad flags, unreadable or\n"
        "malformed file, missing or mismatched inputs), 2 an op or type latch does not\n"
        "support, 3 internal error (out of memory, failed write), 4 the accuracy check failed.\n"
        "\n"
        "examples:\n"
        "  latch run ../shared/corpus/xla/add.hlo\n"
        "  latch run model.hlo --inputs in/ --output out/ --fp64\n"
        "  latch run model.hlo --backend cpu --check accuracy\n",
        stdout);
}

typedef struct run_options {
  const char *file, *inputs, *seed_text, *output, *backend, *fp64, *compile, *help, *check, *tol_text, *spmd;
  uint64_t seed;
  double tol;
  rt_compile_options compile_options; /* from the environment, as latch_open would take them */
} run_options;

static int parse_options(int argc, char **argv, run_options *o) {
  memset(o, 0, sizeof *o);
  const cli_flag flags[] = {
      {"--help", false, &o->help},    {"--inputs", true, &o->inputs},   {"--seed", true, &o->seed_text},
      {"--output", true, &o->output}, {"--backend", true, &o->backend}, {"--fp64", false, &o->fp64},
      {"--compile", false, &o->compile},
      {"--check", true, &o->check},   {"--tol", true, &o->tol_text},
      {"--spmd", false, &o->spmd},
  };
  const char *files[1];
  int file_count = 0;
  int status = cli_parse_flags("run", argc, argv, flags, (int)(sizeof flags / sizeof flags[0]), files, &file_count, 1);
  if (status != CLI_OK || o->help) return status;
  if (file_count == 0) {
    cli_error("run: no input file (see 'latch run --help')");
    return CLI_USAGE;
  }
  o->file = files[0];
  if (o->seed_text) {
    char *end;
    errno = 0;
    unsigned long long seed = strtoull(o->seed_text, &end, 0);
    if (errno || end == o->seed_text || *end || o->seed_text[0] == '-') {
      cli_error("run: --seed wants a non-negative integer, got '%s'", o->seed_text);
      return CLI_USAGE;
    }
    o->seed = seed;
  }
  if (o->inputs && o->seed_text) {
    cli_error("run: --seed makes random inputs; it cannot be combined with --inputs");
    return CLI_USAGE;
  }
  if (o->backend && !cap_backend_find(o->backend)) {
    cli_error("run: unknown backend '%s'; backends: %s", o->backend, cap_backend_names());
    return CLI_USAGE;
  }
  if (o->check && strcmp(o->check, "compile") != 0 && strcmp(o->check, "execute") != 0 &&
      strcmp(o->check, "accuracy") != 0) {
    cli_error("run: --check wants compile, execute or accuracy, got '%s'", o->check);
    return CLI_USAGE;
  }
  if (o->check && o->fp64) {
    cli_error("run: --check compares a backend with the fp64 reference; it cannot be combined with --fp64");
    return CLI_USAGE;
  }
  /* Checking the reference evaluator against itself would find nothing: a check is of the
   * cpu backend unless --backend says otherwise. */
  if (o->check && !o->backend) o->backend = cap_backend_find("cpu") ? "cpu" : "reference";
  o->tol = RT_ACCURACY_DEFAULT_TOL;
  if (o->tol_text) {
    char *end;
    o->tol = strtod(o->tol_text, &end);
    if (end == o->tol_text || *end || !(o->tol >= 0)) {
      cli_error("run: --tol wants a non-negative number, got '%s'", o->tol_text);
      return CLI_USAGE;
    }
  }
  if (o->backend && o->fp64 && strcmp(o->backend, "reference") != 0) {
    cli_error("run: --fp64 is a mode of the reference backend; it cannot be combined with --backend %s",
              o->backend);
    return CLI_USAGE;
  }
  /* A bad LATCH_CACHE is reported before any work rather than after parsing a big module. */
  cache_mode mode;
  hlo_diag diag;
  hlo_diag_clear(&diag);
  if (cap_env_cache_mode(CACHE_MODE_DISK, &mode, &diag) != HLO_OK) return cli_fail(&diag);
  uint64_t max_bytes;
  bool compiles = o->compile || (o->backend && strcmp(o->backend, "reference") != 0);
  if (compiles && mode == CACHE_MODE_DISK && cap_env_cache_max_bytes(&max_bytes, &diag) != HLO_OK)
    return cli_fail(&diag);
  int settings = cli_runtime_settings(&o->compile_options);
  if (settings != CLI_OK) return settings;
  if (o->compile && o->fp64) {
    cli_error("run: --fp64 is a mode of the reference evaluator's direct path; it cannot be combined with --compile");
    return CLI_USAGE;
  }
  return CLI_OK;
}

/* ---- inputs ---- */

/* Whether a file's dims fit a parameter's: equal, or within a dynamic dim's bound. */
static bool dims_fit(const hlo_shape *want, const hlo_shape *have) {
  if (want->rank != have->rank) return false;
  for (int d = 0; d < want->rank; d++) {
    if (want->dim_kind[d] == HLO_DIM_UNBOUNDED) continue;
    if (want->dim_kind[d] == HLO_DIM_BOUNDED ? have->dims[d] > want->dims[d] : have->dims[d] != want->dims[d])
      return false;
  }
  return true;
}

/* Turns a value read from a file into the parameter's type: the same type passes, f32 is
 * rounded to bf16 (the only way to bring bf16 through .npy), and f64 passes for any float
 * parameter under --fp64, where the evaluator computes in f64 anyway. NULL if none fits. */
static rt_value *fit_type(rt_value *value, hlo_dtype want, bool fp64) {
  hlo_dtype have = value->shape.dtype;
  if (have == want || (fp64 && have == HLO_F64 && hlo_dtype_is_float(want))) return rt_value_retain(value);
  if (!(want == HLO_BF16 && have == HLO_F32)) return NULL;
  rt_value *rounded = rt_value_new_array(HLO_BF16, value->shape.rank, value->shape.dims);
  for (int64_t i = 0; rounded && i < value->count; i++) rt_set_f64(rounded, i, rt_get_f64(value, i));
  return rounded;
}

/* DIR, or DIR/RANK under --spmd. */
static void rank_dir(const run_options *o, const char *dir, char *out, size_t size) {
  if (o->compile_options.comm) snprintf(out, size, "%s/%d", dir, rt_comm_rank(o->compile_options.comm));
  else snprintf(out, size, "%s", dir);
}

static rt_value *read_input(const run_options *o, int index, const hlo_instr *param, hlo_diag *diag) {
  char dir[4000], path[4096];
  rank_dir(o, o->inputs, dir, sizeof dir);
  snprintf(path, sizeof path, "%s/%d.npy", dir, index);
  if (param->shape.dtype == HLO_TOKEN) return rt_value_new_tuple(0, NULL); /* no data to read */
  if (param->shape.dtype == HLO_TUPLE) {
    hlo_diag_set(diag, HLO_ERR_UNSUPPORTED,
                 "parameter %d (%s) is a tuple; .npy inputs for tuple parameters are not supported "
                 "(run without --inputs to use seeded random ones)", index, param->name);
    return NULL;
  }
  if (access(path, F_OK) != 0) {
    hlo_diag_set(diag, HLO_ERR_INPUT, "parameter %d (%s): missing input file %s", index, param->name, path);
    return NULL;
  }
  hlo_diag file_diag;
  hlo_diag_clear(&file_diag);
  rt_value *value = rt_npy_read(path, &file_diag);
  if (!value) {
    hlo_diag_set(diag, file_diag.status, "parameter %d (%s): %s", index, param->name, file_diag.message);
    return NULL;
  }
  rt_value *fitted = dims_fit(&param->shape, &value->shape) ? fit_type(value, param->shape.dtype, o->fp64) : NULL;
  if (!fitted) {
    char want[160], have[160];
    hlo_diag_set(diag, HLO_ERR_INPUT, "parameter %d (%s) expects %s, but %s holds %s", index, param->name,
                 hlo_shape_str(&param->shape, want, sizeof want), path, hlo_shape_str(&value->shape, have, sizeof have));
  }
  rt_value_release(value);
  return fitted;
}

/* Bytes the parameters will take, to refuse a run that cannot fit in memory up front
 * rather than be killed halfway through filling inputs. */
static double shape_bytes(const hlo_shape *shape) {
  if (shape->dtype != HLO_TUPLE) return (double)hlo_shape_bytes(shape);
  double total = 0;
  for (int i = 0; i < shape->tuple_count; i++) total += shape_bytes(&shape->tuple[i]);
  return total;
}

static int check_memory(const hlo_comp *entry) {
  double need = 0;
  for (int i = 0; i < entry->param_count; i++)
    if (entry->params[i]) need += shape_bytes(&entry->params[i]->shape);
  double have = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
  if (have > 0 && need > have / 2) {
    cli_error("run: the parameters alone need %.1f GiB, more than half of this machine's %.1f GiB of memory",
              need / (1 << 30), have / (1 << 30));
    return CLI_INTERNAL;
  }
  return CLI_OK;
}

/* One value per entry parameter, from files or from the seed. */
static int make_inputs(const run_options *o, const hlo_comp *entry, rt_value **args) {
  hlo_diag diag;
  hlo_diag_clear(&diag);
  for (int i = 0; i < entry->param_count; i++) {
    const hlo_instr *param = entry->params[i];
    if (!param) {
      hlo_diag_set(&diag, HLO_ERR_INPUT, "entry computation %s has no parameter %d", entry->name, i);
      return cli_fail(&diag);
    }
    uint64_t seed = o->seed + (o->compile_options.comm ? (uint64_t)rt_comm_rank(o->compile_options.comm) : 0);
    args[i] = o->inputs ? read_input(o, i, param, &diag) : rt_random_value(&param->shape, seed, (uint64_t)i, &diag);
    if (!args[i]) {
      if (diag.status == HLO_OK) hlo_diag_set(&diag, HLO_ERR_INTERNAL, "out of memory for parameter %d", i);
      if (o->inputs) return cli_fail(&diag);
      hlo_diag named; /* random inputs' messages do not know which parameter they are for */
      hlo_diag_clear(&named);
      hlo_diag_set(&named, diag.status, "parameter %d (%s): %s", i, param->name, diag.message);
      return cli_fail(&named);
    }
  }
  return CLI_OK;
}

/* ---- outputs ---- */

/* The array leaves of a result in order, nested tuples flattened; tokens have none. */
static int flatten(rt_value *value, rt_value **leaves, int count, int capacity) {
  if (value->shape.dtype != HLO_TUPLE) {
    if (leaves && count < capacity) leaves[count] = value;
    return count + 1;
  }
  for (int i = 0; i < value->tuple_count; i++) count = flatten(value->tuple[i], leaves, count, capacity);
  return count;
}

static uint64_t fnv1a(const void *data, size_t size) {
  const unsigned char *bytes = data;
  uint64_t hash = UINT64_C(0xcbf29ce484222325);
  for (size_t i = 0; i < size; i++) hash = (hash ^ bytes[i]) * UINT64_C(0x100000001b3);
  return hash;
}

static void print_element(const rt_value *value, int64_t index) {
  hlo_dtype dtype = value->shape.dtype;
  if (hlo_dtype_is_float(dtype)) printf(" %.7g", rt_get_f64(value, index));
  else if (dtype == HLO_PRED) printf(" %s", rt_get_i64(value, index) ? "true" : "false");
  else if (hlo_dtype_is_unsigned(dtype)) printf(" %" PRIu64, rt_get_u64(value, index));
  else printf(" %" PRId64, rt_get_i64(value, index));
}

static void print_output(int index, const rt_value *value) {
  char shape[160];
  double sum = 0, abs_sum = 0;
  for (int64_t i = 0; i < value->count; i++) {
    double element = rt_get_f64(value, i);
    sum += element;
    abs_sum += element < 0 ? -element : element;
  }
  printf("output %d: %s sum=%.10g abs_sum=%.10g fnv1a=%016" PRIx64 "\n  values:", index,
         hlo_shape_str(&value->shape, shape, sizeof shape), sum, abs_sum,
         fnv1a(value->data, (size_t)hlo_shape_bytes(&value->shape)));
  for (int64_t i = 0; i < value->count && i < 8; i++) print_element(value, i);
  printf("%s\n", value->count > 8 ? " ..." : "");
}

static int write_outputs(const char *dir, rt_value **leaves, int count) {
  if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
    cli_error("run: cannot create output directory %s: %s", dir, strerror(errno));
    return CLI_USAGE;
  }
  bool noted = false;
  for (int i = 0; i < count; i++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%d.npy", dir, i);
    hlo_diag diag;
    hlo_diag_clear(&diag);
    if (rt_npy_write(path, leaves[i], &diag) != HLO_OK) return cli_fail(&diag);
    if (leaves[i]->shape.dtype == HLO_BF16 && !noted) {
      fprintf(stderr, "note: bf16 outputs are written as f32 .npy files (exact; .npy has no bf16 type)\n");
      noted = true;
    }
  }
  printf("wrote %d output%s to %s\n", count, count == 1 ? "" : "s", dir);
  return CLI_OK;
}

static int report(const run_options *o, rt_value *result) {
  int count = flatten(result, NULL, 0, 0);
  rt_value **leaves = calloc((size_t)count + 1, sizeof(rt_value *));
  if (!leaves) return CLI_INTERNAL;
  flatten(result, leaves, 0, count);
  for (int i = 0; i < count; i++) print_output(i, leaves[i]);
  char dir[4000];
  if (o->output) rank_dir(o, o->output, dir, sizeof dir);
  if (o->output && o->compile_options.comm && mkdir(o->output, 0777) != 0 && errno != EEXIST) {
    cli_error("run: cannot create output directory %s: %s", o->output, strerror(errno));
    free(leaves);
    return CLI_USAGE;
  }
  int status = o->output ? write_outputs(dir, leaves, count) : CLI_OK;
  free(leaves);
  return status;
}

/* ---- the command ---- */

static int load_module(const char *path, hlo_module **module) {
  hlo_diag diag;
  hlo_diag_clear(&diag);
  hlo_module **modules = NULL;
  double start = cli_now();
  int count = hlo_parse_file(path, &modules, &diag);
  if (count < 0) return cli_fail(&diag);
  if (count != 1) {
    for (int i = 0; i < count; i++) hlo_module_free(modules[i]);
    free(modules);
    cli_error("run: %s holds %d modules; run takes a file with one", path, count);
    return CLI_USAGE;
  }
  *module = modules[0];
  free(modules);
  double seconds = cli_now() - start;
  if (hlo_verify_module(*module, &diag) != HLO_OK) {
    if (strstr(diag.message, "error:")) fprintf(stderr, "%s (module %s)\n", diag.message, (*module)->name);
    else cli_error("%s: module %s: %s", path, (*module)->name, diag.message);
    hlo_module_free(*module);
    *module = NULL;
    return diag.status == HLO_OK ? CLI_INTERNAL : (int)diag.status;
  }
  if (!(*module)->entry) {
    cli_error("%s: module %s has no entry computation", path, (*module)->name);
    hlo_module_free(*module);
    *module = NULL;
    return CLI_USAGE;
  }
  printf("%s: module %s, parsed in %.2f ms\n", path, (*module)->name, seconds * 1e3);
  int elided = cli_count_elided(*module);
  if (elided)
    fprintf(stderr, "note: %d elided constant%s %s filled deterministically\n", elided, elided == 1 ? "" : "s",
            elided == 1 ? "was" : "were");
  return CLI_OK;
}

/* What a run compiled, kept until its outputs are out: only then is it saved to the cache. */
typedef struct compiled {
  const rt_backend *backend; /* NULL: the module ran directly */
  rt_executable *exe;
  bool checking; /* compiled afresh for --check or LATCH_FAULT: no cache involved */
  run_cache cache;
} compiled;

/* --spmd on several ranks: rank 0 compiles (or loads) the module through the compile cache
 * and every other rank receives its serialized executable, so a job compiles once. */
static hlo_status compile_once_per_job(const run_options *o, const hlo_module *module, compiled *c, hlo_diag *diag) {
  rt_comm *comm = o->compile_options.comm;
  void *bytes = NULL;
  size_t len = 0;
  if (rt_comm_rank(comm) == 0) {
    c->exe = run_cache_compile(&c->cache, c->backend, module, &o->compile_options, diag);
    hlo_diag unused = {0};
    if (c->exe && c->backend->serialize(c->exe, &bytes, &len, &unused) != HLO_OK) bytes = NULL, len = 0;
  } else {
    c->checking = true; /* nothing of this rank's goes to the cache */
  }
  hlo_diag shared = {0};
  hlo_status status = rt_comm_share(comm, &bytes, &len, "sharing the compiled module", &shared);
  if (status == HLO_OK && rt_comm_rank(comm) != 0)
    c->exe = c->backend->deserialize(bytes, len, &o->compile_options, diag);
  if (status == HLO_OK && c->exe)
    printf("compiles: 1 for the job of %d ranks (rank 0's, %zu bytes sent to the others)\n", rt_comm_size(comm), len);
  free(bytes);
  if (status != HLO_OK && diag->status == HLO_OK) *diag = shared;
  return c->exe ? HLO_OK : diag->status == HLO_OK ? HLO_ERR_INTERNAL : diag->status;
}

/* The reference evaluator runs the module directly (it has the fp64 mode) unless --compile
 * says otherwise; any other backend compiles it first, through the compile cache. */
static hlo_status execute(const run_options *o, const hlo_module *module, rt_value **args, rt_value **result,
                          compiled *c, hlo_diag *diag) {
  const hlo_comp *entry = module->entry;
  const char *fault = getenv("LATCH_FAULT");
  bool checking = o->check || (fault && *fault && !o->fp64);
  if (!o->compile && !checking && (!o->backend || strcmp(o->backend, "reference") == 0)) {
    rt_eval_options options = {.fp64 = o->fp64 != NULL, .comm = o->compile_options.comm};
    return rt_evaluate(module, args, entry->param_count, &options, result, diag);
  }
  c->backend = cap_backend_find(o->backend ? o->backend : "reference");
  if (checking) {
    /* Checks and injected faults compile afresh: a cached executable would hide the
     * compile being checked, and a faulty one must never reach the shared cache. */
    c->checking = true;
    c->backend = cap_fault_wrap(c->backend, fault, diag);
    if (!c->backend) return diag->status;
    c->exe = c->backend->compile(module, &o->compile_options, diag);
    if (!c->exe && o->check) {
      hlo_diag failed = *diag; /* say which check failed, keep the backend's status */
      hlo_diag_clear(diag);
      hlo_diag_set(diag, failed.status == HLO_OK ? HLO_ERR_INTERNAL : failed.status,
                   "check failed: compile: %s", failed.message);
    }
  } else if (o->compile_options.comm && rt_comm_size(o->compile_options.comm) > 1) {
    if (compile_once_per_job(o, module, c, diag) != HLO_OK) return diag->status;
  } else {
    c->exe = run_cache_compile(&c->cache, c->backend, module, &o->compile_options, diag);
  }
  if (!c->exe) return diag->status == HLO_OK ? HLO_ERR_INTERNAL : diag->status;
  hlo_status status = c->backend->execute(c->exe, args, entry->param_count, result, diag);
  if (status == HLO_OK || c->checking || c->cache.origin == CACHE_ORIGIN_COMPILED) return status;
  /* a loaded executable failed its first run: compile afresh and run that */
  char failure[sizeof diag->message];
  snprintf(failure, sizeof failure, "%s", diag->message);
  hlo_diag_clear(diag);
  if (!(c->exe = run_cache_recompile(&c->cache, c->exe, failure, diag))) return diag->status;
  return c->backend->execute(c->exe, args, entry->param_count, result, diag);
}

/* Saves what was compiled (after the outputs, so the first result does not wait for the
 * write), prints the cache's line, frees the executable. */
static void finish_compiled(compiled *c) {
  if (!c->backend) return;
  if (!c->checking) run_cache_finish(&c->cache, c->exe);
  if (c->exe) c->backend->destroy(c->exe);
}

/* --check: compile and run already passed; for accuracy, compare with the fp64 reference. */
static int check_result(const run_options *o, const hlo_module *module, rt_value **args, rt_value *result) {
  if (strcmp(o->check, "execute") == 0) {
    printf("check execute: ok\n");
    return CLI_OK;
  }
  hlo_diag diag;
  hlo_diag_clear(&diag);
  rt_accuracy_verdict verdict;
  if (rt_accuracy_check(module, args, module->entry->param_count, result, o->tol, &verdict, &diag) != HLO_OK)
    return cli_fail(&diag);
  if (!verdict.passed) {
    cli_error("check failed: accuracy: %s", verdict.message);
    return CLI_CHECK_FAILED;
  }
  printf("check accuracy: ok, %s\n", verdict.message);
  return CLI_OK;
}

/* --check compile: the compile is the check, so nothing runs and no input is made (a repro
 * of a compile failure in a step with huge parameters replays on any machine). */
static int compile_check(const run_options *o, const hlo_module *module) {
  hlo_diag diag;
  hlo_diag_clear(&diag);
  const rt_backend *backend = cap_fault_wrap(cap_backend_find(o->backend ? o->backend : "reference"), getenv("LATCH_FAULT"),
                                                  &diag);
  if (!backend) return cli_fail(&diag);
  double start = cli_now();
  rt_executable *exe = backend->compile(module, &o->compile_options, &diag);
  if (!exe) {
    hlo_diag failed = diag;
    hlo_diag_clear(&diag);
    hlo_diag_set(&diag, failed.status == HLO_OK ? HLO_ERR_INTERNAL : failed.status, "check failed: compile: %s",
                 failed.message);
    return cli_fail(&diag);
  }
  backend->destroy(exe);
  printf("compiled in %.3f s on the %s backend\ncheck compile: ok\n", cli_now() - start, backend->name);
  return CLI_OK;
}

static int run_module(const run_options *o, const hlo_module *module) {
  const hlo_comp *entry = module->entry;
  if (o->check && strcmp(o->check, "compile") == 0) return compile_check(o, module);
  int status = o->inputs ? CLI_OK : check_memory(entry);
  if (status != CLI_OK) return status;
  rt_value **args = calloc((size_t)entry->param_count + 1, sizeof(rt_value *));
  if (!args) return CLI_INTERNAL;
  status = make_inputs(o, entry, args);
  if (status == CLI_OK) {
    if (o->inputs) printf("inputs: %d from %s\n", entry->param_count, o->inputs);
    else printf("inputs: %d random, seed %" PRIu64 "\n", entry->param_count,
                o->seed + (o->compile_options.comm ? (uint64_t)rt_comm_rank(o->compile_options.comm) : 0));
    hlo_diag diag;
    hlo_diag_clear(&diag);
    rt_value *result = NULL;
    double start = cli_now();
    compiled c = {0};
    hlo_status run = execute(o, module, args, &result, &c, &diag);
    double seconds = cli_now() - start;
    if (run != HLO_OK) {
      status = cli_fail(&diag);
    } else {
      status = report(o, result);
      printf("ran in %.3f s on the %s backend%s\n", seconds, o->backend ? o->backend : "reference",
             o->fp64 ? " (fp64)" : "");
      if (status == CLI_OK && o->check) status = check_result(o, module, args, result);
    }
    finish_compiled(&c);
    rt_value_release(result);
  }
  for (int i = 0; i < entry->param_count; i++) rt_value_release(args[i]);
  free(args);
  return status;
}

int cmd_run(int argc, char **argv) {
  run_options o;
  int status = parse_options(argc, argv, &o);
  if (status != CLI_OK || o.help) {
    if (o.help && status == CLI_OK) cmd_run_usage();
    return status;
  }
  if (o.spmd && (status = cli_open_world(&o.compile_options)) != CLI_OK) return status;
  hlo_module *module = NULL;
  status = load_module(o.file, &module);
  if (status == CLI_OK && o.spmd) {
    rt_comm *comm = o.compile_options.comm;
    printf("rank %d of %d\n", rt_comm_rank(comm), rt_comm_size(comm));
  }
  if (status == CLI_OK) status = run_module(&o, module);
  hlo_module_free(module);
  rt_comm_close(o.compile_options.comm);
  return status;
}

/* ---- for other commands ---- */

int cmd_run_load_module(const char *path, hlo_module **module) {
  return load_module(path, module);
}

int cmd_run_make_inputs(const char *inputs_dir, uint64_t seed, const hlo_comp *entry, rt_value **args) {
  run_options o;
  memset(&o, 0, sizeof o);
  o.inputs = inputs_dir;
  o.seed = seed;
  int status = inputs_dir ? CLI_OK : check_memory(entry);
  return status == CLI_OK ? make_inputs(&o, entry, args) : status;
}
