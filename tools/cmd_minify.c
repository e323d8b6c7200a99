/* latch minify: shrinks a module that fails a check to a small repro directory. */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "minify/minify.h"
#include "runtime/runtime.h"
#include "capture/capture.h"

void cmd_minify_usage(void) {
  fputs("usage: latch minify FILE [--inputs DIR | --seed N]\n"
        "                    (--check compile|accuracy [--backend NAME] [--tol X] | --test CMD [--test-nonzero])\n"
        "                    [-o DIR] [--timeout S] [--max-checks N] [--rechecks N] [--quiet]\n"
        "                    [--single-file] [--max-bytes N] [--keep-shapes] [--any-failure]\n"
        "\n"
        "Shrinks the HLO module in FILE, which fails a check, to a small module that fails the\n"
        "same way, and writes a repro directory:\n"
        "  repro.hlo    the small module, as HLO text XLA's tools read\n"
        "  inputs/      its inputs as I.npy, promoted intermediate values included\n"
        "  repro.sh     one command that exits non-zero exactly when the failure reproduces\n"
        "               (125 when it cannot run: no latch binary)\n"
        "  report.txt   sizes before and after, strategies that worked, checks, time\n"
        "\n"
        "The whole module is checked first and must fail; how it fails is the failure every\n"
        "candidate must keep: the kind (compile error, crash, hang, accuracy); for a compile\n"
        "error or crash the op and the kind of message; for an accuracy failure the output that\n"
        "fails, narrowed to the first op whose value differs (report.txt names it). A candidate\n"
        "that fails another way (a crash while checking accuracy, another output) is no repro.\n"
        "\n"
        "Checks (each candidate runs in a child process, so a crash or hang of the backend is\n"
        "a way of failing, not the end of the minifier):\n"
        "  --check compile   the backend's compile fails: same error kind on the same op, or the\n"
        "                    same crash signal, or a hang\n"
        "  --check accuracy  the outputs fail the accuracy check against the fp64 reference\n"
        "                    (see 'latch run --help'); --tol X sets its tolerance (0.001)\n"
        "  --backend NAME    the backend to check (default cpu)\n"
        "  --test CMD        an external test: run as 'CMD CANDIDATE.hlo' through sh, with\n"
        "                    LATCH_MINIFY_INPUTS naming the candidate's inputs directory; exit 0\n"
        "                    means still failing (as llvm-reduce); --test-nonzero flips that (a\n"
        "                    non-zero exit means failing, as XLA's hlo_bisect --script)\n"
        "\n"
        "  --inputs DIR      parameter I from DIR/I.npy; otherwise from --seed N (default 0),\n"
        "                    as 'latch run' makes them\n"
        "  -o DIR            the repro directory (default ./latch-repro; created)\n"
        "  --timeout S       seconds a check may take before it counts as a hang (default 30)\n"
        "  --max-checks N    stop shrinking after N checks (default: no limit)\n"
        "  --rechecks N      times the final repro is checked again for flakiness (default 3)\n"
        "  --quiet           no progress (otherwise one line per check on stderr; on a terminal\n"
        "                    one line rewritten in place: checks, size, input bytes, time)\n"
        "  --single-file     inputs embedded in repro.hlo as constants: one text file replays\n"
        "                    the failure (latch run repro.hlo --check ...) and XLA's tools read it\n"
        "  --max-bytes N     input bytes a repro may hold (default $LATCH_REPRO_MAX_BYTES, else\n"
        "                    64 MiB); inputs past it are left out, the report says which, and the\n"
        "                    repro runs on seeded inputs\n"
        "  --keep-shapes     keep the ops' shapes and data (otherwise, after the ops are cut, dims\n"
        "                    shrink and inputs become broadcast constants while the inputs exceed\n"
        "                    64 KB and the failure stays the same)\n"
        "  --any-failure     a candidate counts when it fails in any way, not only the module's\n"
        "\n"
        "Exit status: 0 a repro was written (a flaky one too, with a warning), 1 usage or input\n"
        "error or the module does not fail the check, 2 unsupported, 3 internal error.\n"
        "\n"
        "examples:\n"
        "  latch minify model.hlo --check compile --backend cpu -o repro/\n"
        "  latch minify model.hlo --inputs in/ --check accuracy --timeout 60\n"
        "  latch minify model.hlo --test ./still_broken.sh\n",
        stdout);
}

