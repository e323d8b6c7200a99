/* The command says what happened, no more and no less: bench's JSON stays
 * JSON when outputs are non-finite and does not call a failed model finite; the table's
 * compiles column counts the traced modes and the help names the real default modes;
 * repro.sh runs a relative --test command from where minify ran, and says "cannot run"
 * (125) without a latch binary; `cache verify --fix` counts only what it removed; a
 * directory is an input error; each module of a multi-module file is reported on its own,
 * verifier errors with FILE:LINE:COL; minify and run --check check the cpu backend. */
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_util.h"
#include "json_util.h"
#include "runtime/runtime.h"
#include "test.h"

/* y = cos(x) * 2 + 1: the cosine is the culprit the faults and the --test script pick. */
static const char *const cosine_module =
    "HloModule c\n"
    "ENTRY e {\n"
    "  x = f32[4] parameter(0)\n"
    "  c = f32[4] cosine(x)\n"
    "  two = f32[] constant(2)\n"
    "  b = f32[4] broadcast(two), dimensions={}\n"
    "  m = f32[4] multiply(c, b)\n"
    "  ROOT a = f32[4] add(m, b)\n"
    "}\n";

static void write_f32(const char *path, int rank, const int64_t *dims, float value) {
  rt_value *v = rt_value_new_array(HLO_F32, rank, dims);
  int64_t n = 1;
  for (int i = 0; i < rank; i++) n *= dims[i];
  for (int64_t i = 0; i < n; i++) ((float *)v->data)[i] = value;
  hlo_diag diag = {0};
  CHECK_MSG(rt_npy_write(path, v, &diag) == HLO_OK, "%s", diag.message);
  rt_value_release(v);
}

/* An mlp whose input is all NaN: every output is NaN, and so is every difference. */
static void bench_json_nonfinite(void) {
  write_f32(cli_path("nan.npy"), 2, (int64_t[]){2, 784}, NAN);
  CLI_CHECK(3, "LATCH_CACHE=memory", "bench --model mlp --mode eager,every --batch 2 --repeat 1 --warmup 1 --input %s --json %s",
            cli_path("nan.npy"), cli_path("nan.json"));
  json_doc doc;
  CHECK_MSG(json_load(&doc, cli_path("nan.json")), "not JSON: %s", doc.error);
  CHECK(json_literal_is(&doc, "models.0.finite", "false"));
  CHECK(json_literal_is(&doc, "models.0.error", "null"));
  CHECK(json_literal_is(&doc, "models.0.modes.every.max_abs_diff", "null"));
  CHECK(json_literal_is(&doc, "models.0.modes.every.max_rel_diff", "null"));
  CHECK(json_number(&doc, "models.0.modes.every.median_ms") != NULL);
  json_free(&doc);
}

/* A model that fails (an input of the wrong shape) has no outputs: finite is null. */
static void bench_json_failed_model(void) {
  write_f32(cli_path("small.npy"), 2, (int64_t[]){2, 5}, 1);
  int status = cli_run("LATCH_CACHE=memory", "bench --model mlp --mode every --batch 2 --repeat 1 --warmup 1 --input %s --json %s",
                       cli_path("small.npy"), cli_path("failed.json"));
  CHECK_MSG(status != 0, "a failed model exits 0: %s", cli_err);
  json_doc doc;
  CHECK_MSG(json_load(&doc, cli_path("failed.json")), "not JSON: %s", doc.error);
  CHECK(json_literal_is(&doc, "models.0.finite", "null"));
  CHECK(!json_literal_is(&doc, "models.0.error", "null")); /* a string: the message */
  json_free(&doc);
}

/* The row's compiles are every's and once's: "-/1" when only eager and once ran (the mlp step
 * is one graph, compiled once by the traced function). Without --mode all three modes run,
 * as the help says. */
