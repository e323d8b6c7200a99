/* Batch norm folded into the convolution before it (rt_cpu_pass_fold_affine) and the folded
 * weights kept as parameter-only work (runtime/cpu/kept.c). Checked: what the pass folds and
 * leaves (a parameter weight, a computed one, a depthwise convolution, divides, a chain
 * whose value is read twice); the cpu backend against the reference evaluator on the folded
 * graphs; the kept steps skipped while the arguments' stamps are the same and run again when
 * a weight, a scale or a mean is written in place, and oneDNN's reorder of the scaled weights
 * done once per version of them; a bound executable at another batch
 * size, the kept results handed between it and the compiled one; and a traced function whose weights are assigned between calls, against a
 * convolution and batch norm worked out here in double. */
#include <math.h>
#include <stdio.h>

#include "cpu_util.h"
#include "function_util.h"
#include "hlo/hlo.h"
#include "runtime/cpu/exec_internal.h"

/* conv (weight `weight`, groups) -> (c - mean) * rsqrt(var + eps) * gamma + beta -> relu, as
 * capture lowers latch_batch_norm; x [n, cin, 6, 6], 4 output channels. */
typedef struct graph_text {
  char s[4096];
} graph_text;

static graph_text bn_graph(int64_t n, int cin, int groups, const char *weight) {
  graph_text text;
  snprintf(text.s, sizeof text.s,
           "HloModule bn\n"
           "ENTRY e {\n"
           "  x = f32[%1$lld,%2$d,6,6] parameter(0)\n"
           "  p = f32[4,%3$d,3,3] parameter(1)\n"
           "  mean = f32[4] parameter(2)\n  var = f32[4] parameter(3)\n"
           "  gamma = f32[4] parameter(4)\n  beta = f32[4] parameter(5)\n"
           "  %4$s\n"
           "  c = f32[%1$lld,4,6,6] convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01, "
           "feature_group_count=%5$d\n"
           "  m = f32[%1$lld,4,6,6] broadcast(mean), dimensions={1}\n"
           "  v = f32[%1$lld,4,6,6] broadcast(var), dimensions={1}\n"
           "  eps = f32[] constant(1e-05)\n  eb = f32[%1$lld,4,6,6] broadcast(eps), dimensions={}\n"
           "  ve = f32[%1$lld,4,6,6] add(v, eb)\n  r = f32[%1$lld,4,6,6] rsqrt(ve)\n"
           "  d = f32[%1$lld,4,6,6] subtract(c, m)\n  nd = f32[%1$lld,4,6,6] multiply(d, r)\n"
           "  g = f32[%1$lld,4,6,6] broadcast(gamma), dimensions={1}\n  s = f32[%1$lld,4,6,6] multiply(nd, g)\n"
           "  b = f32[%1$lld,4,6,6] broadcast(beta), dimensions={1}\n  y = f32[%1$lld,4,6,6] add(s, b)\n"
           "  z = f32[] constant(0)\n  zb = f32[%1$lld,4,6,6] broadcast(z), dimensions={}\n"
           "  ROOT relu = f32[%1$lld,4,6,6] maximum(y, zb)\n}\n",
           (long long)n, cin, cin / groups, weight, groups);
  return text;
}

static const char *param_weight = "w = f32[4,3,3,3] copy(p)";

/* Instructions of the entry with the root's shape and this opcode. */
static int count_full(const hlo_module *module, hlo_opcode op) {
  int count = 0;
  for (int i = 0; i < module->entry->instr_count; i++)
    count += module->entry->instrs[i]->opcode == op &&
             hlo_shape_equal(&module->entry->instrs[i]->shape, &module->entry->root->shape);
  return count;
}

