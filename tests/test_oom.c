/* Out of memory is a status, never a crash: every allocation of the library goes through
 * hlo/alloc.c, whose test hook fails the Nth one (and, in the second mode, every one from the
 * Nth on), as SQLite's test_malloc.c does. For N = 1, 2, 3, ... until a run allocates without
 * a failure, each run must come back with a clean error (HLO_ERR_INTERNAL / LATCH_ERR_INTERNAL
 * naming memory) or, when the failure only meant less work, with the right answer. Under
 * `make sanitize` ASan's leak checker also sees every failing run free what it took.
 *
 * Two runs: (a) the parser, verifier, printer, canonical hash and clone on corpus modules;
 * (b) a small capture -> latch_sync -> read on the cpu backend, runtime opened and closed
 * inside the run. Expected values: the printed text and key of an unhooked run, and for (b)
 * numbers worked by hand. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache.h"
#include "hlo/hlo.h"
#include "latch.h"
#include "test.h"

/* A bound on N, so a hook that stopped counting cannot loop forever. */
enum { MAX_RUNS = 200000 };

static char *read_corpus(const char *name, size_t *len) {
  const char *dir = getenv("LATCH_CORPUS");
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir && *dir ? dir : "../shared/corpus/xla", name);
  FILE *file = fopen(path, "rb");
  if (!file) return NULL;
  char *text = malloc(1 << 16);
  *len = text ? fread(text, 1, (1 << 16) - 1, file) : 0;
  fclose(file);
  if (text) text[*len] = 0;
  return text;
}

/* ---- (a) the parser and what follows it ---- */

typedef struct parsed {
  hlo_status status;
  char message[1024];
  char *text;    /* the first module printed, when everything succeeded */
  cache_key key; /* its canonical hash */
  int modules;
} parsed;

/* Parse, verify, hash, clone and print; the first failure's status and message. */
static parsed parse_run(const char *text, size_t len) {
  parsed out = {HLO_OK, "", NULL, {0, 0}, 0};
  hlo_diag diag;
  hlo_diag_clear(&diag);
  hlo_module **modules = NULL;
  int count = hlo_parse_modules(text, len, "oom.hlo", &modules, &diag);
  hlo_module *copy = NULL;
  if (count > 0 && hlo_verify_module(modules[0], &diag) == HLO_OK) {
    if (!cache_hash_module(modules[0], &out.key))
      hlo_diag_set(&diag, HLO_ERR_INTERNAL, "out of memory hashing");
    else if ((copy = hlo_module_clone(modules[0], &diag)) && !(out.text = hlo_module_to_text(copy)))
      hlo_diag_set(&diag, HLO_ERR_INTERNAL, "out of memory printing");
  }
  out.modules = count;
  out.status = diag.status;
  snprintf(out.message, sizeof out.message, "%s", diag.message);
  hlo_module_free(copy);
  for (int i = 0; i < count; i++) hlo_module_free(modules[i]);
  free(modules);
  return out;
}

static void check_parse_under_failures(const char *name, bool every_after) {
  size_t len = 0;
  char *text = read_corpus(name, &len);
  CHECK_MSG(text != NULL, "cannot read %s from the corpus", name);
  if (!text) return;
  parsed want = parse_run(text, len);
  CHECK_MSG(want.status == HLO_OK && want.text, "%s: %s", name, want.message);
  int failing = 0, wrong = 0;
  long n;
  for (n = 1; n < MAX_RUNS; n++) {
    hlo_alloc_test_fail(n, every_after);
    parsed got = parse_run(text, len);
    long failures = hlo_alloc_test_failures();
    hlo_alloc_test_fail(0, false);
    if (failures == 0) { /* ran to the end: the same answer as without the hook */
      CHECK(got.status == HLO_OK && got.modules == want.modules && got.text && want.text &&
            strcmp(got.text, want.text) == 0 && cache_key_equal(got.key, want.key));
      free(got.text);
      break;
    }
    failing++;
    bool clean = got.status == HLO_ERR_INTERNAL && strstr(got.message, "out of memory") && !got.text;
    if (!clean && wrong++ < 5)
      fprintf(stderr, "%s: allocation %ld failed (%s): status %d, %s\n", name, n,
              every_after ? "and all after" : "alone", got.status, got.message);
    free(got.text);
  }
  CHECK_MSG(wrong == 0, "%s: %d of %d failing runs did not report out of memory", name, wrong, failing);
  CHECK_MSG(n < MAX_RUNS && failing > 10, "%s: %d failing runs", name, failing);
  printf("%s (%s): %d runs with an allocation failed, %d unclean\n", name, every_after ? "every one from N" : "the Nth",
         failing, wrong);
  free(want.text);
  free(text);
}

