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

static char temp_dir[64];
static char bin[512];
static const char *corpus;
static char out_text[1 << 16], err_text[1 << 16];

/* A path in the test's private directory; four can be live at once. */
static const char *temp_path(const char *name) {
  static char paths[4][512];
  static int next;
  char *path = paths[next++ % 4];
  snprintf(path, 512, "%s/%s", temp_dir, name);
  return path;
}

static void read_text(const char *path, char *out, size_t size) {
  FILE *f = fopen(path, "rb");
  size_t len = f ? fread(out, 1, size - 1, f) : 0;
  out[len] = 0;
  if (f) fclose(f);
}

/* Runs `latch ARGS` with stdout and stderr captured in out_text and err_text; returns the
 * exit status, or 128 + signal when it crashed. */
static int latch(const char *format, ...) __attribute__((format(printf, 1, 2)));
static int latch(const char *format, ...) {
  char args[2048], command[4096];
  va_list list;
  va_start(list, format);
  vsnprintf(args, sizeof args, format, list);
  va_end(list);
  snprintf(command, sizeof command, "'%s' %s >'%s' 2>'%s'", bin, args, temp_path("stdout"), temp_path("stderr"));
  int status = system(command);
  read_text(temp_path("stdout"), out_text, sizeof out_text);
  read_text(temp_path("stderr"), err_text, sizeof err_text);
  if (status == -1) return -1;
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

#define CHECK_LATCH(want_status, ...)                                                              \
  do {                                                                                             \
    int got_status_ = latch(__VA_ARGS__);                                                          \
    CHECK_MSG(got_status_ == (want_status), "exit %d, want %d\nstdout: %s\nstderr: %s", got_status_, \
              (want_status), out_text, err_text);                                                  \
  } while (0)

#define CHECK_HAS(text, fragment) CHECK_MSG(strstr((text), (fragment)) != NULL, "no \"%s\" in: %s", (fragment), (text))

static void write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (f) {
    fputs(text, f);
    fclose(f);
  }
}

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
  CHECK_LATCH(0, "--help");
  CHECK_HAS(out_text, "usage: latch COMMAND");
  CHECK_HAS(out_text, "run FILE");
  CHECK_LATCH(0, "run --help");
  CHECK_HAS(out_text, "--inputs DIR");
  CHECK_LATCH(0, "parse --help");
  CHECK_HAS(out_text, "--print");
  CHECK_LATCH(0, "help run");
  CHECK_HAS(out_text, "--seed");
  CHECK_LATCH(1, "%s", "");
  CHECK_LATCH(1, "frobnicate");
  CHECK_HAS(err_text, "unknown command");
  CHECK_LATCH(1, "parse");
  CHECK_LATCH(1, "run");
  CHECK_LATCH(1, "run %s/add.hlo --no-such-flag", corpus);
  CHECK_HAS(err_text, "--no-such-flag");
  CHECK_LATCH(1, "run %s/add.hlo --seed", corpus);
  CHECK_LATCH(1, "run %s/add.hlo --seed banana", corpus);
  CHECK_LATCH(1, "run %s/add.hlo --backend tpu", corpus);
  CHECK_HAS(err_text, "reference");
  CHECK_LATCH(1, "run %s/add.hlo %s/add.hlo", corpus, corpus);
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
    CHECK_LATCH(0, "parse '%s/%s'", corpus, entry->d_name);
    CHECK_HAS(out_text, "parsed in");
    CHECK_HAS(out_text, "instruction");
  }
  closedir(dir);
  CHECK_MSG(files >= 16, "only %d corpus files in %s", files, corpus);

  CHECK_LATCH(0, "parse %s/add.hlo", corpus);
  CHECK_HAS(out_text, "module f: 1 computation (entry f), 2 instructions");
  CHECK_HAS(out_text, "1  add");
  /* --print sends the text to stdout, and that text parses again */
  CHECK_LATCH(0, "parse %s/large_constant.hlo --print", corpus);
  CHECK_HAS(out_text, "HloModule");
  CHECK_HAS(err_text, "5 instructions");
  write_text(temp_path("printed.hlo"), out_text);
  CHECK_LATCH(0, "parse %s", temp_path("printed.hlo"));
  CHECK_HAS(out_text, "5 instructions");
}