static void expect_folds(int line, const char *text, int want) {
  hlo_module *module = parse_checked(text);
  if (!module) return;
  hlo_pass_run_all(module);
  int got = rt_cpu_pass_fold_affine(module);
  CHECK_MSG(got == want, "line %d: %d convolutions folded into, want %d", line, got, want);
  hlo_diag diag = {0};
  CHECK_MSG(hlo_verify_module(module, &diag) == HLO_OK, "line %d: %s", line, diag.message);
  if (want) /* one add after the product remains of the chain, and the relu */
    CHECK_MSG(count_full(module, HLO_OP_RSQRT) == 0 && count_full(module, HLO_OP_MULTIPLY) == 0 &&
                  count_full(module, HLO_OP_SUBTRACT) == 0 && count_full(module, HLO_OP_ADD) == 1,
              "line %d: the chain is still there:\n%s", line, hlo_module_to_text(module));
  hlo_module_free(module);
}

static void test_pass(void) {
  expect_folds(__LINE__, bn_graph(2, 3, 1, param_weight).s, 1);
  expect_folds(__LINE__, bn_graph(2, 4, 4, "w = f32[4,1,3,3] reshape(p)").s, 1); /* depthwise */
  expect_folds(__LINE__, bn_graph(2, 3, 1, "w = f32[4,3,3,3] negate(p)").s, 0);  /* a computed weight */
  /* (c / 2 - bias) * k: a divide by a scalar and a per-channel shift and scale */
  expect_folds(__LINE__,
               "HloModule d\nENTRY e {\n  x = f32[1,2,4,4] parameter(0)\n  w = f32[3,2,1,1] parameter(1)\n"
               "  k = f32[3] parameter(2)\n  t = f32[3] parameter(3)\n"
               "  c = f32[1,3,4,4] convolution(x, w), window={size=1x1}, dim_labels=bf01_oi01->bf01\n"
               "  two = f32[] constant(2)\n  tb = f32[1,3,4,4] broadcast(two), dimensions={}\n"
               "  h = f32[1,3,4,4] divide(c, tb)\n  bt = f32[1,3,4,4] broadcast(t), dimensions={1}\n"
               "  s = f32[1,3,4,4] subtract(h, bt)\n  bk = f32[1,3,4,4] broadcast(k), dimensions={1}\n"
               "  ROOT y = f32[1,3,4,4] multiply(bk, s)\n}\n",
               1);
  /* the product read twice: nothing to fold (its value is needed as it is) */
  expect_folds(__LINE__,
               "HloModule t\nENTRY e {\n  x = f32[1,2,4,4] parameter(0)\n  w = f32[3,2,1,1] parameter(1)\n"
               "  k = f32[3] parameter(2)\n"
               "  c = f32[1,3,4,4] convolution(x, w), window={size=1x1}, dim_labels=bf01_oi01->bf01\n"
               "  bk = f32[1,3,4,4] broadcast(k), dimensions={1}\n  s = f32[1,3,4,4] multiply(c, bk)\n"
               "  ROOT y = (f32[1,3,4,4], f32[1,3,4,4]) tuple(s, c)\n}\n",
               0);
}

/* Arguments: x and p from seeds, mean and gamma and beta in [-1, 1), var in [0.5, 1.5). */
static void make_args(const char *text, int seed, rt_value **args) {
  hlo_diag diag = {0};
  hlo_module *module = parse_checked(text);
  for (int i = 0; module && i < 6; i++) {
    args[i] = rt_random_value(&module->entry->params[i]->shape, (uint64_t)seed, (uint64_t)i, &diag);
    if (i == 3)
      for (int64_t e = 0; e < args[i]->count; e++) ((float *)args[i]->data)[e] = 1.0f + 0.5f * ((float *)args[i]->data)[e];
  }
  hlo_module_free(module);
}

/* The cpu result of exe on args against the reference's on the same text; the kept steps
 * skipped must be `reused` (-1: any number). */
