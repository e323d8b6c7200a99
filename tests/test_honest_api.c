/* The library refuses at once what it cannot do and says which guard keeps failing: an
 * op mixing tensors of two runtimes is an error tensor; dims whose product
 * is past 2^58 elements are refused when the tensor is made, not at a later sync; the
 * recompile-limit warning names the guard that failed at most recompiles; guard_timed says
 * whether guard_ns was measured at all. */
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include "function_util.h"

static void ops_refuse_two_runtimes(void) {
  latch_runtime *a = fu_open(), *b = fu_open();
  int64_t dims[1] = {3};
  latch_tensor *x = fu_ramp(a, 1, dims, 1, 0), *y = fu_ramp(b, 1, dims, 1, 0);
  latch_tensor *sum = latch_binary(LATCH_ADD, x, y);
  const char *error = latch_tensor_error(sum);
  CHECK_MSG(error && strstr(error, "another runtime"), "%s", error ? error : "(no error)");
  latch_tensor *xs[2] = {x, y};
  latch_tensor *both = latch_concat(2, xs, 0);
  CHECK(latch_tensor_error(both) != NULL);
  CHECK(latch_assign(x, y) == LATCH_ERR_INPUT);
  CHECK(strstr(latch_last_error(), "different runtimes") != NULL);
  /* the same op within one runtime is fine: 0+0, 1+1, 2+2 */
  latch_tensor *twice = latch_binary(LATCH_ADD, x, x);
  double *v = fu_read(twice);
  CHECK(v && v[0] == 0 && v[1] == 2 && v[2] == 4);
  free(v);
  latch_release(sum), latch_release(both), latch_release(twice), latch_release(x), latch_release(y);
  latch_close(a);
  latch_close(b);
}

/* 2^30 * 2^30 = 2^60 elements is past 2^58; 2^29 * 2^29 = 2^58 is not (nothing is allocated
 * for a lazy zeros until it is synced, so making it is cheap); a zero dim makes any product
 * empty. */
static void dims_past_the_limit_refused_at_creation(void) {
  latch_runtime *rt = fu_open();
  int64_t huge[2] = {(int64_t)1 << 30, (int64_t)1 << 30};
  latch_tensor *t = latch_zeros(rt, LATCH_F32, 2, huge);
  const char *error = latch_tensor_error(t);
  CHECK_MSG(error && strstr(error, "2^58"), "%s", error ? error : "(no error)");
  int64_t overflow[3] = {(int64_t)1 << 40, (int64_t)1 << 40, (int64_t)1 << 40}; /* 2^120 wraps in int64 */
  latch_tensor *u = latch_zeros(rt, LATCH_F32, 3, overflow);
  CHECK(latch_tensor_error(u) != NULL);
  int64_t edge[2] = {(int64_t)1 << 29, (int64_t)1 << 29};
  latch_tensor *w = latch_zeros(rt, LATCH_F32, 2, edge);
  CHECK(latch_tensor_error(w) == NULL);
  int64_t empty[3] = {(int64_t)1 << 40, 0, (int64_t)1 << 40};
  latch_tensor *e = latch_zeros(rt, LATCH_F32, 3, empty);
  CHECK(latch_tensor_error(e) == NULL);
  int64_t one[1] = {1};
  latch_tensor *s = latch_zeros(rt, LATCH_F32, 1, one);
  latch_tensor *big = latch_broadcast_to(s, 2, huge);
  CHECK(latch_tensor_error(big) != NULL);
  latch_release(t), latch_release(u), latch_release(w), latch_release(e), latch_release(s), latch_release(big);
  latch_close(rt);
}

static latch_status identity(void *user, latch_tensor *const *in, int n, const latch_static *st, int sn,
                             latch_tensor **out, int m) {
  (void)user, (void)n, (void)st, (void)sn, (void)m;
  out[0] = latch_unary(LATCH_NEG, in[0]);
  return LATCH_OK;
}