static void test_parse_nth(void) {
  check_parse_under_failures("multiple_gemm_fusions.hlo", false);
  check_parse_under_failures("while_with_known_trip_count.hlo", false);
}

static void test_parse_from_nth_on(void) {
  check_parse_under_failures("multiple_gemm_fusions.hlo", true);
  check_parse_under_failures("while_with_known_trip_count.hlo", true);
}

/* ---- (b) capture -> sync -> read on the cpu backend ---- */

/* relu(x @ w + b), summed over rows, and its softmax over the last dim:
 *   x = [[1,2,3],[4,5,6]], w = [[1,0],[0,1],[1,1]]: x @ w = [[4,5],[10,11]]
 *   + b = [0.5,-10]: [[4.5,-5],[10.5,1]]; relu: [[4.5,0],[10.5,1]]; sum over dim 0: [15, 1];
 *   softmax of a row [u, v]: [1 / (1 + e^(v-u)), 1 / (1 + e^(u-v))], worked in double here. */
static const float want_sum[2] = {15.0f, 1.0f};
static const float want_relu[4] = {4.5f, 0.0f, 10.5f, 1.0f};

static bool softmax_right(const float *got) {
  for (int row = 0; row < 2; row++) {
    double u = want_relu[2 * row], v = want_relu[2 * row + 1];
    double want[2] = {1 / (1 + exp(v - u)), 1 / (1 + exp(u - v))};
    for (int k = 0; k < 2; k++)
      if (fabs(got[2 * row + k] - want[k]) > 1e-6) return false;
  }
  return true;
}

typedef struct captured {
  latch_status status; /* LATCH_OK when every read succeeded */
  char message[1024];
  bool right;          /* the numbers read were the expected ones */
} captured;

static latch_runtime *open_runtime(const char *backend, captured *out) {
  latch_options options;
  latch_options_init(&options);
  options.backend = backend;
  options.threads = 1;
  options.cache = "memory";
  options.check = "off";
  options.eager = false;
  latch_runtime *rt = latch_open(&options);
  if (!rt) {
    out->status = LATCH_ERR_INTERNAL;
    snprintf(out->message, sizeof out->message, "latch_open: %s", latch_last_error());
  }
  return rt;
}

static const float xd[9] = {1, 2, 3, 4, 5, 6, 0, 0, 1}, wd[6] = {1, 0, 0, 1, 1, 1}, bd[2] = {0.5f, -10};

