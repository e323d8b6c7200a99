/* The latch command, run as a user runs it: exit codes, messages, and numbers that come
 * back through .npy files. The binary is $LATCH_BIN, else $BUILD/latch, else build/latch;
 * the corpus is $LATCH_CORPUS, else ../shared/corpus/xla (tests run from the repo root). */
#include <dirent.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/runtime.h"
#include "test.h"
#include "cli_util.h"

static const char *corpus;

static void write_array(const char *path, hlo_dtype dtype, int rank, const int64_t *dims, const double *elements) {
  rt_value *value = rt_value_new_array(dtype, rank, dims);
  for (int64_t i = 0; i < value->count; i++) rt_set_f64(value, i, elements[i]);
  hlo_diag diag;
  hlo_diag_clear(&diag);
  CHECK_MSG(rt_npy_write(path, value, &diag) == HLO_OK, "%s", diag.message);
  rt_value_release(value);
}

/* Reads an output .npy and compares it with want, exactly. */
static void check_array(const char *path, hlo_dtype dtype, int64_t count, const double *want) {
  hlo_diag diag;
  hlo_diag_clear(&diag);
  rt_value *value = rt_npy_read(path, &diag);
  CHECK_MSG(value != NULL, "%s", diag.message);
  if (!value) return;
  CHECK_MSG(value->shape.dtype == dtype, "%s holds %s", path, hlo_dtype_name(value->shape.dtype));
  CHECK_EQ_INT(value->count, count);
  for (int64_t i = 0; i < count && i < value->count; i++) CHECK_NEAR(rt_get_f64(value, i), want[i], 0);
  rt_value_release(value);
}

static void help_and_usage(void) {
  CLI_CHECK(0, "", "--help");
  CLI_HAS(cli_out, "usage: latch COMMAND");
  CLI_HAS(cli_out, "run FILE");
  CLI_CHECK(0, "", "run --help");
  CLI_HAS(cli_out, "--inputs DIR");
  CLI_CHECK(0, "", "parse --help");
  CLI_HAS(cli_out, "--print");
  CLI_CHECK(0, "", "help run");
  CLI_HAS(cli_out, "--seed");
  CLI_CHECK(1, "", "%s", "");
  CLI_CHECK(1, "", "frobnicate");
  CLI_HAS(cli_err, "unknown command");
  CLI_CHECK(1, "", "parse");
  CLI_CHECK(1, "", "run");
  CLI_CHECK(1, "", "run %s/add.hlo --no-such-flag", corpus);
  CLI_HAS(cli_err, "--no-such-flag");
  CLI_CHECK(1, "", "run %s/add.hlo --seed", corpus);
  CLI_CHECK(1, "", "run %s/add.hlo --seed banana", corpus);
  CLI_CHECK(1, "", "run %s/add.hlo --backend tpu", corpus);
  CLI_HAS(cli_err, "reference");
  CLI_CHECK(1, "", "run %s/add.hlo %s/add.hlo", corpus, corpus);
}

static void parses_whole_corpus(void) {
  DIR *dir = opendir(corpus);
  CHECK_MSG(dir != NULL, "cannot open the corpus %s (set LATCH_CORPUS)", corpus);
  if (!dir) return;
  int files = 0;
  struct dirent *entry;
  while ((entry = readdir(dir))) {
    size_t len = strlen(entry->d_name);
    if (len < 5 || strcmp(entry->d_name + len - 4, ".hlo") != 0) continue;
    files++;
    CLI_CHECK(0, "", "parse '%s/%s'", corpus, entry->d_name);
    CLI_HAS(cli_out, "parsed in");
    CLI_HAS(cli_out, "instruction");
  }
  closedir(dir);
  CHECK_MSG(files >= 16, "only %d corpus files in %s", files, corpus);

  CLI_CHECK(0, "", "parse %s/add.hlo", corpus);
  CLI_HAS(cli_out, "module f: 1 computation (entry f), 2 instructions");
  CLI_HAS(cli_out, "1  add");
  /* --print sends the text to stdout, and that text parses again */
  CLI_CHECK(0, "", "parse %s/large_constant.hlo --print", corpus);
  CLI_HAS(cli_out, "HloModule");
  CLI_HAS(cli_err, "5 instructions");
  cli_write_text(cli_path("printed.hlo"), cli_out);
  CLI_CHECK(0, "", "parse %s", cli_path("printed.hlo"));
  CLI_HAS(cli_out, "5 instructions");
}