static void expect_run(int line, rt_executable *exe, const char *text, rt_value **args, int64_t reused) {
  hlo_diag diag = {0};
  rt_value *want = run_on(&rt_backend_reference, text, args, 6, &diag), *got = NULL;
  int64_t before = rt_cpu_kept_reuse_count();
  hlo_status status = rt_backend_cpu.execute(exe, args, 6, &got, &diag);
  int64_t skipped = rt_cpu_kept_reuse_count() - before;
  CHECK_MSG(status == HLO_OK && want && cpu_agree(want, got), "line %d: cpu and reference differ: %s", line,
            diag.message);
  CHECK_MSG(reused < 0 || skipped == reused, "line %d: %lld kept steps skipped, want %lld", line,
            (long long)skipped, (long long)reused);
  rt_value_release(want);
  rt_value_release(got);
}

static void test_against_reference(void) {
  for (int seed = 1; seed <= 6; seed++) {
    rt_value *args[6];
    graph_text g = bn_graph(seed % 3 + 1, 3, 1, param_weight);
    const char *text = g.s;
    make_args(text, seed, args);
    rt_executable *exe = compile_checked(text);
    if (exe) expect_run(__LINE__, exe, text, args, 0);
    rt_backend_cpu.destroy(exe);
    for (int i = 0; i < 6; i++) rt_value_release(args[i]);
    g = bn_graph(2, 4, 4, "w = f32[4,1,3,3] reshape(p)");
    make_args(text, seed, args);
    exe = compile_checked(text);
    if (exe) expect_run(__LINE__, exe, text, args, 0);
    rt_backend_cpu.destroy(exe);
    for (int i = 0; i < 6; i++) rt_value_release(args[i]);
  }
}

/* Kept steps of the folded graph: the scale over [4] and the scaled weight (at least). */
static void test_weights_in_place(void) {
  graph_text g = bn_graph(2, 3, 1, param_weight), big_g = bn_graph(5, 3, 1, param_weight);
  const char *text = g.s, *bigger = big_g.s;
  rt_value *args[6];
  make_args(text, 7, args);
  rt_executable *exe = compile_checked(text);
  if (!exe) return;
  int64_t before = rt_cpu_kept_reuse_count(), reorders = rt_cpu_dnnl_weight_reorder_count();
  expect_run(__LINE__, exe, text, args, 0); /* first: computed */
  /* oneDNN may want the scaled weights in its own layout: reordered once per version */
  int64_t per_version = rt_cpu_dnnl_weight_reorder_count() - reorders;
  expect_run(__LINE__, exe, text, args, -1);
  int64_t kept = rt_cpu_kept_reuse_count() - before;
  CHECK_MSG(kept >= 2, "%lld kept steps skipped on the second call, want the scale and the weight", (long long)kept);
  expect_run(__LINE__, exe, text, args, kept);
  CHECK_MSG(rt_cpu_dnnl_weight_reorder_count() - reorders == per_version, "%lld weight reorders, want %lld",
            (long long)(rt_cpu_dnnl_weight_reorder_count() - reorders), (long long)per_version);
  int written[] = {1, 3, 4, 2}; /* weight, var, gamma, mean: each written in place in turn */
  for (int k = 0; k < 4; k++) {
    rt_value *v = args[written[k]];
    for (int64_t e = 0; e < v->count; e++) ((float *)v->data)[e] *= 1.25f;
    rt_value_touch(v);
    reorders = rt_cpu_dnnl_weight_reorder_count();
    expect_run(__LINE__, exe, text, args, -1); /* against the reference with the new values */
    expect_run(__LINE__, exe, text, args, kept);
    /* the mean moves only the shift: the scaled weights stay, and so does their reorder */
    int64_t want = written[k] == 2 ? 0 : per_version;
    CHECK_MSG(rt_cpu_dnnl_weight_reorder_count() - reorders == want, "written %d: %lld reorders, want %lld",
              written[k], (long long)(rt_cpu_dnnl_weight_reorder_count() - reorders), (long long)want);
  }
  /* written without a new stamp is the caller's error; a value without one is never kept */
  rt_value view = *args[1];
  view.stamp = 0;
  rt_value *saved = args[1];
  args[1] = &view;
  expect_run(__LINE__, exe, text, args, -1);
  args[1] = saved;
  /* bound at batch 5: its own plan in the family's arena, against the reference there */
  hlo_diag diag = {0};
  hlo_module *binding = parse_checked(bigger);
  rt_executable *bound = binding ? rt_backend_cpu.bind(exe, binding, &diag) : NULL;
  hlo_module_free(binding);
  CHECK_MSG(bound != NULL, "bind: %s", diag.message);
  if (bound) {
    rt_value *big[6];
    make_args(bigger, 7, big);
    for (int i = 1; i < 6; i++) {
      rt_value_release(big[i]);
      big[i] = rt_value_retain(args[i]);
    }
    expect_run(__LINE__, bound, bigger, big, 0); /* the family's arena is too small: one of its own */
    expect_run(__LINE__, bound, bigger, big, kept);
    /* the two plans keep the same results at the same places: switching hands them on */
    int64_t switch_reorders = rt_cpu_dnnl_weight_reorder_count();
    expect_run(__LINE__, exe, text, args, kept);
    expect_run(__LINE__, bound, bigger, big, kept);
    CHECK_MSG(rt_cpu_dnnl_weight_reorder_count() == switch_reorders, "%lld weight reorders switching bindings",
              (long long)(rt_cpu_dnnl_weight_reorder_count() - switch_reorders));
    for (int64_t e = 0; e < args[1]->count; e++) ((float *)args[1]->data)[e] -= 0.5f;
    rt_value_touch(args[1]);
    expect_run(__LINE__, bound, bigger, big, -1);
    for (int i = 0; i < 6; i++) rt_value_release(big[i]);
    rt_backend_cpu.destroy(bound);
  }
  expect_run(__LINE__, exe, text, args, 0); /* the arena last ran the bound plan */
  rt_backend_cpu.destroy(exe);
  for (int i = 0; i < 6; i++) rt_value_release(args[i]);
}