static void bench_compiles_and_default_modes(void) {
  CLI_CHECK(0, "LATCH_CACHE=memory", "bench --model mlp --mode eager,once --batch 2 --repeat 1 --warmup 1");
  const char *row = strstr(cli_out, "\nmlp ");
  CHECK_MSG(row && strstr(row, " -/1 "), "no '-/1' in the mlp row: %s", cli_out);
  CLI_HAS(cli_out, "comp e/o");
  CLI_CHECK(0, "", "bench --help");
  CLI_HAS(cli_out, "default eager,every,once");
  CLI_CHECK(0, "LATCH_CACHE=memory", "bench --model mlp --batch 2 --repeat 1 --warmup 1 --json %s", cli_path("modes.json"));
  json_doc doc;
  CHECK_MSG(json_load(&doc, cli_path("modes.json")), "not JSON: %s", doc.error);
  CHECK(json_number(&doc, "models.0.modes.eager.median_ms") != NULL);
  CHECK(json_number(&doc, "models.0.modes.every.median_ms") != NULL);
  CHECK(json_number(&doc, "models.0.modes.once.median_ms") != NULL);
  CHECK(json_number(&doc, "models.0.modes.once.function.guard_timed") != NULL);
  json_free(&doc);
  row = strstr(cli_out, "\nmlp ");
  /* each mode has a runtime and an in-memory cache of its own: each compiles the one graph */
  CHECK_MSG(row && strstr(row, " 1/1 "), "no '1/1' in the mlp row: %s", cli_out);
}

/* minify --test ./t.sh from the module's directory; repro.sh run from elsewhere must still
 * find ./t.sh (it runs where minify ran) and reproduce: exit non-zero. */
static void repro_relative_test_command(void) {
  cli_write_text(cli_path("c.hlo"), cosine_module);
  cli_write_text(cli_path("t.sh"), "#!/bin/sh\ngrep -q 'cosine(' \"$1\"\n");
  chmod(cli_path("t.sh"), 0755);
  char env[600];
  snprintf(env, sizeof env, "cd '%s' &&", cli_dir);
  CLI_CHECK(0, env, "minify c.hlo --test ./t.sh -o rel --quiet");
  CHECK_EQ_INT(cli_sh("cd / && sh '%s/rel/repro.sh' >/dev/null 2>&1", cli_dir), 1);
  /* and it does not reproduce once the script says the failure is gone */
  cli_write_text(cli_path("t.sh"), "#!/bin/sh\nexit 1\n");
  CHECK_EQ_INT(cli_sh("cd / && sh '%s/rel/repro.sh' >/dev/null 2>&1", cli_dir), 0);
}

/* A repro whose latch binary is gone exits 125 ("cannot run"), not 2 (the status of the
 * compile failure it reproduces). */
static void repro_without_binary(void) {
  cli_write_text(cli_path("c.hlo"), cosine_module);
  CHECK_EQ_INT(cli_sh("cp '%s' '%s'", cli_bin, cli_path("latch-copy")), 0);
  CHECK_EQ_INT(cli_sh("cd '%s' && LATCH_FAULT=compile:cosine ./latch-copy minify c.hlo --check compile -o nobin --quiet "
                      ">/dev/null 2>&1", cli_dir), 0);
  unlink(cli_path("latch-copy"));
  CHECK_EQ_INT(cli_sh("env -i PATH=/usr/bin:/bin sh '%s/nobin/repro.sh' >/dev/null 2>&1", cli_dir), 125);
  CHECK_EQ_INT(cli_sh("LATCH_FAULT=compile:cosine LATCH_BIN='%s' sh '%s/nobin/repro.sh' >/dev/null 2>&1", cli_bin, cli_dir), 2);
  CHECK_EQ_INT(cli_sh("env -u LATCH_FAULT LATCH_BIN='%s' sh '%s/nobin/repro.sh' >/dev/null 2>&1", cli_bin, cli_dir), 0);
}

/* `cache verify --fix` on a read-only filesystem: the damaged entry is reported and stays,
 * and nothing is said to be removed. Needs a private mount namespace (skipped, with a note,
 * where it cannot be made); runs in a child so the mounts never leak. */