static captured capture_run(const char *backend) {
  captured out = {LATCH_OK, "", false};
  latch_runtime *rt = open_runtime(backend, &out);
  if (!rt) return out;
  int64_t xs[2] = {2, 3}, ws[2] = {3, 2}, bs[1] = {2};
  latch_tensor *x = latch_from_host(rt, LATCH_F32, 2, xs, xd);
  latch_tensor *w = latch_from_host(rt, LATCH_F32, 2, ws, wd);
  latch_tensor *b = latch_from_host(rt, LATCH_F32, 1, bs, bd);
  latch_tensor *xw = x && w ? latch_matmul(x, w) : NULL;
  latch_tensor *pre = xw && b ? latch_binary(LATCH_ADD, xw, b) : NULL;
  latch_tensor *act = pre ? latch_relu(pre) : NULL;
  int dim0 = 0;
  latch_tensor *sum = act ? latch_reduce(LATCH_SUM, act, 1, &dim0, false) : NULL;
  latch_tensor *soft = act ? latch_softmax(act, -1) : NULL;
  if (!sum || !soft) {
    out.status = LATCH_ERR_INTERNAL; /* an op ran out of memory: NULL, as latch.h says */
    snprintf(out.message, sizeof out.message, "op: %s", latch_last_error());
  } else {
    out.status = latch_sync(rt);
    float got_sum[2] = {0}, got_relu[4] = {0}, got_soft[4] = {0};
    if (out.status == LATCH_OK) out.status = latch_read(sum, got_sum, sizeof got_sum);
    if (out.status == LATCH_OK) out.status = latch_read(act, got_relu, sizeof got_relu);
    if (out.status == LATCH_OK) out.status = latch_read(soft, got_soft, sizeof got_soft);
    if (out.status != LATCH_OK) snprintf(out.message, sizeof out.message, "%s", latch_last_error());
    out.right = out.status == LATCH_OK && memcmp(got_sum, want_sum, sizeof want_sum) == 0 &&
                memcmp(got_relu, want_relu, sizeof want_relu) == 0 && softmax_right(got_soft);
  }
  latch_release(soft), latch_release(sum), latch_release(act), latch_release(pre), latch_release(xw);
  latch_release(x), latch_release(w), latch_release(b);
  latch_close(rt);
  return out;
}

/* A traced function: sum over rows of relu(x @ w + b), called on 2 rows, on 3 rows (dim 0
 * turns symbolic: a second trace) and on 2 rows again (a guarded hit). The third row
 * [0,0,1] gives x @ w = [1,1], + b = [1.5,-9], relu [1.5,0]: the sum grows to [16.5, 1]. */
static latch_status step(void *user, latch_tensor *const *in, int count, latch_tensor **out, int out_count) {
  (void)user, (void)count, (void)out_count;
  int dim0 = 0;
  latch_tensor *xw = latch_matmul(in[0], in[1]);
  latch_tensor *pre = xw ? latch_binary(LATCH_ADD, xw, in[2]) : NULL;
  latch_tensor *act = pre ? latch_relu(pre) : NULL;
  out[0] = act ? latch_reduce(LATCH_SUM, act, 1, &dim0, false) : NULL;
  latch_release(act), latch_release(pre), latch_release(xw);
  return out[0] ? LATCH_OK : LATCH_ERR_INTERNAL;
}

static captured function_run(const char *backend) {
  captured out = {LATCH_OK, "", true};
  latch_runtime *rt = open_runtime(backend, &out);
  if (!rt) return out;
  latch_function *fn = latch_function_new_step(rt, step, NULL, NULL);
  int64_t ws[2] = {3, 2}, bs[1] = {2};
  latch_tensor *w = latch_from_host(rt, LATCH_F32, 2, ws, wd), *b = latch_from_host(rt, LATCH_F32, 1, bs, bd);
  static const int rows[3] = {2, 3, 2};
  static const float want[3][2] = {{15, 1}, {16.5f, 1}, {15, 1}};
  if (!fn || !w || !b) out.status = LATCH_ERR_INTERNAL, out.right = false;
  for (int call = 0; call < 3 && out.status == LATCH_OK; call++) {
    int64_t xs[2] = {rows[call], 3};
    latch_tensor *x = latch_from_host(rt, LATCH_F32, 2, xs, xd);
    latch_tensor *inputs[3] = {x, w, b}, *sum = NULL;
    float got[2] = {0};
    out.status = x ? latch_call(fn, inputs, 3, NULL, 0, &sum, 1) : LATCH_ERR_INTERNAL;
    if (out.status == LATCH_OK) out.status = latch_read(sum, got, sizeof got);
    out.right = out.right && out.status == LATCH_OK && memcmp(got, want[call], sizeof got) == 0;
    latch_release(sum), latch_release(x);
  }
  if (out.status != LATCH_OK) snprintf(out.message, sizeof out.message, "%s", latch_last_error());
  if (out.status == LATCH_OK && !out.right) snprintf(out.message, sizeof out.message, "wrong numbers");
  latch_release(w), latch_release(b);
  latch_function_free(fn);
  latch_close(rt);
  return out;
}

