/* Weights gradients on oneDNN's backward-weights primitive (runtime/cpu/dnnl_conv_grad.c)
 * against the reference evaluator: the gradient of a convolution's weights written as XLA and
 * latch.torch write it (the forward's source with its batch and features swapped, the
 * result's gradient as the window dilated by the forward's stride), at stride 1 and 2, with
 * padding, a window the stride does not divide, NHWC labels, and the transposed form the
 * simplification folds into the labels. The count of the kernel's runs shows each took it,
 * and a forward convolution did not. A gradient holding inf comes out as the reference's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_util.h"
#include "runtime/cpu/kernel_internal.h"

/* text against the reference on two seeds; whether the gradient kernel ran (want_runs
 * times per execute). */
static void expect_grad(int line, const char *text, int want_runs) {
  for (int seed = 1; seed <= 2; seed++) {
    int64_t before = rt_cpu_conv_grad_runs();
    expect_same_as_reference(text, seed);
    int64_t runs = rt_cpu_conv_grad_runs() - before;
    CHECK_MSG(runs == want_runs, "line %d: the gradient kernel ran %lld times, want %d", line, (long long)runs,
              want_runs);
  }
}

static void test_weights_gradients(void) {
  /* a 3x3 stride-1 pad-1 convolution of [4,5,9,9] into [4,7,9,9]: its weights' gradient
   * [C=5 batch, O=7 features, 3, 3] */
  expect_grad(__LINE__,
              "HloModule g\nENTRY e {\n x = f32[4,5,9,9] parameter(0)\n g = f32[4,7,9,9] parameter(1)\n"
              " ROOT w = f32[5,7,3,3] convolution(x, g), window={size=9x9 pad=1_1x1_1}, dim_labels=fb01_io01->bf01\n}\n",
              1);
  /* stride 2 (the window dilated by 2): 3x3, pad 1, 9x9 -> 5x5 */
  expect_grad(__LINE__,
              "HloModule g\nENTRY e {\n x = f32[2,3,9,9] parameter(0)\n g = f32[2,4,5,5] parameter(1)\n"
              " ROOT w = f32[3,4,3,3] convolution(x, g), window={size=5x5 pad=1_1x1_1 rhs_dilate=2x2}, "
              "dim_labels=fb01_io01->bf01\n}\n",
              1);
  /* stride 2 over an even size: the last row of the padded source is in no window, so the
   * gradient comes out 4x4 (a lowering slices the 3x3 it wants) */
  expect_grad(__LINE__,
              "HloModule g\nENTRY e {\n x = f32[2,3,8,8] parameter(0)\n g = f32[2,4,4,4] parameter(1)\n"
              " ROOT w = f32[3,4,4,4] convolution(x, g), window={size=4x4 pad=1_1x1_1 rhs_dilate=2x2}, "
              "dim_labels=fb01_io01->bf01\n}\n",
              1);
  /* a 7x7 stride-2 pad-3 stem over 3 features, 16x16 -> 8x8, result [O, C, KH, KW] */
  expect_grad(__LINE__,
              "HloModule g\nENTRY e {\n x = f32[2,3,16,16] parameter(0)\n g = f32[2,8,8,8] parameter(1)\n"
              " ROOT w = f32[8,3,8,8] convolution(x, g), window={size=8x8 pad=3_3x3_3 rhs_dilate=2x2}, "
              "dim_labels=fb01_io01->fb01\n}\n",
              1);
  /* NHWC as XLA writes it: f01b_i01o->01bf, a 1x1 stride-2 convolution */
  expect_grad(__LINE__,
              "HloModule g\nENTRY e {\n x = f32[3,5,5,5] parameter(0)\n g = f32[3,3,3,4] parameter(1)\n"
              " ROOT w = f32[1,1,5,4] convolution(x, g), window={size=3x3 rhs_dilate=2x2}, "
              "dim_labels=f01b_i01o->01bf\n}\n",
              1);
  /* the transposed form latch.torch's lowering writes: the simplification folds both
   * transposes into the labels, and the kernel takes the result */
  expect_grad(__LINE__,
              "HloModule g\nENTRY e {\n x = f32[4,6,8,8] parameter(0)\n g = f32[4,5,8,8] parameter(1)\n"
              " xt = f32[6,4,8,8] transpose(x), dimensions={1,0,2,3}\n"
              " gt = f32[5,4,8,8] transpose(g), dimensions={1,0,2,3}\n"
              " c = f32[6,5,3,3] convolution(xt, gt), window={size=8x8 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01\n"
              " ROOT w = f32[5,6,3,3] transpose(c), dimensions={1,0,2,3}\n}\n",
              1);
}

static void test_forward_untouched(void) {
  /* a forward convolution (batch outer to features) is no gradient */
  expect_grad(__LINE__,
              "HloModule g\nENTRY e {\n x = f32[2,5,9,9] parameter(0)\n w = f32[7,5,3,3] parameter(1)\n"
              " ROOT y = f32[2,7,9,9] convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01\n}\n",
              0);
  /* grouped: not a shape the backward-weights description takes here */
  expect_grad(__LINE__,
              "HloModule g\nENTRY e {\n x = f32[4,6,6,6] parameter(0)\n g = f32[2,6,6,6] parameter(1)\n"
              " ROOT w = f32[6,6,3,3] convolution(x, g), window={size=6x6 pad=1_1x1_1}, dim_labels=fb01_io01->bf01, "
              "feature_group_count=2\n}\n",
              0);
}

/* An inf in the result's gradient: the reference skips the padding's taps, oneDNN's tiles may
 * multiply the padding's zeros by it; the result is the reference's either way. */
static void test_nonfinite(void) {
  const char *text =
      "HloModule g\nENTRY e {\n x = f32[2,2,5,5] parameter(0)\n g = f32[2,3,5,5] parameter(1)\n"
      " ROOT w = f32[2,3,3,3] convolution(x, g), window={size=5x5 pad=1_1x1_1}, dim_labels=fb01_io01->bf01\n}\n";
  double xs[2 * 2 * 5 * 5], gs[2 * 3 * 5 * 5];
  for (int i = 0; i < 2 * 2 * 5 * 5; i++) xs[i] = 0.25 * (i % 7) - 0.5;
  for (int i = 0; i < 2 * 3 * 5 * 5; i++) gs[i] = 0.125 * (i % 5) - 0.25;
  gs[0] = INFINITY; /* the corner of the first map: every weight tap that reads it crosses padding */
  rt_value *args[] = {make_value(HLO_F32, 4, (int64_t[]){2, 2, 5, 5}, xs), make_value(HLO_F32, 4, (int64_t[]){2, 3, 5, 5}, gs)};
  hlo_diag diag = {0};
  rt_value *want = run_on(&rt_backend_reference, text, args, 2, &diag);
  rt_value *got = run_on(&rt_backend_cpu, text, args, 2, &diag);
  CHECK_MSG(want && got && cpu_agree(want, got), "%s", diag.message);
  int nonfinite = 0;
  for (int64_t i = 0; want && i < want->count; i++) nonfinite += !isfinite(rt_get_f64(want, i));
  CHECK(nonfinite > 0 && nonfinite < 2 * 3 * 3 * 3); /* some weights meet the inf, some only the padding */
  rt_value_release(want);
  rt_value_release(got);
  rt_value_release(args[0]);
  rt_value_release(args[1]);
}

int main(void) {
  RUN(test_weights_gradients);
  RUN(test_forward_untouched);
  RUN(test_nonfinite);
  return TEST_REPORT();
}
