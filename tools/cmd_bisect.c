/* latch bisect: names the pass application or kernel choice of the backend that makes a
 * module fail (minify/bisect.c), as one line and the settings that reproduce it. */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "minify/minify.h"
#include "runtime/runtime.h"
#include "capture/capture.h"

void cmd_bisect_usage(void) {
  fputs("usage: latch bisect FILE [--inputs DIR | --seed N]\n"
        "                   (--check compile|accuracy [--tol X] | --test CMD [--test-nonzero])\n"
        "                   [-o DIR] [--timeout S]\n"
        "\n"
        "Finds which of the cpu backend's own choices makes the module in FILE fail: a pass\n"
        "application (inline, simplify, cse, dot_of_repeats, fold_affine, space_to_depth,\n"
        "input_grad) or a kernel choice (fusion of a group, Winograd for a convolution, a\n"
        "blocked layout). The backend asks before each, in a fixed order; LATCH_CHOICES=N takes\n"
        "the first N and makes the rest the plain way. The module must fail with all of them\n"
        "taken; a binary search over N finds the smallest that fails, whose Nth choice is the\n"
        "culprit:\n"
        "  culprit: pass fold_affine, application 3 of 7 (%convolution.12)\n"
        "  culprit: winograd on %convolution.41\n"
        "then the settings that show it (LATCH_CHOICES=N fails, N-1 passes; LATCH_AVOID=\n"
        "KIND@NAME refuses that choice alone). A module that fails with every choice refused is\n"
        "not the backend's choices' doing, and says so.\n"
        "\n"
        "  --check compile|accuracy, --test CMD, --test-nonzero, --inputs, --seed, --tol,\n"
        "  --timeout   as for 'latch minify' (a --test command sees LATCH_CHOICES in its\n"
        "              environment and should pass it on to the latch it runs)\n"
        "  -o DIR      also write the line to DIR/culprit.txt (default: FILE's directory when\n"
        "              FILE is a repro directory's repro.hlo)\n"
        "\n"
        "Exit status: 0 a culprit or none named, 1 usage or input error or the module does not\n"
        "fail, 2 unsupported, 3 internal error.\n"
        "\n"
        "examples:\n"
        "  latch bisect latch-repro/repro.hlo --check accuracy\n"
        "  LATCH_FAULT=choice:fusion:2 latch bisect model.hlo --check accuracy\n",
        stdout);
}

typedef struct bisect_flags {
  const char *file, *inputs, *seed, *check, *tol, *test, *test_nonzero, *out, *timeout, *help;
  rt_compile_options compile;
} bisect_flags;

static int parse_options(int argc, char **argv, bisect_flags *f, min_bisect_request *r, uint64_t *seed) {
  memset(f, 0, sizeof *f);
  const cli_flag flags[] = {
      {"--help", false, &f->help},   {"--inputs", true, &f->inputs}, {"--seed", true, &f->seed},
      {"--check", true, &f->check},  {"--tol", true, &f->tol},       {"--test", true, &f->test},
      {"--test-nonzero", false, &f->test_nonzero}, {"-o", true, &f->out}, {"--timeout", true, &f->timeout},
  };
  const char *files[1];
  int file_count = 0;
  int status = cli_parse_flags("bisect", argc, argv, flags, (int)(sizeof flags / sizeof flags[0]), files, &file_count, 1);
  if (status != CLI_OK || f->help) return status;
  status = cli_check_target("bisect", file_count, f->check, f->test);
  if (status != CLI_OK) return status;
  f->file = files[0];
  if (f->inputs && f->seed) {
    cli_error("bisect: --seed makes random inputs; it cannot be combined with --inputs");
    return CLI_USAGE;
  }
  memset(r, 0, sizeof *r);
  min_predicate *p = &r->predicate;
  p->timeout_s = 30;
  p->tol = RT_ACCURACY_DEFAULT_TOL;
  double number;
  if (f->timeout && !cli_parse_number("bisect", "--timeout", f->timeout, 0.001, &p->timeout_s)) return CLI_USAGE;
  if (f->tol && !cli_parse_number("bisect", "--tol", f->tol, 0, &p->tol)) return CLI_USAGE;
  *seed = 0;
  if (f->seed) {
    if (!cli_parse_number("bisect", "--seed", f->seed, 0, &number)) return CLI_USAGE;
    *seed = (uint64_t)strtoull(f->seed, NULL, 0);
  }
  status = cli_runtime_settings(&f->compile);
  if (status != CLI_OK) return status;
  /* the search sets the limit itself; a refusal asked for stays */
  f->compile.limit_choices = false;
  r->compile_options = &f->compile;
  hlo_diag diag;
  hlo_diag_clear(&diag);
  const rt_backend *cpu = cap_backend_find("cpu");
  if (!cpu) {
    cli_error("bisect: this build has no cpu backend, whose choices it bisects");
    return CLI_UNSUPPORTED;
  }
  r->backend = cap_fault_wrap(cpu, getenv("LATCH_FAULT"), &diag);
  if (!r->backend) return cli_fail(&diag);
  p->backend = r->backend;
  p->compile_options = &f->compile;
  if (f->test) {
    p->kind = MIN_CHECK_COMMAND;
    p->command = f->test;
    p->command_nonzero = f->test_nonzero != NULL;
  } else {
    p->kind = strcmp(f->check, "accuracy") == 0 ? MIN_CHECK_ACCURACY : MIN_CHECK_COMPILE;
  }
  return CLI_OK;
}