/* ---- through the public API ---- */

enum { CIN = 2, COUT = 3, SIDE = 4 };

typedef struct bn_weights {
  latch_tensor *w, *mean, *var, *gamma, *beta;
} bn_weights;

static latch_status conv_bn(void *user, latch_tensor *const *in, int in_count, latch_tensor **out, int out_count) {
  (void)in_count, (void)out_count;
  const bn_weights *m = user;
  latch_conv2d_params params = {.padding = {1, 1}};
  latch_tensor *c = latch_conv2d(in[0], m->w, &params);
  latch_tensor *n = latch_batch_norm(c, m->mean, m->var, m->gamma, m->beta, 1e-5);
  out[0] = latch_relu(n);
  latch_release(c);
  latch_release(n);
  return out[0] ? LATCH_OK : LATCH_ERR_INTERNAL;
}

/* relu(bn(conv(x, w))) in double, x [1, CIN, SIDE, SIDE], w [COUT, CIN, 3, 3], pad 1. */
static void conv_bn_by_hand(const float *x, const float *w, const float *bn, double *y) {
  const float *mean = bn, *var = bn + COUT, *gamma = bn + 2 * COUT, *beta = bn + 3 * COUT;
  for (int o = 0; o < COUT; o++)
    for (int i = 0; i < SIDE; i++)
      for (int j = 0; j < SIDE; j++) {
        double s = 0;
        for (int c = 0; c < CIN; c++)
          for (int di = 0; di < 3; di++)
            for (int dj = 0; dj < 3; dj++) {
              int r = i + di - 1, q = j + dj - 1;
              if (r >= 0 && r < SIDE && q >= 0 && q < SIDE)
                s += (double)x[(c * SIDE + r) * SIDE + q] * w[((o * CIN + c) * 3 + di) * 3 + dj];
            }
        double v = (s - mean[o]) / sqrt((double)var[o] + 1e-5) * gamma[o] + beta[o];
        y[(o * SIDE + i) * SIDE + j] = v > 0 ? v : 0;
      }
}

