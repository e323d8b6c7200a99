/* Data a traced function makes itself (latch_from_host while it is traced) and updates in
 * place. A temporary (released before the function returns) is made afresh by every eager
 * call, so a cached entry must not keep its handle and replay the update onto it: each call
 * starts from the made value again. State the function keeps (made on its first call, held
 * in user) is a weight from then on: its update is replayed on every call. Expected values
 * are the eager steps worked by hand, and every mode must give them. */
#include "function_util.h"

static latch_runtime *rt;

typedef struct made_case {
  latch_tensor *w;     /* a weight: w += buf on every call */
  latch_tensor *state; /* kept: made on the first call, then updated */
  bool keep;
} made_case;

/* buf = (5, 5) made here (or the kept state, made on the first call); buf += 1; w += buf;
 * out = x * w. */
static latch_status step(void *user, latch_tensor *const *in, int n, const latch_static *st, int sn,
                         latch_tensor **out, int on) {
  (void)n, (void)st, (void)sn, (void)on;
  made_case *c = user;
  latch_tensor *buf = c->keep && c->state ? c->state : fu_ramp(rt, 1, FDIMS(2), 0, 5);
  if (c->keep) c->state = buf;
  latch_tensor *one = latch_scalar(rt, LATCH_F32, 1), *next = latch_binary(LATCH_ADD, buf, one);
  latch_status status = latch_assign(buf, next);
  latch_tensor *sum = latch_binary(LATCH_ADD, c->w, buf);
  if (status == LATCH_OK) status = latch_assign(c->w, sum);
  out[0] = latch_binary(LATCH_MUL, in[0], c->w);
  latch_release(one);
  latch_release(next);
  latch_release(sum);
  if (!c->keep) latch_release(buf);
  return status;
}

/* w starts at 10. A temporary adds 6 on every call: 16, 22, 28, 34. Kept state adds 6, 7,
 * 8, 9: 16, 23, 31, 40, and holds 6, 7, 8, 9. out = x * w with x = 2. A latch_sync between
 * calls must not apply anything again. */
static void run_case(bool keep, latch_trace_mode mode) {
  made_case c = {fu_ramp(rt, 1, FDIMS(2), 0, 10), NULL, keep};
  latch_function_options o = fu_options(mode, LATCH_SHAPES_AUTOMATIC);
  latch_function *f = latch_function_new(rt, step, &c, &o);
  CHECK(f != NULL);
  latch_tensor *x = fu_ramp(rt, 1, FDIMS(2), 0, 2);
  double w = 10;
  for (int k = 1; f && k <= 4; k++) {
    latch_tensor *out = NULL;
    CHECK_EQ_INT(latch_call(f, &x, 1, NULL, 0, &out, 1), LATCH_OK);
    CHECK_EQ_INT(latch_sync(rt), LATCH_OK);
    w += keep ? 5 + k : 6;
    double *wv = fu_read(c.w), *ov = fu_read(out), *sv = c.state ? fu_read(c.state) : NULL;
    CHECK_MSG(wv && wv[0] == w && wv[1] == w, "keep %d mode %d call %d: w %g, want %g", keep, (int)mode, k,
              wv ? wv[0] : -1, w);
    CHECK_MSG(ov && ov[0] == 2 * w, "keep %d mode %d call %d: out %g, want %g", keep, (int)mode, k, ov ? ov[0] : -1,
              2 * w);
    if (keep) CHECK_MSG(sv && sv[0] == 5 + k, "mode %d call %d: state %g, want %d", (int)mode, k, sv ? sv[0] : -1, 5 + k);
    free(wv);
    free(ov);
    free(sv);
    latch_release(out);
  }
  if (mode == LATCH_TRACE_ONCE && f) {
    latch_function_stats s;
    latch_function_get_stats(f, &s);
    CHECK_EQ_INT(s.traces, 1);
    CHECK_EQ_INT(s.hits, 3);
  }
  latch_function_free(f);
  latch_release(x);
  latch_release(c.w);
  latch_release(c.state);
}

static void test_temporary(void) {
  run_case(false, LATCH_TRACE_EAGER);
  run_case(false, LATCH_TRACE_EVERY);
  run_case(false, LATCH_TRACE_ONCE);
}

static void test_kept_state(void) {
  run_case(true, LATCH_TRACE_EAGER);
  run_case(true, LATCH_TRACE_EVERY);
  run_case(true, LATCH_TRACE_ONCE);
}

int main(void) {
  rt = fu_open();
  RUN(test_temporary);
  RUN(test_kept_state);
  latch_close(rt);
  return TEST_REPORT();
}
