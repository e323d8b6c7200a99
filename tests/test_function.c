/* Traced functions through latch.h: hits, misses on dtype, rank, dims and statics, duck
 * sizing, 0/1 specialization, divisibility guards from reshape, comparison guards from
 * latch_size, value reads, in-place replay, random numbers on hits, the recompile limit
 * with its one warning, and the same results in all three modes. */
#include <stdio.h>
#include <unistd.h>

#include "function_util.h"

static latch_runtime *rt;

/* ---- functions under test ---- */

static int body_runs; /* how many times a function body ran (a hit must not run it) */

/* out = 2 * x + y */
static latch_status affine(void *user, latch_tensor *const *in, int n, const latch_static *st, int sn,
                           latch_tensor **out, int on) {
  (void)user, (void)n, (void)st, (void)sn, (void)on;
  body_runs++;
  latch_tensor *two = latch_scalar(latch_tensor_dtype(in[0]) == LATCH_F64 ? rt : rt, latch_tensor_dtype(in[0]), 2);
  latch_tensor *a = latch_binary(LATCH_MUL, in[0], two);
  out[0] = latch_binary(LATCH_ADD, a, in[1]);
  latch_release(two);
  latch_release(a);
  return LATCH_OK;
}

/* out = op(x * statics[0].f) where op is statics[1] ("relu" or "neg"). */
static latch_status scaled(void *user, latch_tensor *const *in, int n, const latch_static *st, int sn,
                           latch_tensor **out, int on) {
  (void)user, (void)n, (void)sn, (void)on;
  body_runs++;
  latch_tensor *k = latch_scalar(rt, LATCH_F32, st[0].f);
  latch_tensor *m = latch_binary(LATCH_MUL, in[0], k);
  out[0] = st[1].len == 4 && !memcmp(st[1].bytes, "relu", 4) ? latch_relu(m) : latch_unary(LATCH_NEG, m);
  latch_release(k);
  latch_release(m);
  return LATCH_OK;
}

static latch_function *make(latch_fn fn, void *user, latch_trace_mode mode, latch_shape_policy shapes, int marks,
                            const latch_dim_mark *mark) {
  latch_function_options o = fu_options(mode, shapes);
  o.mark_count = marks;
  o.marks = mark;
  latch_function *f = latch_function_new(rt, fn, user, &o);
  CHECK(f != NULL);
  return f;
}

static latch_function_stats stats_of(latch_function *f) {
  latch_function_stats s;
  latch_function_get_stats(f, &s);
  return s;
}

/* Calls f on (x, y) and checks out == 2x + y elementwise. */
static void call_affine(latch_function *f, latch_tensor *x, latch_tensor *y, int line) {
  latch_tensor *in[2] = {x, y}, *out = NULL;
  latch_status status = latch_call(f, in, 2, NULL, 0, &out, 1);
  CHECK_MSG(status == LATCH_OK, "line %d: %s", line, latch_last_error());
  double *a = fu_read(x), *b = fu_read(y), *c = fu_read(out);
  CHECK_MSG(a && b && c, "line %d: unreadable", line);
  int64_t n = latch_numel(out);
  for (int64_t i = 0; a && b && c && i < n; i++) CHECK_MSG(c[i] == 2 * a[i] + b[i], "line %d: element %lld", line, (long long)i);
  free(a);
  free(b);
  free(c);
  latch_release(out);
}

static void test_hits_and_misses(void) {
  latch_function *f = make(affine, NULL, LATCH_TRACE_ONCE, LATCH_SHAPES_STATIC, 0, NULL);
  body_runs = 0;
  for (int k = 0; k < 3; k++) { /* new values, same shapes: one trace, then hits */
    latch_tensor *x = fu_ramp(rt, 2, FDIMS(2, 3), 1 + k, 0), *y = fu_ramp(rt, 2, FDIMS(2, 3), -1, k);
    call_affine(f, x, y, __LINE__);
    latch_release(x);
    latch_release(y);
  }
  latch_function_stats s = stats_of(f);
  CHECK_EQ_INT(s.traces, 1);
  CHECK_EQ_INT(s.hits, 2);
  CHECK_EQ_INT(body_runs, 1);
  /* A dim change (static policy), a rank change, a dtype change: each a miss. */
  latch_tensor *x = fu_ramp(rt, 2, FDIMS(2, 4), 1, 0), *y = fu_ramp(rt, 2, FDIMS(2, 4), 1, 1);
  call_affine(f, x, y, __LINE__);
  latch_release(x);
  latch_release(y);
  x = fu_ramp(rt, 1, FDIMS(6), 1, 0), y = fu_ramp(rt, 1, FDIMS(6), 1, 1);
  call_affine(f, x, y, __LINE__);
  latch_release(x);
  latch_release(y);
  double d[6] = {1, 2, 3, 4, 5, 6};
  x = latch_from_host(rt, LATCH_F64, 2, FDIMS(2, 3), d);
  y = latch_from_host(rt, LATCH_F64, 2, FDIMS(2, 3), d);
  call_affine(f, x, y, __LINE__);
  latch_release(x);
  latch_release(y);
  s = stats_of(f);
  CHECK_EQ_INT(s.traces, 4);
  CHECK_EQ_INT(s.recompiles, 3);
  CHECK_EQ_INT(s.entries, 4);
  /* The first shape still hits its entry. */
  x = fu_ramp(rt, 2, FDIMS(2, 3), 1, 0), y = fu_ramp(rt, 2, FDIMS(2, 3), 1, 1);
  call_affine(f, x, y, __LINE__);
  /* That entry now passed last: it is tried first, one guard program per call. */
  uint64_t checks = stats_of(f).guard_checks;
  call_affine(f, x, y, __LINE__);
  call_affine(f, x, y, __LINE__);
  CHECK_EQ_INT(stats_of(f).guard_checks - checks, 2);
  latch_release(x);
  latch_release(y);
  CHECK_EQ_INT(stats_of(f).hits, 5);
  CHECK_EQ_INT(body_runs, 4);
  latch_function_free(f);
}

