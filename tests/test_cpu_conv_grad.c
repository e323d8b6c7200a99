/* Convolution gradients on oneDNN's backward primitives (runtime/cpu/dnnl_conv_grad.c)
 * against the reference evaluator.
 *
 * Weights gradients as XLA and latch.torch write them (the forward's source with its batch
 * and features swapped, the result's gradient as the window dilated by the forward's stride),
 * at stride 1 and 2, with padding, a window the stride does not divide, the high side padded
 * less (down to 1 - stride) so that exactly the kernel's taps come out, NHWC labels, and the
 * transposed form the simplification folds into the labels.
 *
 * Input gradients as XLA writes them (the result's gradient dilated by the forward's stride,
 * the kernel reversed and read with its features swapped; pass_input_grad.c folds the
 * reverse into the window), at stride 1 and 2, 3x3, 1x1 over an even size (source rows no
 * window read), a 7x7 stem, dilation, and the window reversal written in the text; a reverse
 * of other dims is left alone.
 *
 * Gradients whose weights outweigh their activations run as one matrix product
 * (conv_gemm.c), in NCHW and NHWC.
 *
 * The count of each kernel's runs shows each took it, and a forward convolution did not. A
 * gradient or kernel holding inf comes out as the reference's. */
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
  /* the same, exact: the high side padded by 0, so that 3x3 taps come out */
  expect_grad(__LINE__,
              "HloModule g\nENTRY e {\n x = f32[2,3,8,8] parameter(0)\n g = f32[2,4,4,4] parameter(1)\n"
              " ROOT w = f32[4,3,3,3] convolution(x, g), window={size=4x4 pad=1_0x1_0 rhs_dilate=2x2}, "
              "dim_labels=fb01_io01->fb01\n}\n",
              1);
  /* a 1x1 stride-2 shortcut over 8x8: the forward reads no source row past its last window,
   * the high side padded by -1 */
  expect_grad(__LINE__,
              "HloModule g\nENTRY e {\n x = f32[2,4,8,8] parameter(0)\n g = f32[2,8,4,4] parameter(1)\n"
              " ROOT w = f32[8,4,1,1] convolution(x, g), window={size=4x4 pad=0_-1x0_-1 rhs_dilate=2x2}, "
              "dim_labels=fb01_io01->fb01\n}\n",
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

/* text against the reference on two seeds; whether the input gradient kernel ran (want_runs
 * times per execute). */
static void expect_input_grad(int line, const char *text, int want_runs) {
  for (int seed = 1; seed <= 2; seed++) {
    int64_t before = rt_cpu_conv_input_grad_runs();
    expect_same_as_reference(text, seed);
    int64_t runs = rt_cpu_conv_input_grad_runs() - before;
    CHECK_MSG(runs == want_runs, "line %d: the input gradient kernel ran %lld times, want %d", line,
              (long long)runs, want_runs);
  }
}

static void test_input_gradients(void) {
  /* a 3x3 stride-1 pad-1 convolution [4,5,9,9] -> [4,7,9,9]: its input's gradient */
  expect_input_grad(__LINE__,
                    "HloModule g\nENTRY e {\n g = f32[4,7,9,9] parameter(0)\n w = f32[7,5,3,3] parameter(1)\n"
                    " r = f32[7,5,3,3] reverse(w), dimensions={2,3}\n"
                    " ROOT x = f32[4,5,9,9] convolution(g, r), window={size=3x3 pad=1_1x1_1}, "
                    "dim_labels=bf01_io01->bf01\n}\n",
                    1);
  /* stride 2, 3x3, pad 1: 9x9 -> 5x5, and 8x8 -> 4x4 (the high side padded one more) */
  expect_input_grad(__LINE__,
                    "HloModule g\nENTRY e {\n g = f32[2,6,5,5] parameter(0)\n w = f32[6,3,3,3] parameter(1)\n"
                    " r = f32[6,3,3,3] reverse(w), dimensions={2,3}\n"
                    " ROOT x = f32[2,3,9,9] convolution(g, r), window={size=3x3 pad=1_1x1_1 lhs_dilate=2x2}, "
                    "dim_labels=bf01_io01->bf01\n}\n",
                    1);
  expect_input_grad(__LINE__,
                    "HloModule g\nENTRY e {\n g = f32[2,6,4,4] parameter(0)\n w = f32[6,3,3,3] parameter(1)\n"
                    " r = f32[6,3,3,3] reverse(w), dimensions={2,3}\n"
                    " ROOT x = f32[2,3,8,8] convolution(g, r), window={size=3x3 pad=1_2x1_2 lhs_dilate=2x2}, "
                    "dim_labels=bf01_io01->bf01\n}\n",
                    1);
  /* a 1x1 stride-2 shortcut over 8x8: the last row and column no window read get zeros */
  expect_input_grad(__LINE__,
                    "HloModule g\nENTRY e {\n g = f32[2,8,4,4] parameter(0)\n w = f32[8,4,1,1] parameter(1)\n"
                    " r = f32[8,4,1,1] reverse(w), dimensions={2,3}\n"
                    " ROOT x = f32[2,4,8,8] convolution(g, r), window={size=1x1 pad=0_1x0_1 lhs_dilate=2x2}, "
                    "dim_labels=bf01_io01->bf01\n}\n",
                    1);
  /* a 7x7 stride-2 pad-3 stem, 16x16 -> 8x8 */
  expect_input_grad(__LINE__,
                    "HloModule g\nENTRY e {\n g = f32[2,8,8,8] parameter(0)\n w = f32[8,3,7,7] parameter(1)\n"
                    " r = f32[8,3,7,7] reverse(w), dimensions={3,2}\n"
                    " ROOT x = f32[2,3,16,16] convolution(g, r), window={size=7x7 pad=3_4x3_4 lhs_dilate=2x2}, "
                    "dim_labels=bf01_io01->bf01\n}\n",
                    1);
  /* dilation 2, stride 1, pad 2: 9x9 -> 9x9 */
  expect_input_grad(__LINE__,
                    "HloModule g\nENTRY e {\n g = f32[2,4,9,9] parameter(0)\n w = f32[4,3,3,3] parameter(1)\n"
                    " r = f32[4,3,3,3] reverse(w), dimensions={2,3}\n"
                    " ROOT x = f32[2,3,9,9] convolution(g, r), window={size=3x3 pad=2_2x2_2 rhs_dilate=2x2}, "
                    "dim_labels=bf01_io01->bf01\n}\n",
                    1);
  /* the reversal in the window as written, NHWC labels */
  expect_input_grad(__LINE__,
                    "HloModule g\nENTRY e {\n g = f32[2,5,5,6] parameter(0)\n w = f32[3,3,6,3] parameter(1)\n"
                    " ROOT x = f32[2,9,9,3] convolution(g, w), window={size=3x3 pad=1_1x1_1 lhs_dilate=2x2 "
                    "rhs_reversal=1x1}, dim_labels=b01f_01io->b01f\n}\n",
                    1);
}

static void test_forward_untouched(void) {
  /* a forward convolution (batch outer to features) is no gradient */
  expect_grad(__LINE__,
              "HloModule g\nENTRY e {\n x = f32[2,5,9,9] parameter(0)\n w = f32[7,5,3,3] parameter(1)\n"
              " ROOT y = f32[2,7,9,9] convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01\n}\n",
              0);
  /* a reverse of the kernel's features is no input gradient's: left as it is */
  expect_input_grad(__LINE__,
                    "HloModule g\nENTRY e {\n g = f32[2,7,9,9] parameter(0)\n w = f32[7,5,3,3] parameter(1)\n"
                    " r = f32[7,5,3,3] reverse(w), dimensions={0,3}\n"
                    " ROOT x = f32[2,5,9,9] convolution(g, r), window={size=3x3 pad=1_1x1_1}, "
                    "dim_labels=bf01_io01->bf01\n}\n",
                    0);
  /* the window reversed along one dim only */
  expect_input_grad(__LINE__,
                    "HloModule g\nENTRY e {\n g = f32[2,7,9,9] parameter(0)\n w = f32[7,5,3,3] parameter(1)\n"
                    " ROOT x = f32[2,5,9,9] convolution(g, w), window={size=3x3 pad=1_1x1_1 rhs_reversal=0x1}, "
                    "dim_labels=bf01_io01->bf01\n}\n",
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

/* An inf in the kernel of an input gradient: the taps that read it give inf or NaN, the
 * padding's and the dilation's holes none (the reference skips them); the result is the
 * reference's. */
static void test_input_grad_nonfinite(void) {
  const char *text =
      "HloModule g\nENTRY e {\n g = f32[1,2,3,3] parameter(0)\n w = f32[2,2,3,3] parameter(1)\n"
      " r = f32[2,2,3,3] reverse(w), dimensions={2,3}\n"
      " ROOT x = f32[1,2,6,6] convolution(g, r), window={size=3x3 pad=1_2x1_2 lhs_dilate=2x2}, "
      "dim_labels=bf01_io01->bf01\n}\n";
  double gs[1 * 2 * 3 * 3], ws[2 * 2 * 3 * 3];
  for (int i = 0; i < 1 * 2 * 3 * 3; i++) gs[i] = 0.25 * (i % 7) - 0.5;
  for (int i = 0; i < 2 * 2 * 3 * 3; i++) ws[i] = 0.125 * (i % 5) - 0.25;
  ws[0] = INFINITY; /* tap (0, 0) of the first output feature's filter for input feature 0 */
  rt_value *args[] = {make_value(HLO_F32, 4, (int64_t[]){1, 2, 3, 3}, gs), make_value(HLO_F32, 4, (int64_t[]){2, 2, 3, 3}, ws)};
  hlo_diag diag = {0};
  int64_t before = rt_cpu_conv_input_grad_runs();
  rt_value *want = run_on(&rt_backend_reference, text, args, 2, &diag);
  rt_value *got = run_on(&rt_backend_cpu, text, args, 2, &diag);
  CHECK_MSG(want && got && cpu_agree(want, got), "%s", diag.message);
  CHECK(rt_cpu_conv_input_grad_runs() - before == 1);
  int nonfinite = 0;
  for (int64_t i = 0; want && i < want->count; i++) nonfinite += !isfinite(rt_get_f64(want, i));
  CHECK(nonfinite > 0 && nonfinite < 2 * 6 * 6 / 2); /* feature 0 at odd rows and columns: tap (0, 0)'s */
  rt_value_release(want);
  rt_value_release(got);
  rt_value_release(args[0]);
  rt_value_release(args[1]);
}

/* text against the reference on two seeds; whether each ran as one matrix product
 * (conv_gemm.c): want_runs per execute. */
static void expect_gemm(int line, const char *text, int want_runs) {
  for (int seed = 1; seed <= 2; seed++) {
    int64_t before = rt_cpu_conv_gemm_runs();
    expect_same_as_reference(text, seed);
    int64_t runs = rt_cpu_conv_gemm_runs() - before;
    CHECK_MSG(runs == want_runs, "line %d: the product ran %lld times, want %d", line, (long long)runs, want_runs);
  }
}

/* Weights that outweigh the activations (64 x 32 x 3 x 3 over 4x4 maps): both gradients as one
 * matrix product, at stride 1 and 2, NCHW and NHWC (operands read through their strides), and
 * a weights gradient whose result is written transposed ([C, O, KH, KW]). Small weights stay
 * on oneDNN's primitives. */
static void test_gemm_gradients(void) {
  /* the input's gradient of a 3x3 stride-2 pad-1 convolution [2,32,4,4] -> [2,64,2,2] */
  expect_gemm(__LINE__,
              "HloModule g\nENTRY e {\n g = f32[2,64,2,2] parameter(0)\n w = f32[64,32,3,3] parameter(1)\n"
              " r = f32[64,32,3,3] reverse(w), dimensions={2,3}\n"
              " ROOT x = f32[2,32,4,4] convolution(g, r), window={size=3x3 pad=1_2x1_2 lhs_dilate=2x2}, "
              "dim_labels=bf01_io01->bf01\n}\n",
              1);
  /* stride 1, NHWC */
  expect_gemm(__LINE__,
              "HloModule g\nENTRY e {\n g = f32[2,4,4,64] parameter(0)\n w = f32[3,3,64,32] parameter(1)\n"
              " ROOT x = f32[2,4,4,32] convolution(g, w), window={size=3x3 pad=1_1x1_1 rhs_reversal=1x1}, "
              "dim_labels=b01f_01io->b01f\n}\n",
              1);
  /* its weights' gradient at stride 2, exact taps ([O, C, KH, KW]), and at stride 1 written
   * [C, O, KH, KW] */
  expect_gemm(__LINE__,
              "HloModule g\nENTRY e {\n x = f32[2,32,4,4] parameter(0)\n g = f32[2,64,2,2] parameter(1)\n"
              " ROOT w = f32[64,32,3,3] convolution(x, g), window={size=2x2 pad=1_0x1_0 rhs_dilate=2x2}, "
              "dim_labels=fb01_io01->fb01\n}\n",
              1);
  expect_gemm(__LINE__,
              "HloModule g\nENTRY e {\n x = f32[2,32,4,4] parameter(0)\n g = f32[2,64,4,4] parameter(1)\n"
              " ROOT w = f32[32,64,3,3] convolution(x, g), window={size=4x4 pad=1_1x1_1}, "
              "dim_labels=fb01_io01->bf01\n}\n",
              1);
  /* NHWC source and gradient */
  expect_gemm(__LINE__,
              "HloModule g\nENTRY e {\n x = f32[2,4,4,32] parameter(0)\n g = f32[2,4,4,64] parameter(1)\n"
              " ROOT w = f32[3,3,32,64] convolution(x, g), window={size=4x4 pad=1_1x1_1}, "
              "dim_labels=f01b_i01o->01bf\n}\n",
              1);
  /* small weights: oneDNN's */
  expect_gemm(__LINE__,
              "HloModule g\nENTRY e {\n x = f32[4,5,9,9] parameter(0)\n g = f32[4,7,9,9] parameter(1)\n"
              " ROOT w = f32[5,7,3,3] convolution(x, g), window={size=9x9 pad=1_1x1_1}, dim_labels=fb01_io01->bf01\n}\n",
              0);
}

/* An inf in the weights of an input gradient run as a product: the taps that read it give
 * inf or NaN where the reference's do; and in the result's gradient of a weights gradient:
 * the product multiplies the padding's zeros by it, and the reference computes it again. */
static void test_gemm_nonfinite(void) {
  const char *texts[2] = {
      "HloModule g\nENTRY e {\n g = f32[1,64,2,2] parameter(0)\n w = f32[64,16,3,3] parameter(1)\n"
      " ROOT x = f32[1,16,4,4] convolution(g, w), window={size=3x3 pad=1_2x1_2 lhs_dilate=2x2 rhs_reversal=1x1}, "
      "dim_labels=bf01_io01->bf01\n}\n",
      "HloModule g\nENTRY e {\n x = f32[1,16,4,4] parameter(0)\n g = f32[1,64,2,2] parameter(1)\n"
      " ROOT w = f32[64,16,3,3] convolution(x, g), window={size=2x2 pad=1_0x1_0 rhs_dilate=2x2}, "
      "dim_labels=fb01_io01->fb01\n}\n"};
  for (int t = 0; t < 2; t++) {
    hlo_module *module = parse_checked(texts[t]);
    if (!module) continue;
    hlo_diag diag = {0};
    rt_value *args[2];
    for (int i = 0; i < 2; i++) args[i] = rt_random_value(&module->entry->params[i]->shape, 3, (uint64_t)i, &diag);
    ((float *)args[1]->data)[0] = INFINITY; /* the weights' first tap; the gradient's corner */
    int64_t before = rt_cpu_conv_gemm_runs();
    rt_value *want = run_on(&rt_backend_reference, texts[t], args, 2, &diag);
    rt_value *got = run_on(&rt_backend_cpu, texts[t], args, 2, &diag);
    CHECK_MSG(want && got && cpu_agree(want, got), "text %d: %s", t, diag.message);
    CHECK_MSG(rt_cpu_conv_gemm_runs() - before == 1, "text %d: not run as a product", t);
    int nonfinite = 0;
    for (int64_t i = 0; want && i < want->count; i++) nonfinite += !isfinite(rt_get_f64(want, i));
    CHECK_MSG(nonfinite > 0 && nonfinite < want->count, "text %d: %d results not finite", t, nonfinite);
    rt_value_release(want);
    rt_value_release(got);
    for (int i = 0; i < 2; i++) rt_value_release(args[i]);
    hlo_module_free(module);
  }
}

int main(void) {
  RUN(test_weights_gradients);
  RUN(test_gemm_gradients);
  RUN(test_gemm_nonfinite);
  RUN(test_input_gradients);
  RUN(test_input_grad_nonfinite);
  RUN(test_forward_untouched);
  RUN(test_nonfinite);
  return TEST_REPORT();
}
