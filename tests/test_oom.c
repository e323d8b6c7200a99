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
  printf("%s (%s): %d runs with an allocation failed, all clean\n", name, every_after ? "every one from N" : "the Nth",
         failing);
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

/* relu(x @ w + b), summed over rows:
 *   x = [[1,2,3],[4,5,6]], w = [[1,0],[0,1],[1,1]]: x @ w = [[4,5],[10,11]]
 *   + b = [0.5,-10]: [[4.5,-5],[10.5,1]]; relu: [[4.5,0],[10.5,1]]; sum over dim 0: [15, 1]. */
static const float want_sum[2] = {15.0f, 1.0f};
static const float want_relu[4] = {4.5f, 0.0f, 10.5f, 1.0f};

typedef struct captured {
  latch_status status; /* LATCH_OK when both reads gave the expected numbers */
  char message[1024];
  bool right;          /* the numbers read were the expected ones */
} captured;

static captured capture_run(void) {
  captured out = {LATCH_OK, "", false};
  latch_options options;
  latch_options_init(&options);
  options.backend = "cpu";
  options.threads = 1;
  options.cache = "memory";
  options.check = "off";
  options.eager = false;
  latch_runtime *rt = latch_open(&options);
  if (!rt) {
    out.status = LATCH_ERR_INTERNAL;
    snprintf(out.message, sizeof out.message, "latch_open: %s", latch_last_error());
    return out;
  }
  static const float xd[6] = {1, 2, 3, 4, 5, 6}, wd[6] = {1, 0, 0, 1, 1, 1}, bd[2] = {0.5f, -10};
  int64_t xs[2] = {2, 3}, ws[2] = {3, 2}, bs[1] = {2};
  latch_tensor *x = latch_from_host(rt, LATCH_F32, 2, xs, xd);
  latch_tensor *w = latch_from_host(rt, LATCH_F32, 2, ws, wd);
  latch_tensor *b = latch_from_host(rt, LATCH_F32, 1, bs, bd);
  latch_tensor *xw = x && w ? latch_matmul(x, w) : NULL;
  latch_tensor *pre = xw && b ? latch_binary(LATCH_ADD, xw, b) : NULL;
  latch_tensor *act = pre ? latch_relu(pre) : NULL;
  int dim0 = 0;
  latch_tensor *sum = act ? latch_reduce(LATCH_SUM, act, 1, &dim0, false) : NULL;
  if (!sum) {
    out.status = LATCH_ERR_INTERNAL; /* an op ran out of memory: NULL, as latch.h says */
    snprintf(out.message, sizeof out.message, "op: %s", latch_last_error());
  } else {
    out.status = latch_sync(rt);
    float got_sum[2] = {0}, got_relu[4] = {0};
    if (out.status == LATCH_OK) out.status = latch_read(sum, got_sum, sizeof got_sum);
    if (out.status == LATCH_OK) out.status = latch_read(act, got_relu, sizeof got_relu);
    if (out.status != LATCH_OK) snprintf(out.message, sizeof out.message, "%s", latch_last_error());
    out.right = out.status == LATCH_OK && memcmp(got_sum, want_sum, sizeof want_sum) == 0 &&
                memcmp(got_relu, want_relu, sizeof want_relu) == 0;
  }
  latch_release(sum), latch_release(act), latch_release(pre), latch_release(xw);
  latch_release(x), latch_release(w), latch_release(b);
  latch_close(rt);
  return out;
}

static void check_capture_under_failures(bool every_after) {
  captured want = capture_run();
  CHECK_MSG(want.status == LATCH_OK && want.right, "without failures: %s", want.message);
  int failing = 0, wrong = 0, recovered = 0;
  long n;
  for (n = 1; n < MAX_RUNS; n++) {
    hlo_alloc_test_fail(n, every_after);
    captured got = capture_run();
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
      fprintf(stderr, "capture: allocation %ld failed (%s): status %d, right %d, %s\n", n,
              every_after ? "and all after" : "alone", got.status, got.right, got.message);
  }
  CHECK_MSG(wrong == 0, "%d of %d failing runs were neither right nor out of memory", wrong, failing);
  CHECK_MSG(n < MAX_RUNS && failing > 10, "%d failing runs", failing);
  printf("capture -> sync -> read (%s): %d runs with an allocation failed, %d of them still right, all clean\n",
         every_after ? "every one from N" : "the Nth", failing, recovered);
}

static void test_capture_nth(void) { check_capture_under_failures(false); }

static void test_capture_from_nth_on(void) { check_capture_under_failures(true); }

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