static void expect_conv_bn(int line, latch_function *f, latch_tensor *x, const float *xs, const float *ws,
                           const float *bn) {
  latch_tensor *y = NULL;
  CHECK_EQ_INT(latch_call(f, &x, 1, NULL, 0, &y, 1), LATCH_OK);
  double *got = fu_read(y), want[COUT * SIDE * SIDE];
  conv_bn_by_hand(xs, ws, bn, want);
  CHECK_MSG(got != NULL, "line %d: no result", line);
  for (int e = 0; got && e < COUT * SIDE * SIDE; e++)
    CHECK_MSG(fabs(got[e] - want[e]) <= 1e-5 * (1 + fabs(want[e])), "line %d: y[%d] = %.9g, want %.9g", line, e,
              got[e], want[e]);
  free(got);
  latch_release(y);
}

static void assign_from(latch_runtime *rt, latch_tensor *dst, int rank, const int64_t *dims, const float *values) {
  latch_tensor *src = latch_from_host(rt, LATCH_F32, rank, dims, values);
  CHECK_EQ_INT(latch_assign(dst, src), LATCH_OK);
  latch_release(src);
}

static void test_traced_assign(void) {
  latch_runtime *rt = fu_open_backend("cpu");
  CHECK(rt != NULL);
  if (!rt) return;
  float xs[CIN * SIDE * SIDE], ws[COUT * CIN * 9], bn[4 * COUT];
  for (int i = 0; i < CIN * SIDE * SIDE; i++) xs[i] = (float)((i * 7) % 11) / 4 - 1;
  for (int i = 0; i < COUT * CIN * 9; i++) ws[i] = (float)((i * 5) % 13) / 8 - 0.75f;
  for (int o = 0; o < COUT; o++)
    bn[o] = 0.25f * o - 0.3f, bn[COUT + o] = 0.5f + o, bn[2 * COUT + o] = 1.5f - 0.5f * o, bn[3 * COUT + o] = 0.1f * o;
  int64_t xd[4] = {1, CIN, SIDE, SIDE}, wd[4] = {COUT, CIN, 3, 3}, cd[1] = {COUT};
  latch_tensor *x = latch_from_host(rt, LATCH_F32, 4, xd, xs);
  bn_weights m = {latch_from_host(rt, LATCH_F32, 4, wd, ws), latch_from_host(rt, LATCH_F32, 1, cd, bn),
                  latch_from_host(rt, LATCH_F32, 1, cd, bn + COUT), latch_from_host(rt, LATCH_F32, 1, cd, bn + 2 * COUT),
                  latch_from_host(rt, LATCH_F32, 1, cd, bn + 3 * COUT)};
  latch_function_options fo = fu_options(LATCH_TRACE_ONCE, LATCH_SHAPES_STATIC);
  latch_function *f = latch_function_new_step(rt, conv_bn, &m, &fo);
  CHECK(f != NULL);
  for (int call = 0; f && call < 3; call++) {
    expect_conv_bn(__LINE__, f, x, xs, ws, bn);
    int64_t before = rt_cpu_kept_reuse_count();
    expect_conv_bn(__LINE__, f, x, xs, ws, bn); /* same weights: the folded ones kept */
    CHECK_MSG(rt_cpu_kept_reuse_count() > before, "call %d: nothing kept", call);
    for (int i = 0; i < COUT * CIN * 9; i++) ws[i] = -ws[i] + 0.125f * call; /* a new weight version */
    assign_from(rt, m.w, 4, wd, ws);
    expect_conv_bn(__LINE__, f, x, xs, ws, bn);
    for (int o = 0; o < COUT; o++) bn[COUT + o] *= 2, bn[o] += 0.5f; /* new statistics */
    assign_from(rt, m.var, 1, cd, bn + COUT);
    assign_from(rt, m.mean, 1, cd, bn);
  }
  latch_function_free(f);
  latch_release(x);
  latch_release(m.w);
  latch_release(m.mean);
  latch_release(m.var);
  latch_release(m.gamma);
  latch_release(m.beta);
  latch_close(rt);
}

int main(void) {
  RUN(test_pass);
  RUN(test_against_reference);
  RUN(test_weights_in_place);
  RUN(test_traced_assign);
  return TEST_REPORT();
}
