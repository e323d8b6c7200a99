/* Kept reduces: the cpu backend keeps the result of a reduce of one parameter alone in its
 * arena, with the argument's stamp, and skips the step while an execute's argument has the
 * same stamp. Checked: stamps (new values, copies, touches); reuse and recomputation on the
 * backend (same value, a value written and touched, a copy, a view without a stamp, an
 * arena last run by a bound executable, a kept row whose slice moves with the binding); and
 * through traced functions whose weight is assigned in place between calls, or updated
 * inside each call. Results against sums worked out here. */
#include <math.h>
#include <stdio.h>

#include "cpu_util.h"
#include "function_util.h"
#include "runtime/cpu/exec_internal.h"

static void test_stamps(void) {
  rt_value *a = rt_value_new_array(HLO_F32, 1, (int64_t[]){4}), *b = rt_value_new_array(HLO_F32, 1, (int64_t[]){4});
  CHECK(a->stamp != 0 && b->stamp != 0 && a->stamp != b->stamp);
  rt_value *copy = rt_value_copy(a);
  CHECK(copy->stamp != a->stamp && copy->stamp != 0);
  uint64_t before = a->stamp;
  rt_value_touch(a);
  CHECK(a->stamp != before && a->stamp != 0 && a->stamp != copy->stamp);
  rt_value shell = *a; /* a shell around the same data carries its stamp */
  CHECK(shell.stamp == a->stamp);
  rt_value_release(a);
  rt_value_release(b);
  rt_value_release(copy);
}

/* y[i][j] = x[i][j] + s[j], s[j] = sum over g of w[g][j] (w [3, 4] seen as [3, 4], reduced
 * over dim 0 through a reshape): the reduce reads the parameter w alone. */
static const char *graph(int64_t n) {
  static char text[1024];
  snprintf(text, sizeof text,
           "HloModule kept\nadd {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] add(a, b)\n}\n"
           "ENTRY e {\n  x = f32[%1$lld,4] parameter(0)\n  w = f32[12] parameter(1)\n  r = f32[3,4] reshape(w)\n"
           "  z = f32[] constant(0)\n  s = f32[4] reduce(r, z), dimensions={0}, to_apply=add\n"
           "  b = f32[%1$lld,4] broadcast(s), dimensions={1}\n  ROOT y = f32[%1$lld,4] add(x, b)\n}\n",
           (long long)n);
  return text;
}

/* Runs exe on x = i (row-major index) and w; checks y and how many kept steps were skipped. */
static void expect_run(int line, rt_executable *exe, int64_t n, rt_value *w, int64_t reuses) {
  double xs[64 * 4];
  for (int64_t i = 0; i < n * 4; i++) xs[i] = (double)i;
  rt_value *x = make_value(HLO_F32, 2, (int64_t[]){n, 4}, xs);
  rt_value *args[] = {x, w}, *result = NULL;
  hlo_diag diag = {0};
  int64_t before = rt_cpu_kept_reuse_count();
  hlo_status status = rt_backend_cpu.execute(exe, args, 2, &result, &diag);
  CHECK_MSG(status == HLO_OK, "line %d: %s", line, diag.message);
  CHECK_MSG(rt_cpu_kept_reuse_count() - before == reuses, "line %d: %lld kept steps skipped, want %lld", line,
            (long long)(rt_cpu_kept_reuse_count() - before), (long long)reuses);
  double want[64 * 4];
  for (int64_t i = 0; i < n; i++)
    for (int j = 0; j < 4; j++) {
      double s = 0;
      for (int g = 0; g < 3; g++) s += rt_get_f64(w, g * 4 + j);
      want[i * 4 + j] = xs[i * 4 + j] + s;
    }
  if (result) expect_values(line, result, want, n * 4, 0);
  rt_value_release(result);
  rt_value_release(x);
}