static void test_statics(void) {
  latch_function *f = make(scaled, NULL, LATCH_TRACE_ONCE, LATCH_SHAPES_AUTOMATIC, 0, NULL);
  latch_tensor *x = fu_ramp(rt, 1, FDIMS(4), 1, -2); /* -2 -1 0 1 */
  struct { double k; const char *op; double want0, want3; } calls[] = {
      {2, "relu", 0, 2}, {2, "relu", 0, 2}, {3, "relu", 0, 3}, {2, "neg_", 4, -2}, {3, "relu", 0, 3}};
  for (int c = 0; c < 5; c++) {
    latch_static st[2] = {{.kind = LATCH_STATIC_FLOAT, .f = calls[c].k}, {.kind = LATCH_STATIC_BYTES, .bytes = calls[c].op, .len = 4}};
    latch_tensor *out = NULL;
    CHECK_EQ_INT(latch_call(f, &x, 1, st, 2, &out, 1), LATCH_OK);
    double *v = fu_read(out);
    CHECK(v && v[0] == calls[c].want0 && v[3] == calls[c].want3);
    free(v);
    latch_release(out);
  }
  latch_function_stats s = stats_of(f);
  CHECK_EQ_INT(s.traces, 3); /* (2, relu), (3, relu), (2, neg_) */
  CHECK_EQ_INT(s.hits, 2);
  latch_release(x);
  latch_function_free(f);
}

/* out = sum(x) + sum(y): no shape relation between x and y. */
static latch_status two_sums(void *user, latch_tensor *const *in, int n, const latch_static *st, int sn,
                             latch_tensor **out, int on) {
  (void)user, (void)n, (void)st, (void)sn, (void)on;
  latch_tensor *a = latch_reduce(LATCH_SUM, in[0], 0, NULL, false), *b = latch_reduce(LATCH_SUM, in[1], 0, NULL, false);
  out[0] = latch_binary(LATCH_ADD, a, b);
  latch_release(a);
  latch_release(b);
  return LATCH_OK;
}

static double call_sums(latch_function *f, int64_t n, int64_t m) {
  latch_tensor *in[2] = {fu_ramp(rt, 1, &n, 1, 0), fu_ramp(rt, 1, &m, 1, 0)}, *out = NULL;
  double v = -1;
  if (latch_call(f, in, 2, NULL, 0, &out, 1) == LATCH_OK) latch_read_f64(out, &v, 1);
  latch_release(out);
  latch_release(in[0]);
  latch_release(in[1]);
  return v;
}

static void test_duck_sizing(void) {
  latch_dim_mark marks[2] = {{0, 0, true, false}, {1, 0, true, false}};
  latch_function *f = make(two_sums, NULL, LATCH_TRACE_ONCE, LATCH_SHAPES_MARKED, 2, marks);
  CHECK_EQ_INT(call_sums(f, 3, 3), 6);   /* one symbol for both: s0 = 3 */
  CHECK_EQ_INT(call_sums(f, 5, 5), 20);  /* hit */
  CHECK_EQ_INT(stats_of(f).traces, 1);
  CHECK_EQ_INT(call_sums(f, 4, 5), 16);  /* equal sizes were assumed: miss */
  CHECK_EQ_INT(stats_of(f).traces, 2);
  latch_function_free(f);
  /* Marked independent: each dim its own symbol, so unequal sizes hit. */
  latch_dim_mark apart[2] = {{0, 0, true, true}, {1, 0, true, true}};
  f = make(two_sums, NULL, LATCH_TRACE_ONCE, LATCH_SHAPES_MARKED, 2, apart);
  CHECK_EQ_INT(call_sums(f, 3, 3), 6);
  CHECK_EQ_INT(call_sums(f, 4, 5), 16);
  CHECK_EQ_INT(call_sums(f, 7, 2), 22);
  CHECK_EQ_INT(stats_of(f).traces, 1);
  CHECK_EQ_INT(stats_of(f).hits, 2);
  latch_function_free(f);
}

static void test_zero_one_specialization(void) {
  latch_dim_mark marks[2] = {{0, 0, true, true}, {1, 0, true, true}};
  latch_function *f = make(two_sums, NULL, LATCH_TRACE_ONCE, LATCH_SHAPES_MARKED, 2, marks);
  CHECK_EQ_INT(call_sums(f, 1, 3), 3); /* size 1: a constant */
  CHECK_EQ_INT(call_sums(f, 2, 3), 4); /* misses: input 0 dim 0 == 1 */
  CHECK_EQ_INT(stats_of(f).traces, 2);
  CHECK_EQ_INT(call_sums(f, 9, 4), 42); /* hits the symbolic entry */
  CHECK_EQ_INT(call_sums(f, 1, 8), 28); /* hits the first entry (1 stays special) */
  CHECK_EQ_INT(call_sums(f, 0, 8), 28); /* 0 is special too: a miss */
  latch_function_stats s = stats_of(f);
  CHECK_EQ_INT(s.traces, 3);
  CHECK_EQ_INT(s.hits, 2);
  latch_function_free(f);
}

/* out = reshape(x, [-1, 4]) * 1 */
static latch_status rows_of_four(void *user, latch_tensor *const *in, int n, const latch_static *st, int sn,
                                 latch_tensor **out, int on) {
  (void)user, (void)n, (void)st, (void)sn, (void)on;
  out[0] = latch_reshape(in[0], 2, FDIMS(-1, 4));
  return LATCH_OK;
}

static void test_divisibility(void) {
  latch_dim_mark marks[1] = {{0, 0, true, false}};
  latch_function *f = make(rows_of_four, NULL, LATCH_TRACE_ONCE, LATCH_SHAPES_MARKED, 1, marks);
  int64_t sizes[3] = {8, 12, 40};
  for (int k = 0; k < 3; k++) {
    latch_tensor *x = fu_ramp(rt, 1, &sizes[k], 1, 0), *out = NULL;
    CHECK_EQ_INT(latch_call(f, &x, 1, NULL, 0, &out, 1), LATCH_OK);
    CHECK_EQ_INT(latch_rank(out), 2);
    CHECK_EQ_INT(latch_dim(out, 0), sizes[k] / 4);
    double *v = fu_read(out);
    CHECK(v && v[sizes[k] - 1] == (double)(sizes[k] - 1));
    free(v);
    latch_release(out);
    latch_release(x);
  }
  CHECK_EQ_INT(stats_of(f).traces, 1);
  /* 10 is not a multiple of 4: the divisibility guard fails, the trace that follows
   * reports the reshape error. */
  int64_t ten = 10;
  latch_tensor *x = fu_ramp(rt, 1, &ten, 1, 0), *out = NULL;
  CHECK_EQ_INT(latch_call(f, &x, 1, NULL, 0, &out, 1), LATCH_ERR_INPUT);
  CHECK(out == NULL);
  CHECK(strstr(latch_last_error(), "reshape") != NULL);
  CHECK_EQ_INT(stats_of(f).traces, 2);
  latch_release(x);
  latch_function_free(f);
}