typedef struct minify_flags {
  const char *file, *inputs, *seed, *check, *backend, *tol, *test, *test_nonzero, *out, *timeout, *max_checks,
      *rechecks, *quiet, *help, *single_file, *max_bytes, *keep_shapes, *any_failure;
  rt_compile_options compile; /* from the environment, as latch_open would take them */
} minify_flags;

static int parse_options(int argc, char **argv, minify_flags *f, min_options *o, uint64_t *seed) {
  memset(f, 0, sizeof *f);
  const cli_flag flags[] = {
      {"--help", false, &f->help},        {"--inputs", true, &f->inputs},   {"--seed", true, &f->seed},
      {"--check", true, &f->check},       {"--backend", true, &f->backend}, {"--tol", true, &f->tol},
      {"--test", true, &f->test},         {"--test-nonzero", false, &f->test_nonzero},
      {"-o", true, &f->out},              {"--output", true, &f->out},      {"--timeout", true, &f->timeout},
      {"--max-checks", true, &f->max_checks}, {"--rechecks", true, &f->rechecks}, {"--quiet", false, &f->quiet},
      {"--single-file", false, &f->single_file}, {"--max-bytes", true, &f->max_bytes},
      {"--keep-shapes", false, &f->keep_shapes}, {"--any-failure", false, &f->any_failure},
  };
  const char *files[1];
  int file_count = 0;
  int status = cli_parse_flags("minify", argc, argv, flags, (int)(sizeof flags / sizeof flags[0]), files, &file_count, 1);
  if (status != CLI_OK || f->help) return status;
  status = cli_check_target("minify", file_count, f->check, f->test);
  if (status != CLI_OK) return status;
  f->file = files[0];
  if (f->test && (f->backend || f->tol)) {
    cli_error("minify: --backend and --tol belong to --check; the --test command decides alone");
    return CLI_USAGE;
  }
  if (f->test_nonzero && !f->test) {
    cli_error("minify: --test-nonzero goes with --test");
    return CLI_USAGE;
  }
  if (f->inputs && f->seed) {
    cli_error("minify: --seed makes random inputs; it cannot be combined with --inputs");
    return CLI_USAGE;
  }
  double number;
  memset(o, 0, sizeof *o);
  min_predicate *p = &o->predicate;
  p->timeout_s = 30;
  p->tol = RT_ACCURACY_DEFAULT_TOL;
  if (f->timeout && !cli_parse_number("minify", "--timeout", f->timeout, 0.001, &p->timeout_s)) return CLI_USAGE;
  if (f->tol && !cli_parse_number("minify", "--tol", f->tol, 0, &p->tol)) return CLI_USAGE;
  if (f->max_checks) {
    if (!cli_parse_number("minify", "--max-checks", f->max_checks, 1, &number)) return CLI_USAGE;
    o->max_checks = (int)number;
  }
  if (f->rechecks) {
    if (!cli_parse_number("minify", "--rechecks", f->rechecks, 1, &number)) return CLI_USAGE;
    o->rechecks = (int)number;
  }
  *seed = 0;
  if (f->seed) {
    if (!cli_parse_number("minify", "--seed", f->seed, 0, &number)) return CLI_USAGE;
    *seed = (uint64_t)strtoull(f->seed, NULL, 0);
  }
  if (f->test) {
    p->kind = MIN_CHECK_COMMAND;
    p->command = f->test;
    p->command_nonzero = f->test_nonzero != NULL;
  } else {
    p->kind = strcmp(f->check, "accuracy") == 0 ? MIN_CHECK_ACCURACY : MIN_CHECK_COMPILE;
    /* The reference evaluator is what the check compares with: checking it against itself
     * finds nothing, so the default is the cpu backend. */
    const char *name = f->backend ? f->backend : cap_backend_find("cpu") ? "cpu" : "reference";
    const rt_backend *backend = cap_backend_find(name);
    if (!backend) {
      cli_error("minify: unknown backend '%s'; backends: %s", name, cap_backend_names());
      return CLI_USAGE;
    }
    status = cli_runtime_settings(&f->compile);
    if (status != CLI_OK) return status;
    p->compile_options = &f->compile;
    hlo_diag diag;
    hlo_diag_clear(&diag);
    p->backend = cap_fault_wrap(backend, getenv("LATCH_FAULT"), &diag);
    if (!p->backend) return cli_fail(&diag);
  }
  o->progress = f->quiet ? NULL : stderr;
  o->progress_line = !f->quiet && isatty(STDERR_FILENO);
  o->keep_shapes = f->keep_shapes != NULL;
  o->any_failure = f->any_failure != NULL;
  if (!f->max_bytes) f->max_bytes = getenv("LATCH_REPRO_MAX_BYTES");
  if (f->max_bytes && *f->max_bytes) {
    if (!cli_parse_number("minify", "--max-bytes (or LATCH_REPRO_MAX_BYTES)", f->max_bytes, 1, &number)) return CLI_USAGE;
    if (number < MIN_SMALL_INPUTS_BYTES) o->small_inputs_bytes = number; /* shapes shrink until the inputs fit */
  }
  return CLI_OK;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  remove(path);
  return 0;
}