static void test_reuse(void) {
  rt_executable *exe = compile_checked(graph(2));
  if (!exe) return;
  double ws[12];
  for (int i = 0; i < 12; i++) ws[i] = i - 4;
  rt_value *w = make_value(HLO_F32, 1, (int64_t[]){12}, ws);
  expect_run(__LINE__, exe, 2, w, 0); /* first: computed */
  expect_run(__LINE__, exe, 2, w, 1); /* same contents: kept */
  expect_run(__LINE__, exe, 2, w, 1);
  ((float *)w->data)[5] = 100; /* written in place and touched: computed again */
  rt_value_touch(w);
  expect_run(__LINE__, exe, 2, w, 0);
  expect_run(__LINE__, exe, 2, w, 1);
  rt_value *copy = rt_value_copy(w); /* equal contents, another value: computed */
  expect_run(__LINE__, exe, 2, copy, 0);
  rt_value view = *w; /* a view made by hand: no stamp, never kept */
  view.stamp = 0;
  expect_run(__LINE__, exe, 2, &view, 0);
  expect_run(__LINE__, exe, 2, &view, 0);
  /* a bound executable runs in the family's arena with its own plan, which keeps the
   * result where the compiled one's does (the arena holds the kept value alone: the graph's
   * result is a value of its own): each hands it to the other (kept_places.c) */
  hlo_diag diag = {0};
  hlo_module *binding = parse_checked(graph(5));
  rt_executable *bound = binding ? rt_backend_cpu.bind(exe, binding, &diag) : NULL;
  hlo_module_free(binding);
  CHECK_MSG(bound != NULL, "bind: %s", diag.message);
  if (bound) {
    expect_run(__LINE__, exe, 2, w, 0); /* the view's call left no kept result current */
    expect_run(__LINE__, bound, 5, w, 1);
    expect_run(__LINE__, bound, 5, w, 1);
    expect_run(__LINE__, exe, 2, w, 1);
    ((float *)w->data)[2] = -3; /* written in place: computed again, by whichever runs next */
    rt_value_touch(w);
    expect_run(__LINE__, bound, 5, w, 0);
    expect_run(__LINE__, exe, 2, w, 1);
    expect_run(__LINE__, bound, 5, w, 1);
    rt_backend_cpu.destroy(bound); /* it gave the arena back last: its layout goes with it */
    expect_run(__LINE__, exe, 2, w, 0);
    expect_run(__LINE__, exe, 2, w, 1);
  }
  rt_value_release(copy);
  rt_value_release(w);
  rt_backend_cpu.destroy(exe);
}

/* y = flatten(x grown 4 -> 4x3 by copies) @ w at batch 1: the weight's sum over each
 * group of 3 rows is kept from call to call, and follows w when it is assigned. */
static latch_status classifier(void *user, latch_tensor *const *in, int in_count, latch_tensor **out, int out_count) {
  (void)user, (void)in_count, (void)out_count;
  latch_tensor *x3 = latch_reshape(in[0], 3, (int64_t[]){1, 4, 1});
  latch_tensor *copies[3] = {x3, x3, x3};
  latch_tensor *grown = latch_concat(3, copies, 2);
  latch_tensor *flat = latch_reshape(grown, 2, (int64_t[]){1, 12});
  out[0] = latch_matmul(flat, in[1]);
  latch_release(x3);
  latch_release(grown);
  latch_release(flat);
  return out[0] ? LATCH_OK : LATCH_ERR_INTERNAL;
}

/* The classifier, then w -= 1 in place (a training step's update, written back after the
 * call): each call must see the weights the previous one left. */
static latch_status classifier_step(void *user, latch_tensor *const *in, int in_count, latch_tensor **out,
                                    int out_count) {
  latch_status status = classifier(user, in, in_count, out, out_count);
  latch_tensor *one = latch_scalar((latch_runtime *)user, LATCH_F32, 1);
  latch_tensor *next = latch_binary(LATCH_SUB, in[1], one);
  if (status == LATCH_OK) status = latch_assign(in[1], next);
  latch_release(one);
  latch_release(next);
  return status;
}