static void check_capture_under_failures(const char *what, captured (*run)(const char *), const char *backend,
                                         bool every_after) {
  captured want = run(backend);
  CHECK_MSG(want.status == LATCH_OK && want.right, "without failures: %s", want.message);
  int failing = 0, wrong = 0, recovered = 0;
  long n;
  for (n = 1; n < MAX_RUNS; n++) {
    hlo_alloc_test_fail(n, every_after);
    captured got = run(backend);
    long failures = hlo_alloc_test_failures();
    hlo_alloc_test_fail(0, false);
    if (failures == 0) {
      CHECK(got.status == LATCH_OK && got.right);
      break;
    }
    failing++;
    /* A failure that only meant less work (a pass skipped, a kept arena given back) may still
     * give the right numbers; otherwise the run must say it ran out of memory. */
    if (got.status == LATCH_OK && got.right) {
      recovered++;
      continue;
    }
    bool clean = got.status == LATCH_ERR_INTERNAL && strstr(got.message, "out of memory");
    if (!clean && wrong++ < 5)
      fprintf(stderr, "%s on %s: allocation %ld failed (%s): status %d, right %d, %s\n", what, backend, n,
              every_after ? "and all after" : "alone", got.status, got.right, got.message);
  }
  CHECK_MSG(wrong == 0, "%s on %s: %d of %d failing runs were neither right nor out of memory", what, backend, wrong,
            failing);
  CHECK_MSG(n < MAX_RUNS && failing > 10, "%s on %s: %d failing runs", what, backend, failing);
  printf("%s on %s (%s): %d runs with an allocation failed, %d of them still right, %d unclean\n", what, backend,
         every_after ? "every one from N" : "the Nth", failing, recovered, wrong);
}

static void test_capture_nth(void) {
  check_capture_under_failures("capture -> sync -> read", capture_run, "cpu", false);
  check_capture_under_failures("capture -> sync -> read", capture_run, "reference", false);
  check_capture_under_failures("traced function", function_run, "cpu", false);
}

static void test_capture_from_nth_on(void) {
  check_capture_under_failures("capture -> sync -> read", capture_run, "cpu", true);
  check_capture_under_failures("capture -> sync -> read", capture_run, "reference", true);
  check_capture_under_failures("traced function", function_run, "cpu", true);
}

/* The hook itself: it fails exactly the Nth allocation, counts only while armed, and off
 * means off. */
static void test_hook(void) {
  hlo_alloc_test_fail(3, false);
  void *a = hlo_malloc(8), *b = hlo_calloc(1, 8), *c = hlo_malloc(8), *d = hlo_strdup("x");
  CHECK(a && b && !c && d);
  CHECK_EQ_INT(hlo_alloc_test_count(), 4);
  CHECK_EQ_INT(hlo_alloc_test_failures(), 1);
  free(a), free(b), free(d);
  hlo_alloc_test_fail(2, true);
  a = hlo_malloc(8), b = hlo_realloc(NULL, 8), c = hlo_aligned_alloc(64, 64);
  CHECK(a && !b && !c);
  CHECK_EQ_INT(hlo_alloc_test_failures(), 2);
  free(a);
  hlo_alloc_test_fail(0, false);
  a = hlo_malloc(8);
  CHECK(a != NULL);
  CHECK_EQ_INT(hlo_alloc_test_count(), 0);
  free(a);
}

int main(void) {
  RUN(test_hook);
  RUN(test_parse_nth);
  RUN(test_parse_from_nth_on);
  RUN(test_capture_nth);
  RUN(test_capture_from_nth_on);
  return TEST_REPORT();
}