/* DIR/culprit.txt: -o DIR, else FILE's directory when FILE is a repro's repro.hlo. */
static void write_culprit(const bisect_flags *f, const char *text) {
  char dir[4096] = "";
  if (f->out) snprintf(dir, sizeof dir, "%s", f->out);
  else {
    const char *slash = strrchr(f->file, '/');
    const char *base = slash ? slash + 1 : f->file;
    if (strcmp(base, "repro.hlo") == 0) snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - f->file) : 1, slash ? f->file : ".");
  }
  if (!dir[0]) return;
  char path[4200];
  snprintf(path, sizeof path, "%s/culprit.txt", dir);
  FILE *out = fopen(path, "w");
  if (!out || fputs(text, out) < 0 || fclose(out) != 0) cli_error("bisect: cannot write %s: %s", path, strerror(errno));
  else fprintf(stderr, "latch: wrote %s\n", path);
}

int cmd_bisect(int argc, char **argv) {
  bisect_flags f;
  min_bisect_request r;
  uint64_t seed = 0;
  int status = parse_options(argc, argv, &f, &r, &seed);
  if (status != CLI_OK || f.help) {
    if (f.help && status == CLI_OK) cmd_bisect_usage();
    return status;
  }
  cli_kill_checks_on_signal();
  hlo_module *module = NULL;
  status = cmd_run_load_module(f.file, &module);
  rt_value **inputs = NULL;
  char work_dir[] = "/tmp/latch-bisect-XXXXXX";
  bool made_dir = false;
  if (status == CLI_OK) {
    inputs = calloc((size_t)module->entry->param_count + 1, sizeof *inputs);
    if (!inputs) status = CLI_INTERNAL;
    else if (r.predicate.kind == MIN_CHECK_ACCURACY || r.predicate.kind == MIN_CHECK_COMMAND)
      status = cmd_run_make_inputs(f.inputs, seed, module->entry, inputs);
  }
  if (status == CLI_OK && r.predicate.kind == MIN_CHECK_COMMAND) {
    made_dir = mkdtemp(work_dir) != NULL;
    if (!made_dir) status = CLI_INTERNAL;
    r.predicate.work_dir = work_dir;
  }
  if (status == CLI_OK) {
    r.module = module;
    r.inputs = inputs;
    r.input_count = module->entry->param_count;
    min_bisect_result result;
    hlo_diag diag;
    hlo_diag_clear(&diag);
    if (min_bisect(&r, &result, &diag) != HLO_OK) status = cli_fail(&diag);
    else {
      char text[2048];
      min_bisect_text(&result, text, sizeof text);
      fputs(text, stdout);
      write_culprit(&f, text);
    }
  }
  if (made_dir) {
    char command[256];
    snprintf(command, sizeof command, "rm -rf '%s'", work_dir);
    if (system(command) != 0) cli_error("bisect: could not remove %s", work_dir);
  }
  for (int i = 0; inputs && module && i < module->entry->param_count; i++) rt_value_release(inputs[i]);
  free(inputs);
  hlo_module_free(module);
  return status;
}