/* Symbolic sizes: out = x * (n > 4 ? 2 : 3), reshaped to [n, 1] through latch_size. */
static latch_status by_size(void *user, latch_tensor *const *in, int n, const latch_static *st, int sn,
                            latch_tensor **out, int on) {
  (void)user, (void)n, (void)st, (void)sn, (void)on;
  body_runs++;
  latch_size len = latch_size_of(in[0], 0);
  double k = latch_size_compare(LATCH_GT, len, latch_size_const(4)) ? 2 : 3;
  latch_tensor *s = latch_scalar(rt, LATCH_F32, k), *m = latch_binary(LATCH_MUL, in[0], s);
  latch_size dims[2] = {len, latch_size_const(1)};
  out[0] = latch_reshape_sized(m, 2, dims);
  latch_release(s);
  latch_release(m);
  return LATCH_OK;
}

static void test_size_api(void) {
  latch_dim_mark marks[1] = {{0, 0, true, false}};
  latch_function *f = make(by_size, NULL, LATCH_TRACE_ONCE, LATCH_SHAPES_MARKED, 1, marks);
  body_runs = 0;
  int64_t sizes[4] = {6, 9, 3, 2};
  double factor[4] = {2, 2, 3, 3};
  for (int k = 0; k < 4; k++) {
    latch_tensor *x = fu_ramp(rt, 1, &sizes[k], 1, 1), *out = NULL;
    CHECK_EQ_INT(latch_call(f, &x, 1, NULL, 0, &out, 1), LATCH_OK);
    CHECK_EQ_INT(latch_dim(out, 0), sizes[k]);
    double *v = fu_read(out);
    CHECK(v && v[sizes[k] - 1] == factor[k] * (double)sizes[k]);
    free(v);
    latch_release(out);
    latch_release(x);
  }
  CHECK_EQ_INT(body_runs, 2); /* 6 traces (s0 > 4), 9 hits, 3 misses (s0 <= 4), 2 hits */
  latch_function_free(f);
}

/* A product of symbolic sizes: x [a, b] flattened to [a * b] through latch_size_mul. */
static latch_status flatten_sized(void *user, latch_tensor *const *in, int n, const latch_static *st, int sn,
                                  latch_tensor **out, int on) {
  (void)user, (void)n, (void)st, (void)sn, (void)on;
  body_runs++;
  latch_size all = latch_size_mul(latch_size_of(in[0], 0), latch_size_of(in[0], 1));
  out[0] = latch_reshape_sized(in[0], 1, &all);
  return LATCH_OK;
}

static void test_size_mul(void) {
  latch_dim_mark marks[2] = {{0, 0, true, false}, {0, 1, true, false}};
  latch_function *f = make(flatten_sized, NULL, LATCH_TRACE_ONCE, LATCH_SHAPES_MARKED, 2, marks);
  body_runs = 0;
  int64_t dims[3][2] = {{2, 3}, {4, 5}, {3, 7}};
  for (int k = 0; k < 3; k++) {
    latch_tensor *x = fu_ramp(rt, 2, dims[k], 1, 0), *out = NULL;
    CHECK_EQ_INT(latch_call(f, &x, 1, NULL, 0, &out, 1), LATCH_OK);
    int64_t count = dims[k][0] * dims[k][1];
    CHECK_EQ_INT(latch_rank(out), 1);
    CHECK_EQ_INT(latch_dim(out, 0), count);
    double *v = fu_read(out);
    for (int64_t i = 0; v && i < count; i++) CHECK(v[i] == (double)i); /* row-major order kept */
    free(v);
    latch_release(out);
    latch_release(x);
  }
  CHECK_EQ_INT(body_runs, 1); /* one trace serves every a and b */
  /* Outside a trace the sizes are plain: 6 * 7. */
  latch_size p = latch_size_mul(latch_size_const(6), latch_size_const(7));
  CHECK_EQ_INT(p.value, 42);
  CHECK_EQ_INT(p.sym, -1);
  latch_function_free(f);
}

/* A slice with a symbolic stop: out = x[1:n:2]. */
static latch_status odd_elements(void *user, latch_tensor *const *in, int n, const latch_static *st, int sn,
                                 latch_tensor **out, int on) {
  (void)user, (void)n, (void)st, (void)sn, (void)on;
  body_runs++;
  out[0] = latch_slice_sized(in[0], 0, latch_size_const(1), latch_size_of(in[0], 0), 2);
  return LATCH_OK;
}

static void test_slice_sized(void) {
  latch_dim_mark marks[1] = {{0, 0, true, false}};
  latch_function *f = make(odd_elements, NULL, LATCH_TRACE_ONCE, LATCH_SHAPES_MARKED, 1, marks);
  body_runs = 0;
  int64_t sizes[4] = {7, 10, 13, 8};
  for (int k = 0; k < 4; k++) {
    latch_tensor *x = fu_ramp(rt, 1, &sizes[k], 1, 0), *out = NULL;
    CHECK_EQ_INT(latch_call(f, &x, 1, NULL, 0, &out, 1), LATCH_OK);
    CHECK_EQ_INT(latch_dim(out, 0), sizes[k] / 2);
    double *v = fu_read(out);
    for (int64_t i = 0; v && i < sizes[k] / 2; i++) CHECK(v[i] == (double)(1 + 2 * i));
    free(v);
    latch_release(out);
    latch_release(x);
  }
  CHECK_EQ_INT(body_runs, 1);
  /* Out of range is an error, not a clamp. */
  latch_tensor *x = fu_ramp(rt, 1, FDIMS(4), 1, 0);
  latch_tensor *bad = latch_slice_sized(x, 0, latch_size_const(1), latch_size_const(5), 1);
  CHECK(latch_tensor_error(bad) != NULL);
  latch_release(bad);
  latch_release(x);
  latch_function_free(f);
}

/* latch_dim inside a trace specializes the dim even when it was marked dynamic. */
static latch_status reads_dim(void *user, latch_tensor *const *in, int n, const latch_static *st, int sn,
                              latch_tensor **out, int on) {
  (void)user, (void)n, (void)st, (void)sn, (void)on;
  latch_tensor *s = latch_scalar(rt, LATCH_F32, (double)latch_dim(in[0], 0));
  out[0] = latch_binary(LATCH_MUL, in[0], s);
  latch_release(s);
  return LATCH_OK;
}