static void multi_module_files(void) {
  cli_write_text(cli_path("two.hlo"),
             "HloModule first\n"
             "ENTRY e {\n  ROOT p = f32[] parameter(0)\n}\n"
             "// -----\n"
             "HloModule second\n"
             "ENTRY e {\n  p = s32[2] parameter(0)\n  ROOT n = s32[2] negate(p)\n}\n");
  CLI_CHECK(0, "", "parse %s", cli_path("two.hlo"));
  CLI_HAS(cli_out, "2 modules");
  CLI_HAS(cli_out, "module first: 1 computation (entry e), 1 instruction\n");
  CLI_HAS(cli_out, "module second: 1 computation (entry e), 2 instructions");
  /* printed back, the modules stay separated and parse again */
  CLI_CHECK(0, "", "parse %s --print", cli_path("two.hlo"));
  CLI_HAS(cli_out, "// -----");
  cli_write_text(cli_path("two_printed.hlo"), cli_out);
  CLI_CHECK(0, "", "parse %s", cli_path("two_printed.hlo"));
  CLI_HAS(cli_out, "2 modules");
  CLI_CHECK(1, "", "run %s", cli_path("two.hlo"));
  CLI_HAS(cli_err, "2 modules");
}

static void runs_add_on_given_inputs(void) {
  mkdir(cli_path("in"), 0777);
  const double p0[4] = {1, 2.5, -3, 4};
  write_array(cli_path("in/0.npy"), HLO_F32, 2, (int64_t[]){2, 2}, p0);
  CLI_CHECK(0, "", "run %s/add.hlo --inputs %s --output %s", corpus, cli_path("in"), cli_path("out"));
  const double sum[4] = {2, 5, -6, 8};
  check_array(cli_path("out/0.npy"), HLO_F32, 4, sum);
  CLI_HAS(cli_out, "output 0: f32[2,2] sum=9 abs_sum=21");
  CLI_HAS(cli_out, "values: 2 5 -6 8");
  CLI_HAS(cli_out, "ran in");

  /* fp64 computes and writes f64 */
  CLI_CHECK(0, "", "run %s/add.hlo --inputs=%s --output=%s --fp64", corpus, cli_path("in"), cli_path("out64"));
  check_array(cli_path("out64/0.npy"), HLO_F64, 4, sum);

  /* s32 with constants: y = p0 * c1 + c2, c1 = 0..11 */
  const double ints[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  mkdir(cli_path("in_s32"), 0777);
  write_array(cli_path("in_s32/0.npy"), HLO_S32, 1, (int64_t[]){12}, ints);
  CLI_CHECK(0, "", "run %s/large_constant.hlo --inputs %s --output %s", corpus, cli_path("in_s32"), cli_path("out_s32"));
  const double c2[12] = {10, 6, 3, 2, 5, 3, 7, 4, 2, 3, 1, 0};
  double y[12];
  for (int i = 0; i < 12; i++) y[i] = ints[i] * i + c2[i];
  check_array(cli_path("out_s32/0.npy"), HLO_S32, 12, y);
}

static void random_inputs_are_seeded(void) {
  CLI_CHECK(0, "", "run %s/add.hlo", corpus);
  char first[4096];
  const char *line = strstr(cli_out, "output 0:");
  snprintf(first, sizeof first, "%.*s", line ? (int)strcspn(line, "\n") : 0, line ? line : "");
  CLI_HAS(cli_out, "seed 0");
  CLI_CHECK(0, "", "run %s/add.hlo --seed 0", corpus);
  CLI_HAS(cli_out, first);
  CLI_CHECK(0, "", "run %s/add.hlo --seed 12345", corpus);
  CHECK_MSG(strstr(cli_out, first) == NULL, "seed 12345 gave the same output as seed 0: %s", first);
  /* the checksum is pinned: random inputs are the same on every machine */
  CLI_CHECK(0, "", "run %s/add.hlo --seed 3", corpus);
  CLI_HAS(cli_out, "fnv1a=efd36e6912f597dc");
}

static void flattens_tuples_and_notes_elided_constants(void) {
  cli_write_text(cli_path("tuple.hlo"),
             "HloModule t\n"
             "ENTRY e {\n"
             "  p = f32[2] parameter(0)\n"
             "  n = f32[2] negate(p)\n"
             "  c = f32[2] constant({...})\n"
             "  inner = (f32[2], f32[2]) tuple(p, c)\n"
             "  ROOT t = (f32[2], (f32[2], f32[2])) tuple(n, inner)\n"
             "}\n");
  mkdir(cli_path("in_t"), 0777);
  const double p[2] = {1.5, -2};
  write_array(cli_path("in_t/0.npy"), HLO_F32, 1, (int64_t[]){2}, p);
  CLI_CHECK(0, "", "run %s --inputs %s --output %s", cli_path("tuple.hlo"), cli_path("in_t"), cli_path("out_t"));
  CLI_HAS(cli_err, "note: 1 elided constant was filled deterministically");
  const double negated[2] = {-1.5, 2};
  check_array(cli_path("out_t/0.npy"), HLO_F32, 2, negated);
  check_array(cli_path("out_t/1.npy"), HLO_F32, 2, p);
  CHECK(access(cli_path("out_t/2.npy"), F_OK) == 0);
  CHECK(access(cli_path("out_t/3.npy"), F_OK) != 0);
  CLI_HAS(cli_out, "output 2: f32[2]");
  /* a tuple parameter is filled element by element */
  CLI_CHECK(0, "", "run %s/single_device_tupled.hlo", corpus);
  CLI_HAS(cli_out, "output 0: f32[2,2]");
}

static void bf16_goes_through_f32_files(void) {
  cli_write_text(cli_path("bf16.hlo"),
             "HloModule b\n"
             "ENTRY e {\n"
             "  p = bf16[2] parameter(0)\n"
             "  ROOT r = bf16[2] add(p, p)\n"
             "}\n");
  mkdir(cli_path("in_bf"), 0777);
  /* 3 + 2^-7 is a tie between bf16 neighbours 3 and 3 + 2^-6: rounds to even, 3 */
  const double p[2] = {1.5, 3.0078125};
  write_array(cli_path("in_bf/0.npy"), HLO_F32, 1, (int64_t[]){2}, p);
  CLI_CHECK(0, "", "run %s --inputs %s --output %s", cli_path("bf16.hlo"), cli_path("in_bf"), cli_path("out_bf"));
  CLI_HAS(cli_err, "written as f32");
  const double doubled[2] = {3, 6};
  check_array(cli_path("out_bf/0.npy"), HLO_F32, 2, doubled);
}

static void input_errors_exit_1(void) {
  /* malformed text: FILE:LINE:COL: error: */
  cli_write_text(cli_path("bad.hlo"),
             "HloModule m\n"
             "ENTRY e {\n"
             "  p = f32[2] parameter(0)\n"
             "  ROOT r = f32[2] add(p, \n"
             "}\n");
  char where[600];
  snprintf(where, sizeof where, "%s:", cli_path("bad.hlo"));
  CLI_CHECK(1, "", "parse %s", cli_path("bad.hlo"));
  CLI_HAS(cli_err, "error:");
  CLI_HAS(cli_err, where);
  const char *after = strstr(cli_err, where);
  int line = 0, column = 0;
  CHECK_MSG(after && sscanf(after + strlen(where), "%d:%d:", &line, &column) == 2 && line >= 4 && column >= 1,
            "no LINE:COL after the file name in: %s", cli_err);
  CLI_CHECK(1, "", "run %s", cli_path("bad.hlo"));
  CLI_HAS(cli_err, "error:");
  /* one bad file among good ones: the others are still reported */
  CLI_CHECK(1, "", "parse %s %s/add.hlo", cli_path("bad.hlo"), corpus);
  CLI_HAS(cli_out, "add.hlo: 1 module");

  CLI_CHECK(1, "", "parse %s", cli_path("no-such-file.hlo"));
  CLI_HAS(cli_err, "no-such-file.hlo");
  CLI_CHECK(1, "", "run %s", cli_path("no-such-file.hlo"));

  /* missing and mismatched inputs */
  mkdir(cli_path("empty"), 0777);
  CLI_CHECK(1, "", "run %s/add.hlo --inputs %s", corpus, cli_path("empty"));
  CLI_HAS(cli_err, "parameter 0");
  CLI_HAS(cli_err, "0.npy");
  mkdir(cli_path("wrong"), 0777);
  const double three[4] = {1, 2, 3, 4};
  write_array(cli_path("wrong/0.npy"), HLO_F32, 1, (int64_t[]){3}, three);
  CLI_CHECK(1, "", "run %s/add.hlo --inputs %s", corpus, cli_path("wrong"));
  CLI_HAS(cli_err, "f32[2,2]");
  CLI_HAS(cli_err, "f32[3]");
  write_array(cli_path("wrong/0.npy"), HLO_S32, 2, (int64_t[]){2, 2}, three);
  CLI_CHECK(1, "", "run %s/add.hlo --inputs %s", corpus, cli_path("wrong"));
  CLI_HAS(cli_err, "s32[2,2]");
  cli_write_text(cli_path("wrong/0.npy"), "not numpy at all");
  CLI_CHECK(1, "", "run %s/add.hlo --inputs %s", corpus, cli_path("wrong"));
  CLI_HAS(cli_err, "not a .npy file");
}

static void unsupported_features_exit_2(void) {
  cli_write_text(cli_path("custom.hlo"),
             "HloModule c\n"
             "ENTRY e {\n"
             "  p = f32[2] parameter(0)\n"
             "  ROOT r = f32[2] custom-call(p), custom_call_target=\"my_kernel\"\n"
             "}\n");
  CLI_CHECK(2, "", "run %s", cli_path("custom.hlo"));
  CLI_HAS(cli_err, "custom-call");
  cli_write_text(cli_path("complex.hlo"),
             "HloModule c\n"
             "ENTRY e {\n"
             "  p = c64[2] parameter(0)\n"
             "  ROOT r = c64[2] negate(p)\n"
             "}\n");
  CLI_CHECK(2, "", "run %s", cli_path("complex.hlo"));
  CLI_HAS(cli_err, "c64");
}

int main(void) {
  corpus = getenv("LATCH_CORPUS") ? getenv("LATCH_CORPUS") : "../shared/corpus/xla";
  if (!cli_setup()) {
    perror("mkdtemp");
    return 1;
  }
  CHECK_MSG(access(cli_bin, X_OK) == 0, "no latch binary at %s", cli_bin);
  RUN(help_and_usage);
  RUN(parses_whole_corpus);
  RUN(multi_module_files);
  RUN(runs_add_on_given_inputs);
  RUN(random_inputs_are_seeded);
  RUN(flattens_tuples_and_notes_elided_constants);
  RUN(bf16_goes_through_f32_files);
  RUN(input_errors_exit_1);
  RUN(unsupported_features_exit_2);
  cli_cleanup();
  return TEST_REPORT();
}