/* Static shapes, limit 3: batch 1 traces, 2, 3 and 4 recompile on input 0 dim 0; then an f64
 * input reaches the limit. Against the entry tried first (the last hit, f32[4,4]) the first
 * guard to fail is the dtype, but the guard that kept failing is dim 0 (3 of 4 times). */
static void recompile_warning_names_the_guard_that_keeps_failing(void) {
  latch_runtime *rt = fu_open();
  latch_function_options o = fu_options(LATCH_TRACE_ONCE, LATCH_SHAPES_STATIC);
  o.recompile_limit = 3;
  latch_function *f = latch_function_new(rt, identity, NULL, &o);
  char path[] = "/tmp/latch-honest-XXXXXX";
  int fd = mkstemp(path), saved = dup(STDERR_FILENO);
  fflush(stderr);
  dup2(fd, STDERR_FILENO);
  for (int batch = 1; batch <= 5; batch++) {
    int64_t dims[2] = {batch, 4};
    latch_tensor *x = batch < 5 ? fu_ramp(rt, 2, dims, 1, 0) : latch_zeros(rt, LATCH_F64, 2, dims), *y = NULL;
    CHECK(latch_call(f, &x, 1, NULL, 0, &y, 1) == LATCH_OK);
    latch_release(x), latch_release(y);
  }
  fflush(stderr);
  dup2(saved, STDERR_FILENO);
  close(saved);
  char text[4096] = "";
  ssize_t n = pread(fd, text, sizeof text - 1, 0);
  text[n > 0 ? n : 0] = 0;
  close(fd);
  unlink(path);
  const char *warning = strstr(text, "reached its recompile limit");
  CHECK_MSG(warning && strstr(warning, "dim 0") && strstr(warning, "(at 3 of 4 recompiles)"), "%s", text);
  CHECK_MSG(warning && !strstr(warning, "dtype"), "%s", text);
  latch_function_free(f);
  latch_close(rt);
}

/* Guard time is sampled on one look-up in 8 per thread (a miss looks up twice: again once
 * it runs alone). On a fresh thread one function's first call takes look-ups 0 (timed) and
 * 1; a second function's miss takes 2 and 3 and its four hits 4 to 7: none timed, so its
 * guard_ns of 0 means "not measured", which guard_timed == 0 says. */
static void *sampled_calls(void *unused) {
  (void)unused;
  latch_runtime *rt = fu_open();
  latch_function_options o = fu_options(LATCH_TRACE_ONCE, LATCH_SHAPES_STATIC);
  latch_function *first = latch_function_new(rt, identity, NULL, &o), *second = latch_function_new(rt, identity, NULL, &o);
  int64_t dims[1] = {2};
  latch_tensor *x = fu_ramp(rt, 1, dims, 1, 0);
  latch_tensor *y = NULL;
  CHECK(latch_call(first, &x, 1, NULL, 0, &y, 1) == LATCH_OK);
  latch_release(y);
  for (int i = 0; i < 5; i++) {
    CHECK(latch_call(second, &x, 1, NULL, 0, &y, 1) == LATCH_OK);
    latch_release(y);
  }
  latch_function_stats a, b;
  latch_function_get_stats(first, &a);
  latch_function_get_stats(second, &b);
  CHECK_EQ_INT(a.guard_timed, 1);
  CHECK_EQ_INT(b.guard_timed, 0);
  CHECK_EQ_INT(b.guard_ns, 0);
  CHECK_EQ_INT(b.guard_checks, 4); /* each hit checked the one entry; the miss had none to check */
  latch_release(x);
  latch_function_free(first), latch_function_free(second);
  latch_close(rt);
  return NULL;
}

static void guard_timed_says_when_nothing_was_sampled(void) {
  pthread_t thread;
  pthread_create(&thread, NULL, sampled_calls, NULL);
  pthread_join(thread, NULL);
}

int main(void) {
  RUN(ops_refuse_two_runtimes);
  RUN(dims_past_the_limit_refused_at_creation);
  RUN(recompile_warning_names_the_guard_that_keeps_failing);
  RUN(guard_timed_says_when_nothing_was_sampled);
  return TEST_REPORT();
}