static void expect_classifier(int line, latch_function *f, latch_tensor *x, latch_tensor *w, const float *xs,
                              const float *ws) {
  latch_tensor *in[] = {x, w}, *y = NULL;
  CHECK_EQ_INT(latch_call(f, in, 2, NULL, 0, &y, 1), LATCH_OK);
  double *got = fu_read(y), want[5];
  for (int j = 0; j < 5; j++) {
    want[j] = 0;
    for (int k = 0; k < 12; k++) want[j] += xs[k / 3] * ws[k * 5 + j];
  }
  for (int j = 0; got && j < 5; j++) CHECK_MSG(got[j] == want[j], "line %d: y[%d] = %g, want %g", line, j, got[j], want[j]);
  CHECK_MSG(got != NULL, "line %d: no result", line);
  free(got);
  latch_release(y);
}

static void test_traced_weights(void) {
  latch_runtime *rt = fu_open_backend("cpu");
  latch_function_options fo = fu_options(LATCH_TRACE_ONCE, LATCH_SHAPES_STATIC);
  latch_function *f = rt ? latch_function_new_step(rt, classifier, NULL, &fo) : NULL;
  CHECK(f != NULL);
  if (!f) {
    latch_close(rt);
    return;
  }
  float xs[4] = {1, -2, 0.5f, 3}, ws[60], ws2[60];
  for (int i = 0; i < 60; i++) ws[i] = (float)(i % 7) - 3, ws2[i] = (float)(i % 5) * 0.5f;
  latch_tensor *x = latch_from_host(rt, LATCH_F32, 2, (int64_t[]){1, 4}, xs);
  latch_tensor *w = latch_from_host(rt, LATCH_F32, 2, (int64_t[]){12, 5}, ws);
  expect_classifier(__LINE__, f, x, w, xs, ws);
  int64_t before = rt_cpu_kept_reuse_count();
  expect_classifier(__LINE__, f, x, w, xs, ws);
  expect_classifier(__LINE__, f, x, w, xs, ws);
  CHECK_MSG(rt_cpu_kept_reuse_count() - before == 2, "%lld kept steps skipped, want 2",
            (long long)(rt_cpu_kept_reuse_count() - before));
  latch_tensor *w2 = latch_from_host(rt, LATCH_F32, 2, (int64_t[]){12, 5}, ws2);
  CHECK_EQ_INT(latch_assign(w, w2), LATCH_OK); /* w's contents change: the sum follows */
  latch_release(w2);
  expect_classifier(__LINE__, f, x, w, xs, ws2);
  expect_classifier(__LINE__, f, x, w, xs, ws2);
  /* updated inside the function, call after call */
  latch_function *g = latch_function_new_step(rt, classifier_step, rt, &fo);
  CHECK(g != NULL);
  for (int call = 0; g && call < 4; call++) {
    expect_classifier(__LINE__, g, x, w, xs, ws2);
    for (int i = 0; i < 60; i++) ws2[i] -= 1;
  }
  latch_function_free(g);
  latch_release(x);
  latch_release(w);
  latch_function_free(f);
  latch_close(rt);
}

/* Lazy ops, no traced function: the classifier's graph is compiled once by hash and run by
 * each read; w -= 1 assigned lazily is written back into w's buffer when it runs, and the
 * next read must see it. */
static void test_lazy_weights(void) {
  latch_options options;
  latch_options_init(&options);
  options.backend = "cpu";
  options.eager = false;
  latch_runtime *rt = latch_open(&options);
  CHECK(rt != NULL);
  if (!rt) return;
  float xs[4] = {2, -1, 0.25f, 1}, ws[60];
  for (int i = 0; i < 60; i++) ws[i] = (float)(i % 9) - 4;
  latch_tensor *x = latch_from_host(rt, LATCH_F32, 2, (int64_t[]){1, 4}, xs);
  latch_tensor *w = latch_from_host(rt, LATCH_F32, 2, (int64_t[]){12, 5}, ws);
  latch_tensor *one = latch_scalar(rt, LATCH_F32, 1);
  for (int step = 0; step < 3; step++) {
    latch_tensor *in[] = {x, w}, *y = NULL;
    CHECK_EQ_INT(classifier(NULL, in, 2, &y, 1), LATCH_OK);
    double *got = fu_read(y);
    for (int j = 0; got && j < 5; j++) {
      double want = 0;
      for (int k = 0; k < 12; k++) want += xs[k / 3] * ws[k * 5 + j];
      CHECK_MSG(got[j] == want, "step %d: y[%d] = %g, want %g", step, j, got[j], want);
    }
    free(got);
    latch_release(y);
    latch_tensor *next = latch_binary(LATCH_SUB, w, one);
    CHECK_EQ_INT(latch_assign(w, next), LATCH_OK);
    latch_release(next);
    CHECK_EQ_INT(latch_sync(rt), LATCH_OK);
    for (int i = 0; i < 60; i++) ws[i] -= 1;
  }
  latch_release(one);
  latch_release(x);
  latch_release(w);
  latch_close(rt);
}

