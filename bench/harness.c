/* `latch bench` over the zoo: parses the options, runs each model in each mode, checks
 * that the modes agree, prints the table (stdout), progress (stderr) and the JSON. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define MAX_MODELS 32
/* Outputs of two modes agree when the largest difference is within this fraction of the
 * largest magnitude: the modes run the same kernels, so only op order and fusion differ. */
#define AGREE_REL 1e-4

/* --clock cpu: the table shows process CPU time per step instead of wall time, for
 * machines shared with other work (the JSON always holds both). */
static bool table_uses_cpu;

/* The short default: every architecture at small sizes, under 2 minutes on a 2-core
 * machine with the reference backend. */
static const char *const default_models[] = {"mlp", "resnet18", "resnet50", "mobilenet_v2", "squeezenet1_1", "alexnet",
                                              "vgg16", "bert_small", "vit_tiny", "gpt2", "train_mlp", "train_cnn"};

void bench_zoo_usage(void) {
  int count;
  const bench_model *models = bench_models(&count);
  printf("usage: latch bench [--model M...] [--mode eager,every,once] [--batch N] [--size N]\n"
         "                   [--repeat N] [--warmup N] [--seed N] [--tiny] [--json FILE]\n"
         "       latch bench --sweep LO..HI [--model M...] [--mode every,once] [--policy static,auto]\n"
         "       latch bench --model M --weights DIR [--input FILE.npy] [--output FILE.npy]\n"
         "       latch bench --micro [--reps N]\n"
         "\n"
         "Times each model's step (median ms over --repeat steps after --warmup, default 3 and 1)\n"
         "op by op (eager) and traced whole with the compile cached by hash (every), checks that\n"
         "both give the same output, and prints a table with the speedup of every over eager and\n"
         "their geometric mean. The modes warm up one after another, then take their timed steps\n"
         "in turn (eager, every, once, eager, ...), so a machine's drift weighs on each alike.\n"
         "Progress goes to stderr; --json FILE writes every raw figure.\n"
         "With no options: the short default run, every model below but bert_base and vit_b_16, at\n"
         "its default batch and size.\n"
         "  --model M        one or more (repeat the flag or separate with commas); 'all' = every model\n"
         "  --mode LIST      eager, every, once (a traced function: guards, then the cached graph),\n"
         "                   reference\n"
         "                   (every on the reference backend); default eager,every,once\n"
         "  --batch N        batch size (default per model), --size N: image side or sequence length\n"
         "  --weights DIR    load DIR/<state_dict key>.npy (PyTorch names) instead of seeded weights\n"
         "  --input FILE     input 0 from a .npy file; --output FILE: output 0 of the last mode run\n"
         "  --sweep LO..HI   batch sweep (powers of two from LO to HI, or a list 1,3,8): per batch\n"
         "                   size ms per step, compiles and traces; each mode runs one model (in\n"
         "                   once mode one traced function) over every size, checked against every\n"
         "                   (default modes every,once)\n"
         "  --policy LIST    the sweep's once rows: static (once-static), auto (once-auto); default both\n"
         "  --clock cpu      the table shows process CPU ms per step instead of wall ms (shared\n"
         "                   machines; the JSON holds both)\n"
         "  --tiny           the tests' configuration: 256-wide alexnet/vgg16 classifiers, 2-layer\n"
         "                   bert_base, vit_b_16 and GPT-2 small (quick smoke runs)\n"
         "The backend is LATCH_BACKEND's (default cpu when it exists, else reference).\n"
         "\nmodels (default batch, size):\n");
  for (int i = 0; i < count; i++)
    printf("  %-14s %3d %4d  %s\n", models[i].name, models[i].default_batch, models[i].default_size, models[i].about);
}

typedef struct options {
  const bench_model *models[MAX_MODELS];
  int model_count;
  bool modes[BENCH_MODE_COUNT];
  bench_config config;
  int repeat, warmup;
  const char *json, *output;
  int sweep[32], sweep_count; /* batch sizes of --sweep */
  bool policies[2];            /* --policy: the sweep's once rows, static and automatic */
  bool modes_given;            /* --mode on the command line (the sweep's default differs) */
} options;

static bool parse_int(const char *flag, const char *text, int low, int *out) {
  char *end;
  errno = 0;
  long v = strtol(text, &end, 10);
  if (errno || *end || !*text || v < low || v > 1 << 20) {
    fprintf(stderr, "latch: error: bench: %s %s: expected an integer of at least %d\n", flag, text, low);
    return false;
  }
  *out = (int)v;
  return true;
}