static void test_dim_read_specializes(void) {
  latch_dim_mark marks[1] = {{0, 0, true, false}};
  latch_function *f = make(reads_dim, NULL, LATCH_TRACE_ONCE, LATCH_SHAPES_MARKED, 1, marks);
  int64_t sizes[3] = {5, 7, 5};
  for (int k = 0; k < 3; k++) {
    latch_tensor *x = fu_ramp(rt, 1, &sizes[k], 0, 1), *out = NULL;
    CHECK_EQ_INT(latch_call(f, &x, 1, NULL, 0, &out, 1), LATCH_OK);
    double *v = fu_read(out);
    CHECK(v && v[0] == (double)sizes[k]);
    free(v);
    latch_release(out);
    latch_release(x);
  }
  latch_function_stats s = stats_of(f);
  CHECK_EQ_INT(s.traces, 2);
  CHECK_EQ_INT(s.hits, 1);
  latch_function_free(f);
}

/* Reads a value while traced: the function falls back to trace-every, results stay right. */
static latch_status reads_value(void *user, latch_tensor *const *in, int n, const latch_static *st, int sn,
                                latch_tensor **out, int on) {
  (void)user, (void)n, (void)st, (void)sn, (void)on;
  double first = 0;
  latch_tensor *s = latch_reduce(LATCH_SUM, in[0], 0, NULL, false);
  latch_read_f64(s, &first, 1);
  latch_tensor *k = latch_scalar(rt, LATCH_F32, first);
  out[0] = latch_binary(LATCH_ADD, in[0], k);
  latch_release(s);
  latch_release(k);
  return LATCH_OK;
}

static void test_value_read(void) {
  latch_function *f = make(reads_value, NULL, LATCH_TRACE_ONCE, LATCH_SHAPES_AUTOMATIC, 0, NULL);
  for (int k = 0; k < 3; k++) {
    latch_tensor *x = fu_ramp(rt, 1, FDIMS(3), 1, k), *out = NULL; /* sum = 3 + 3k */
    CHECK_EQ_INT(latch_call(f, &x, 1, NULL, 0, &out, 1), LATCH_OK);
    double *v = fu_read(out);
    CHECK(v && v[0] == k + 3 + 3 * k);
    free(v);
    latch_release(out);
    latch_release(x);
  }
  latch_function_stats s = stats_of(f);
  CHECK(s.trace_every);
  CHECK_EQ_INT(s.traces, 3);
  CHECK_EQ_INT(s.hits, 0);
  CHECK_EQ_INT(s.entries, 0);
  latch_function_free(f);
}

/* A weight the function only writes: counter = 2 * x on every call, replayed on hits (the
 * in-place test below covers read-modify-write). */
static latch_status writes_only(void *user, latch_tensor *const *in, int n, const latch_static *st, int sn,
                                latch_tensor **out, int on) {
  (void)n, (void)st, (void)sn, (void)on;
  latch_tensor *counter = *(latch_tensor **)user;
  latch_tensor *two = latch_scalar(rt, LATCH_F32, 2), *doubled = latch_binary(LATCH_MUL, in[0], two);
  latch_assign(counter, doubled);
  out[0] = latch_retain(in[0]);
  latch_release(two);
  latch_release(doubled);
  return LATCH_OK;
}

static void test_write_only_weight(void) {
  latch_tensor *counter = fu_ramp(rt, 1, FDIMS(2), 0, 0);
  latch_function *f = make(writes_only, &counter, LATCH_TRACE_ONCE, LATCH_SHAPES_AUTOMATIC, 0, NULL);
  for (int k = 1; k <= 3; k++) {
    latch_tensor *x = fu_ramp(rt, 1, FDIMS(2), 0, k), *out = NULL;
    CHECK_EQ_INT(latch_call(f, &x, 1, NULL, 0, &out, 1), LATCH_OK);
    CHECK(out == x); /* an input returned as is is the same handle */
    double *v = fu_read(counter);
    CHECK(v && v[0] == 2 * k && v[1] == 2 * k);
    free(v);
    latch_release(out);
    latch_release(x);
  }
  CHECK_EQ_INT(stats_of(f).hits, 2);
  latch_function_free(f);
  latch_release(counter);
}

/* out[0] = x + 1, out[1] = the weight in user as is, out[2] = data the function makes. */
static latch_status returns_weight(void *user, latch_tensor *const *in, int n, const latch_static *st, int sn,
                                   latch_tensor **out, int on) {
  (void)n, (void)st, (void)sn, (void)on;
  latch_tensor *one = latch_scalar(rt, LATCH_F32, 1);
  out[0] = latch_binary(LATCH_ADD, in[0], one);
  out[1] = latch_retain(*(latch_tensor **)user);
  out[2] = fu_ramp(rt, 1, FDIMS(3), 10, 7);
  latch_release(one);
  return LATCH_OK;
}

/* A weight returned without being used in any op is still a weight: a call returns what it
 * holds then, after the caller replaced its value, not the value the trace saw. */
static void test_weight_returned_as_is(void) {
  latch_tensor *w = fu_ramp(rt, 1, FDIMS(2), 1, 0);
  latch_function *f = make(returns_weight, &w, LATCH_TRACE_ONCE, LATCH_SHAPES_AUTOMATIC, 0, NULL);
  for (int k = 0; k < 3; k++) {
    latch_tensor *x = fu_ramp(rt, 1, FDIMS(2), 0, k), *out[3] = {NULL, NULL, NULL};
    CHECK_EQ_INT(latch_call(f, &x, 1, NULL, 0, out, 3), LATCH_OK);
    double *sum = fu_read(out[0]), *weight = fu_read(out[1]), *own = fu_read(out[2]);
    CHECK(sum && sum[0] == k + 1 && sum[1] == k + 1);
    CHECK(weight && weight[0] == 100 * k && weight[1] == 100 * k + 1);
    CHECK(own && own[0] == 7 && own[1] == 17 && own[2] == 27);
    free(sum), free(weight), free(own);
    for (int j = 0; j < 3; j++) latch_release(out[j]);
    latch_release(x);
    /* the caller gives the weight a new value between calls: w = ramp + 100 * (k + 1) */
    latch_tensor *next = fu_ramp(rt, 1, FDIMS(2), 1, 100 * (k + 1));
    CHECK_EQ_INT(latch_assign(w, next), LATCH_OK);
    latch_release(next);
  }
  CHECK_EQ_INT(stats_of(f).traces, 1);
  CHECK_EQ_INT(stats_of(f).hits, 2);
  latch_function_free(f);
  latch_release(w);
}