static int minify(const minify_flags *f, min_options *o, uint64_t seed, hlo_module *module) {
  const hlo_comp *entry = module->entry;
  rt_value **inputs = calloc((size_t)entry->param_count + 1, sizeof(rt_value *));
  if (!inputs) return CLI_INTERNAL;
  /* A compile check never reads input data: none is made, whatever the parameters' sizes. */
  int status = o->predicate.kind == MIN_CHECK_COMPILE ? CLI_OK : cmd_run_make_inputs(f->inputs, seed, entry, inputs);
  char work_dir[] = "/tmp/latch-minify-XXXXXX";
  if (status == CLI_OK && o->predicate.kind == MIN_CHECK_COMMAND) {
    if (!mkdtemp(work_dir)) {
      cli_error("minify: cannot create a work directory: %s", strerror(errno));
      status = CLI_INTERNAL;
    }
    o->predicate.work_dir = work_dir;
  }
  if (status == CLI_OK) {
    hlo_diag diag;
    hlo_diag_clear(&diag);
    min_report report;
    const char *out = f->out ? f->out : "latch-repro";
    hlo_status minified = min_minify(module, inputs, entry->param_count, o, &report, &diag);
    if (minified != HLO_OK) {
      status = cli_fail(&diag);
    } else {
      char latch_bin[PATH_MAX];
      ssize_t len = readlink("/proc/self/exe", latch_bin, sizeof latch_bin - 1);
      latch_bin[len > 0 ? len : 0] = 0;
      min_repro_info info = {.backend = o->predicate.backend ? o->predicate.backend->name : NULL,
                             .latch_bin = len > 0 ? latch_bin : NULL,
                             .source = f->file,
                             .single_file = f->single_file != NULL,
                             .max_bytes = f->max_bytes && *f->max_bytes ? strtod(f->max_bytes, NULL) : 0};
      if (min_write_repro(out, &report, &o->predicate, &info, &diag) != HLO_OK) {
        status = cli_fail(&diag);
      } else {
        printf("repro: %s: %d -> %d instructions (%d -> %d ops), %d checks, %.2f s\n", out, report.instrs_before,
               report.instrs_after, report.ops_before, report.ops_after, report.checks, report.seconds);
        if (report.flaky)
          fprintf(stderr, "latch: warning: the repro is flaky: it failed the same way %d of %d times\n",
                  report.reproduced, report.rechecks);
      }
      min_report_free(&report);
    }
  }
  if (o->predicate.work_dir) nftw(work_dir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
  for (int i = 0; i < entry->param_count; i++) rt_value_release(inputs[i]);
  free(inputs);
  return status;
}

int cmd_minify(int argc, char **argv) {
  minify_flags f;
  min_options o;
  uint64_t seed = 0;
  int status = parse_options(argc, argv, &f, &o, &seed);
  if (status != CLI_OK || f.help) {
    if (f.help && status == CLI_OK) cmd_minify_usage();
    return status;
  }
  cli_kill_checks_on_signal();
  hlo_module *module = NULL;
  status = cmd_run_load_module(f.file, &module);
  if (status == CLI_OK) status = minify(&f, &o, seed, module);
  hlo_module_free(module);
  return status;
}