/* A per-feature value (y = x + (b - m * g) spread over x's rows) is kept: computed on the
 * first execute, skipped on the next, computed again after m is written in place. A value
 * spread from a large one (the sum of x * x's rows) is not kept, even with x unchanged. */
static void test_per_feature(void) {
  const char *text =
      "HloModule pf\nadd {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] add(a, b)\n}\n"
      "ENTRY e {\n  x = f32[16,4] parameter(0)\n  b = f32[4] parameter(1)\n  m = f32[4] parameter(2)\n"
      "  g = f32[4] parameter(3)\n  mg = f32[4] multiply(m, g)\n  t = f32[4] subtract(b, mg)\n"
      "  bt = f32[16,4] broadcast(t), dimensions={1}\n  ROOT y = f32[16,4] add(x, bt)\n}\n";
  rt_executable *exe = compile_checked(text);
  double xs[64], bs[4] = {1, 2, 3, 4}, ms[4] = {0.5, -1, 2, 0}, gs[4] = {2, 3, -1, 5};
  for (int i = 0; i < 64; i++) xs[i] = i * 0.25;
  rt_value *args[4] = {make_value(HLO_F32, 2, (int64_t[]){16, 4}, xs), make_value(HLO_F32, 1, (int64_t[]){4}, bs),
                       make_value(HLO_F32, 1, (int64_t[]){4}, ms), make_value(HLO_F32, 1, (int64_t[]){4}, gs)};
  for (int run = 0; exe && run < 3; run++) {
    if (run == 2) {
      ((float *)args[2]->data)[1] = 7;
      ms[1] = 7;
      rt_value_touch(args[2]);
    }
    rt_value *result = NULL;
    hlo_diag diag = {0};
    int64_t before = rt_cpu_kept_reuse_count();
    CHECK_MSG(rt_backend_cpu.execute(exe, args, 4, &result, &diag) == HLO_OK, "run %d: %s", run, diag.message);
    CHECK_MSG(rt_cpu_kept_reuse_count() - before == (run == 1), "run %d: %lld kept steps skipped", run,
              (long long)(rt_cpu_kept_reuse_count() - before));
    bool right = result != NULL;
    for (int i = 0; right && i < 64; i++) right = rt_get_f64(result, i) == xs[i] + (bs[i % 4] - ms[i % 4] * gs[i % 4]);
    CHECK_MSG(right, "run %d: wrong values", run);
    rt_value_release(result);
  }
  for (int i = 0; i < 4; i++) rt_value_release(args[i]);
  if (exe) rt_backend_cpu.destroy(exe);
  const char *big =
      "HloModule big\nadd {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] add(a, b)\n}\n"
      "ENTRY e {\n  x = f32[8,16384] parameter(0)\n  z = f32[] constant(0)\n  xx = f32[8,16384] multiply(x, x)\n"
      "  s = f32[16384] reduce(xx, z), dimensions={0}, to_apply=add\n"
      "  bs = f32[8,16384] broadcast(s), dimensions={1}\n  ROOT y = f32[8,16384] subtract(x, bs)\n}\n";
  exe = compile_checked(big);
  hlo_diag diag = {0};
  hlo_module *module = parse_checked(big);
  rt_value *x = module ? rt_random_value(&module->entry->params[0]->shape, 3, 0, &diag) : NULL;
  hlo_module_free(module);
  for (int run = 0; exe && x && run < 2; run++) {
    rt_value *result = NULL;
    int64_t before = rt_cpu_kept_reuse_count();
    CHECK_MSG(rt_backend_cpu.execute(exe, &x, 1, &result, &diag) == HLO_OK, "big run %d: %s", run, diag.message);
    CHECK_MSG(rt_cpu_kept_reuse_count() == before, "big run %d: a sum over the input was kept", run);
    double col = 0;
    for (int r = 0; r < 8; r++) col += rt_get_f64(x, r * 16384 + 5) * rt_get_f64(x, r * 16384 + 5);
    CHECK_MSG(result && fabs(rt_get_f64(result, 16384 * 2 + 5) - (rt_get_f64(x, 16384 * 2 + 5) - col)) < 1e-5,
              "big run %d: wrong values", run);
    rt_value_release(result);
  }
  rt_value_release(x);
  if (exe) rt_backend_cpu.destroy(exe);
}