static bool add_models(options *o, const char *list) {
  char buffer[1024];
  snprintf(buffer, sizeof buffer, "%s", list);
  for (char *save = NULL, *name = strtok_r(buffer, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
    if (strcmp(name, "all") == 0) {
      int count;
      const bench_model *all = bench_models(&count);
      for (int i = 0; i < count && o->model_count < MAX_MODELS; i++) o->models[o->model_count++] = &all[i];
      continue;
    }
    const bench_model *m = bench_find_model(name);
    if (!m) {
      fprintf(stderr, "latch: error: bench: unknown model '%s' (see 'latch bench --help')\n", name);
      return false;
    }
    if (o->model_count < MAX_MODELS) o->models[o->model_count++] = m;
  }
  return true;
}

/* "1..64": the powers of two from 1 to 64 (and the ends); "1,3,8": those. */
static bool parse_sweep(options *o, const char *text) {
  int lo, hi;
  char tail;
  if (sscanf(text, "%d..%d%c", &lo, &hi, &tail) == 2 && lo >= 1 && hi >= lo && hi <= 4096) {
    o->sweep[o->sweep_count++] = lo;
    for (int b = 1; b <= hi && o->sweep_count < 31; b *= 2)
      if (b > lo && b < hi) o->sweep[o->sweep_count++] = b;
    if (hi > lo) o->sweep[o->sweep_count++] = hi;
    return true;
  }
  if (strstr(text, "..")) return false;
  char buffer[256];
  snprintf(buffer, sizeof buffer, "%s", text);
  for (char *save = NULL, *item = strtok_r(buffer, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
    if (o->sweep_count == 32 || !parse_int("--sweep", item, 1, &o->sweep[o->sweep_count])) return false;
    o->sweep_count++;
  }
  return o->sweep_count > 0;
}

/* --policy static,auto: the shape policies of the sweep's once rows. */
static bool set_policies(options *o, const char *list) {
  char buffer[256];
  snprintf(buffer, sizeof buffer, "%s", list);
  o->policies[0] = o->policies[1] = false;
  for (char *save = NULL, *name = strtok_r(buffer, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
    if (!strcmp(name, "static")) o->policies[0] = true;
    else if (!strcmp(name, "auto") || !strcmp(name, "automatic")) o->policies[1] = true;
    else {
      fprintf(stderr, "latch: error: bench: unknown shape policy '%s' (policies: static, auto)\n", name);
      return false;
    }
  }
  return o->policies[0] || o->policies[1];
}

static bool set_modes(options *o, const char *list) {
  char buffer[256];
  snprintf(buffer, sizeof buffer, "%s", list);
  memset(o->modes, 0, sizeof o->modes);
  for (char *save = NULL, *name = strtok_r(buffer, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
    int found = -1;
    for (int m = 0; m < BENCH_MODE_COUNT; m++)
      if (strcmp(name, bench_mode_name((bench_mode)m)) == 0) found = m;
    if (found < 0) {
      fprintf(stderr, "latch: error: bench: unknown mode '%s' (modes: eager, every, once, reference)\n", name);
      return false;
    }
    o->modes[found] = true;
  }
  return true;
}

/* 0 when parsed, else the exit status. */
static int parse(int argc, char **argv, options *o) {
  memset(o, 0, sizeof *o);
  table_uses_cpu = false;
  o->repeat = 3;
  o->warmup = 1;
  o->modes[BENCH_EAGER] = o->modes[BENCH_EVERY] = o->modes[BENCH_ONCE] = true;
  o->policies[0] = o->policies[1] = true;
  int seed = 0;
  for (int i = 0; i < argc; i++) {
    const char *flag = argv[i], *value = NULL;
    char name[64];
    const char *eq = strchr(flag, '=');
    if (eq && (size_t)(eq - flag) < sizeof name) {
      memcpy(name, flag, (size_t)(eq - flag));
      name[eq - flag] = 0;
      flag = name;
      value = eq + 1;
    }
    if (strcmp(flag, "--tiny") == 0) {
      o->config.tiny = true;
      continue;
    }
    if (strcmp(flag, "--help") == 0 || strcmp(flag, "-h") == 0) {
      bench_zoo_usage();
      return -1;
    }
    static const char *const valued[] = {"--clock", "--model", "--mode", "--batch", "--size", "--repeat", "--warmup",
                                         "--seed", "--json", "--weights", "--input", "--output", "--sweep",
                                         "--policy"};
    bool known = false;
    for (size_t k = 0; k < sizeof valued / sizeof valued[0]; k++) known = known || strcmp(flag, valued[k]) == 0;
    if (!known) {
      fprintf(stderr, "latch: error: bench: unknown option '%s' (see 'latch bench --help')\n", argv[i]);
      return 1;
    }
    if (!value) {
      if (i + 1 >= argc) {
        fprintf(stderr, "latch: error: bench: %s needs a value\n", flag);
        return 1;
      }
      value = argv[++i];
    }
    bool ok = true;
    if (!strcmp(flag, "--model")) {
      ok = add_models(o, value);
      /* --model a b c: the names that follow, up to the next flag */
      while (ok && i + 1 < argc && argv[i + 1][0] != '-') ok = add_models(o, argv[++i]);
    } else if (!strcmp(flag, "--mode")) ok = set_modes(o, value), o->modes_given = true;
    else if (!strcmp(flag, "--policy")) ok = set_policies(o, value);
    else if (!strcmp(flag, "--batch")) ok = parse_int(flag, value, 1, &o->config.batch);
    else if (!strcmp(flag, "--size")) ok = parse_int(flag, value, 1, &o->config.size);
    else if (!strcmp(flag, "--repeat")) ok = parse_int(flag, value, 1, &o->repeat);
    else if (!strcmp(flag, "--warmup")) ok = parse_int(flag, value, 0, &o->warmup);
    else if (!strcmp(flag, "--seed")) ok = parse_int(flag, value, 0, &seed);
    else if (!strcmp(flag, "--json")) o->json = value;
    else if (!strcmp(flag, "--clock")) {
      ok = !strcmp(value, "cpu") || !strcmp(value, "wall");
      table_uses_cpu = !strcmp(value, "cpu");
      if (!ok) fprintf(stderr, "latch: error: bench: --clock %s: expected wall or cpu\n", value);
    }
    else if (!strcmp(flag, "--weights")) o->config.weights = value;
    else if (!strcmp(flag, "--input")) o->config.input = value;
    else if (!strcmp(flag, "--output")) o->output = value;
    else if (!strcmp(flag, "--sweep")) {
      ok = parse_sweep(o, value);
      if (!ok) fprintf(stderr, "latch: error: bench: --sweep %s: expected LO..HI (1 <= LO <= HI <= 4096) or a list of batch sizes\n", value);
    }
    if (!ok) return 1;
  }
  o->config.seed = (uint64_t)seed;
  bool any = false;
  for (int m = 0; m < BENCH_MODE_COUNT; m++) any = any || o->modes[m];
  if (!any) {
    fprintf(stderr, "latch: error: bench: --mode names no mode\n");
    return 1;
  }
  if (o->model_count == 0)
    for (size_t i = 0; i < sizeof default_models / sizeof default_models[0]; i++)
      o->models[o->model_count++] = bench_find_model(default_models[i]);
  /* A sweep is about what a new batch size costs: op by op has nothing to compile. */
  if (o->sweep_count && !o->modes_given) o->modes[BENCH_EAGER] = false;
  if (o->sweep_count && (o->config.input || o->output)) {
    fprintf(stderr, "latch: error: bench: --sweep changes the batch: it takes no --input or --output\n");
    return 1;
  }
  if ((o->config.weights || o->config.input || o->output) && o->model_count != 1) {
    fprintf(stderr, "latch: error: bench: --weights, --input and --output need exactly one --model\n");
    return 1;
  }
  return 0;
}

/* ---- output ---- */

typedef struct model_run {
  const bench_model *model;
  bench_result results[BENCH_MODE_COUNT];
  bool ran[BENCH_MODE_COUNT];
  double max_abs[BENCH_MODE_COUNT], max_rel[BENCH_MODE_COUNT];
  bool agree[BENCH_MODE_COUNT], finite;
  char error[512];
  /* Graphs this process had stored in the disk cache when each mode's warm-up began, and
   * when the timed steps began: a graph loaded from the disk while this is 0 was compiled
   * by an earlier run; otherwise it may have been compiled by another mode of this run. */
  uint64_t stored_before[BENCH_MODE_COUNT], stored_before_timed;
} model_run;

/* Graphs stored in the disk cache by the models run before the current one. */
static uint64_t stored_by_earlier_models;

/* Graphs this process has stored in the disk cache: earlier models', and the open runtimes'. */
static uint64_t stored_so_far(latch_runtime *const *rts) {
  uint64_t stored = stored_by_earlier_models;
  for (int m = 0; m < BENCH_MODE_COUNT; m++)
    if (rts[m]) {
      latch_stats stats;
      latch_get_stats(rts[m], &stats);
      stored += stats.disk_writes;
    }
  return stored;
}

static double median_of(const bench_result *r) { return bench_median(r->step_ms, r->steps); }
static double cpu_median_of(const bench_result *r) { return bench_median(r->cpu_ms, r->steps); }

static double table_median(const bench_result *r) { return table_uses_cpu ? cpu_median_of(r) : median_of(r); }

static void json_counters(FILE *f, const char *name, const bench_counters *c) {
  fprintf(f,
          "\"%s\": {\"syncs\": %llu, \"ops_traced\": %llu, \"nodes_synced\": %llu, \"cache_hits\": %llu, "
          "\"cache_misses\": %llu, \"compiles\": %llu, \"compile_failures\": %llu, \"key_ms\": %.6f, "
          "\"compile_ms\": %.6f, \"execute_ms\": %.6f, \"disk_loads\": %llu}",
          name, (unsigned long long)c->syncs, (unsigned long long)c->ops_traced, (unsigned long long)c->nodes_synced,
          (unsigned long long)c->cache_hits, (unsigned long long)c->cache_misses, (unsigned long long)c->compiles,
          (unsigned long long)c->compile_failures, (double)c->key_ns / 1e6, (double)c->compile_ns / 1e6,
          (double)c->execute_ns / 1e6, (unsigned long long)c->disk_loads);
}

static double geomean(const double *values, int count) {
  double log_sum = 0;
  for (int i = 0; i < count; i++) log_sum += log(values[i]);
  return count ? exp(log_sum / count) : 0;
}

/* A number as JSON writes it: JSON has no NaN or infinity, so those are null. Used as
 * json_num(x).text inside one fprintf (the temporary lives to the end of the call). */
typedef struct json_text {
  char text[40];
} json_text;

static json_text json_num(double value, const char *format) {
  json_text out = {"null"};
  if (isfinite(value)) snprintf(out.text, sizeof out.text, format, value);
  return out;
}

static void json_number_list(FILE *f, const double *values, int count) {
  fputc('[', f);
  for (int i = 0; i < count; i++) fprintf(f, "%s%s", i ? ", " : "", json_num(values[i], "%.6f").text);
  fputc(']', f);
}

static bool write_json(const char *path, const options *o, const model_run *runs, int count, const char *backend) {
  FILE *f = fopen(path, "w");
  if (!f) return false;
  fprintf(f, "{\n  \"latch_bench\": 1,\n  \"backend\": \"%s\",\n  \"repeat\": %d,\n  \"warmup\": %d,\n  \"models\": [",
          backend, o->repeat, o->warmup);
  double speedups[MAX_MODELS], cpu_speedups[MAX_MODELS], once_speedups[MAX_MODELS], once_cpu_speedups[MAX_MODELS];
  int speedup_count = 0, once_count = 0;
  for (int i = 0; i < count; i++) {
    const model_run *r = &runs[i];
    const bench_result *any = NULL;
    for (int m = 0; m < BENCH_MODE_COUNT && !any; m++)
      if (r->ran[m]) any = &r->results[m];
    fprintf(f, "%s\n    {\"name\": \"%s\", \"batch\": %d, \"size\": %d, \"output\": \"%s\", \"output_shape\": [",
            i ? "," : "", r->model->name, any ? any->batch : 0, any ? any->size : 0,
            any && any->output_name ? any->output_name : "");
    for (int d = 0; any && d < any->output_rank; d++) fprintf(f, "%s%lld", d ? ", " : "", (long long)any->output_dims[d]);
    /* A model that failed has no outputs to call finite or not. */
    fprintf(f, "], \"finite\": %s, \"error\": ", r->error[0] ? "null" : r->finite ? "true" : "false");
    if (r->error[0]) {
      fputc('"', f);
      for (const char *c = r->error; *c; c++) {
        if (*c == '"' || *c == '\\') fputc('\\', f);
        if ((unsigned char)*c >= 0x20) fputc(*c, f);
      }
      fputc('"', f);
    } else {
      fputs("null", f);
    }
    fputs(",\n     \"modes\": {", f);
    bool first = true;
    for (int m = 0; m < BENCH_MODE_COUNT; m++) {
      if (!r->ran[m]) continue;
      const bench_result *x = &r->results[m];
      double lo = x->step_ms[0], hi = x->step_ms[0];
      for (int s = 1; s < x->steps; s++) lo = fmin(lo, x->step_ms[s]), hi = fmax(hi, x->step_ms[s]);
      fprintf(f, "%s\n      \"%s\": {\"backend\": \"%s\", \"median_ms\": %.6f, \"min_ms\": %.6f, \"max_ms\": %.6f, "
                 "\"spread_ms\": %.6f, \"first_step_ms\": %.6f, \"trace_ms\": %.6f, \"steps\": %d, \"samples_ms\": ",
              first ? "" : ",", bench_mode_name((bench_mode)m), x->backend, median_of(x), lo, hi, hi - lo, x->first_ms,
              bench_median(x->trace_ms, x->steps), x->steps);
      json_number_list(f, x->step_ms, x->steps);
      fprintf(f, ",\n        \"cpu_median_ms\": %.6f, \"cpu_samples_ms\": ", cpu_median_of(x));
      json_number_list(f, x->cpu_ms, x->steps);
      fputs(",\n        ", f);
      json_counters(f, "timed", &x->timed);
      fputs(",\n        ", f);
      json_counters(f, "warmup", &x->warmup);
      if (m == BENCH_ONCE) {
        const latch_function_stats *fs = &x->function;
        /* guard_ns is scaled from the timed calls: with none timed it is unknown, not 0. */
        char guard_ns[32] = "null";
        if (fs->guard_timed) snprintf(guard_ns, sizeof guard_ns, "%llu", (unsigned long long)fs->guard_ns);
        fprintf(f, ",\n        \"function\": {\"calls\": %llu, \"hits\": %llu, \"traces\": %llu, \"recompiles\": %llu, "
                   "\"guard_ns\": %s, \"guard_timed\": %llu, \"guard_checks\": %llu, \"trace_ns\": %llu, "
                   "\"instantiations\": %llu, \"instantiate_ns\": %llu, \"trace_every\": %s}",
                (unsigned long long)fs->calls, (unsigned long long)fs->hits, (unsigned long long)fs->traces,
                (unsigned long long)fs->recompiles, guard_ns, (unsigned long long)fs->guard_timed,
                (unsigned long long)fs->guard_checks, (unsigned long long)fs->trace_ns,
                (unsigned long long)fs->instantiations, (unsigned long long)fs->instantiate_ns,
                fs->trace_every ? "true" : "false");
      }
      fprintf(f, ",\n        \"max_abs_diff\": %s, \"max_rel_diff\": %s, \"agrees\": %s}",
              json_num(r->max_abs[m], "%.9g").text, json_num(r->max_rel[m], "%.9g").text, r->agree[m] ? "true" : "false");
      first = false;
    }
    fputs("},\n     \"speedup\": {", f);
    if (r->ran[BENCH_EAGER] && r->ran[BENCH_EVERY]) {
      double s = median_of(&r->results[BENCH_EAGER]) / median_of(&r->results[BENCH_EVERY]);
      double c = cpu_median_of(&r->results[BENCH_EAGER]) / cpu_median_of(&r->results[BENCH_EVERY]);
      fprintf(f, "\"every\": %s, \"every_cpu\": %s", json_num(s, "%.6f").text, json_num(c, "%.6f").text);
      cpu_speedups[speedup_count] = c;
      speedups[speedup_count++] = s;
    }
    if (r->ran[BENCH_EAGER] && r->ran[BENCH_ONCE]) {
      double s = median_of(&r->results[BENCH_EAGER]) / median_of(&r->results[BENCH_ONCE]);
      double c = cpu_median_of(&r->results[BENCH_EAGER]) / cpu_median_of(&r->results[BENCH_ONCE]);
      fprintf(f, "%s\"once\": %s, \"once_cpu\": %s", r->ran[BENCH_EVERY] ? ", " : "", json_num(s, "%.6f").text,
              json_num(c, "%.6f").text);
      once_cpu_speedups[once_count] = c;
      once_speedups[once_count++] = s;
    }
    fputs("}}", f);
  }
  fputs("\n  ],\n  \"geomean_speedup\": {", f);
  if (speedup_count)
    fprintf(f, "\"every\": %s, \"every_cpu\": %s", json_num(geomean(speedups, speedup_count), "%.6f").text,
            json_num(geomean(cpu_speedups, speedup_count), "%.6f").text);
  if (once_count)
    fprintf(f, "%s\"once\": %s, \"once_cpu\": %s", speedup_count ? ", " : "",
            json_num(geomean(once_speedups, once_count), "%.6f").text,
            json_num(geomean(once_cpu_speedups, once_count), "%.6f").text);
  fputs("}\n}\n", f);
  return fclose(f) == 0;
}

static void print_table(const options *o, const model_run *runs, int count, const char *backend) {
  printf("latch bench: backend %s, median %s ms per step over %d steps (after %d warm-up)\n", backend,
         table_uses_cpu ? "CPU" : "wall", o->repeat, o->warmup);
  printf("%-14s %5s %5s %11s %11s %11s %9s %9s %9s %7s  %s\n", "model", "batch", "size", "eager ms", "every ms",
         "once ms", "every/eag", "once/eag", "comp e/o", "traces", "agree (max rel diff)");
  double speedups[MAX_MODELS], once_speedups[MAX_MODELS];
  int speedup_count = 0, once_count = 0;
  for (int i = 0; i < count; i++) {
    const model_run *r = &runs[i];
    if (r->error[0]) {
      printf("%-14s  failed: %s\n", r->model->name, r->error);
      continue;
    }
    const bench_result *any = NULL;
    for (int m = 0; m < BENCH_MODE_COUNT && !any; m++)
      if (r->ran[m]) any = &r->results[m];
    char eager[32] = "-", every[32] = "-", once[32] = "-", speed[32] = "-", once_speed[32] = "-", agree[64] = "-";
    char traces[32] = "-";
    if (r->ran[BENCH_ONCE]) {
      snprintf(once, sizeof once, "%.2f", table_median(&r->results[BENCH_ONCE]));
      snprintf(traces, sizeof traces, "%llu", (unsigned long long)r->results[BENCH_ONCE].function.traces);
    }
    if (r->ran[BENCH_EAGER] && r->ran[BENCH_ONCE]) {
      double s = table_median(&r->results[BENCH_EAGER]) / table_median(&r->results[BENCH_ONCE]);
      once_speedups[once_count++] = s;
      snprintf(once_speed, sizeof once_speed, "%.2fx", s);
    }
    if (r->ran[BENCH_EAGER]) snprintf(eager, sizeof eager, "%.2f", table_median(&r->results[BENCH_EAGER]));
    if (r->ran[BENCH_EVERY]) snprintf(every, sizeof every, "%.2f", table_median(&r->results[BENCH_EVERY]));
    if (r->ran[BENCH_EAGER] && r->ran[BENCH_EVERY]) {
      double s = table_median(&r->results[BENCH_EAGER]) / table_median(&r->results[BENCH_EVERY]);
      speedups[speedup_count++] = s;
      snprintf(speed, sizeof speed, "%.2fx", s);
    }
    double worst = 0;
    bool all = true;
    int compared = 0;
    for (int m = 0; m < BENCH_MODE_COUNT; m++)
      if (r->ran[m] && &r->results[m] != any) compared++, worst = fmax(worst, r->max_rel[m]), all = all && r->agree[m];
    if (compared) snprintf(agree, sizeof agree, "%s (%.1e)%s", all ? "yes" : "NO", worst, r->finite ? "" : " non-finite");
    else if (!r->finite) snprintf(agree, sizeof agree, "non-finite");
    /* Backend compiles of the two traced modes, every/once ("-" for a mode not run): eager
     * compiles one graph per op shape, which says nothing about tracing. */
    char compiles[32], part[2][16];
    const bench_mode traced[2] = {BENCH_EVERY, BENCH_ONCE};
    for (int k = 0; k < 2; k++) {
      const bench_result *x = &r->results[traced[k]];
      if (r->ran[traced[k]])
        snprintf(part[k], sizeof part[k], "%llu", (unsigned long long)(x->warmup.compiles + x->timed.compiles));
      else
        snprintf(part[k], sizeof part[k], "-");
    }
    snprintf(compiles, sizeof compiles, "%s/%s", part[0], part[1]);
    printf("%-14s %5d %5d %11s %11s %11s %9s %9s %9s %7s  %s\n", r->model->name, any->batch, any->size, eager, every,
           once, speed, once_speed, compiles, traces, agree);
  }
  char every_mean[32] = "", once_mean[32] = "";
  if (speedup_count) snprintf(every_mean, sizeof every_mean, "%.2fx", geomean(speedups, speedup_count));
  if (once_count) snprintf(once_mean, sizeof once_mean, "%.2fx", geomean(once_speedups, once_count));
  if (speedup_count || once_count)
    printf("%-14s %5s %5s %11s %11s %11s %9s %9s\n", "geomean", "", "", "", "", "", every_mean, once_mean);
  /* Loads before this process stored anything came from an earlier run; later ones may have
   * come from another mode of this run (every and once often compile the same graph). */
  unsigned long long earlier = 0, either = 0;
  for (int i = 0; i < count; i++)
    for (int m = 0; m < BENCH_MODE_COUNT; m++) {
      const model_run *r = &runs[i];
      if (!r->ran[m]) continue;
      *(r->stored_before[m] ? &either : &earlier) += r->results[m].warmup.disk_loads;
      *(r->stored_before_timed ? &either : &earlier) += r->results[m].timed.disk_loads;
    }
  if (earlier)
    printf("(%llu graph%s came from the disk compile cache, compiled by an earlier run; LATCH_CACHE=memory compiles "
           "afresh)\n", earlier, earlier == 1 ? "" : "s");
  if (either)
    printf("(%llu graph%s came from the disk compile cache, compiled by another mode of this run or by an earlier "
           "run; LATCH_CACHE=memory compiles each mode's afresh)\n", either, either == 1 ? "" : "s");
}

/* ---- --sweep ---- */

/* One set of sweep rows: a mode and, in once mode, a shape policy. */
typedef struct sweep_variant {
  bench_mode mode;
  int policy; /* a latch_shape_policy in once mode, else -1 */
  const char *name, *policy_name;
} sweep_variant;

/* every first (the rows the others are checked against), then eager, the once policies
 * (static, then automatic) and reference. Returns the count. */
static int sweep_variants(const options *o, sweep_variant *out) {
  int n = 0;
  if (o->modes[BENCH_EVERY]) out[n++] = (sweep_variant){BENCH_EVERY, -1, "every", NULL};
  if (o->modes[BENCH_EAGER]) out[n++] = (sweep_variant){BENCH_EAGER, -1, "eager", NULL};
  if (o->modes[BENCH_ONCE] && o->policies[0])
    out[n++] = (sweep_variant){BENCH_ONCE, LATCH_SHAPES_STATIC, "once-static", "static"};
  if (o->modes[BENCH_ONCE] && o->policies[1])
    out[n++] = (sweep_variant){BENCH_ONCE, LATCH_SHAPES_AUTOMATIC, "once-auto", "auto"};
  if (o->modes[BENCH_REFERENCE]) out[n++] = (sweep_variant){BENCH_REFERENCE, -1, "reference", NULL};
  return n;
}

/* What one variant's sweep added up to, for the totals under the table. */
typedef struct sweep_total {
  uint64_t compiles, traces, specializations;
  double ms;    /* the sum of ms per step over the batch sizes */
  int sizes;    /* batch sizes that ran */
  bool agree, fell_back;
} sweep_total;

/* One row of the sweep: the table line and the JSON object. */
static void sweep_row(FILE *json, int *rows, const bench_model *model, const sweep_variant *v, const bench_result *r,
                      uint64_t compiles, const sweep_total *t, double max_rel, bool agree) {
  double ms = table_median(r);
  char traces[24] = "-", total_traces[24] = "-";
  if (v->mode == BENCH_ONCE) {
    snprintf(traces, sizeof traces, "%llu", (unsigned long long)r->function.traces);
    snprintf(total_traces, sizeof total_traces, "%llu", (unsigned long long)t->traces);
  }
  printf("%-14s %-11s %6d %11.3f %11.4f %9llu %7s %9llu %7s  %s (%.1e)%s\n", model->name, v->name, r->batch, ms,
         ms / r->batch, (unsigned long long)compiles, traces, (unsigned long long)t->compiles, total_traces,
         agree ? "yes" : "NO", max_rel, r->function.trace_every ? " trace-every fallback" : "");
  if (!json) return;
  fprintf(json,
          "%s\n    {\"name\": \"%s\", \"mode\": \"%s\", \"policy\": %s%s%s, \"batch\": %d, \"size\": %d, "
          "\"median_ms\": %.6f, \"per_sample_ms\": %.6f, \"compiles\": %llu, \"total_compiles\": %llu, "
          "\"cache_hits\": %llu, \"cache_misses\": %llu",
          (*rows)++ ? "," : "", model->name, bench_mode_name(v->mode), v->policy_name ? "\"" : "",
          v->policy_name ? v->policy_name : "null", v->policy_name ? "\"" : "", r->batch, r->size, ms, ms / r->batch,
          (unsigned long long)compiles, (unsigned long long)t->compiles,
          (unsigned long long)(r->warmup.cache_hits + r->timed.cache_hits),
          (unsigned long long)(r->warmup.cache_misses + r->timed.cache_misses));
  if (v->mode == BENCH_ONCE)
    fprintf(json,
            ", \"traces\": %llu, \"total_traces\": %llu, \"specializations\": %llu, \"instantiations\": %llu, "
            "\"hits\": %llu, \"trace_every\": %s",
            (unsigned long long)r->function.traces, (unsigned long long)t->traces,
            (unsigned long long)r->function.specializations, (unsigned long long)r->function.instantiations,
            (unsigned long long)r->function.hits, r->function.trace_every ? "true" : "false");
  else
    fputs(", \"traces\": null, \"total_traces\": null", json);
  fprintf(json, ", \"cpu_median_ms\": %.6f, \"first_step_ms\": %.6f, \"compile_ms\": %.6f", cpu_median_of(r), r->first_ms,
          (double)(r->warmup.compile_ns + r->timed.compile_ns) / 1e6);
  fprintf(json, ", \"max_rel_diff\": %s, \"agrees\": %s}", json_num(max_rel, "%.9g").text, agree ? "true" : "false");
}

/* One variant over every batch size: one runtime, one model, and in once mode one traced
 * function under the variant's shape policy. base[b] holds the first variant's results
 * (filled when keep is set, else compared with). Returns 0 or the exit status. */
static int sweep_variant_run(const options *o, const bench_model *model, const sweep_variant *v, bench_result *base,
                             bool keep, FILE *json, int *rows, sweep_total *t) {
  memset(t, 0, sizeof *t);
  t->agree = true;
  /* An in-memory cache: the compiles counted are this variant's, not loads of what an
   * earlier variant or run stored on disk (LATCH_CACHE still overrides). */
  latch_runtime *rt = bench_open_cache(v->mode, NULL, "memory");
  if (!rt) {
    fprintf(stderr, "latch: error: bench: %s\n", bench_error());
    return 3;
  }
  latch_function_options fo;
  latch_function_options_init(&fo);
  fo.shapes = v->policy < 0 ? LATCH_SHAPES_AUTOMATIC : (latch_shape_policy)v->policy;
  /* Room for one trace per call (gpt2's cache grows every step): the static policy's
   * traces are the finding, not a fallback to tracing every call. */
  int calls = o->sweep_count * (o->warmup + o->repeat);
  if (fo.recompile_limit < calls) fo.recompile_limit = calls;
  bench_config cfg = o->config;
  cfg.batch = o->sweep[0];
  bench_session session;
  latch_status s = bench_session_open(&session, rt, model, &cfg, v->mode, &fo);
  int exit_code = 0;
  for (int b = 0; s == LATCH_OK && b < o->sweep_count; b++) {
    fprintf(stderr, "bench: sweep %s %s batch %d ...\n", model->name, v->name, o->sweep[b]);
    bench_result r;
    memset(&r, 0, sizeof r);
    s = bench_session_batch(&session, o->sweep[b]);
    if (s == LATCH_OK) s = bench_session_run(&session, o->warmup, o->repeat, NULL, &r);
    if (s != LATCH_OK) {
      bench_result_free(&r);
      break;
    }
    uint64_t compiles = r.warmup.compiles + r.timed.compiles;
    t->compiles += compiles;
    t->traces += r.function.traces;
    t->specializations += r.function.specializations;
    t->ms += table_median(&r);
    t->sizes++;
    t->fell_back = t->fell_back || r.function.trace_every;
    double max_abs = 0, max_rel = 0;
    bool agree = bench_finite(&r);
    if (!keep) agree = bench_compare(&r, &base[b], &max_abs, &max_rel) && max_rel <= AGREE_REL && agree;
    if (!agree) {
      fprintf(stderr, "latch: error: bench: %s %s batch %d: %s (max abs diff %g, max rel diff %g)\n", model->name,
              v->name, r.batch, bench_finite(&r) ? "differs from the first variant" : "non-finite outputs", max_abs,
              max_rel);
      exit_code = 3;
      t->agree = false;
    }
    sweep_row(json, rows, model, v, &r, compiles, t, max_rel, agree);
    if (keep) base[b] = r;
    else bench_result_free(&r);
  }
  if (s != LATCH_OK) {
    fprintf(stderr, "latch: error: bench: %s %s: %s\n", model->name, v->name, bench_error());
    if ((int)s > exit_code) exit_code = (int)s;
    t->agree = false;
  }
  bench_session_close(&session);
  latch_close(rt);
  return exit_code;
}

/* --sweep: each variant runs every batch size with one model (and one traced function),
 * so the compile and trace counts show what a change of batch costs under each shape
 * policy; every result is checked against the first variant's (every's) at that batch. */
static int run_sweep(const options *o, const char *backend) {
  FILE *json = o->json ? fopen(o->json, "w") : NULL;
  if (o->json && !json) {
    fprintf(stderr, "latch: error: bench: cannot write %s\n", o->json);
    return 3;
  }
  if (json) fprintf(json, "{\n  \"latch_bench\": 1,\n  \"backend\": \"%s\",\n  \"repeat\": %d,\n  \"sweep\": [", backend, o->repeat);
  printf("latch bench --sweep: backend %s, median %s ms per step over %d steps (after %d warm-up)\n", backend,
         table_uses_cpu ? "CPU" : "wall", o->repeat, o->warmup);
  printf("%-14s %-11s %6s %11s %11s %9s %7s %9s %7s  %s\n", "model", "mode", "batch", "ms/step", "ms/sample", "compiles",
         "traces", "all comp", "all tr", "agree (max rel diff)");
  sweep_variant variants[BENCH_MODE_COUNT + 1];
  int variant_count = sweep_variants(o, variants), exit_code = 0, rows = 0;
  sweep_total (*totals)[BENCH_MODE_COUNT + 1] = calloc((size_t)o->model_count, sizeof *totals);
  if (!totals) return 3;
  for (int i = 0; i < o->model_count; i++) {
    bench_result base[32];
    memset(base, 0, sizeof base);
    for (int v = 0; v < variant_count; v++) {
      int code = sweep_variant_run(o, o->models[i], &variants[v], base, v == 0, json, &rows, &totals[i][v]);
      if (code > exit_code) exit_code = code;
    }
    for (int b = 0; b < o->sweep_count; b++) bench_result_free(&base[b]);
  }
  printf("\ntotals over batch sizes %d..%d (%d sizes): compiles, traces, sum of ms per step\n", o->sweep[0],
         o->sweep[o->sweep_count - 1], o->sweep_count);
  for (int i = 0; i < o->model_count; i++)
    for (int v = 0; v < variant_count; v++) {
      const sweep_total *t = &totals[i][v];
      char traces[24] = "-";
      if (variants[v].mode == BENCH_ONCE) snprintf(traces, sizeof traces, "%llu", (unsigned long long)t->traces);
      printf("%-14s %-11s %9llu compiles %5s traces %11.3f ms%s%s\n", o->models[i]->name, variants[v].name,
             (unsigned long long)t->compiles, traces, t->ms, t->sizes < o->sweep_count ? "  (incomplete)" : "",
             t->fell_back ? "  (fell back to trace-every)" : "");
    }
  free(totals);
  if (json) {
    fputs("\n  ]\n}\n", json);
    if (fclose(json) != 0) exit_code = 3;
  }
  return exit_code;
}

/* One model in every mode asked for, each in a runtime and model of its own: the modes
 * warm up one after another, then take their timed steps in turn (eager, every, once,
 * eager, ...), so that a machine getting slower or faster for a while weighs on every mode
 * alike; then each mode's output is checked against the first's. The status: 0, or the
 * failing part's. */
static latch_status run_model(const options *o, model_run *r) {
  latch_runtime *rts[BENCH_MODE_COUNT] = {0};
  bench_session sessions[BENCH_MODE_COUNT];
  bool open[BENCH_MODE_COUNT] = {false};
  latch_status s = LATCH_OK;
  int failed = -1, last = -1;
  bool disagree = false;
  r->finite = true;
  for (int m = 0; m < BENCH_MODE_COUNT; m++) {
    if (!o->modes[m]) continue;
    last = m;
    if (s != LATCH_OK) continue;
    fprintf(stderr, "bench: %s %s ...\n", r->model->name, bench_mode_name((bench_mode)m));
    rts[m] = bench_open((bench_mode)m, NULL);
    if (!rts[m]) s = LATCH_ERR_INPUT;
    if (s == LATCH_OK) {
      s = bench_session_open(&sessions[m], rts[m], r->model, &o->config, (bench_mode)m, NULL);
      open[m] = true;
    }
    r->stored_before[m] = stored_so_far(rts);
    if (s == LATCH_OK) s = bench_session_begin(&sessions[m], o->warmup, o->repeat, &r->results[m]);
    if (s != LATCH_OK) failed = m;
  }
  r->stored_before_timed = stored_so_far(rts);
  for (int i = 0; s == LATCH_OK && i < o->repeat; i++)
    for (int m = 0; s == LATCH_OK && m < BENCH_MODE_COUNT; m++)
      if (open[m] && (s = bench_session_step(&sessions[m], &r->results[m])) != LATCH_OK) failed = m;
  int base = -1;
  for (int m = 0; m < BENCH_MODE_COUNT; m++) {
    if (!open[m]) continue;
    /* --output takes the last mode's output; every mode's agree, so any would do. */
    if (s == LATCH_OK && (s = bench_session_end(&sessions[m], last == m ? o->output : NULL, &r->results[m])) != LATCH_OK)
      failed = m;
    bench_session_close(&sessions[m]);
    if (s != LATCH_OK) continue;
    r->ran[m] = true;
    r->finite = r->finite && bench_finite(&r->results[m]);
    if (base < 0) {
      base = m;
      r->agree[m] = true;
    } else {
      bench_compare(&r->results[m], &r->results[base], &r->max_abs[m], &r->max_rel[m]);
      r->agree[m] = r->max_rel[m] <= AGREE_REL;
    }
    fprintf(stderr, "bench: %s %s: median %.3f ms, first step %.3f ms\n", r->model->name,
            bench_mode_name((bench_mode)m), median_of(&r->results[m]), r->results[m].first_ms);
    if (!r->agree[m]) {
      fprintf(stderr, "latch: error: bench: %s: %s and %s disagree: max abs diff %g, max rel diff %g\n",
              r->model->name, bench_mode_name((bench_mode)m), bench_mode_name((bench_mode)base), r->max_abs[m],
              r->max_rel[m]);
      disagree = true;
    }
  }
  stored_by_earlier_models = stored_so_far(rts);
  for (int m = 0; m < BENCH_MODE_COUNT; m++)
    if (rts[m]) latch_close(rts[m]);
  if (failed >= 0) {
    snprintf(r->error, sizeof r->error, "%s mode: %s", bench_mode_name((bench_mode)failed), bench_error());
    fprintf(stderr, "latch: error: bench: %s: %s\n", r->model->name, r->error);
    for (int m = 0; m < BENCH_MODE_COUNT; m++) r->ran[m] = false;
    return s;
  }
  /* A model whose outputs are not finite makes its timings meaningless: report it. */
  if (!r->finite) {
    fprintf(stderr, "latch: error: bench: %s: non-finite outputs\n", r->model->name);
    return LATCH_ERR_INTERNAL;
  }
  return disagree ? LATCH_ERR_INTERNAL : LATCH_OK;
}

int bench_zoo_main(int argc, char **argv) {
  options o;
  int status = parse(argc, argv, &o);
  if (status) return status < 0 ? 0 : status;
  if (o.sweep_count) {
    latch_options lo;
    latch_options_init(&lo);
    return run_sweep(&o, lo.backend ? lo.backend : "reference");
  }
  model_run *runs = calloc((size_t)o.model_count, sizeof *runs);
  if (!runs) return 3;
  latch_options lo;
  latch_options_init(&lo);
  char backend[64];
  snprintf(backend, sizeof backend, "%s", lo.backend ? lo.backend : "reference");
  int exit_code = 0;
  for (int i = 0; i < o.model_count; i++) {
    runs[i].model = o.models[i];
    latch_status s = run_model(&o, &runs[i]);
    if ((int)s > exit_code) exit_code = (int)s;
  }
  print_table(&o, runs, o.model_count, backend);
  if (o.json && !write_json(o.json, &o, runs, o.model_count, backend)) {
    fprintf(stderr, "latch: error: bench: cannot write %s\n", o.json);
    exit_code = 3;
  }
  for (int i = 0; i < o.model_count; i++)
    for (int m = 0; m < BENCH_MODE_COUNT; m++) bench_result_free(&runs[i].results[m]);
  free(runs);
  return exit_code;
}