/* In place: x += 1 (an input), w *= 0.5 (a weight in user), out = x * w. */
static latch_status step_in_place(void *user, latch_tensor *const *in, int n, const latch_static *st, int sn,
                                  latch_tensor **out, int on) {
  (void)n, (void)st, (void)sn, (void)on;
  latch_tensor *w = *(latch_tensor **)user;
  latch_tensor *one = latch_scalar(rt, LATCH_F32, 1), *half = latch_scalar(rt, LATCH_F32, 0.5);
  latch_tensor *x1 = latch_binary(LATCH_ADD, in[0], one), *w1 = latch_binary(LATCH_MUL, w, half);
  latch_assign(in[0], x1);
  latch_assign(w, w1);
  out[0] = latch_binary(LATCH_MUL, in[0], w);
  latch_release(one);
  latch_release(half);
  latch_release(x1);
  latch_release(w1);
  return LATCH_OK;
}

static void test_in_place(void) {
  latch_tensor *w = fu_ramp(rt, 1, FDIMS(2), 0, 64); /* 64 64 */
  latch_function *f = make(step_in_place, &w, LATCH_TRACE_ONCE, LATCH_SHAPES_AUTOMATIC, 0, NULL);
  latch_tensor *x = fu_ramp(rt, 1, FDIMS(2), 1, 0); /* 0 1 */
  const float *data = latch_data(x);
  double wv = 64;
  for (int k = 1; k <= 4; k++) {
    latch_tensor *out = NULL;
    CHECK_EQ_INT(latch_call(f, &x, 1, NULL, 0, &out, 1), LATCH_OK);
    wv *= 0.5;
    double *v = fu_read(out), *xv = fu_read(x), *ww = fu_read(w);
    CHECK(v && xv && ww);
    if (v && xv && ww) {
      CHECK_EQ_INT(xv[0], k);
      CHECK_EQ_INT(xv[1], k + 1);
      CHECK(ww[0] == wv);
      CHECK(v[1] == (k + 1) * wv);
    }
    free(v);
    free(xv);
    free(ww);
    latch_release(out);
    if (k == 2) { /* the caller updates the weight between calls: the next hit sees it */
      latch_tensor *ten = latch_scalar(rt, LATCH_F32, 10), *w2 = latch_binary(LATCH_MUL, w, ten);
      latch_assign(w, w2);
      latch_sync(rt);
      latch_release(ten);
      latch_release(w2);
      wv *= 10;
    }
  }
  CHECK(latch_data(x) == data); /* written back into the caller's buffer */
  latch_function_stats s = stats_of(f);
  CHECK_EQ_INT(s.traces, 1);
  CHECK_EQ_INT(s.hits, 3);
  latch_function_free(f);
  latch_release(x);
  latch_release(w);
}

/* A weight also passed as an input. Three functions of x and a weight w: one reads w, one
 * updates w, one updates x. Each runs a sequence of calls, some passing w itself as x, in
 * every mode; the results must be what the same steps give on the host, with eager
 * semantics: when x is w they are one tensor, and a write through one is seen through the
 * other. A trace-once function keeps one entry per way of passing (aliased or not). */
enum { ALIAS_N = 3, ALIAS_CALLS = 6 };

typedef enum { READS_W, UPDATES_W, UPDATES_X } alias_kind;

typedef struct alias_case {
  latch_tensor *w;
  alias_kind kind;
} alias_case;

static latch_status alias_step(void *user, latch_tensor *const *in, int n, const latch_static *st, int sn,
                               latch_tensor **out, int on) {
  (void)n, (void)st, (void)sn, (void)on;
  alias_case *a = user;
  latch_tensor *x = in[0], *w = a->w;
  latch_status status = LATCH_OK;
  if (a->kind == READS_W) {
    out[0] = latch_binary(LATCH_ADD, x, w);
  } else if (a->kind == UPDATES_W) { /* w += x; out = 2x */
    latch_tensor *sum = latch_binary(LATCH_ADD, w, x), *two = latch_scalar(rt, LATCH_F32, 2);
    status = latch_assign(w, sum);
    out[0] = latch_binary(LATCH_MUL, x, two);
    latch_release(sum);
    latch_release(two);
  } else { /* x += 1; out = x * w */
    latch_tensor *one = latch_scalar(rt, LATCH_F32, 1), *next = latch_binary(LATCH_ADD, x, one);
    status = latch_assign(x, next);
    out[0] = latch_binary(LATCH_MUL, x, w);
    latch_release(one);
    latch_release(next);
  }
  return status;
}

/* The same step on the host: w and x are updated, out receives the output. */
static void alias_step_host(alias_kind kind, bool aliased, double *w, double *x, double *out) {
  for (int k = 0; k < ALIAS_N; k++) {
    double xk = aliased ? w[k] : x[k];
    if (kind == READS_W) {
      out[k] = xk + w[k];
    } else if (kind == UPDATES_W) {
      w[k] += xk;
      if (aliased) xk = w[k];
      out[k] = 2 * xk;
    } else {
      xk += 1;
      if (aliased) w[k] = xk;
      out[k] = xk * w[k];
    }
    x[k] = xk;
  }
}

static void run_alias_sequence(alias_kind kind, latch_trace_mode mode, const bool *aliased) {
  alias_case a = {fu_ramp(rt, 1, FDIMS(ALIAS_N), 1, 1), kind}; /* 1 2 3 */
  double w[ALIAS_N] = {1, 2, 3};
  latch_function *f = make(alias_step, &a, mode, LATCH_SHAPES_AUTOMATIC, 0, NULL);
  int wrong = 0;
  for (int c = 0; c < ALIAS_CALLS; c++) {
    latch_tensor *x = aliased[c] ? latch_retain(a.w) : fu_ramp(rt, 1, FDIMS(ALIAS_N), 0.5, c), *out = NULL;
    double x_want[ALIAS_N], out_want[ALIAS_N];
    for (int k = 0; k < ALIAS_N; k++) x_want[k] = c + 0.5 * k;
    alias_step_host(kind, aliased[c], w, x_want, out_want);
    latch_status status = latch_call(f, &x, 1, NULL, 0, &out, 1);
    CHECK_MSG(status == LATCH_OK, "kind %d mode %d call %d: %s", kind, mode, c, latch_last_error());
    double *got = fu_read(out), *got_w = fu_read(a.w), *got_x = fu_read(x);
    CHECK(got && got_w && got_x);
    for (int k = 0; got && got_w && got_x && k < ALIAS_N; k++)
      wrong += got[k] != out_want[k] || got_w[k] != w[k] || got_x[k] != x_want[k];
    CHECK_MSG(wrong == 0, "kind %d mode %d call %d (%s): out %g want %g, w %g want %g", kind, mode, c,
              aliased[c] ? "w passed as x" : "x apart", got ? got[0] : NAN, out_want[0], got_w ? got_w[0] : NAN, w[0]);
    free(got);
    free(got_w);
    free(got_x);
    latch_release(out);
    latch_release(x);
    if (wrong) break;
  }
  if (mode == LATCH_TRACE_ONCE) {
    latch_function_stats s = stats_of(f);
    CHECK_EQ_INT(s.traces, 2);
    CHECK_EQ_INT(s.entries, 2);
    CHECK_EQ_INT(s.hits, ALIAS_CALLS - 2);
  }
  latch_function_free(f);
  latch_release(a.w);
}

