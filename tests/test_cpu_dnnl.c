/* Convolutions on oneDNN (runtime/cpu/dnnl_*.c) against the reference evaluator:
 * layouts (any dim_labels, groups, depthwise, strides, dilation), epilogues absorbed as
 * post-ops (bias, relu, relu6, an unfolded batch norm, the residual add), blocked layouts
 * kept between convolutions, the fallbacks (lhs dilation, f64), weights reordered once per
 * contents and again after an in-place write (touch, latch_assign), and bound executables
 * at new batch sizes. Each graph's plan is inspected too, so a test cannot pass by every
 * convolution quietly taking the old path. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_util.h"
#include "function_util.h"
#include "runtime/cpu/dnnl_internal.h"

/* The plan of text: how many DNNL steps, how many of them keep a blocked result, and how
 * many post-ops they absorbed in all. */
typedef struct plan_counts {
  int dnnl, blocked, posts;
} plan_counts;

/* The plan of text (NULL after a failed check); free with free_plan. */
static rt_cpu_plan *plan_of(const char *text, hlo_module **module) {
  hlo_diag diag = {0};
  *module = parse_checked(text);
  rt_cpu_plan *plan = *module ? rt_cpu_plan_build(*module, NULL, &diag) : NULL;
  CHECK_MSG(plan != NULL || !*module, "plan: %s", diag.message);
  return plan;
}

static void free_plan(rt_cpu_plan *plan, hlo_module *module) {
  rt_cpu_plan_free(plan);
  hlo_module_free(module);
}

/* Plans text and calls visit on each DNNL step of the plan. */
static void each_dnnl_step(const char *text, void (*visit)(const rt_cpu_dnnl *d, void *ctx), void *ctx) {
  hlo_module *module;
  rt_cpu_plan *plan = plan_of(text, &module);
  for (int i = 0; plan && i < plan->step_count; i++)
    if (plan->steps[i].kind == RT_STEP_DNNL) visit(plan->steps[i].dnnl, ctx);
  free_plan(plan, module);
}

static void count_step(const rt_cpu_dnnl *d, void *ctx) {
  plan_counts *c = ctx;
  c->dnnl++;
  c->blocked += d->blocked_out;
  c->posts += d->post_count;
}

static plan_counts count_plan(const char *text) {
  plan_counts c = {0};
  each_dnnl_step(text, count_step, &c);
  return c;
}

/* text against the reference on seeded random arguments, and its plan's counts. */
static void expect_dnnl(int line, const char *text, int dnnl, int blocked, int posts) {
  for (int seed = 1; seed <= 2; seed++) expect_same_as_reference(text, seed);
  plan_counts c = count_plan(text);
  CHECK_MSG(c.dnnl == dnnl && c.blocked == blocked && c.posts == posts,
            "line %d: %d DNNL steps, %d blocked, %d post-ops; want %d, %d, %d", line, c.dnnl, c.blocked, c.posts,
            dnnl, blocked, posts);
}

static void test_layouts(void) {
  /* 3x3, padding 1, NCHW */
  expect_dnnl(__LINE__,
              "HloModule c\nENTRY e {\n x = f32[2,5,9,9] parameter(0)\n w = f32[7,5,3,3] parameter(1)\n"
              " ROOT y = f32[2,7,9,9] convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01\n}\n",
              1, 0, 0);
  /* NHWC with HWIO weights, stride 2, asymmetric padding */
  expect_dnnl(__LINE__,
              "HloModule c\nENTRY e {\n x = f32[1,11,10,6] parameter(0)\n w = f32[3,3,6,8] parameter(1)\n"
              " ROOT y = f32[1,6,5,8] convolution(x, w), window={size=3x3 stride=2x2 pad=1_1x0_1}, "
              "dim_labels=b01f_01io->b01f\n}\n",
              1, 0, 0);
  /* grouped (2 groups) and dilated */
  expect_dnnl(__LINE__,
              "HloModule c\nENTRY e {\n x = f32[2,6,12,12] parameter(0)\n w = f32[4,3,3,3] parameter(1)\n"
              " ROOT y = f32[2,4,8,8] convolution(x, w), window={size=3x3 rhs_dilate=2x2}, "
              "dim_labels=bf01_oi01->bf01, feature_group_count=2\n}\n",
              1, 0, 0);
  /* depthwise, 16 features (two blocks of 8), stride 2 */
  expect_dnnl(__LINE__,
              "HloModule c\nENTRY e {\n x = f32[1,16,14,14] parameter(0)\n w = f32[16,1,3,3] parameter(1)\n"
              " ROOT y = f32[1,16,7,7] convolution(x, w), window={size=3x3 stride=2x2 pad=1_1x1_1}, "
              "dim_labels=bf01_oi01->bf01, feature_group_count=16\n}\n",
              1, 0, 0);
}

static void test_fallbacks(void) {
  /* lhs dilation (a transposed convolution) and f64 stay on the existing kernels */
  expect_dnnl(__LINE__,
              "HloModule c\nENTRY e {\n x = f32[1,3,5,5] parameter(0)\n w = f32[2,3,3,3] parameter(1)\n"
              " ROOT y = f32[1,2,9,9] convolution(x, w), window={size=3x3 pad=1_1x1_1 lhs_dilate=2x2}, "
              "dim_labels=bf01_oi01->bf01\n}\n",
              0, 0, 0);
  expect_dnnl(__LINE__,
              "HloModule c\nENTRY e {\n x = f64[1,3,6,6] parameter(0)\n w = f64[4,3,3,3] parameter(1)\n"
              " ROOT y = f64[1,4,4,4] convolution(x, w), window={size=3x3}, dim_labels=bf01_oi01->bf01\n}\n",
              0, 0, 0);
}

/* conv -> batch norm as the zoo lowers it (mean, rsqrt(var + eps), gamma, beta, all
 * broadcast; the variance squared here, as random ones may be negative) -> relu6 (clamp),
 * then a second conv with a bias and relu. */
static const char *bn_relu6 =
    "HloModule c\nENTRY e {\n x = f32[2,3,10,10] parameter(0)\n w = f32[8,3,3,3] parameter(1)\n"
    " mean = f32[8] parameter(2)\n var = f32[8] parameter(3)\n gamma = f32[8] parameter(4)\n"
    " beta = f32[8] parameter(5)\n w2 = f32[4,8,1,1] parameter(6)\n bias = f32[4] parameter(7)\n"
    " c = f32[2,8,10,10] convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01\n"
    " bm = f32[2,8,10,10] broadcast(mean), dimensions={1}\n bv = f32[2,8,10,10] broadcast(var), dimensions={1}\n"
    " eps = f32[] constant(1e-05)\n be = f32[2,8,10,10] broadcast(eps), dimensions={}\n"
    " vv = f32[2,8,10,10] multiply(bv, bv)\n ve = f32[2,8,10,10] add(vv, be)\n r = f32[2,8,10,10] rsqrt(ve)\n"
    " s = f32[2,8,10,10] subtract(c, bm)\n n = f32[2,8,10,10] multiply(s, r)\n"
    " bg = f32[2,8,10,10] broadcast(gamma), dimensions={1}\n g = f32[2,8,10,10] multiply(n, bg)\n"
    " bb = f32[2,8,10,10] broadcast(beta), dimensions={1}\n b = f32[2,8,10,10] add(g, bb)\n"
    " zero = f32[] constant(0)\n six = f32[] constant(6)\n a = f32[2,8,10,10] clamp(zero, b, six)\n"
    " c2 = f32[2,4,10,10] convolution(a, w2), window={size=1x1}, dim_labels=bf01_oi01->bf01\n"
    " bb2 = f32[2,4,10,10] broadcast(bias), dimensions={1}\n d2 = f32[2,4,10,10] add(c2, bb2)\n"
    " z2 = f32[2,4,10,10] broadcast(zero), dimensions={}\n ROOT y = f32[2,4,10,10] maximum(d2, z2)\n}\n";

/* A residual block: a = relu(conv(x) + bias) kept blocked for both readers, then
 * relu(conv(a) + bias2 + a). */
static const char *residual =
    "HloModule c\nENTRY e {\n x = f32[1,8,12,12] parameter(0)\n w = f32[8,8,3,3] parameter(1)\n"
    " bias = f32[8] parameter(2)\n w2 = f32[8,8,3,3] parameter(3)\n bias2 = f32[8] parameter(4)\n"
    " zero = f32[] constant(0)\n z = f32[1,8,12,12] broadcast(zero), dimensions={}\n"
    " c = f32[1,8,12,12] convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01\n"
    " bb = f32[1,8,12,12] broadcast(bias), dimensions={1}\n d = f32[1,8,12,12] add(c, bb)\n"
    " a = f32[1,8,12,12] maximum(d, z)\n"
    " c2 = f32[1,8,12,12] convolution(a, w2), window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01\n"
    " bb2 = f32[1,8,12,12] broadcast(bias2), dimensions={1}\n d2 = f32[1,8,12,12] add(c2, bb2)\n"
    " s = f32[1,8,12,12] add(d2, a)\n ROOT y = f32[1,8,12,12] maximum(s, z)\n}\n";

/* A downsampling block: both convolutions' epilogues end at the same add; the first takes
 * it (bias, residual, relu), the second keeps its bias and its result blocked for it. */