static void multi_module_files(void) {
  write_text(temp_path("two.hlo"),
             "HloModule first\n"
             "ENTRY e {\n  ROOT p = f32[] parameter(0)\n}\n"
             "// -----\n"
             "HloModule second\n"
             "ENTRY e {\n  p = s32[2] parameter(0)\n  ROOT n = s32[2] negate(p)\n}\n");
  CHECK_LATCH(0, "parse %s", temp_path("two.hlo"));
  CHECK_HAS(out_text, "2 modules");
  CHECK_HAS(out_text, "module first: 1 computation (entry e), 1 instruction\n");
  CHECK_HAS(out_text, "module second: 1 computation (entry e), 2 instructions");
  /* printed back, the modules stay separated and parse again */
  CHECK_LATCH(0, "parse %s --print", temp_path("two.hlo"));
  CHECK_HAS(out_text, "// -----");
  write_text(temp_path("two_printed.hlo"), out_text);
  CHECK_LATCH(0, "parse %s", temp_path("two_printed.hlo"));
  CHECK_HAS(out_text, "2 modules");
  CHECK_LATCH(1, "run %s", temp_path("two.hlo"));
  CHECK_HAS(err_text, "2 modules");
}

static void runs_add_on_given_inputs(void) {
  mkdir(temp_path("in"), 0777);
  const double p0[4] = {1, 2.5, -3, 4};
  write_array(temp_path("in/0.npy"), HLO_F32, 2, (int64_t[]){2, 2}, p0);
  CHECK_LATCH(0, "run %s/add.hlo --inputs %s --output %s", corpus, temp_path("in"), temp_path("out"));
  const double sum[4] = {2, 5, -6, 8};
  check_array(temp_path("out/0.npy"), HLO_F32, 4, sum);
  CHECK_HAS(out_text, "output 0: f32[2,2] sum=9 abs_sum=21");
  CHECK_HAS(out_text, "values: 2 5 -6 8");
  CHECK_HAS(out_text, "ran in");

  /* fp64 computes and writes f64 */
  CHECK_LATCH(0, "run %s/add.hlo --inputs=%s --output=%s --fp64", corpus, temp_path("in"), temp_path("out64"));
  check_array(temp_path("out64/0.npy"), HLO_F64, 4, sum);

  /* s32 with constants: y = p0 * c1 + c2, c1 = 0..11 */
  const double ints[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  mkdir(temp_path("in_s32"), 0777);
  write_array(temp_path("in_s32/0.npy"), HLO_S32, 1, (int64_t[]){12}, ints);
  CHECK_LATCH(0, "run %s/large_constant.hlo --inputs %s --output %s", corpus, temp_path("in_s32"), temp_path("out_s32"));
  const double c2[12] = {10, 6, 3, 2, 5, 3, 7, 4, 2, 3, 1, 0};
  double y[12];
  for (int i = 0; i < 12; i++) y[i] = ints[i] * i + c2[i];
  check_array(temp_path("out_s32/0.npy"), HLO_S32, 12, y);
}

static void random_inputs_are_seeded(void) {
  CHECK_LATCH(0, "run %s/add.hlo", corpus);
  char first[4096];
  const char *line = strstr(out_text, "output 0:");
  snprintf(first, sizeof first, "%.*s", line ? (int)strcspn(line, "\n") : 0, line ? line : "");
  CHECK_HAS(out_text, "seed 0");
  CHECK_LATCH(0, "run %s/add.hlo --seed 0", corpus);
  CHECK_HAS(out_text, first);
  CHECK_LATCH(0, "run %s/add.hlo --seed 12345", corpus);
  CHECK_MSG(strstr(out_text, first) == NULL, "seed 12345 gave the same output as seed 0: %s", first);
  /* the checksum is pinned: random inputs are the same on every machine */
  CHECK_LATCH(0, "run %s/add.hlo --seed 3", corpus);
  CHECK_HAS(out_text, "fnv1a=efd36e6912f597dc");
}

static void flattens_tuples_and_notes_elided_constants(void) {
  write_text(temp_path("tuple.hlo"),
             "HloModule t\n"
             "ENTRY e {\n"
             "  p = f32[2] parameter(0)\n"
             "  n = f32[2] negate(p)\n"
             "  c = f32[2] constant({...})\n"
             "  inner = (f32[2], f32[2]) tuple(p, c)\n"
             "  ROOT t = (f32[2], (f32[2], f32[2])) tuple(n, inner)\n"
             "}\n");
  mkdir(temp_path("in_t"), 0777);
  const double p[2] = {1.5, -2};
  write_array(temp_path("in_t/0.npy"), HLO_F32, 1, (int64_t[]){2}, p);
  CHECK_LATCH(0, "run %s --inputs %s --output %s", temp_path("tuple.hlo"), temp_path("in_t"), temp_path("out_t"));
  CHECK_HAS(err_text, "note: 1 elided constant was filled deterministically");
  const double negated[2] = {-1.5, 2};
  check_array(temp_path("out_t/0.npy"), HLO_F32, 2, negated);
  check_array(temp_path("out_t/1.npy"), HLO_F32, 2, p);
  CHECK(access(temp_path("out_t/2.npy"), F_OK) == 0);
  CHECK(access(temp_path("out_t/3.npy"), F_OK) != 0);
  CHECK_HAS(out_text, "output 2: f32[2]");
  /* a tuple parameter is filled element by element */
  CHECK_LATCH(0, "run %s/single_device_tupled.hlo", corpus);
  CHECK_HAS(out_text, "output 0: f32[2,2]");
}

static void bf16_goes_through_f32_files(void) {
  write_text(temp_path("bf16.hlo"),
             "HloModule b\n"
             "ENTRY e {\n"
             "  p = bf16[2] parameter(0)\n"
             "  ROOT r = bf16[2] add(p, p)\n"
             "}\n");
  mkdir(temp_path("in_bf"), 0777);
  /* 3 + 2^-7 is a tie between bf16 neighbours 3 and 3 + 2^-6: rounds to even, 3 */
  const double p[2] = {1.5, 3.0078125};
  write_array(temp_path("in_bf/0.npy"), HLO_F32, 1, (int64_t[]){2}, p);
  CHECK_LATCH(0, "run %s --inputs %s --output %s", temp_path("bf16.hlo"), temp_path("in_bf"), temp_path("out_bf"));
  CHECK_HAS(err_text, "written as f32");
  const double doubled[2] = {3, 6};
  check_array(temp_path("out_bf/0.npy"), HLO_F32, 2, doubled);
}

static void input_errors_exit_1(void) {
  /* malformed text: FILE:LINE:COL: error: */
  write_text(temp_path("bad.hlo"),
             "HloModule m\n"
             "ENTRY e {\n"
             "  p = f32[2] parameter(0)\n"
             "  ROOT r = f32[2] add(p, \n"
             "}\n");
  char where[600];
  snprintf(where, sizeof where, "%s:", temp_path("bad.hlo"));
  CHECK_LATCH(1, "parse %s", temp_path("bad.hlo"));
  CHECK_HAS(err_text, "error:");
  CHECK_HAS(err_text, where);
  const char *after = strstr(err_text, where);
  int line = 0, column = 0;
  CHECK_MSG(after && sscanf(after + strlen(where), "%d:%d:", &line, &column) == 2 && line >= 4 && column >= 1,
            "no LINE:COL after the file name in: %s", err_text);
  CHECK_LATCH(1, "run %s", temp_path("bad.hlo"));
  CHECK_HAS(err_text, "error:");
  /* one bad file among good ones: the others are still reported */
  CHECK_LATCH(1, "parse %s %s/add.hlo", temp_path("bad.hlo"), corpus);
  CHECK_HAS(out_text, "add.hlo: 1 module");

  CHECK_LATCH(1, "parse %s", temp_path("no-such-file.hlo"));
  CHECK_HAS(err_text, "no-such-file.hlo");
  CHECK_LATCH(1, "run %s", temp_path("no-such-file.hlo"));

  /* missing and mismatched inputs */
  mkdir(temp_path("empty"), 0777);
  CHECK_LATCH(1, "run %s/add.hlo --inputs %s", corpus, temp_path("empty"));
  CHECK_HAS(err_text, "parameter 0");
  CHECK_HAS(err_text, "0.npy");
  mkdir(temp_path("wrong"), 0777);
  const double three[4] = {1, 2, 3, 4};
  write_array(temp_path("wrong/0.npy"), HLO_F32, 1, (int64_t[]){3}, three);
  CHECK_LATCH(1, "run %s/add.hlo --inputs %s", corpus, temp_path("wrong"));
  CHECK_HAS(err_text, "f32[2,2]");
  CHECK_HAS(err_text, "f32[3]");
  write_array(temp_path("wrong/0.npy"), HLO_S32, 2, (int64_t[]){2, 2}, three);
  CHECK_LATCH(1, "run %s/add.hlo --inputs %s", corpus, temp_path("wrong"));
  CHECK_HAS(err_text, "s32[2,2]");
  write_text(temp_path("wrong/0.npy"), "not numpy at all");
  CHECK_LATCH(1, "run %s/add.hlo --inputs %s", corpus, temp_path("wrong"));
  CHECK_HAS(err_text, "not a .npy file");
}

static void unsupported_features_exit_2(void) {
  write_text(temp_path("custom.hlo"),
             "HloModule c\n"
             "ENTRY e {\n"
             "  p = f32[2] parameter(0)\n"
             "  ROOT r = f32[2] custom-call(p), custom_call_target=\"my_kernel\"\n"
             "}\n");
  CHECK_LATCH(2, "run %s", temp_path("custom.hlo"));
  CHECK_HAS(err_text, "custom-call");
  write_text(temp_path("complex.hlo"),
             "HloModule c\n"
             "ENTRY e {\n"
             "  p = c64[2] parameter(0)\n"
             "  ROOT r = c64[2] negate(p)\n"
             "}\n");
  CHECK_LATCH(2, "run %s", temp_path("complex.hlo"));
  CHECK_HAS(err_text, "c64");
}

int main(void) {
  const char *env_bin = getenv("LATCH_BIN"), *build = getenv("BUILD");
  if (env_bin) snprintf(bin, sizeof bin, "%s", env_bin);
  else snprintf(bin, sizeof bin, "%s/latch", build && *build ? build : "build");
  corpus = getenv("LATCH_CORPUS") ? getenv("LATCH_CORPUS") : "../shared/corpus/xla";
  snprintf(temp_dir, sizeof temp_dir, "/tmp/latch-cli-XXXXXX");
  if (!mkdtemp(temp_dir)) {
    perror("mkdtemp");
    return 1;
  }
  CHECK_MSG(access(bin, X_OK) == 0, "no latch binary at %s", bin);
  RUN(help_and_usage);
  RUN(parses_whole_corpus);
  RUN(multi_module_files);
  RUN(runs_add_on_given_inputs);
  RUN(random_inputs_are_seeded);
  RUN(flattens_tuples_and_notes_elided_constants);
  RUN(bf16_goes_through_f32_files);
  RUN(input_errors_exit_1);
  RUN(unsupported_features_exit_2);
  char cleanup[128];
  snprintf(cleanup, sizeof cleanup, "rm -rf '%s'", temp_dir);
  if (system(cleanup) != 0) fprintf(stderr, "could not remove %s\n", temp_dir);
  return TEST_REPORT();
}