static void test_weight_passed_as_input(void) {
  /* Traced aliased first, then apart, and the other way round; hits of both after. */
  static const bool aliased_first[ALIAS_CALLS] = {true, false, false, true, true, false};
  static const bool apart_first[ALIAS_CALLS] = {false, true, true, false, false, true};
  latch_trace_mode modes[3] = {LATCH_TRACE_ONCE, LATCH_TRACE_EVERY, LATCH_TRACE_EAGER};
  for (int kind = READS_W; kind <= UPDATES_X; kind++)
    for (int m = 0; m < 3; m++) {
      run_alias_sequence((alias_kind)kind, modes[m], aliased_first);
      run_alias_sequence((alias_kind)kind, modes[m], apart_first);
    }
}

/* Two inputs that are one tensor in some calls, with an in-place update of the first:
 * f(x, y): x *= 2; out = x + y. */
static latch_status double_first(void *user, latch_tensor *const *in, int n, const latch_static *st, int sn,
                                 latch_tensor **out, int on) {
  (void)user, (void)n, (void)st, (void)sn, (void)on;
  latch_tensor *two = latch_scalar(rt, LATCH_F32, 2), *doubled = latch_binary(LATCH_MUL, in[0], two);
  latch_status status = latch_assign(in[0], doubled);
  out[0] = latch_binary(LATCH_ADD, in[0], in[1]);
  latch_release(two);
  latch_release(doubled);
  return status;
}

static void test_inputs_passed_twice(void) {
  latch_function *f = make(double_first, NULL, LATCH_TRACE_ONCE, LATCH_SHAPES_AUTOMATIC, 0, NULL);
  static const bool twice[4] = {false, true, false, true};
  for (int c = 0; c < 4; c++) {
    latch_tensor *x = fu_ramp(rt, 1, FDIMS(2), 1, 1), *y = twice[c] ? latch_retain(x) : fu_ramp(rt, 1, FDIMS(2), 0, 10);
    latch_tensor *in[2] = {x, y}, *out = NULL;
    CHECK_EQ_INT(latch_call(f, in, 2, NULL, 0, &out, 1), LATCH_OK);
    double *v = fu_read(out);
    /* x = 1 2 -> 2 4; y is x (4 8) or 10 10 */
    CHECK(v && v[0] == (twice[c] ? 4 : 12) && v[1] == (twice[c] ? 8 : 14));
    free(v);
    latch_release(out);
    latch_release(x);
    latch_release(y);
  }
  CHECK_EQ_INT(stats_of(f).entries, 2);
  CHECK_EQ_INT(stats_of(f).hits, 2);
  latch_function_free(f);
}

/* A handle of the function's own onto an input's data (a cast to the same dtype) is that
 * input, not a weight: calls with other inputs hit. out = cast(x) + 1. */
static latch_status cast_plus_one(void *user, latch_tensor *const *in, int n, const latch_static *st, int sn,
                                  latch_tensor **out, int on) {
  (void)user, (void)n, (void)st, (void)sn, (void)on;
  latch_tensor *same = latch_cast(in[0], LATCH_F32), *one = latch_scalar(rt, LATCH_F32, 1);
  out[0] = latch_binary(LATCH_ADD, same, one);
  latch_release(same);
  latch_release(one);
  return LATCH_OK;
}

static void test_own_handle_onto_input(void) {
  latch_function *f = make(cast_plus_one, NULL, LATCH_TRACE_ONCE, LATCH_SHAPES_AUTOMATIC, 0, NULL);
  for (int c = 0; c < 3; c++) {
    latch_tensor *x = fu_ramp(rt, 1, FDIMS(2), 1, c), *out = NULL;
    CHECK_EQ_INT(latch_call(f, &x, 1, NULL, 0, &out, 1), LATCH_OK);
    double *v = fu_read(out);
    CHECK(v && v[0] == c + 1 && v[1] == c + 2);
    free(v);
    latch_release(out);
    latch_release(x);
  }
  CHECK_EQ_INT(stats_of(f).traces, 1);
  CHECK_EQ_INT(stats_of(f).hits, 2);
  latch_function_free(f);
}

/* Random numbers: out = uniform like x, and dropout of x. */
static latch_status random_step(void *user, latch_tensor *const *in, int n, const latch_static *st, int sn,
                                latch_tensor **out, int on) {
  (void)user, (void)n, (void)st, (void)sn, (void)on;
  out[0] = latch_rand_uniform_like(in[0], 0, 1);
  out[1] = latch_dropout(in[0], 0.5);
  return LATCH_OK;
}

static void test_random(void) {
  enum { CALLS = 4, N = 256 };
  latch_trace_mode modes[3] = {LATCH_TRACE_ONCE, LATCH_TRACE_EVERY, LATCH_TRACE_EAGER};
  double *seen[3][CALLS][2];
  for (int m = 0; m < 3; m++) {
    latch_function_options o = fu_options(modes[m], LATCH_SHAPES_AUTOMATIC);
    o.seed = 1234;
    latch_function *f = latch_function_new(rt, random_step, NULL, &o);
    latch_tensor *x = fu_ramp(rt, 1, FDIMS(N), 0, 1);
    for (int c = 0; c < CALLS; c++) {
      latch_tensor *out[2] = {NULL, NULL};
      CHECK_EQ_INT(latch_call(f, &x, 1, NULL, 0, out, 2), LATCH_OK);
      seen[m][c][0] = fu_read(out[0]);
      seen[m][c][1] = fu_read(out[1]);
      latch_release(out[0]);
      latch_release(out[1]);
    }
    if (modes[m] == LATCH_TRACE_ONCE) {
      CHECK_EQ_INT(stats_of(f).traces, 1);
      CHECK_EQ_INT(stats_of(f).hits, CALLS - 1);
    }
    latch_function_free(f);
    latch_release(x);
  }
  for (int c = 0; c < CALLS; c++) {
    double *u = seen[0][c][0], *d = seen[0][c][1];
    CHECK(u && d);
    if (!u || !d) continue;
    int kept = 0, in_range = 0;
    for (int i = 0; i < N; i++) {
      in_range += u[i] >= 0 && u[i] < 1;
      kept += d[i] == 2;
      CHECK(d[i] == 0 || d[i] == 2);
    }
    CHECK_EQ_INT(in_range, N);
    CHECK(kept > N / 4 && kept < 3 * N / 4);
    for (int p = 0; p < c; p++) { /* no two calls draw the same numbers, hits included */
      int same = 0;
      for (int i = 0; seen[0][p][0] && i < N; i++) same += seen[0][p][0][i] == u[i];
      CHECK_MSG(same < 4, "calls %d and %d share %d of %d numbers", p, c, same, N);
    }
    for (int m = 1; m < 3; m++) /* the same seed sequence gives the same numbers in every mode */
      for (int k = 0; k < 2; k++) {
        bool equal = seen[m][c][k] != NULL;
        for (int i = 0; equal && i < N; i++) equal = seen[m][c][k][i] == seen[0][c][k][i];
        CHECK_MSG(equal, "mode %d call %d output %d differs from trace-once", m, c, k);
      }
  }
  for (int m = 0; m < 3; m++)
    for (int c = 0; c < CALLS; c++) free(seen[m][c][0]), free(seen[m][c][1]);
}