static const char *downsample =
    "HloModule c\nENTRY e {\n x = f32[1,8,8,8] parameter(0)\n w = f32[16,8,3,3] parameter(1)\n"
    " b = f32[16] parameter(2)\n wd = f32[16,8,1,1] parameter(3)\n bd = f32[16] parameter(4)\n"
    " c = f32[1,16,4,4] convolution(x, w), window={size=3x3 stride=2x2 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01\n"
    " bb = f32[1,16,4,4] broadcast(b), dimensions={1}\n d = f32[1,16,4,4] add(c, bb)\n"
    " cd = f32[1,16,4,4] convolution(x, wd), window={size=1x1 stride=2x2}, dim_labels=bf01_oi01->bf01\n"
    " bbd = f32[1,16,4,4] broadcast(bd), dimensions={1}\n dd = f32[1,16,4,4] add(cd, bbd)\n"
    " s = f32[1,16,4,4] add(d, dd)\n zero = f32[] constant(0)\n z = f32[1,16,4,4] broadcast(zero), dimensions={}\n"
    " ROOT y = f32[1,16,4,4] maximum(s, z)\n}\n";

static void expect_bias_first(const rt_cpu_dnnl *d, void *ctx) {
  (void)ctx;
  CHECK_EQ_INT(d->posts[0].kind, RT_DNNL_BIAS);
}

static void test_epilogues(void) {
  /* first conv: sub, mul (rsqrt computed over [C]), mul, add, clip; second: bias, relu */
  expect_dnnl(__LINE__, bn_relu6, 2, 1, 7);
  /* first: bias, relu (blocked: both readers are DNNL); second: bias, residual, relu */
  expect_dnnl(__LINE__, residual, 2, 1, 5);
  expect_dnnl(__LINE__, downsample, 2, 1, 4);
  /* a bias given as [1, C] broadcast to a batch of one (a frontend's [1, C, 1, 1] with its
   * size-1 dims dropped) is the same C values: the convolution's bias, not a full-shape
   * operand */
  const char *bias4 =
      "HloModule c\nENTRY e {\n x = f32[1,8,6,6] parameter(0)\n w = f32[16,8,3,3] parameter(1)\n"
      " b = f32[1,16] parameter(2)\n zero = f32[] constant(0)\n z = f32[1,16,6,6] broadcast(zero), dimensions={}\n"
      " c = f32[1,16,6,6] convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01\n"
      " bb = f32[1,16,6,6] broadcast(b), dimensions={0,1}\n d = f32[1,16,6,6] add(c, bb)\n"
      " ROOT y = f32[1,16,6,6] maximum(d, z)\n}\n";
  expect_dnnl(__LINE__, bias4, 1, 0, 2);
  each_dnnl_step(bias4, expect_bias_first, NULL);
}

/* A residual that arrives row-major (a parameter here; a max pool's result in resnet18's first
 * blocks) is reordered into the result's blocked layout, so oneDNN runs its direct kernel
 * (with a row-major residual it took its im2col gemm one, about 7x slower at 56x56x64). */
static void expect_residual_reordered(const rt_cpu_dnnl *d, void *ctx) {
  (void)ctx;
  CHECK_EQ_INT(d->posts[0].kind, RT_DNNL_ADD_FULL);
  CHECK_MSG(d->post_reorder[0].prim != NULL, "the row-major residual is read as it arrives");
  const_dnnl_primitive_desc_t pd = NULL;
  const char *impl = NULL;
  CHECK(dnnl_primitive_get_primitive_desc(d->conv_prim, &pd) == dnnl_success &&
        dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl);
  CHECK_MSG(impl && !strstr(impl, "gemm"), "implementation %s", impl ? impl : "?");
}

static void test_row_major_residual(void) {
  const char *text =
      "HloModule c\nENTRY e {\n x = f32[2,16,10,10] parameter(0)\n w = f32[16,16,3,3] parameter(1)\n"
      " r = f32[2,16,10,10] parameter(2)\n zero = f32[] constant(0)\n z = f32[2,16,10,10] broadcast(zero), dimensions={}\n"
      " c = f32[2,16,10,10] convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01\n"
      " s = f32[2,16,10,10] add(c, r)\n ROOT y = f32[2,16,10,10] maximum(s, z)\n}\n";
  expect_dnnl(__LINE__, text, 1, 0, 2);
  each_dnnl_step(text, expect_residual_reordered, NULL);
}

/* Max and min pools between convolutions read the blocked result as it is: a resnet stem
 * (conv, relu, 3x3 stride-2 max pool padded by 1, conv) with 12 channels (padded lanes in
 * the blocks), a min pool whose result leaves row-major, and NaN through a pool (a
 * depthwise 1x1 convolution keeps sqrt's NaNs where they are, about one input in 20). */
static void test_blocked_pools(void) {
  const char *reducers = "HloModule c\nmx {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT m = f32[] maximum(a, b)\n}\n"
                         "mn {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT m = f32[] minimum(a, b)\n}\n";
  char text[2048];
  snprintf(text, sizeof text,
           "%sENTRY e {\n x = f32[2,12,9,9] parameter(0)\n w = f32[12,12,3,3] parameter(1)\n w2 = f32[8,12,3,3] parameter(2)\n"
           " zero = f32[] constant(0)\n z = f32[2,12,9,9] broadcast(zero), dimensions={}\n ninf = f32[] constant(-inf)\n"
           " c = f32[2,12,9,9] convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01\n"
           " r = f32[2,12,9,9] maximum(c, z)\n"
           " p = f32[2,12,5,5] reduce-window(r, ninf), window={size=1x1x3x3 stride=1x1x2x2 pad=0_0x0_0x1_1x1_1}, to_apply=mx\n"
           " ROOT y = f32[2,8,5,5] convolution(p, w2), window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01\n}\n",
           reducers);
  expect_dnnl(__LINE__, text, 3, 2, 1);
  snprintf(text, sizeof text,
           "%sENTRY e {\n x = f32[1,16,8,8] parameter(0)\n w = f32[16,16,1,1] parameter(1)\n inf = f32[] constant(inf)\n"
           " c = f32[1,16,8,8] convolution(x, w), window={size=1x1}, dim_labels=bf01_oi01->bf01\n"
           " ROOT p = f32[1,16,3,3] reduce-window(c, inf), window={size=1x1x3x3 stride=1x1x3x3 pad=0_0x0_0x0_1x0_1}, to_apply=mn\n}\n",
           reducers);
  expect_dnnl(__LINE__, text, 2, 1, 0);
  snprintf(text, sizeof text,
           "%sENTRY e {\n q = f32[1,8,8,8] parameter(0)\n w = f32[8,1,1,1] parameter(1)\n w2 = f32[8,8,1,1] parameter(2)\n"
           " tenth = f32[] constant(0.9)\n t = f32[1,8,8,8] broadcast(tenth), dimensions={}\n s = f32[1,8,8,8] add(q, t)\n"
           " x = f32[1,8,8,8] sqrt(s)\n ninf = f32[] constant(-inf)\n"
           " c = f32[1,8,8,8] convolution(x, w), window={size=1x1}, dim_labels=bf01_oi01->bf01, feature_group_count=8\n"
           " p = f32[1,8,4,4] reduce-window(c, ninf), window={size=1x1x2x2 stride=1x1x2x2}, to_apply=mx\n"
           " ROOT y = f32[1,8,4,4] convolution(p, w2), window={size=1x1}, dim_labels=bf01_oi01->bf01\n}\n",
           reducers);
  expect_dnnl(__LINE__, text, 3, 2, 0);
  /* Rows wide enough for the kernel's four-at-a-time path (outputs whose windows lie inside
   * the row) beside its one-at-a-time border outputs: stride 2 with padding, NaN through a
   * 2x2 pool, and stride 1 over two blocks of 8. */
  snprintf(text, sizeof text,
           "%sENTRY e {\n x = f32[2,12,21,21] parameter(0)\n w = f32[12,12,3,3] parameter(1)\n w2 = f32[8,12,3,3] parameter(2)\n"
           " zero = f32[] constant(0)\n z = f32[2,12,21,21] broadcast(zero), dimensions={}\n ninf = f32[] constant(-inf)\n"
           " c = f32[2,12,21,21] convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01\n"
           " r = f32[2,12,21,21] maximum(c, z)\n"
           " p = f32[2,12,11,11] reduce-window(r, ninf), window={size=1x1x3x3 stride=1x1x2x2 pad=0_0x0_0x1_1x1_1}, to_apply=mx\n"
           " ROOT y = f32[2,8,11,11] convolution(p, w2), window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01\n}\n",
           reducers);
  expect_dnnl(__LINE__, text, 3, 2, 1);
  snprintf(text, sizeof text,
           "%sENTRY e {\n q = f32[1,8,18,18] parameter(0)\n w = f32[8,1,1,1] parameter(1)\n w2 = f32[8,8,1,1] parameter(2)\n"
           " tenth = f32[] constant(0.9)\n t = f32[1,8,18,18] broadcast(tenth), dimensions={}\n s = f32[1,8,18,18] add(q, t)\n"
           " x = f32[1,8,18,18] sqrt(s)\n ninf = f32[] constant(-inf)\n"
           " c = f32[1,8,18,18] convolution(x, w), window={size=1x1}, dim_labels=bf01_oi01->bf01, feature_group_count=8\n"
           " p = f32[1,8,9,9] reduce-window(c, ninf), window={size=1x1x2x2 stride=1x1x2x2}, to_apply=mx\n"
           " ROOT y = f32[1,8,9,9] convolution(p, w2), window={size=1x1}, dim_labels=bf01_oi01->bf01\n}\n",
           reducers);
  expect_dnnl(__LINE__, text, 3, 2, 0);
  snprintf(text, sizeof text,
           "%sENTRY e {\n x = f32[1,16,13,13] parameter(0)\n w = f32[16,16,1,1] parameter(1)\n w2 = f32[8,16,1,1] parameter(2)\n"
           " ninf = f32[] constant(-inf)\n"
           " c = f32[1,16,13,13] convolution(x, w), window={size=1x1}, dim_labels=bf01_oi01->bf01\n"
           " p = f32[1,16,13,13] reduce-window(c, ninf), window={size=1x1x3x3 pad=0_0x0_0x1_1x1_1}, to_apply=mx\n"
           " ROOT y = f32[1,8,13,13] convolution(p, w2), window={size=1x1}, dim_labels=bf01_oi01->bf01\n}\n",
           reducers);
  expect_dnnl(__LINE__, text, 3, 2, 0);
}