/* y = x + broadcast(w[k]): one row of a weight, picked by a slice whose bounds move with a
 * size (a decoder's position embedding at the current position). The row is kept (a
 * per-feature value spread 8-fold, read from a parameter alone), and two bindings of the
 * graph at other positions keep it at the same place with the same shape and stamps: an
 * arena one of them gave back must not hand its row to the other. */
static const char *window_graph(int64_t k) {
  static char text[1024];
  snprintf(text, sizeof text,
           "HloModule win\nENTRY e {\n  x = f32[8,4] parameter(0)\n  w = f32[6,4] parameter(1)\n"
           "  s = f32[1,4] slice(w), slice={[%1$lld:%2$lld], [0:4]}\n  r = f32[4] reshape(s)\n"
           "  b = f32[8,4] broadcast(r), dimensions={1}\n  ROOT y = f32[8,4] add(x, b)\n}\n",
           (long long)k, (long long)k + 1);
  return text;
}

static void expect_window(int line, rt_executable *exe, int64_t k, rt_value *x, rt_value *w) {
  rt_value *args[] = {x, w}, *y = NULL;
  hlo_diag diag = {0};
  CHECK_MSG(rt_backend_cpu.execute(exe, args, 2, &y, &diag) == HLO_OK, "line %d: %s", line, diag.message);
  bool right = y != NULL;
  for (int i = 0; right && i < 32; i++) right = rt_get_f64(y, i) == rt_get_f64(x, i) + rt_get_f64(w, k * 4 + i % 4);
  CHECK_MSG(right, "line %d: y is not x plus row %lld of w", line, (long long)k);
  rt_value_release(y);
}

static void test_moving_window(void) {
  rt_executable *exe = compile_checked(window_graph(1));
  hlo_module *binding = parse_checked(window_graph(4));
  hlo_diag diag = {0};
  rt_executable *bound = exe && binding ? rt_backend_cpu.bind(exe, binding, &diag) : NULL;
  hlo_module_free(binding);
  CHECK_MSG(bound != NULL, "bind: %s", diag.message);
  double xs[32], ws[24];
  for (int i = 0; i < 32; i++) xs[i] = i;
  for (int i = 0; i < 24; i++) ws[i] = 100 * (i / 4 + 1) + i % 4;
  rt_value *x = make_value(HLO_F32, 2, (int64_t[]){8, 4}, xs), *w = make_value(HLO_F32, 2, (int64_t[]){6, 4}, ws);
  for (int round = 0; bound && round < 3; round++) {
    expect_window(__LINE__, exe, 1, x, w);
    expect_window(__LINE__, bound, 4, x, w);
  }
  int64_t before = rt_cpu_kept_reuse_count();
  expect_window(__LINE__, bound, 4, x, w); /* its own row, from the arena it gave back: kept */
  CHECK_MSG(rt_cpu_kept_reuse_count() - before == 1, "the row was not kept (%lld reuses)",
            (long long)(rt_cpu_kept_reuse_count() - before));
  rt_value_release(x);
  rt_value_release(w);
  if (bound) rt_backend_cpu.destroy(bound);
  if (exe) rt_backend_cpu.destroy(exe);
}

int main(void) {
  RUN(test_stamps);
  RUN(test_reuse);
  RUN(test_traced_weights);
  RUN(test_lazy_weights);
  RUN(test_per_feature);
  RUN(test_moving_window);
  return TEST_REPORT();
}