static void two_sizes(void *arg) {
  latch_function *f = arg;
  for (int64_t size = 3; size <= 5; size += 2) {
    latch_tensor *x = fu_ramp(rt, 1, &size, 1, 0), *y = fu_ramp(rt, 1, &size, 2, 1);
    call_affine(f, x, y, __LINE__);
    latch_release(x);
    latch_release(y);
  }
}

/* options.log "recompiles,guards" (LATCH_LOG): each new entry's guards, each recompile with
 * its guard and the input dim's old and new value. */
static void test_logs(void) {
  latch_options options;
  latch_options_init(&options);
  options.backend = "reference";
  options.log = "recompiles,guards";
  latch_runtime *quiet = rt;
  rt = latch_open(&options); /* two_sizes makes its tensors in rt */
  CHECK_MSG(rt != NULL, "%s", latch_last_error());
  if (!rt) {
    rt = quiet;
    return;
  }
  latch_function_options o = fu_options(LATCH_TRACE_ONCE, LATCH_SHAPES_STATIC);
  o.name = "logged";
  latch_function *f = latch_function_new(rt, affine, NULL, &o);
  const char *text = fu_capture_stderr(two_sizes, f);
  CHECK(strstr(text, "'logged' entry 1 guards:") != NULL);
  CHECK(strstr(text, "input 1 dim 0 == 3") != NULL);
  CHECK(strstr(text, "'logged' entry 2 guards:") != NULL);
  CHECK(strstr(text, "'logged' recompile 1") != NULL);
  CHECK(strstr(text, "guard 'input 0 dim 0 == 3' failed: got 5") != NULL);
  CHECK(strstr(text, "(input 0 dim 0: 3 -> 5)") != NULL);
  latch_function_free(f);
  latch_close(rt);
  rt = quiet;
}

static void sizes_1_to_8_twice(void *arg) {
  latch_function *f = arg;
  for (int64_t size = 1; size <= 8; size++) {
    latch_tensor *x = fu_ramp(rt, 1, &size, 1, 0), *y = fu_ramp(rt, 1, &size, 2, 1);
    call_affine(f, x, y, __LINE__);
    call_affine(f, x, y, __LINE__); /* sizes 1..4 hit their entries; later ones trace again */
    latch_release(x);
    latch_release(y);
  }
}

/* The recompile limit: static shapes, limit 3, eight sizes. */
static void test_limit(void) {
  latch_function_options o = fu_options(LATCH_TRACE_ONCE, LATCH_SHAPES_STATIC);
  o.recompile_limit = 3;
  o.name = "limited";
  latch_function *f = latch_function_new(rt, affine, NULL, &o);
  const char *text = fu_capture_stderr(sizes_1_to_8_twice, f); /* to count the warnings */
  int warnings = 0;
  for (const char *p = text; (p = strstr(p, "recompile limit")); p++) warnings++;
  CHECK_EQ_INT(warnings, 1);
  CHECK(strstr(text, "'limited'") != NULL);
  CHECK(strstr(text, "input 0 dim 0 == ") != NULL); /* names the guard that keeps failing */
  latch_function_stats s = stats_of(f);
  CHECK_EQ_INT(s.entries, 4);
  CHECK_EQ_INT(s.recompiles, 3);
  CHECK(s.trace_every);
  CHECK_EQ_INT(s.hits, 4);
  CHECK_EQ_INT(s.traces, 4 + 8);
  CHECK_EQ_INT(s.fallback_calls, 8);
  latch_function_free(f);
}

/* Symbolic spatial dims through strided windows: conv2d stride 2 pad 1, then max_pool 3
 * stride 2 (floor divisions, kept as symbols defined by them). */
static latch_status strided(void *user, latch_tensor *const *in, int n, latch_tensor **out, int on) {
  (void)n, (void)on;
  latch_tensor *w = user;
  latch_conv2d_params p = {{2, 2}, {1, 1}, {1, 1}, 1};
  int64_t k[2] = {3, 3}, st[2] = {2, 2};
  latch_tensor *c = latch_conv2d(in[0], w, &p), *pool = latch_max_pool2d(c, k, st, NULL);
  out[0] = latch_reduce(LATCH_SUM, pool, 1, (const int[]){1}, false);
  latch_release(c);
  latch_release(pool);
  return LATCH_OK;
}