/* Sum pools on the blocked kernel, after a depthwise 1x1 convolution by ones (an exact copy,
 * so the pool's input is x itself, blocked): a global average pool's sum over 7x7 planes, 24
 * channels (three blocks of 8, or two of 16 with 8 padded lanes), and a 3x3 stride-2 sum with
 * padding, against loops written here: each window's taps added in row-major order from the
 * init, padding skipped, as the reference folds; the same bits. */
static void expect_sum_pool(int line, int64_t c, int64_t h, int64_t k, int64_t stride, int64_t pad) {
  int64_t oh = (h + 2 * pad - k) / stride + 1, count = 2 * c * h * h;
  double *x = hlo_malloc(sizeof(double) * (size_t)count), *ones = hlo_malloc(sizeof(double) * (size_t)c);
  double *want = hlo_malloc(sizeof(double) * (size_t)(2 * c * oh * oh));
  CHECK(x && ones && want);
  if (!x || !ones || !want) return;
  for (int64_t i = 0; i < count; i++) x[i] = (float)((i * 7919 % 1013) * 0.0137 - 6.1);
  for (int64_t i = 0; i < c; i++) ones[i] = 1;
  for (int64_t p = 0; p < 2 * c; p++)
    for (int64_t i = 0; i < oh; i++)
      for (int64_t j = 0; j < oh; j++) {
        float acc = 0.25f;
        for (int64_t a = 0; a < k; a++)
          for (int64_t b = 0; b < k; b++) {
            int64_t r = i * stride + a - pad, q = j * stride + b - pad;
            if (r >= 0 && r < h && q >= 0 && q < h) acc = acc + (float)x[(p * h + r) * h + q];
          }
        want[(p * oh + i) * oh + j] = acc;
      }
  char text[1024];
  snprintf(text, sizeof text,
           "HloModule c\nad {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] add(a, b)\n}\n"
           "ENTRY e {\n x = f32[2,%lld,%lld,%lld] parameter(0)\n w = f32[%lld,1,1,1] parameter(1)\n"
           " init = f32[] constant(0.25)\n c = f32[2,%lld,%lld,%lld] convolution(x, w), window={size=1x1}, "
           "dim_labels=bf01_oi01->bf01, feature_group_count=%lld\n"
           " ROOT p = f32[2,%lld,%lld,%lld] reduce-window(c, init), window={size=1x1x%lldx%lld stride=1x1x%lldx%lld "
           "pad=0_0x0_0x%lld_%lldx%lld_%lld}, to_apply=ad\n}\n",
           (long long)c, (long long)h, (long long)h, (long long)c, (long long)c, (long long)h, (long long)h,
           (long long)c, (long long)c, (long long)oh, (long long)oh, (long long)k, (long long)k, (long long)stride,
           (long long)stride, (long long)pad, (long long)pad, (long long)pad, (long long)pad);
  plan_counts planned = count_plan(text);
  CHECK_MSG(planned.dnnl == 2 && planned.blocked == 1, "line %d: %d DNNL steps, %d blocked; want 2, 1", line,
            planned.dnnl, planned.blocked);
  rt_value *args[] = {make_value(HLO_F32, 4, (int64_t[]){2, c, h, h}, x), make_value(HLO_F32, 4, (int64_t[]){c, 1, 1, 1}, ones)};
  expect_cpu(line, text, args, 2, want, 2 * c * oh * oh, 0);
  free(x), free(ones), free(want);
}

static void test_blocked_sum_pools(void) {
  expect_sum_pool(__LINE__, 24, 7, 7, 1, 0);
  expect_sum_pool(__LINE__, 16, 11, 3, 2, 1);
  expect_sum_pool(__LINE__, 8, 21, 3, 1, 1); /* rows wide enough for the four-at-a-time path */
}

/* The blocked pools run by each other vector variant this processor has. */
static void test_blocked_pools_per_variant(void) {
  rt_cpu_isa widest = rt_cpu_isa_in_use();
  for (int isa = 0; isa < RT_CPU_ISA_COUNT; isa++)
    if (isa != (int)widest && rt_cpu_use_isa((rt_cpu_isa)isa)) test_blocked_pools(), test_blocked_sum_pools();
  CHECK(rt_cpu_use_isa(widest));
}

/* alexnet's stem (11x11, stride 4, 3 features) has only oneDNN's im2col kernel, which
 * writes row-major, which the blocked pool after it refuses: the stem's result is planned
 * row-major, the pool runs on the plain kernel, and the convolutions after it still keep
 * theirs blocked (before, one refusal made every result row-major). The stem's weights are
 * scaled by 0.1 so that the sums stay small enough for cpu_agree's tolerance. */