static int read_only_child(const char *dir) {
  if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) return 77;
  if (mount("tmpfs", dir, "tmpfs", 0, "size=64k") != 0) return 77;
  char entry[600];
  snprintf(entry, sizeof entry, "%s/0123456789abcdef0123456789abcdef.latch", dir);
  cli_write_text(entry, "not an entry");
  if (mount(NULL, dir, NULL, MS_REMOUNT | MS_RDONLY, "size=64k") != 0) return 77;
  int status = cli_run("", "cache verify --fix --dir '%s'", dir);
  bool ok = status == 1 && strstr(cli_out, "1 bad, 0 removed, 1 could not be removed (Read-only file system)") &&
            access(entry, F_OK) == 0;
  if (!ok) fprintf(stderr, "verify --fix: exit %d: %s%s\n", status, cli_out, cli_err);
  return ok ? 0 : 1;
}

static void cache_verify_fix_read_only(void) {
  const char *dir = cli_path("ro");
  mkdir(dir, 0700);
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) _exit(read_only_child(dir));
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 77) printf("note: no private mount namespace here; skipped\n");
  else CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
}

static void directory_is_an_input_error(void) {
  CLI_CHECK(1, "", "parse '%s'", cli_dir);
  CLI_HAS(cli_err, "is a directory");
  CLI_CHECK(1, "", "run '%s'", cli_dir);
  CLI_HAS(cli_err, "is a directory");
}

/* Module b has a syntax error on line 11, module c a shape the verifier refuses (line 16,
 * column 3: where "r" starts); module a is still parsed and summarized. */
static void multi_module_errors_each_their_own(void) {
  cli_write_text(cli_path("multi.hlo"),
                 "HloModule a\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT r = f32[2] add(p, p)\n}\n"
                 "// -----\n"
                 "HloModule b\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT r = f32[2] add(p, p\n}\n"
                 "// -----\n"
                 "HloModule c\nENTRY e {\n  p = f32[2] parameter(0)\n  r = f32[3] add(p, p)\n  ROOT t = (f32[3]) tuple(r)\n}\n");
  CLI_CHECK(1, "", "parse '%s'", cli_path("multi.hlo"));
  CLI_HAS(cli_out, "3 modules");
  CLI_HAS(cli_out, "module a: 1 computation (entry e), 2 instructions");
  CLI_HAS(cli_err, "multi.hlo:11:1: error:");
  CLI_HAS(cli_err, "multi.hlo:16:3: error: computation e: add %r: declared shape f32[3]");
}

/* Without --backend the check is of the cpu backend, not the reference against itself. */
static void checks_default_to_cpu(void) {
  cli_write_text(cli_path("c.hlo"), cosine_module);
  CLI_CHECK(0, "", "run '%s' --check compile", cli_path("c.hlo"));
  CLI_HAS(cli_out, "on the cpu backend");
  CLI_CHECK(0, "LATCH_FAULT=compile:cosine", "minify '%s' --check compile -o '%s' --quiet", cli_path("c.hlo"),
            cli_path("cpu-repro"));
  char report[4096];
  cli_read_text(cli_path("cpu-repro/report.txt"), report, sizeof report);
  CLI_HAS(report, "check:      compile on backend cpu");
  char script[4096];
  cli_read_text(cli_path("cpu-repro/repro.sh"), script, sizeof script);
  CLI_HAS(script, "--backend 'cpu'");
}

int main(void) {
  if (!cli_setup()) return 1;
  RUN(bench_json_nonfinite);
  RUN(bench_json_failed_model);
  RUN(bench_compiles_and_default_modes);
  RUN(repro_relative_test_command);
  RUN(repro_without_binary);
  RUN(cache_verify_fix_read_only);
  RUN(directory_is_an_input_error);
  RUN(multi_module_errors_each_their_own);
  RUN(checks_default_to_cpu);
  cli_cleanup();
  return TEST_REPORT();
}