static void test_symbolic_windows(void) {
  latch_tensor *w = fu_ramp(rt, 4, FDIMS(2, 1, 3, 3), 0.1, -0.8);
  latch_dim_mark marks[2] = {{0, 2, true, true}, {0, 3, true, true}};
  latch_function_options o = fu_options(LATCH_TRACE_ONCE, LATCH_SHAPES_MARKED), e = fu_options(LATCH_TRACE_EVERY, LATCH_SHAPES_MARKED);
  o.mark_count = 2;
  o.marks = marks;
  latch_function *once = latch_function_new_step(rt, strided, w, &o), *every = latch_function_new_step(rt, strided, w, &e);
  int checked = 0;
  /* Sizes whose derived window counts stay >= 2: a derived size of 0 or 1 is specialized
   * (guarded to its range), as an input size would be. */
  for (int64_t h = 13; h <= 20; h++) {
    int64_t wd = 33 - h;
    latch_tensor *x = fu_ramp(rt, 4, FDIMS(2, 1, h, wd), 0.01, -1), *a = NULL, *b = NULL;
    CHECK_EQ_INT(latch_call(once, &x, 1, NULL, 0, &a, 1), LATCH_OK);
    CHECK_EQ_INT(latch_call(every, &x, 1, NULL, 0, &b, 1), LATCH_OK);
    int64_t oh = (h + 2 - 3) / 2 + 1, ow = (wd + 2 - 3) / 2 + 1; /* conv */
    oh = (oh - 3) / 2 + 1, ow = (ow - 3) / 2 + 1;                 /* pool */
    CHECK_EQ_INT(latch_dim(a, 1), oh);
    CHECK_EQ_INT(latch_dim(a, 2), ow);
    CHECK(fu_max_diff(a, b) == 0);
    checked += latch_dim(a, 1) == oh;
    latch_release(a);
    latch_release(b);
    latch_release(x);
  }
  CHECK_EQ_INT(checked, 8);
  latch_function_stats s;
  latch_function_get_stats(once, &s);
  CHECK_EQ_INT(s.traces, 1);
  CHECK_EQ_INT(s.hits, 7);
  latch_function_free(once);
  latch_function_free(every);
  latch_release(w);
}

/* One function, three modes, the same results. */
typedef struct mlp {
  latch_tensor *w1, *b1, *w2;
} mlp;

static latch_status mlp_step(void *user, latch_tensor *const *in, int n, latch_tensor **out, int on) {
  (void)n, (void)on;
  mlp *m = user;
  latch_tensor *h = latch_matmul(in[0], m->w1), *hb = latch_binary(LATCH_ADD, h, m->b1), *r = latch_relu(hb);
  latch_tensor *o = latch_matmul(r, m->w2);
  out[0] = latch_softmax(o, -1);
  out[1] = latch_reduce(LATCH_MEAN, o, 0, NULL, false);
  latch_release(h);
  latch_release(hb);
  latch_release(r);
  latch_release(o);
  return LATCH_OK;
}

static void test_modes_agree(void) {
  mlp m = {fu_ramp(rt, 2, FDIMS(4, 8), 0.01, -0.1), fu_ramp(rt, 1, FDIMS(8), 0.02, -0.05),
           fu_ramp(rt, 2, FDIMS(8, 3), -0.03, 0.3)};
  latch_trace_mode modes[3] = {LATCH_TRACE_ONCE, LATCH_TRACE_EVERY, LATCH_TRACE_EAGER};
  latch_function *f[3];
  for (int k = 0; k < 3; k++) {
    latch_function_options o = fu_options(modes[k], LATCH_SHAPES_AUTOMATIC);
    f[k] = latch_function_new_step(rt, mlp_step, &m, &o);
  }
  int64_t batches[4] = {2, 5, 3, 5};
  for (int b = 0; b < 4; b++) {
    latch_tensor *x = fu_ramp(rt, 2, FDIMS(batches[b], 4), 0.1, -0.7 + b), *out[3][2];
    for (int k = 0; k < 3; k++) CHECK_EQ_INT(latch_call(f[k], &x, 1, NULL, 0, out[k], 2), LATCH_OK);
    for (int k = 1; k < 3; k++)
      for (int j = 0; j < 2; j++) CHECK_MSG(fu_max_diff(out[0][j], out[k][j]) <= 1e-6, "batch %lld mode %d output %d", (long long)batches[b], k, j);
    for (int k = 0; k < 3; k++) latch_release(out[k][0]), latch_release(out[k][1]);
    latch_release(x);
  }
  latch_function_stats s = stats_of(f[0]);
  CHECK_EQ_INT(s.traces, 2); /* 2 static, then 5 made the batch symbolic */
  CHECK_EQ_INT(s.hits, 2);
  CHECK_EQ_INT(stats_of(f[1]).traces, 4);
  for (int k = 0; k < 3; k++) latch_function_free(f[k]);
  latch_release(m.w1);
  latch_release(m.b1);
  latch_release(m.w2);
}

static void test_errors(void) {
  latch_function *f = make(affine, NULL, LATCH_TRACE_ONCE, LATCH_SHAPES_AUTOMATIC, 0, NULL);
  latch_tensor *x = fu_ramp(rt, 1, FDIMS(3), 1, 0), *y = fu_ramp(rt, 1, FDIMS(4), 1, 0), *in[2] = {x, y}, *out = x;
  CHECK_EQ_INT(latch_call(f, in, 2, NULL, 0, &out, 1), LATCH_ERR_INPUT); /* shapes do not broadcast */
  CHECK(out == NULL);
  CHECK_EQ_INT(latch_call(NULL, in, 2, NULL, 0, &out, 1), LATCH_ERR_INPUT);
  in[1] = NULL;
  CHECK_EQ_INT(latch_call(f, in, 2, NULL, 0, &out, 1), LATCH_ERR_INPUT);
  CHECK_EQ_INT(stats_of(f).entries, 0);
  /* Traced with one output; a call asking for two is not that entry (the function leaves
   * the second NULL: an error, nothing written past the caller's array). */
  latch_tensor *z = fu_ramp(rt, 1, FDIMS(3), 1, 0), *pair[2] = {NULL, NULL};
  in[0] = x, in[1] = z;
  CHECK_EQ_INT(latch_call(f, in, 2, NULL, 0, pair, 1), LATCH_OK);
  latch_release(pair[0]);
  CHECK_EQ_INT(latch_call(f, in, 2, NULL, 0, pair, 2), LATCH_ERR_INPUT);
  CHECK(pair[0] == NULL && pair[1] == NULL);
  CHECK_EQ_INT(stats_of(f).entries, 1);
  latch_release(z);
  latch_release(x);
  latch_release(y);
  latch_function_free(f);
}

int main(void) {
  rt = fu_open();
  RUN(test_hits_and_misses);
  RUN(test_statics);
  RUN(test_duck_sizing);
  RUN(test_zero_one_specialization);
  RUN(test_divisibility);
  RUN(test_size_api);
  RUN(test_size_mul);
  RUN(test_slice_sized);
  RUN(test_dim_read_specializes);
  RUN(test_value_read);
  RUN(test_in_place);
  RUN(test_write_only_weight);
  RUN(test_weight_returned_as_is);
  RUN(test_weight_passed_as_input);
  RUN(test_inputs_passed_twice);
  RUN(test_own_handle_onto_input);
  RUN(test_random);
  RUN(test_limit);
  RUN(test_logs);
  RUN(test_modes_agree);
  RUN(test_symbolic_windows);
  RUN(test_errors);
  latch_close(rt);
  return TEST_REPORT();
}