static void test_refused_layout(void) {
  const char *text =
      "HloModule c\nmx {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT m = f32[] maximum(a, b)\n}\n"
      "ENTRY e {\n x = f32[2,3,39,39] parameter(0)\n w = f32[16,3,11,11] parameter(1)\n w2 = f32[16,16,3,3] parameter(2)\n"
      " w3 = f32[8,16,3,3] parameter(3)\n zero = f32[] constant(0)\n ninf = f32[] constant(-inf)\n"
      " tenth = f32[] constant(0.1)\n t = f32[16,3,11,11] broadcast(tenth), dimensions={}\n ws = f32[16,3,11,11] multiply(w, t)\n"
      " c = f32[2,16,9,9] convolution(x, ws), window={size=11x11 stride=4x4 pad=2_2x2_2}, dim_labels=bf01_oi01->bf01\n"
      " z = f32[2,16,9,9] broadcast(zero), dimensions={}\n r = f32[2,16,9,9] maximum(c, z)\n"
      " p = f32[2,16,4,4] reduce-window(r, ninf), window={size=1x1x3x3 stride=1x1x2x2}, to_apply=mx\n"
      " c2 = f32[2,16,4,4] convolution(p, w2), window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01\n"
      " z2 = f32[2,16,4,4] broadcast(zero), dimensions={}\n r2 = f32[2,16,4,4] maximum(c2, z2)\n"
      " ROOT y = f32[2,8,4,4] convolution(r2, w3), window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01\n}\n";
  /* With AVX-512 the stem's result is asked for in nChw16c (dnnl_conv.c) and oneDNN writes
   * it so: nothing is refused, and the pool runs blocked as a fourth DNNL step. */
  bool avx512 = (dnnl_get_effective_cpu_isa() & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core;
  expect_dnnl(__LINE__, text, avx512 ? 4 : 3, avx512 ? 3 : 1, 2);
}

/* Concatenations along the channels between convolutions: a Fire module (squeeze, two
 * expands with relu, joined, then a 1x1 convolution) keeps every result blocked; a join
 * that is the result leaves row-major; a join of a convolution's blocked result with a
 * row-major parameter reads each as it arrives. */
static void test_blocked_concat(void) {
  const char *fire =
      "HloModule c\nENTRY e {\n x = f32[2,32,7,7] parameter(0)\n ws = f32[16,32,1,1] parameter(1)\n"
      " w1 = f32[16,16,1,1] parameter(2)\n w3 = f32[32,16,3,3] parameter(3)\n wn = f32[8,48,1,1] parameter(4)\n"
      " zero = f32[] constant(0)\n"
      " s = f32[2,16,7,7] convolution(x, ws), window={size=1x1}, dim_labels=bf01_oi01->bf01\n"
      " zs = f32[2,16,7,7] broadcast(zero), dimensions={}\n rs = f32[2,16,7,7] maximum(s, zs)\n"
      " e1 = f32[2,16,7,7] convolution(rs, w1), window={size=1x1}, dim_labels=bf01_oi01->bf01\n"
      " r1 = f32[2,16,7,7] maximum(e1, zs)\n"
      " e3 = f32[2,32,7,7] convolution(rs, w3), window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01\n"
      " z3 = f32[2,32,7,7] broadcast(zero), dimensions={}\n r3 = f32[2,32,7,7] maximum(e3, z3)\n"
      " j = f32[2,48,7,7] concatenate(r1, r3), dimensions={1}\n"
      " ROOT y = f32[2,8,7,7] convolution(j, wn), window={size=1x1}, dim_labels=bf01_oi01->bf01\n}\n";
  expect_dnnl(__LINE__, fire, 5, 4, 3);
  const char *last =
      "HloModule c\nENTRY e {\n x = f32[1,16,5,5] parameter(0)\n w = f32[16,16,3,3] parameter(1)\n"
      " p = f32[1,16,5,5] parameter(2)\n"
      " c = f32[1,16,5,5] convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01\n"
      " ROOT j = f32[1,32,5,5] concatenate(p, c), dimensions={1}\n}\n";
  expect_dnnl(__LINE__, last, 2, 1, 0);
  const char *mixed =
      "HloModule c\nENTRY e {\n x = f32[1,16,5,5] parameter(0)\n w = f32[16,16,3,3] parameter(1)\n"
      " p = f32[1,16,5,5] parameter(2)\n wn = f32[8,32,1,1] parameter(3)\n"
      " c = f32[1,16,5,5] convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01\n"
      " j = f32[1,32,5,5] concatenate(c, p), dimensions={1}\n"
      " ROOT y = f32[1,8,5,5] convolution(j, wn), window={size=1x1}, dim_labels=bf01_oi01->bf01\n}\n";
  expect_dnnl(__LINE__, mixed, 3, 2, 0);
}

/* text (x f32[1,8,6,6], w f32[8,8,3,3], w2 of w2_kernel x w2_kernel) run on the cpu backend,
 * without and then with a NaN in x: the same as the reference, the NaN reaching the result,
 * and want_scans[with_nan] inputs scanned for inf and NaN. */
/* text on the cpu backend against the reference on args, counting the inputs its DNNL steps
 * scan; the result (NULL on failure), which the caller releases. */
static rt_value *check_scans(int line, const char *text, rt_value **args, int count, int want_scans) {
  hlo_diag diag = {0};
  int64_t before = rt_cpu_dnnl_input_scan_count();
  rt_value *got = run_on(&rt_backend_cpu, text, args, count, &diag);
  int64_t scans = rt_cpu_dnnl_input_scan_count() - before;
  rt_value *want = run_on(&rt_backend_reference, text, args, count, &diag);
  CHECK_MSG(got && want && cpu_agree(want, got), "line %d: %s", line, diag.message);
  CHECK_MSG(scans == want_scans, "line %d: %lld inputs scanned, want %d", line, (long long)scans, want_scans);
  rt_value_release(want);
  return got;
}

/* How many NaN an f32 result holds (0 for NULL). */
static int nans_in(const rt_value *v) {
  int nans = 0;
  for (int64_t i = 0; v && i < v->count; i++) nans += isnan(((const float *)v->data)[i]);
  return nans;
}

static void expect_scans(int line, const char *text, int64_t w2_kernel, const int want_scans[2]) {
  double xs[288], ws[576];
  for (int i = 0; i < 288; i++) xs[i] = (i % 7) - 3;
  for (int i = 0; i < 576; i++) ws[i] = ((i % 5) - 2) * 0.25;
  for (int with_nan = 0; with_nan < 2; with_nan++) {
    if (with_nan) xs[100] = NAN;
    rt_value *args[] = {make_value(HLO_F32, 4, (int64_t[]){1, 8, 6, 6}, xs),
                        make_value(HLO_F32, 4, (int64_t[]){8, 8, 3, 3}, ws),
                        make_value(HLO_F32, 4, (int64_t[]){8, 8, w2_kernel, w2_kernel}, ws)};
    rt_value *got = check_scans(line * 10 + with_nan, text, args, 3, want_scans[with_nan]);
    int nans = nans_in(got);
    CHECK_MSG(with_nan ? nans > 0 : nans == 0, "line %d, with_nan %d: %d NaN", line, with_nan, nans);
    rt_value_release(got);
    for (int k = 0; k < 3; k++) rt_value_release(args[k]);
  }
}

/* A source made by a convolution that ran its fast primitive with a relu6 last is known
 * finite and is not scanned again: two such steps in a row scan only the graph's input.
 * When the input holds NaN, the first step takes its safe primitive, says nothing, and the
 * second scans its source and keeps the NaN as the reference does. */
static void test_known_finite(void) {
  const char *chain =
      "HloModule c\nENTRY e {\n x = f32[1,8,6,6] parameter(0)\n w = f32[8,8,3,3] parameter(1)\n"
      " w2 = f32[8,8,1,1] parameter(2)\n zero = f32[] constant(0)\n six = f32[] constant(6)\n"
      " c = f32[1,8,6,6] convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01\n"
      " a = f32[1,8,6,6] clamp(zero, c, six)\n"
      " c2 = f32[1,8,6,6] convolution(a, w2), window={size=1x1}, dim_labels=bf01_oi01->bf01\n"
      " ROOT y = f32[1,8,6,6] clamp(zero, c2, six)\n}\n";
  expect_dnnl(__LINE__, chain, 2, 1, 2);
  expect_scans(__LINE__, chain, 1, (const int[]){1, 2});
}

/* A residual block's input is scanned once: the first convolution scans it as its source,
 * and the last one, adding it as its residual, knows it finite from that scan (before, three
 * scans: x, the first relu's result, x again). With NaN in x, both convolutions take their
 * safe primitives and the NaN reaches the result as the reference's does. */
static void test_residual_scanned_once(void) {
  const char *block =
      "HloModule c\nENTRY e {\n x = f32[1,8,6,6] parameter(0)\n w = f32[8,8,3,3] parameter(1)\n"
      " w2 = f32[8,8,3,3] parameter(2)\n zero = f32[] constant(0)\n z = f32[1,8,6,6] broadcast(zero), dimensions={}\n"
      " c = f32[1,8,6,6] convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01\n"
      " r = f32[1,8,6,6] maximum(c, z)\n"
      " c2 = f32[1,8,6,6] convolution(r, w2), window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01\n"
      " s = f32[1,8,6,6] add(c2, x)\n ROOT y = f32[1,8,6,6] maximum(s, z)\n}\n";
  expect_dnnl(__LINE__, block, 2, 1, 3);
  expect_scans(__LINE__, block, 3, (const int[]){2, 2});
}

/* A pool's result and a concatenation's are checked for inf and NaN as they are written, so
 * the convolution reading them does not scan them: a conv-relu, pool, conv-relu chain scans
 * only the graph's input (before: the pool's result too); with NaN in it, the pool passes the
 * NaN on, says so, and the second convolution scans its source and takes its safe primitive. */
static void test_written_finite(void) {
  const char *pooled =
      "HloModule c\nENTRY e {\n x = f32[1,8,6,6] parameter(0)\n w = f32[8,8,3,3] parameter(1)\n"
      " w2 = f32[8,8,3,3] parameter(2)\n zero = f32[] constant(0)\n ninf = f32[] constant(-inf)\n"
      " z = f32[1,8,6,6] broadcast(zero), dimensions={}\n"
      " c = f32[1,8,6,6] convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01\n"
      " r = f32[1,8,6,6] maximum(c, z)\n"
      " p = f32[1,8,6,6] reduce-window(r, ninf), window={size=1x1x3x3 pad=0_0x0_0x1_1x1_1}, to_apply=mx\n"
      " c2 = f32[1,8,6,6] convolution(p, w2), window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01\n"
      " ROOT y = f32[1,8,6,6] maximum(c2, z)\n}\n"
      "mx {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT m = f32[] maximum(a, b)\n}\n";
  expect_dnnl(__LINE__, pooled, 3, 2, 2);
  expect_scans(__LINE__, pooled, 3, (const int[]){1, 2});

  /* squeezenet's Fire module: two convolutions of one source joined, then a convolution. The
   * source is scanned once; the join checks the two results as it copies them. With NaN: the
   * source twice (found not finite, it is not known finite), the join's result once. */
  const char *fire =
      "HloModule c\nENTRY e {\n x = f32[1,16,5,5] parameter(0)\n w1 = f32[16,16,1,1] parameter(1)\n"
      " w3 = f32[16,16,3,3] parameter(2)\n w = f32[8,32,1,1] parameter(3)\n zero = f32[] constant(0)\n"
      " z = f32[1,16,5,5] broadcast(zero), dimensions={}\n z8 = f32[1,8,5,5] broadcast(zero), dimensions={}\n"
      " c1 = f32[1,16,5,5] convolution(x, w1), window={size=1x1}, dim_labels=bf01_oi01->bf01\n"
      " r1 = f32[1,16,5,5] maximum(c1, z)\n"
      " c3 = f32[1,16,5,5] convolution(x, w3), window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01\n"
      " r3 = f32[1,16,5,5] maximum(c3, z)\n j = f32[1,32,5,5] concatenate(r1, r3), dimensions={1}\n"
      " c = f32[1,8,5,5] convolution(j, w), window={size=1x1}, dim_labels=bf01_oi01->bf01\n"
      " ROOT y = f32[1,8,5,5] maximum(c, z8)\n}\n";
  expect_dnnl(__LINE__, fire, 4, 3, 3);
  double xs[400], ws[2304];
  for (int i = 0; i < 400; i++) xs[i] = (i % 7) - 3;
  for (int i = 0; i < 2304; i++) ws[i] = ((i % 5) - 2) * 0.25;
  for (int with_nan = 0; with_nan < 2; with_nan++) {
    if (with_nan) xs[123] = NAN;
    rt_value *args[] = {make_value(HLO_F32, 4, (int64_t[]){1, 16, 5, 5}, xs),
                        make_value(HLO_F32, 4, (int64_t[]){16, 16, 1, 1}, ws),
                        make_value(HLO_F32, 4, (int64_t[]){16, 16, 3, 3}, ws),
                        make_value(HLO_F32, 4, (int64_t[]){8, 32, 1, 1}, ws)};
    rt_value *got = check_scans(__LINE__ * 10 + with_nan, fire, args, 4, with_nan ? 3 : 1);
    int nans = nans_in(got);
    CHECK_MSG(with_nan ? nans > 0 : nans == 0, "with_nan %d: %d NaN", with_nan, nans);
    rt_value_release(got);
    for (int k = 0; k < 4; k++) rt_value_release(args[k]);
  }

  /* A pool window over padding alone gives its init, -inf, from finite values: the check sees
   * it, and the next convolution scans its source; its -inf times weights of both signs makes
   * NaN that oneDNN's relu would turn into 0, the reference's keeps. */
  const char *padded =
      "HloModule c\nENTRY e {\n x = f32[1,8,6,6] parameter(0)\n w = f32[8,8,3,3] parameter(1)\n"
      " w2 = f32[8,8,3,3] parameter(2)\n zero = f32[] constant(0)\n ninf = f32[] constant(-inf)\n"
      " z = f32[1,8,6,6] broadcast(zero), dimensions={}\n"
      " c = f32[1,8,6,6] convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01\n"
      " r = f32[1,8,6,6] maximum(c, z)\n"
      " p = f32[1,8,8,8] reduce-window(r, ninf), window={size=1x1x1x1 pad=0_0x0_0x1_1x1_1}, to_apply=mx\n"
      " c2 = f32[1,8,6,6] convolution(p, w2), window={size=3x3}, dim_labels=bf01_oi01->bf01\n"
      " ROOT y = f32[1,8,6,6] maximum(c2, z)\n}\n"
      "mx {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT m = f32[] maximum(a, b)\n}\n";
  expect_dnnl(__LINE__, padded, 3, 2, 2);
  rt_value *args[] = {make_value(HLO_F32, 4, (int64_t[]){1, 8, 6, 6}, xs),
                      make_value(HLO_F32, 4, (int64_t[]){8, 8, 3, 3}, ws),
                      make_value(HLO_F32, 4, (int64_t[]){8, 8, 3, 3}, ws)};
  rt_value *got = check_scans(__LINE__, padded, args, 3, 2);
  int nans = nans_in(got);
  CHECK_MSG(nans > 0, "%d NaN from -inf", nans);
  rt_value_release(got);
  for (int k = 0; k < 3; k++) rt_value_release(args[k]);
}

/* NaN through an absorbed relu or relu6: oneDNN's would make it 0, the reference keeps it.
 * The inputs are sqrt of values in [-1, 1): about half NaN. */
static void test_nonfinite(void) {
  static const char *const tails[] = {" ROOT y = f32[1,8,6,6] maximum(c, z)\n", " ROOT y = f32[1,8,6,6] clamp(zero, c, six)\n"};
  for (int t = 0; t < 2; t++) {
    char text[1024];
    snprintf(text, sizeof text,
             "HloModule c\nENTRY e {\n p = f32[1,8,6,6] parameter(0)\n w = f32[8,8,3,3] parameter(1)\n"
             " x = f32[1,8,6,6] sqrt(p)\n zero = f32[] constant(0)\n six = f32[] constant(6)\n"
             " z = f32[1,8,6,6] broadcast(zero), dimensions={}\n"
             " c = f32[1,8,6,6] convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01\n%s}\n",
             tails[t]);
    expect_dnnl(__LINE__, text, 1, 0, 1);
  }
  /* a source large enough to be scanned in chunks over the threads, finite but for one NaN
   * in its last chunk: relu(conv) of ones by ones is 1 everywhere, NaN there */
  enum { C = 16, H = 128, W = 128, N = C * H * W };
  const char *big = "HloModule c\nENTRY e {\n x = f32[1,16,128,128] parameter(0)\n w = f32[16,1,1,1] parameter(1)\n"
                    " zero = f32[] constant(0)\n z = f32[1,16,128,128] broadcast(zero), dimensions={}\n"
                    " c = f32[1,16,128,128] convolution(x, w), window={size=1x1}, dim_labels=bf01_oi01->bf01, "
                    "feature_group_count=16\n ROOT y = f32[1,16,128,128] maximum(c, z)\n}\n";
  double *ones = hlo_malloc(sizeof(double) * N);
  CHECK(ones != NULL);
  if (!ones) return;
  for (int i = 0; i < N; i++) ones[i] = 1;
  ones[N - 5] = NAN;
  rt_value *args[] = {make_value(HLO_F32, 4, (int64_t[]){1, C, H, W}, ones),
                      make_value(HLO_F32, 4, (int64_t[]){C, 1, 1, 1}, ones)};
  hlo_diag diag = {0};
  rt_value *got = run_on(&rt_backend_cpu, big, args, 2, &diag);
  CHECK_MSG(got != NULL, "%s", diag.message);
  int wrong = 0;
  for (int i = 0; got && i < N; i++) {
    float v = ((const float *)got->data)[i];
    wrong += i == N - 5 ? !isnan(v) : v != 1.0f;
  }
  CHECK_EQ_INT(wrong, 0);
  rt_value_release(got);
  rt_value_release(args[0]);
  rt_value_release(args[1]);
  free(ones);
}

/* y = conv(x, w) for a [1,2,4,4] x of ones and w [3,2,1,1]: y[o] = sum over i of w[o][i]. */
static const char *one_by_one =
    "HloModule c\nENTRY e {\n x = f32[%1$d,2,4,4] parameter(0)\n w = f32[3,2,1,1] parameter(1)\n"
    " ROOT y = f32[%1$d,3,4,4] convolution(x, w), window={size=1x1}, dim_labels=bf01_oi01->bf01\n}\n";

static void expect_one_by_one(int line, rt_executable *exe, int batch, rt_value *w, int64_t reorders) {
  double xs[8 * 2 * 16];
  for (int i = 0; i < batch * 32; i++) xs[i] = 1;
  rt_value *x = make_value(HLO_F32, 4, (int64_t[]){batch, 2, 4, 4}, xs);
  rt_value *args[] = {x, w}, *y = NULL;
  hlo_diag diag = {0};
  int64_t before = rt_cpu_dnnl_weight_reorder_count();
  CHECK_MSG(rt_backend_cpu.execute(exe, args, 2, &y, &diag) == HLO_OK, "line %d: %s", line, diag.message);
  CHECK_MSG(rt_cpu_dnnl_weight_reorder_count() - before == reorders, "line %d: %lld weight reorders, want %lld", line,
            (long long)(rt_cpu_dnnl_weight_reorder_count() - before), (long long)reorders);
  double want[8 * 3 * 16];
  for (int n = 0; n < batch; n++)
    for (int o = 0; o < 3; o++)
      for (int p = 0; p < 16; p++) want[(n * 3 + o) * 16 + p] = rt_get_f64(w, o * 2) + rt_get_f64(w, o * 2 + 1);
  if (y) expect_values(line, y, want, batch * 48, 0);
  rt_value_release(y);
  rt_value_release(x);
}

static const char *batch_text(int batch) {
  static char text[512];
  snprintf(text, sizeof text, one_by_one, batch);
  return text;
}

/* Whether the plans of two texts keep the same results at the same places (kept_places.c). */
static bool same_kept_places(const char *a, const char *b) {
  hlo_module *ma, *mb;
  rt_cpu_plan *pa = plan_of(a, &ma);
  char copy[512];
  snprintf(copy, sizeof copy, "%s", b); /* batch_text reuses one buffer */
  rt_cpu_plan *pb = plan_of(copy, &mb);
  rt_cpu_kept_places *places = pa ? rt_cpu_kept_places_of(pa) : NULL;
  bool same = places && pb && rt_cpu_kept_places_matches(places, pb);
  rt_cpu_kept_places_free(places);
  free_plan(pa, ma);
  free_plan(pb, mb);
  return same;
}

/* Kept weights: reordered on the first execute, not on the next with the same stamp, again
 * after an in-place write and touch. A bound executable shares its family's arena: where its
 * plan keeps the weights as the compiled one's does (the same oneDNN layout at the same
 * place: kept_places.c), the weights the other reordered serve it too, and switching back
 * and forth reorders nothing. Whether oneDNN wants these weights reordered at all depends on
 * the processor; the test asks what the plans say. */
static void test_kept_weights(void) {
  rt_executable *exe = compile_checked(batch_text(1));
  if (!exe) return;
  hlo_module *module;
  rt_cpu_plan *plan = plan_of(batch_text(1), &module);
  int64_t once = 0;
  for (int i = 0; plan && i < plan->step_count; i++)
    if (plan->steps[i].kind == RT_STEP_DNNL) once = plan->steps[i].weight_param >= 0 ? 1 : 0;
  free_plan(plan, module);
  char one[512];
  snprintf(one, sizeof one, "%s", batch_text(1));
  int64_t switched = same_kept_places(one, batch_text(5)) ? 0 : once;
  hlo_diag diag = {0};
  rt_value *w = make_value(HLO_F32, 4, (int64_t[]){3, 2, 1, 1}, (double[]){1, 2, 3, 4, 5, 6});
  expect_one_by_one(__LINE__, exe, 1, w, once);
  expect_one_by_one(__LINE__, exe, 1, w, 0);
  ((float *)w->data)[0] = 10; /* written in place and touched: reordered again */
  rt_value_touch(w);
  expect_one_by_one(__LINE__, exe, 1, w, once);
  expect_one_by_one(__LINE__, exe, 1, w, 0);
  hlo_module *binding = parse_checked(batch_text(5));
  rt_executable *bound = binding ? rt_backend_cpu.bind(exe, binding, &diag) : NULL;
  hlo_module_free(binding);
  CHECK_MSG(bound != NULL, "bind: %s", diag.message);
  if (bound) {
    expect_one_by_one(__LINE__, bound, 5, w, once); /* the family's arena is too small: one of its own */
    expect_one_by_one(__LINE__, bound, 5, w, 0);
    ((float *)w->data)[5] = -7;
    rt_value_touch(w);
    expect_one_by_one(__LINE__, bound, 5, w, once);
    expect_one_by_one(__LINE__, exe, 1, w, switched); /* the arena last held the bound plan's */
    expect_one_by_one(__LINE__, bound, 5, w, switched);
    rt_backend_cpu.destroy(bound);
    /* the arena came back from the bound executable, whose layout went with it: not trusted */
    expect_one_by_one(__LINE__, exe, 1, w, once);
    expect_one_by_one(__LINE__, exe, 1, w, 0);
  }
  rt_value_release(w);
  rt_backend_cpu.destroy(exe);
}

/* y = relu(conv(x, w) + b), 3x3 over 16 features: weights oneDNN reorders on every x86
 * processor it has a kernel for. */
static const char *relu_conv =
    "HloModule c\nENTRY e {\n x = f32[%1$d,16,6,6] parameter(0)\n w = f32[16,16,3,3] parameter(1)\n"
    " b = f32[16] parameter(2)\n c = f32[%1$d,16,6,6] convolution(x, w), window={size=3x3 pad=1_1x1_1}, "
    "dim_labels=bf01_oi01->bf01\n bb = f32[%1$d,16,6,6] broadcast(b), dimensions={1}\n a = f32[%1$d,16,6,6] add(c, bb)\n"
    " z = f32[] constant(0)\n zb = f32[%1$d,16,6,6] broadcast(z), dimensions={}\n"
    " ROOT y = f32[%1$d,16,6,6] maximum(a, zb)\n}\n";

/* exe at batch against the reference on seeded arguments sharing w and b; want_reorders:
 * the weight reorders its execute makes. */
static void expect_relu_conv(int line, rt_executable *exe, int batch, rt_value *w, rt_value *b,
                             int64_t want_reorders) {
  char text[1024];
  snprintf(text, sizeof text, relu_conv, batch);
  hlo_module *module = parse_checked(text);
  if (!module) return;
  hlo_diag diag = {0};
  rt_value *x = rt_random_value(&module->entry->params[0]->shape, (uint64_t)line, 0, &diag);
  rt_value *args[] = {x, w, b}, *got = NULL, *want = NULL;
  int64_t before = rt_cpu_dnnl_weight_reorder_count();
  CHECK_MSG(rt_backend_cpu.execute(exe, args, 3, &got, &diag) == HLO_OK, "line %d: %s", line, diag.message);
  int64_t reorders = rt_cpu_dnnl_weight_reorder_count() - before;
  CHECK_MSG(reorders == want_reorders, "line %d: %lld weight reorders, want %lld", line, (long long)reorders,
            (long long)want_reorders);
  rt_eval_options options = {.fp64 = false};
  CHECK_MSG(rt_evaluate(module, args, 3, &options, &want, &diag) == HLO_OK, "line %d: reference: %s", line,
            diag.message);
  CHECK_MSG(cpu_agree(want, got), "line %d: differs from the reference", line);
  rt_value_release(got);
  rt_value_release(want);
  rt_value_release(x);
  hlo_module_free(module);
}

/* relu_conv's weights and bias, seeded. */
static void relu_conv_weights(uint64_t seed, rt_value **w, rt_value **b) {
  hlo_shape w_shape = hlo_shape_make(HLO_F32, 4, (int64_t[]){16, 16, 3, 3}), b_shape = hlo_shape_make(HLO_F32, 1, (int64_t[]){16});
  hlo_diag diag = {0};
  *w = rt_random_value(&w_shape, seed, 1, &diag);
  *b = rt_random_value(&b_shape, seed, 2, &diag);
}

/* A weight written in place and touched, as latch_assign leaves it. */
static void rewrite(rt_value *w) {
  ((float *)w->data)[3] = 0.5f;
  rt_value_touch(w);
}

/* Three rounds of a then b, each reordering no weight: they share what the other reordered. */
static void expect_switches(int line, rt_executable *a, int a_batch, rt_executable *b, int b_batch, rt_value *w,
                            rt_value *bias) {
  for (int round = 0; round < 3; round++) {
    expect_relu_conv(line, a, a_batch, w, bias, 0);
    expect_relu_conv(line, b, b_batch, w, bias, 0);
  }
}

/* Two bindings of one graph called in turn (a server's batch sizes of 2 and 3) share their
 * family's arena and with it the reordered weights: one reorder for the first call and one
 * for the first call of the larger binding (the arena it needs is new), none for the
 * switches after them, one again after the weights are written in place, and the results
 * are the reference's throughout. */
static void test_kept_across_bindings(void) {
  char two[1024], three[1024];
  snprintf(two, sizeof two, relu_conv, 2);
  snprintf(three, sizeof three, relu_conv, 3);
  CHECK_MSG(same_kept_places(two, three), "the two batch sizes' plans keep their weights at other places");
  rt_executable *exe = compile_checked(two);
  hlo_module *binding = parse_checked(three);
  hlo_diag diag = {0};
  rt_executable *bound = exe && binding ? rt_backend_cpu.bind(exe, binding, &diag) : NULL;
  hlo_module_free(binding);
  CHECK_MSG(bound != NULL, "bind: %s", diag.message);
  if (!bound) {
    rt_backend_cpu.destroy(exe);
    return;
  }
  rt_value *w, *b;
  relu_conv_weights(7, &w, &b);
  expect_relu_conv(__LINE__, exe, 2, w, b, 1);
  expect_relu_conv(__LINE__, bound, 3, w, b, 1);
  expect_relu_conv(__LINE__, exe, 2, w, b, 0);
  expect_switches(__LINE__, bound, 3, exe, 2, w, b);
  rewrite(w); /* reordered once more */
  expect_relu_conv(__LINE__, bound, 3, w, b, 1);
  expect_relu_conv(__LINE__, exe, 2, w, b, 0);
  expect_relu_conv(__LINE__, bound, 3, w, b, 0);
  rt_value_release(w);
  rt_value_release(b);
  rt_backend_cpu.destroy(bound);
  rt_backend_cpu.destroy(exe);
}

/* A binding saved by one process and loaded by another is an executable of its own; told to
 * share its family's buffers (rt_backend.share_buffers, as a traced function's entry does
 * for each binding it loads) it takes the weights its family reordered, as a bound one does.
 * The family is compiled at batch 3 and the binding is of batch 2, whose arena fits in the
 * family's: no reorder at its first call. The same bytes loaded and not told to share
 * reorder them into an arena of their own; an executable of another graph is refused. */
static void test_kept_across_loaded_bindings(void) {
  char two[1024], three[1024];
  snprintf(two, sizeof two, relu_conv, 2);
  snprintf(three, sizeof three, relu_conv, 3);
  rt_executable *exe = compile_checked(three);
  hlo_module *binding = parse_checked(two);
  hlo_diag diag = {0};
  rt_executable *bound = exe && binding ? rt_backend_cpu.bind(exe, binding, &diag) : NULL;
  hlo_module_free(binding);
  void *bytes = NULL;
  size_t len = 0;
  CHECK_MSG(bound && rt_backend_cpu.serialize(bound, &bytes, &len, &diag) == HLO_OK, "bind or serialize: %s",
            diag.message);
  rt_backend_cpu.destroy(bound);
  rt_executable *shared = bytes ? rt_backend_cpu.deserialize(bytes, len, NULL, &diag) : NULL;
  rt_executable *alone = bytes ? rt_backend_cpu.deserialize(bytes, len, NULL, &diag) : NULL;
  free(bytes);
  rt_executable *other = compile_checked(batch_text(2));
  CHECK_MSG(shared && alone && other, "deserialize: %s", diag.message);
  if (!exe || !shared || !alone || !other) {
    rt_backend_cpu.destroy(shared), rt_backend_cpu.destroy(alone), rt_backend_cpu.destroy(other);
    rt_backend_cpu.destroy(exe);
    return;
  }
  CHECK(rt_backend_cpu.share_buffers(shared, exe));
  CHECK(!rt_backend_cpu.share_buffers(shared, exe)); /* once */
  CHECK(!rt_backend_cpu.share_buffers(other, exe));  /* another graph */
  rt_value *w, *b;
  relu_conv_weights(11, &w, &b);
  expect_relu_conv(__LINE__, exe, 3, w, b, 1);
  expect_relu_conv(__LINE__, shared, 2, w, b, 0);
  expect_relu_conv(__LINE__, alone, 2, w, b, 1);
  expect_switches(__LINE__, exe, 3, shared, 2, w, b);
  rewrite(w); /* reordered once more */
  expect_relu_conv(__LINE__, exe, 3, w, b, 1);
  expect_relu_conv(__LINE__, alone, 2, w, b, 1);
  expect_relu_conv(__LINE__, shared, 2, w, b, 0);
  rt_backend_cpu.destroy(shared); /* the arena came back from it, whose layout went with it: not trusted */
  expect_relu_conv(__LINE__, exe, 3, w, b, 1);
  expect_relu_conv(__LINE__, exe, 3, w, b, 0);
  rt_value_release(w);
  rt_value_release(b);
  rt_backend_cpu.destroy(alone);
  rt_backend_cpu.destroy(other);
  rt_backend_cpu.destroy(exe);
}

/* Through the public API: a traced conv whose weight is assigned between calls and updated
 * inside a step; each call must see the weights as they are. */
static latch_status conv_fn(void *user, latch_tensor *const *in, int in_count, latch_tensor **out, int out_count) {
  (void)user, (void)in_count, (void)out_count;
  latch_conv2d_params p = {{1, 1}, {0, 0}, {1, 1}, 1};
  out[0] = latch_conv2d(in[0], in[1], &p);
  return out[0] ? LATCH_OK : LATCH_ERR_INTERNAL;
}

static latch_status conv_step(void *user, latch_tensor *const *in, int in_count, latch_tensor **out, int out_count) {
  latch_status status = conv_fn(user, in, in_count, out, out_count);
  latch_tensor *one = latch_scalar((latch_runtime *)user, LATCH_F32, 1);
  latch_tensor *next = latch_binary(LATCH_ADD, in[1], one);
  if (status == LATCH_OK) status = latch_assign(in[1], next);
  latch_release(one);
  latch_release(next);
  return status;
}

/* y for x of ones [batch, 2, 4, 4] and weights ws [3, 2, 1, 1]. */
static void expect_call(int line, latch_function *f, latch_tensor *x, latch_tensor *w, int batch, const float *ws) {
  latch_tensor *in[] = {x, w}, *y = NULL;
  CHECK_EQ_INT(latch_call(f, in, 2, NULL, 0, &y, 1), LATCH_OK);
  double *got = fu_read(y);
  CHECK_MSG(got != NULL, "line %d: no result", line);
  for (int i = 0; got && i < batch * 48; i++) {
    int o = i / 16 % 3;
    double want = (double)ws[o * 2] + ws[o * 2 + 1];
    if (got[i] != want) {
      CHECK_MSG(false, "line %d: y[%d] = %g, want %g", line, i, got[i], want);
      break;
    }
  }
  free(got);
  latch_release(y);
}

static void test_traced_weights(void) {
  latch_runtime *rt = fu_open_backend("cpu");
  latch_function_options fo = fu_options(LATCH_TRACE_ONCE, LATCH_SHAPES_STATIC);
  latch_function *f = rt ? latch_function_new_step(rt, conv_fn, NULL, &fo) : NULL;
  latch_function *g = rt ? latch_function_new_step(rt, conv_step, rt, &fo) : NULL;
  CHECK(f != NULL && g != NULL);
  float ones[8 * 32], ws[6] = {1, 2, 3, 4, 5, 6}, ws2[6] = {-1, 0.5f, 2, 2, 0, 3};
  for (int i = 0; i < 8 * 32; i++) ones[i] = 1;
  latch_tensor *x = rt ? latch_from_host(rt, LATCH_F32, 4, (int64_t[]){1, 2, 4, 4}, ones) : NULL;
  latch_tensor *x8 = rt ? latch_from_host(rt, LATCH_F32, 4, (int64_t[]){8, 2, 4, 4}, ones) : NULL;
  latch_tensor *w = rt ? latch_from_host(rt, LATCH_F32, 4, (int64_t[]){3, 2, 1, 1}, ws) : NULL;
  if (f && g && x && x8 && w) {
    expect_call(__LINE__, f, x, w, 1, ws);
    expect_call(__LINE__, f, x, w, 1, ws);
    latch_tensor *w2 = latch_from_host(rt, LATCH_F32, 4, (int64_t[]){3, 2, 1, 1}, ws2);
    CHECK_EQ_INT(latch_assign(w, w2), LATCH_OK);
    latch_release(w2);
    expect_call(__LINE__, f, x, w, 1, ws2);
    expect_call(__LINE__, f, x8, w, 8, ws2); /* another batch size */
    expect_call(__LINE__, f, x, w, 1, ws2);
    for (int call = 0; call < 3; call++) { /* updated inside the step, call after call */
      expect_call(__LINE__, g, call % 2 ? x8 : x, w, call % 2 ? 8 : 1, ws2);
      for (int i = 0; i < 6; i++) ws2[i] += 1;
    }
  }
  latch_release(x);
  latch_release(x8);
  latch_release(w);
  latch_function_free(f);
  latch_function_free(g);
  latch_close(rt);
}

/* y = conv3x3(x, w), 16 features, padded: weights oneDNN reorders. */
static latch_status conv3_fn(void *user, latch_tensor *const *in, int in_count, latch_tensor **out, int out_count) {
  (void)user, (void)in_count, (void)out_count;
  latch_conv2d_params p = {{1, 1}, {1, 1}, {1, 1}, 1};
  out[0] = latch_conv2d(in[0], in[1], &p);
  return out[0] ? LATCH_OK : LATCH_ERR_INTERNAL;
}

/* One process of test_loaded_binding_shares: a traced conv, its batch symbolic, called at
 * batch 3 and then 2 on a runtime with the disk cache in dir. outs[b - 2]: batch b's values;
 * *reorders: the weight reorders the batch-2 call made; *loads: the runtime's disk loads. */
static void conv_process(const char *dir, double **outs, int64_t *reorders, uint64_t *loads) {
  latch_runtime *rt = fu_open_disk(dir);
  CHECK_MSG(rt != NULL, "%s", latch_last_error());
  if (!rt) return;
  latch_dim_mark batch = {.input = 0, .dim = 0, .dynamic = true};
  latch_function_options fo = fu_options(LATCH_TRACE_ONCE, LATCH_SHAPES_MARKED);
  fo.mark_count = 1, fo.marks = &batch;
  latch_function *f = latch_function_new_step(rt, conv3_fn, NULL, &fo);
  latch_tensor *w = fu_ramp(rt, 4, (int64_t[]){16, 16, 3, 3}, 0.001, -1);
  for (int b = 3; f && b >= 2; b--) {
    latch_tensor *x = fu_ramp(rt, 4, (int64_t[]){b, 16, 5, 5}, 0.01, -3), *y = NULL, *in[] = {x, w};
    int64_t before = rt_cpu_dnnl_weight_reorder_count();
    CHECK_EQ_INT(latch_call(f, in, 2, NULL, 0, &y, 1), LATCH_OK);
    outs[b - 2] = fu_read(y);
    CHECK(outs[b - 2] != NULL);
    if (b == 2) *reorders = rt_cpu_dnnl_weight_reorder_count() - before;
    latch_release(y);
    latch_release(x);
  }
  latch_stats stats;
  latch_get_stats(rt, &stats);
  *loads = stats.disk_loads;
  latch_release(w);
  latch_function_free(f);
  latch_close(rt);
}

/* Through the public API with the disk cache: the first process compiles at batch 3 and
 * binds batch 2, which shares the compiled one's arena and reorders no weight. The second
 * loads both from disk; the batch-2 binding it loads shares its entry's buffers as the bound
 * one did, so it too reorders none, and the values are the first process's bits. */
static void test_loaded_binding_shares(void) {
  char dir[] = "/tmp/latch-share-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  double *cold[2] = {NULL, NULL}, *warm[2] = {NULL, NULL};
  int64_t cold_reorders = -1, warm_reorders = -1;
  uint64_t cold_loads = 0, warm_loads = 0;
  conv_process(dir, cold, &cold_reorders, &cold_loads);
  conv_process(dir, warm, &warm_reorders, &warm_loads);
  CHECK_EQ_INT(cold_loads, 0);
  CHECK_EQ_INT(warm_loads, 2);
  CHECK_EQ_INT(cold_reorders, 0);
  CHECK_EQ_INT(warm_reorders, 0);
  for (int b = 2; b <= 3; b++)
    CHECK_MSG(cold[b - 2] && warm[b - 2] && memcmp(cold[b - 2], warm[b - 2], sizeof(double) * (size_t)b * 16 * 25) == 0,
              "batch %d: the loaded binding's values differ from the bound one's", b);
  for (int i = 0; i < 2; i++) free(cold[i]), free(warm[i]);
  char command[128];
  snprintf(command, sizeof command, "rm -rf %s", dir);
  CHECK(system(command) == 0);
}

/* Winograd (oneDNN's F(4x4, 3x3), AVX-512 only): at batch 8 over 64 channels at 14x14 oneDNN
 * picks it for a 3x3 convolution with a bias and relu. Its results against the reference on
 * seeded values; then with NaN in the source and inf in the weights (the safe direct
 * primitive runs, the NaN and inf land where the reference's do); then with finite values
 * so large that Winograd's transforms overflow (+-3e37) while the direct sums stay finite:
 * the result is checked, found not finite and computed again directly. On AVX2 the plan
 * must say direct. */
static const char *wino_conv =
    "HloModule c\nENTRY e {\n x = f32[8,64,14,14] parameter(0)\n w = f32[64,64,3,3] parameter(1)\n"
    " b = f32[64] parameter(2)\n c = f32[8,64,14,14] convolution(x, w), window={size=3x3 pad=1_1x1_1}, "
    "dim_labels=bf01_oi01->bf01\n bb = f32[8,64,14,14] broadcast(b), dimensions={1}\n a = f32[8,64,14,14] add(c, bb)\n"
    " z = f32[] constant(0)\n zb = f32[8,64,14,14] broadcast(z), dimensions={}\n"
    " ROOT y = f32[8,64,14,14] maximum(a, zb)\n}\n";

static void count_winograd(const rt_cpu_dnnl *d, void *ctx) { *(int *)ctx += d->alg == dnnl_convolution_winograd; }

/* wino_conv on the cpu backend against the reference on args; how many results are not finite. */
static int expect_wino(int line, rt_value **args) {
  hlo_diag diag = {0};
  rt_value *got = run_on(&rt_backend_cpu, wino_conv, args, 3, &diag);
  rt_value *want = run_on(&rt_backend_reference, wino_conv, args, 3, &diag);
  CHECK_MSG(got && want && cpu_agree(want, got), "line %d: differs from the reference %s", line, diag.message);
  int nonfinite = 0;
  for (int64_t i = 0; got && i < got->count; i++) nonfinite += !isfinite(((const float *)got->data)[i]);
  rt_value_release(got);
  rt_value_release(want);
  return nonfinite;
}

static void test_winograd(void) {
  bool avx512 = (dnnl_get_effective_cpu_isa() & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core;
  int winograd = 0;
  each_dnnl_step(wino_conv, count_winograd, &winograd);
  CHECK_EQ_INT(winograd, avx512 ? 1 : 0);
  expect_dnnl(__LINE__, wino_conv, 1, 0, 2);
  hlo_module *module = parse_checked(wino_conv);
  if (!module) return;
  hlo_diag diag = {0};
  rt_value *args[3];
  for (int i = 0; i < 3; i++) args[i] = rt_random_value(&module->entry->params[i]->shape, 7, (uint64_t)i, &diag);
  float *x = args[0]->data, *w = args[1]->data;
  x[1000] = NAN;
  w[77] = INFINITY;
  CHECK_MSG(expect_wino(__LINE__, args) > 0, "NaN and inf reach the result");
  for (int64_t i = 0; i < args[0]->count; i++) x[i] = (i % 2 ? 3e37f : -3e37f) * (1 + (float)(i % 5) / 8);
  for (int64_t i = 0; i < args[1]->count; i++) w[i] = (float)((i * 37) % 11 - 5) * 2e-5f;
  rt_value_touch(args[0]);
  rt_value_touch(args[1]);
  CHECK_EQ_INT(expect_wino(__LINE__, args), 0);
  for (int i = 0; i < 3; i++) rt_value_release(args[i]);
  hlo_module_free(module);
}

static void count_own_wino(const rt_cpu_dnnl *d, void *ctx) { *(int *)ctx += d->wino; }

/* wino_conv on exe against the reference on args; the weight reorders and transforms its
 * execute makes. */
static int64_t wino_reorders(int line, rt_executable *exe, rt_value **args) {
  hlo_diag diag = {0};
  rt_value *got = NULL, *want = run_on(&rt_backend_reference, wino_conv, args, 3, &diag);
  int64_t before = rt_cpu_dnnl_weight_reorder_count();
  CHECK_MSG(rt_backend_cpu.execute(exe, args, 3, &got, &diag) == HLO_OK, "line %d: %s", line, diag.message);
  int64_t reorders = rt_cpu_dnnl_weight_reorder_count() - before;
  CHECK_MSG(got && want && cpu_agree(want, got), "line %d: differs from the reference", line);
  rt_value_release(got);
  rt_value_release(want);
  return reorders;
}

/* Weights new at every call (a training step's): a Winograd step transforms the first ones and
 * those of the next call, then runs direct while they keep changing (oneDNN's safe primitive,
 * whose reorder into its direct layout is no Winograd transform; wino.c's: oneDNN's direct
 * kernel, its weights reordered into the scratch); weights that come again are transformed
 * and kept. Results are the reference's throughout. A plain direct step reorders each new
 * version once. */
static void test_winograd_new_weights(void) {
  int winograd = 0, own = 0;
  each_dnnl_step(wino_conv, count_winograd, &winograd);
  each_dnnl_step(wino_conv, count_own_wino, &own);
  /* per call: versions 1, 2, 3, 4, then 4 twice */
  static const int64_t want_winograd[6] = {1, 1, 0, 0, 1, 0}, want_own[6] = {1, 1, 1, 1, 1, 0},
                       want_direct[6] = {1, 1, 1, 1, 0, 0};
  const int64_t *want = winograd ? want_winograd : own ? want_own : want_direct;
  rt_executable *exe = compile_checked(wino_conv);
  hlo_module *module = parse_checked(wino_conv);
  if (!exe || !module) {
    rt_backend_cpu.destroy(exe);
    hlo_module_free(module);
    return;
  }
  hlo_diag diag = {0};
  rt_value *args[3];
  for (int i = 0; i < 3; i++) args[i] = rt_random_value(&module->entry->params[i]->shape, 11, (uint64_t)i, &diag);
  float *w = args[1]->data;
  for (int call = 0; call < 6; call++) {
    if (call > 0 && call < 4) { /* a new version, as an optimizer's step leaves it */
      for (int64_t i = 0; i < args[1]->count; i++) w[i] *= 0.99f;
      rt_value_touch(args[1]);
    }
    int64_t reorders = wino_reorders(__LINE__, exe, args);
    CHECK_MSG(reorders == want[call], "call %d: %lld weight reorders, want %lld", call, (long long)reorders,
              (long long)want[call]);
  }
  for (int i = 0; i < 3; i++) rt_value_release(args[i]);
  hlo_module_free(module);
  rt_backend_cpu.destroy(exe);
}

/* 128 x 64 x 3x3 weights over 2x2 maps: they outweigh the activations. */
static const char *heavy_conv =
    "HloModule c\nENTRY e {\n x = f32[2,64,2,2] parameter(0)\n w = f32[128,64,3,3] parameter(1)\n"
    " ROOT y = f32[2,128,2,2] convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01\n}\n";

/* Weights new at every call that outweigh the activations: the first two versions are
 * reordered and run on the primitive, the next ones run as one matrix product over the
 * batch (conv_gemm.c) with no reorder; weights that come again are reordered and kept, and
 * the count of new versions starts over. The results are the reference's throughout, an inf
 * in the weights included (the third new version in a row: the product's result is not
 * finite, and the primitive computes it). */
static void test_gemm_new_weights(void) {
  rt_executable *exe = compile_checked(heavy_conv);
  hlo_module *module = parse_checked(heavy_conv);
  if (!exe || !module) {
    rt_backend_cpu.destroy(exe);
    hlo_module_free(module);
    return;
  }
  hlo_diag diag = {0};
  rt_value *args[2];
  for (int i = 0; i < 2; i++) args[i] = rt_random_value(&module->entry->params[i]->shape, 13, (uint64_t)i, &diag);
  float *w = args[1]->data;
  /* per call: versions 1, 2, 3, 4, then 4 twice, then 5 and 6 (an inf in 6) */
  static const int64_t want_reorders[8] = {1, 1, 0, 0, 1, 0, 1, 1}, want_products[8] = {0, 0, 1, 1, 0, 0, 0, 0};
  for (int call = 0; call < 8; call++) {
    if ((call > 0 && call < 4) || call >= 6) {
      for (int64_t i = 0; i < args[1]->count; i++) w[i] *= 0.99f;
      if (call == 7) w[40] = INFINITY;
      rt_value_touch(args[1]);
    }
    rt_value *want = run_on(&rt_backend_reference, heavy_conv, args, 2, &diag), *got = NULL;
    int64_t reorders = rt_cpu_dnnl_weight_reorder_count(), products = rt_cpu_dnnl_gemm_step_count();
    CHECK_MSG(rt_backend_cpu.execute(exe, args, 2, &got, &diag) == HLO_OK, "call %d: %s", call, diag.message);
    reorders = rt_cpu_dnnl_weight_reorder_count() - reorders;
    products = rt_cpu_dnnl_gemm_step_count() - products;
    CHECK_MSG(got && want && cpu_agree(want, got), "call %d: differs from the reference", call);
    CHECK_MSG(products == want_products[call], "call %d: %lld products, want %lld", call, (long long)products,
              (long long)want_products[call]);
    CHECK_MSG(reorders == want_reorders[call], "call %d: %lld weight reorders, want %lld", call, (long long)reorders,
              (long long)want_reorders[call]);
    rt_value_release(got);
    rt_value_release(want);
  }
  for (int i = 0; i < 2; i++) rt_value_release(args[i]);
  hlo_module_free(module);
  rt_backend_cpu.destroy(exe);
}

int main(void) {
  RUN(test_layouts);
  RUN(test_fallbacks);
  RUN(test_epilogues);
  RUN(test_row_major_residual);
  RUN(test_blocked_pools);
  RUN(test_blocked_sum_pools);
  RUN(test_blocked_pools_per_variant);
  RUN(test_blocked_concat);
  RUN(test_refused_layout);
  RUN(test_known_finite);
  RUN(test_residual_scanned_once);
  RUN(test_written_finite);
  RUN(test_nonfinite);
  RUN(test_kept_weights);
  RUN(test_kept_across_bindings);
  RUN(test_kept_across_loaded_bindings);
  RUN(test_loaded_binding_shares);
  RUN(test_traced_weights);
  RUN(test_winograd);
  RUN(test_winograd_new_weights);
  RUN(test_gemm_new_weights);
  return TEST_REPORT();
}
