/* dot and convolution in the reference evaluator. Expected values are worked out by hand
 * (arithmetic in the comments) or, for the larger cases, by a small independent Python
 * reference written from XLA's and StableHLO's semantics (plain loops over the definition)
 * and pasted here as literals. Inputs follow simple integer patterns so the numbers are
 * exact in f32. */
#include <time.h>

#include "eval_util.h"

/* Runs text on args (released here) and checks the array result (exactly unless tol > 0). */
static void expect_run(int line, const char *text, rt_value **args, int arg_count, bool fp64,
                       const double *want, int64_t want_count, double tol) {
  hlo_diag diag;
  rt_value *got = run_text(text, args, arg_count, fp64, &diag);
  for (int i = 0; i < arg_count; i++) rt_value_release(args[i]);
  CHECK_MSG(got != NULL, "line %d: evaluation failed: %s", line, diag.message);
  if (!got) return;
  expect_values(line, got, want, want_count, tol);
  rt_value_release(got);
}
#define EXPECT(text, args, want, tol)                                                   \
  expect_run(__LINE__, (text), (args), (int)(sizeof(args) / sizeof *(args)), false, (want), \
             (int64_t)(sizeof(want) / sizeof *(want)), (tol))

/* Element i is (i * a) % m + b (no modulo when m is 0): the patterns the Python reference
 * used for the literal expectations below. */
static rt_value *pattern(hlo_dtype dtype, int rank, const int64_t *dims, int a, int m, int b) {
  rt_value *value = rt_value_new_array(dtype, rank, dims);
  for (int64_t i = 0; i < value->count; i++) {
    int64_t v = (m ? (i * a) % m : i * a) + b;
    if (hlo_dtype_is_float(dtype)) rt_set_f64(value, i, (double)v);
    else rt_set_i64(value, i, v);
  }
  return value;
}

static rt_value *values(hlo_dtype dtype, int rank, const int64_t *dims, const double *elements) {
  return make_value(dtype, rank, dims, elements);
}

/* ---------------------------------------------------------------------------------------
 * dot */

static void test_dot_batch(void) {
  static const char *text =
      "HloModule m\n"
      "ENTRY e {\n"
      "  a = f32[2,3,4] parameter(0)\n"
      "  b = f32[2,4,5] parameter(1)\n"
      "  ROOT d = f32[2,3,5] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2},\n"
      "      rhs_batch_dims={0}, rhs_contracting_dims={1}\n"
      "}\n";
  /* a = i + 1, b = i % 7 - 3. By hand, d[0][0][0] = 1*-3 + 2*2 + 3*0 + 4*-2 = -7. */
  rt_value *args[] = {pattern(HLO_F32, 3, (int64_t[]){2, 3, 4}, 1, 0, 1),
                      pattern(HLO_F32, 3, (int64_t[]){2, 4, 5}, 1, 7, -3)};
  double want[] = {-7, 3, -1, 9, -2, -19, 7, -9, 17, -6, -31, 11, -17, 25, -10,
                   -10, -43, 15, -25, 33, -10, -55, 19, -33, 41, -10, -67, 23, -41, 49};
  EXPECT(text, args, want, 0);
}

static void test_dot_contracting_first(void) {
  /* a^T b: contracting on dimension 0 of both. a = i + 1 as [3,2], b = i % 5 - 2 as [3,4];
   * d[0][0] = 1*-2 + 3*2 + 5*1 = 9. */
  static const char *text =
      "HloModule m\n"
      "ENTRY e {\n"
      "  a = f32[3,2] parameter(0)\n"
      "  b = f32[3,4] parameter(1)\n"
      "  ROOT d = f32[2,4] dot(a, b), lhs_contracting_dims={0}, rhs_contracting_dims={0}\n"
      "}\n";
  rt_value *args[] = {pattern(HLO_F32, 2, (int64_t[]){3, 2}, 1, 0, 1),
                      pattern(HLO_F32, 2, (int64_t[]){3, 4}, 1, 5, -2)};
  double want[] = {9, 3, -13, -4, 10, 2, -16, -4};
  EXPECT(text, args, want, 0);

  /* Batch and contracting dims in the middle: a [3,2,4] batch 1 contracting 0, b [4,2,3]
   * batch 1 contracting 2; result [batch 2][a free 4][b free 4]. */
  static const char *middle =
      "HloModule m\n"
      "ENTRY e {\n"
      "  a = f32[3,2,4] parameter(0)\n"
      "  b = f32[4,2,3] parameter(1)\n"
      "  ROOT d = f32[2,4,4] dot(a, b), lhs_batch_dims={1}, lhs_contracting_dims={0},\n"
      "      rhs_batch_dims={1}, rhs_contracting_dims={2}\n"
      "}\n";
  rt_value *args2[] = {pattern(HLO_F32, 3, (int64_t[]){3, 2, 4}, 1, 9, -4),
                       pattern(HLO_F32, 3, (int64_t[]){4, 2, 3}, 1, 4, 1)};
  double want2[] = {13, 7, 13, 7, 1, -21, 1, -21, -20, -22, -20, -22, -14, -14, -14, -14,
                    -5, -11, -5, -11, 2, -2, 2, -2, 9, 7, 9, 7, 16, 16, 16, 16};
  EXPECT(middle, args2, want2, 0);
}

static void test_dot_vectors(void) {
  /* 1*5 + 2*6 + 3*7 + 4*8 = 70 */
  static const char *text =
      "HloModule m\n"
      "ENTRY e {\n"
      "  a = f32[4] parameter(0)\n"
      "  b = f32[4] parameter(1)\n"
      "  ROOT d = f32[] dot(a, b), lhs_contracting_dims={0}, rhs_contracting_dims={0}\n"
      "}\n";
  rt_value *args[] = {values(HLO_F32, 1, (int64_t[]){4}, (double[]){1, 2, 3, 4}),
                      values(HLO_F32, 1, (int64_t[]){4}, (double[]){5, 6, 7, 8})};
  double want[] = {70};
  EXPECT(text, args, want, 0);

  /* Matrix times vector (computed transposed inside): a = i + 1 as [5,3], b = [1, 0, -1];
   * each row (3r+1) - (3r+3) = -2. */
  static const char *matvec =
      "HloModule m\n"
      "ENTRY e {\n"
      "  a = f32[5,3] parameter(0)\n"
      "  b = f32[3] parameter(1)\n"
      "  ROOT d = f32[5] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
      "}\n";
  rt_value *args2[] = {pattern(HLO_F32, 2, (int64_t[]){5, 3}, 1, 0, 1),
                       values(HLO_F32, 1, (int64_t[]){3}, (double[]){1, 0, -1})};
  double want2[] = {-2, -2, -2, -2, -2};
  EXPECT(matvec, args2, want2, 0);
}

static void test_dot_blocks(void) {
  /* 9x13 times 13x11: full 4-row blocks, a 1-row tail, a full and a partial 8-column panel.
   * a = (7i) % 11 - 5, b = (5i) % 13 - 6 (Python reference). */
  static const char *text =
      "HloModule m\n"
      "ENTRY e {\n"
      "  a = f32[9,13] parameter(0)\n"
      "  b = f32[13,11] parameter(1)\n"
      "  ROOT d = f32[9,11] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
      "}\n";
  double want[] = {23, -44, -33, 56, 41, -39, -41, -4, 7, 18, 3, 56, -33, -44, 23, -14, 27, 3, 18, 7,
                   -4, -41, -43, 77, -11, -21, 8, -28, 14, -48, 7, 62, -52, 23, -22, 11, -21, -14, 71,
                   -52, 7, 40, -70, 80, -10, 11, -33, 1, 74, -61, 25, 7, -37, 62, -8, 45, -11, 11, -32,
                   -36, 38, 47, -48, -26, -4, -8, -21, 44, 44, -21, -47, 5, -8, 18, 18, 18, -8, -32, 11,
                   -11, 45, -3, 27, -8, -4, -26, -48, 47, 1, -33, 11, -10, 8, -39, -8, 62, -37, 7, 25};
  rt_value *args[] = {pattern(HLO_F32, 2, (int64_t[]){9, 13}, 7, 11, -5),
                      pattern(HLO_F32, 2, (int64_t[]){13, 11}, 5, 13, -6)};
  EXPECT(text, args, want, 0);
  /* The same integers as s32 and in fp64 mode give the same numbers. */
  static const char *ints =
      "HloModule m\n"
      "ENTRY e {\n"
      "  a = s32[9,13] parameter(0)\n"
      "  b = s32[13,11] parameter(1)\n"
      "  ROOT d = s32[9,11] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
      "}\n";
  rt_value *args2[] = {pattern(HLO_S32, 2, (int64_t[]){9, 13}, 7, 11, -5),
                       pattern(HLO_S32, 2, (int64_t[]){13, 11}, 5, 13, -6)};
  EXPECT(ints, args2, want, 0);
  rt_value *args3[] = {pattern(HLO_F32, 2, (int64_t[]){9, 13}, 7, 11, -5),
                       pattern(HLO_F32, 2, (int64_t[]){13, 11}, 5, 13, -6)};
  expect_run(__LINE__, text, args3, 2, true, want, 99, 0);
}

static void test_dot_int_wraps(void) {
  /* 65536*65536 + 3*5 = 2^32 + 15, which wraps to 15 in s32 */
  static const char *text =
      "HloModule m\n"
      "ENTRY e {\n"
      "  a = s32[2] parameter(0)\n"
      "  b = s32[2] parameter(1)\n"
      "  ROOT d = s32[] dot(a, b), lhs_contracting_dims={0}, rhs_contracting_dims={0}\n"
      "}\n";
  rt_value *args[] = {values(HLO_S32, 1, (int64_t[]){2}, (double[]){65536, 3}),
                      values(HLO_S32, 1, (int64_t[]){2}, (double[]){65536, 5})};
  double want[] = {15};
  EXPECT(text, args, want, 0);
  /* s8: 100*2 + 100*1 = 300 = 256 + 44 */
  static const char *s8 =
      "HloModule m\n"
      "ENTRY e {\n"
      "  a = s8[2] parameter(0)\n"
      "  b = s8[2] parameter(1)\n"
      "  ROOT d = s8[] dot(a, b), lhs_contracting_dims={0}, rhs_contracting_dims={0}\n"
      "}\n";
  rt_value *args2[] = {values(HLO_S8, 1, (int64_t[]){2}, (double[]){100, 100}),
                       values(HLO_S8, 1, (int64_t[]){2}, (double[]){2, 1})};
  double want2[] = {44};
  EXPECT(s8, args2, want2, 0);
  /* s8 operands, s32 result: no wrap at 8 bits. -128*-128 + 127*127 = 16384 + 16129 */
  static const char *widen =
      "HloModule m\n"
      "ENTRY e {\n"
      "  a = s8[2] parameter(0)\n"
      "  b = s8[2] parameter(1)\n"
      "  ROOT d = s32[] dot(a, b), lhs_contracting_dims={0}, rhs_contracting_dims={0}\n"
      "}\n";
  rt_value *args3[] = {values(HLO_S8, 1, (int64_t[]){2}, (double[]){-128, 127}),
                       values(HLO_S8, 1, (int64_t[]){2}, (double[]){-128, 127})};
  double want3[] = {32513};
  EXPECT(widen, args3, want3, 0);
}

static void test_dot_bf16_to_f32(void) {
  /* rows [1.5, -2, 0.25] and [3, 0.5, -1] times [2, 4, -8]:
   * 3 - 8 - 2 = -7 and 6 + 2 + 8 = 16, returned as f32 */
  static const char *text =
      "HloModule m\n"
      "ENTRY e {\n"
      "  a = bf16[2,3] parameter(0)\n"
      "  b = bf16[3] parameter(1)\n"
      "  ROOT d = f32[2] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
      "}\n";
  rt_value *args[] = {values(HLO_BF16, 2, (int64_t[]){2, 3}, (double[]){1.5, -2, 0.25, 3, 0.5, -1}),
                      values(HLO_BF16, 1, (int64_t[]){3}, (double[]){2, 4, -8})};
  double want[] = {-7, 16};
  EXPECT(text, args, want, 0);
  hlo_diag diag;
  rt_value *a = values(HLO_BF16, 2, (int64_t[]){2, 3}, (double[]){1.5, -2, 0.25, 3, 0.5, -1});
  rt_value *b = values(HLO_BF16, 1, (int64_t[]){3}, (double[]){2, 4, -8});
  rt_value *in[2] = {a, b};
  rt_value *got = run_text(text, in, 2, false, &diag);
  CHECK(got && got->shape.dtype == HLO_F32);
  rt_value_release(got);
  rt_value_release(a);
  rt_value_release(b);
}

static void test_dot_accumulates_in_type(void) {
  /* 1e8 + 1 rounds back to 1e8 in f32, so the f32 sum is 0; in fp64 mode it is 1. */
  static const char *text =
      "HloModule m\n"
      "ENTRY e {\n"
      "  a = f32[3] parameter(0)\n"
      "  b = f32[3] parameter(1)\n"
      "  ROOT d = f32[] dot(a, b), lhs_contracting_dims={0}, rhs_contracting_dims={0}\n"
      "}\n";
  rt_value *args[] = {values(HLO_F32, 1, (int64_t[]){3}, (double[]){1e8, 1, -1e8}),
                      values(HLO_F32, 1, (int64_t[]){3}, (double[]){1, 1, 1})};
  double zero[] = {0}, one[] = {1};
  EXPECT(text, args, zero, 0);
  rt_value *args2[] = {values(HLO_F32, 1, (int64_t[]){3}, (double[]){1e8, 1, -1e8}),
                       values(HLO_F32, 1, (int64_t[]){3}, (double[]){1, 1, 1})};
  expect_run(__LINE__, text, args2, 2, true, one, 1, 0);
}

static void test_dot_errors(void) {
  static const char *text =
      "HloModule m\n"
      "ENTRY e {\n"
      "  a = f32[2,3] parameter(0)\n"
      "  b = f32[4,2] parameter(1)\n"
      "  ROOT bad_dot = f32[2,2] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
      "}\n";
  rt_value *a = rt_value_new_array(HLO_F32, 2, (int64_t[]){2, 3});
  rt_value *b = rt_value_new_array(HLO_F32, 2, (int64_t[]){4, 2});
  rt_value *args[2] = {a, b};
  hlo_diag diag;
  rt_value *got = run_text(text, args, 2, false, &diag);
  /* the parser or the kernel may catch it; either way it names the instruction */
  CHECK(got == NULL);
  CHECK_MSG(strstr(diag.message, "bad_dot") != NULL, "message: %s", diag.message);
  rt_value_release(got);
  rt_value_release(a);
  rt_value_release(b);
}

/* ---------------------------------------------------------------------------------------
 * convolution, 1-D: input x = [1, 2, 3, 4, 5] as [batch 1][feature 1][5], kernel [1, 2, 3] */

static const char *conv1d(char *buffer, size_t size, int in, int out, const char *window) {
  snprintf(buffer, size,
           "HloModule m\n"
           "ENTRY e {\n"
           "  x = f32[1,1,%d] parameter(0)\n"
           "  w = f32[1,1,3] parameter(1)\n"
           "  ROOT c = f32[1,1,%d] convolution(x, w), window={%s}, dim_labels=bf0_oi0->bf0\n"
           "}\n",
           in, out, window);
  return buffer;
}

static void run_conv1d(int line, int in, int out, const char *window, const double *want) {
  char text[512];
  rt_value *args[2] = {pattern(HLO_F32, 3, (int64_t[]){1, 1, in}, 1, 0, 1),
                       values(HLO_F32, 3, (int64_t[]){1, 1, 3}, (double[]){1, 2, 3})};
  expect_run(line, conv1d(text, sizeof text, in, out, window), args, 2, false, want, out, 0);
}

static void test_conv_1d(void) {
  /* out[j] = x[j] + 2 x[j+1] + 3 x[j+2]: 1+4+9, 2+6+12, 3+8+15 */
  run_conv1d(__LINE__, 5, 3, "size=3", (double[]){14, 20, 26});
  /* pad 1_1: the ends see one padding tap each: 2*1 + 3*2 = 8 and 4 + 2*5 = 14 */
  run_conv1d(__LINE__, 5, 5, "size=3 pad=1_1", (double[]){8, 14, 20, 26, 14});
  /* stride 2 keeps positions 0, 2, 4 of the above */
  run_conv1d(__LINE__, 5, 3, "size=3 stride=2 pad=1_1", (double[]){8, 20, 14});
  /* lhs_dilate 2 (a transposed convolution): x becomes 1 . 2 . 3 . 4 . 5;
   * out[0] = 1 + 3*2 = 7, out[1] = 2*2 = 4, out[2] = 2 + 3*3 = 11, ... */
  run_conv1d(__LINE__, 5, 7, "size=3 lhs_dilate=2", (double[]){7, 4, 11, 6, 15, 8, 19});
  /* rhs_dilate 2: taps at 0, 2, 4; x = 1..6: 1 + 2*3 + 3*5 = 22, 2 + 2*4 + 3*6 = 28 */
  run_conv1d(__LINE__, 6, 2, "size=3 rhs_dilate=2", (double[]){22, 28});
  /* reversal: the kernel reads as [3, 2, 1]: 3+4+3, 6+6+4, 9+8+5 */
  run_conv1d(__LINE__, 5, 3, "size=3 rhs_reversal=1", (double[]){10, 16, 22});
  /* negative low padding crops x[0]: windows over 2 3 4 5: 2+6+12, 3+8+15 */
  run_conv1d(__LINE__, 5, 2, "size=3 pad=-1_0", (double[]){20, 26});
}

static void test_conv_2d(void) {
  /* x = 1..9 as 3x3, kernel [[1,0],[0,1]]: x[i][j] + x[i+1][j+1] = 1+5, 2+6, 4+8, 5+9 */
  static const char *text =
      "HloModule m\n"
      "ENTRY e {\n"
      "  x = f32[1,1,3,3] parameter(0)\n"
      "  w = f32[1,1,2,2] parameter(1)\n"
      "  ROOT c = f32[1,1,2,2] convolution(x, w), window={size=2x2}, dim_labels=bf01_oi01->bf01\n"
      "}\n";
  rt_value *args[] = {pattern(HLO_F32, 4, (int64_t[]){1, 1, 3, 3}, 1, 0, 1),
                      values(HLO_F32, 4, (int64_t[]){1, 1, 2, 2}, (double[]){1, 0, 0, 1})};
  double want[] = {6, 8, 12, 14};
  EXPECT(text, args, want, 0);

  /* StableHLO's spec example: lhs_dilate 2 and stride 4 over a 4x4 input, 3x3 ones. */
  static const char *spec =
      "HloModule m\n"
      "ENTRY e {\n"
      "  x = s32[1,4,4,1] parameter(0)\n"
      "  w = s32[3,3,1,1] parameter(1)\n"
      "  ROOT c = s32[1,2,2,1] convolution(x, w), window={size=3x3 stride=4x4 lhs_dilate=2x2},\n"
      "      dim_labels=b01f_01io->b01f\n"
      "}\n";
  rt_value *args2[] = {values(HLO_S32, 4, (int64_t[]){1, 4, 4, 1},
                              (double[]){1, 2, 5, 6, 3, 4, 7, 8, 10, 11, 14, 15, 12, 13, 16, 17}),
                       pattern(HLO_S32, 4, (int64_t[]){3, 3, 1, 1}, 0, 0, 1)};
  double want2[] = {10, 26, 46, 62};
  EXPECT(spec, args2, want2, 0);

  /* No spatial dimensions at all: a matrix product. x = [[1,2,3],[4,5,6]], w[i][o] = 4i + o:
   * out[0][o] = o + 2(4+o) + 3(8+o) = 6o + 32, out[1][o] = 15o + 68 */
  static const char *flat =
      "HloModule m\n"
      "ENTRY e {\n"
      "  x = f32[2,3] parameter(0)\n"
      "  w = f32[3,4] parameter(1)\n"
      "  ROOT c = f32[2,4] convolution(x, w), dim_labels=bf_io->bf\n"
      "}\n";
  rt_value *args3[] = {pattern(HLO_F32, 2, (int64_t[]){2, 3}, 1, 0, 1),
                       pattern(HLO_F32, 2, (int64_t[]){3, 4}, 1, 0, 0)};
  double want3[] = {32, 38, 44, 50, 68, 83, 98, 113};
  EXPECT(flat, args3, want3, 0);
}

static void test_conv_groups(void) {
  /* feature_group_count=2: x = i + 1 as [1,4,3], w = i % 5 - 2 as [4 out][2 in][2];
   * outputs 0,1 read features 0,1 and outputs 2,3 features 2,3. By hand, out[0][0] =
   * (1*-2 + 2*-1) + (4*0 + 5*1) = 1 and out[2][0] = (7*1 + 8*2) + (10*-2 + 11*-1) = -8. */
  static const char *grouped =
      "HloModule m\n"
      "ENTRY e {\n"
      "  x = f32[1,4,3] parameter(0)\n"
      "  w = f32[4,2,2] parameter(1)\n"
      "  ROOT c = f32[1,4,2] convolution(x, w), window={size=2}, dim_labels=bf0_oi0->bf0,\n"
      "      feature_group_count=2\n"
      "}\n";
  rt_value *args[] = {pattern(HLO_F32, 3, (int64_t[]){1, 4, 3}, 1, 0, 1),
                      pattern(HLO_F32, 3, (int64_t[]){4, 2, 2}, 1, 5, -2)};
  double want[] = {1, -1, -6, -7, -8, -8, 6, 7};
  EXPECT(grouped, args, want, 0);

  /* Depthwise: one group per feature. x = i % 7 - 3 as [2,3,5], w = i + 1 as [3,1,3], pad 1. */
  static const char *depthwise =
      "HloModule m\n"
      "ENTRY e {\n"
      "  x = f32[2,3,5] parameter(0)\n"
      "  w = f32[3,1,3] parameter(1)\n"
      "  ROOT c = f32[2,3,5] convolution(x, w), window={size=3 pad=1_1}, dim_labels=bf0_oi0->bf0,\n"
      "      feature_group_count=3\n"
      "}\n";
  rt_value *args2[] = {pattern(HLO_F32, 3, (int64_t[]){2, 3, 5}, 1, 7, -3),
                       pattern(HLO_F32, 3, (int64_t[]){3, 1, 3}, 1, 0, 1)};
  double want2[] = {-12, -10, -4, 2, 2, 28, 5, -15, -28, -13, 9, 26, 50, 11, -3,
                    -7, -4, 2, 8, 5, -3, -15, -28, -13, -4, 26, 50, 11, -21, -37};
  EXPECT(depthwise, args2, want2, 0);

  /* batch_group_count=2: input batches 0,1 feed output features 0,1 and batches 2,3 feed
   * 2,3; output batch n of group g reads input batch 2g + n. x = i % 5 + 1 as [4,2,3],
   * w = i % 3 - 1 as [4,2,2]; by hand out[0][0][0] = (1*-1 + 2*0) + (4*1 + 5*-1) = -2. */
  static const char *batch_groups =
      "HloModule m\n"
      "ENTRY e {\n"
      "  x = f32[4,2,3] parameter(0)\n"
      "  w = f32[4,2,2] parameter(1)\n"
      "  ROOT c = f32[2,4,2] convolution(x, w), window={size=2}, dim_labels=bf0_oi0->bf0,\n"
      "      batch_group_count=2\n"
      "}\n";
  rt_value *args3[] = {pattern(HLO_F32, 3, (int64_t[]){4, 2, 3}, 1, 5, 1),
                       pattern(HLO_F32, 3, (int64_t[]){4, 2, 2}, 1, 3, -1)};
  double want3[] = {-2, 2, -2, -2, 1, 2, -4, -5, 2, -4, -2, 3, 2, 8, -5, -6};
  EXPECT(batch_groups, args3, want3, 0);
}

/* NCHW convolution: x = i % 11 - 5 as [2,3,5,4], w = i % 5 - 2 as [4,3,3,2], window 3x2
 * stride 2x1 pad 1_1x0_1, result [2,4,3,4] (Python reference). */
static const double nchw_want[96] = {
    19, -3, -14, 12, -2, 17, 3, 13, 5, 17, 7, 4, 4, 5, 17, 4, -10, -20, 14, -1, -2, -27, -19, -4,
    -21, -2, -27, -24, 7, 18, -15, 0, 21, 24, 5, 3, 29, 21, 24, 13, 9, -14, -4, 16, -21, 0, -1, 5,
    -14, 8, -14, -22, -28, 2, -1, -3, -1, 0, -21, -7, 9, -1, 0, 4, 28, -4, -14, 4, 5, 24, 21, 19,
    -3, 5, 24, 10, -26, -15, 18, 1, -19, -27, -2, -25, 0, -19, -27, -4, 15, 14, -20, -17, 7, 17, 5, 11};

/* Copies src (dims `dims`) into a new value whose dimension j is src's dimension perm[j]. */
static rt_value *permuted(const rt_value *src, const int *perm) {
  int rank = src->shape.rank;
  int64_t dims[HLO_MAX_RANK], coords[HLO_MAX_RANK] = {0}, src_coords[HLO_MAX_RANK];
  for (int j = 0; j < rank; j++) dims[j] = src->shape.dims[perm[j]];
  rt_value *dst = rt_value_new_array(src->shape.dtype, rank, dims);
  for (int64_t i = 0; i < dst->count; i++, rt_next_coords(&dst->shape, coords)) {
    for (int j = 0; j < rank; j++) src_coords[perm[j]] = coords[j];
    rt_copy_element(dst, i, src, rt_flat_index(&src->shape, src_coords));
  }
  return dst;
}

static void test_conv_dim_labels(void) {
  static const char *nchw =
      "HloModule m\n"
      "ENTRY e {\n"
      "  x = f32[2,3,5,4] parameter(0)\n"
      "  w = f32[4,3,3,2] parameter(1)\n"
      "  ROOT c = f32[2,4,3,4] convolution(x, w), window={size=3x2 stride=2x1 pad=1_1x0_1},\n"
      "      dim_labels=bf01_oi01->bf01\n"
      "}\n";
  rt_value *x = pattern(HLO_F32, 4, (int64_t[]){2, 3, 5, 4}, 1, 11, -5);
  rt_value *w = pattern(HLO_F32, 4, (int64_t[]){4, 3, 3, 2}, 1, 5, -2);
  rt_value *args[] = {rt_value_retain(x), rt_value_retain(w)};
  EXPECT(nchw, args, nchw_want, 0);
  rt_value *want = values(HLO_F32, 4, (int64_t[]){2, 4, 3, 4}, nchw_want);

  /* The same convolution on NHWC data with an HWIO kernel, and on a scrambled layout
   * (x as 0fb1, w as i1o0, result as f10b): the same numbers, permuted. */
  static const struct {
    const char *text;
    int x_perm[4], w_perm[4], out_perm[4];
  } variants[] = {
      {"HloModule m\n"
       "ENTRY e {\n"
       "  x = f32[2,5,4,3] parameter(0)\n"
       "  w = f32[3,2,3,4] parameter(1)\n"
       "  ROOT c = f32[2,3,4,4] convolution(x, w), window={size=3x2 stride=2x1 pad=1_1x0_1},\n"
       "      dim_labels=b01f_01io->b01f\n"
       "}\n",
       {0, 2, 3, 1}, {2, 3, 1, 0}, {0, 2, 3, 1}},
      {"HloModule m\n"
       "ENTRY e {\n"
       "  x = f32[5,3,2,4] parameter(0)\n"
       "  w = f32[3,2,4,3] parameter(1)\n"
       "  ROOT c = f32[4,4,3,2] convolution(x, w), window={size=3x2 stride=2x1 pad=1_1x0_1},\n"
       "      dim_labels=0fb1_i1o0->f10b\n"
       "}\n",
       {2, 1, 0, 3}, {1, 3, 0, 2}, {1, 3, 2, 0}},
  };
  for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
    rt_value *vx = permuted(x, variants[v].x_perm), *vw = permuted(w, variants[v].w_perm);
    rt_value *expected = permuted(want, variants[v].out_perm);
    double want_values[96];
    for (int i = 0; i < 96; i++) want_values[i] = rt_get_f64(expected, i);
    rt_value *vargs[] = {vx, vw};
    expect_run(__LINE__, variants[v].text, vargs, 2, false, want_values, 96, 0);
    rt_value_release(expected);
  }
  rt_value_release(want);
  rt_value_release(x);
  rt_value_release(w);
}

static void test_conv_skips_padding(void) {
  /* An infinite weight over padding: XLA's evaluator skips padded taps, so no 0 * inf NaN.
   * x = [1, 2, 3], w = [inf, 1, 0], pad 1_1: out[0] = (pad) + 1*1 + 2*0 = 1,
   * out[1] = inf + 2 + 0, out[2] = 2*inf + 3 + (pad). */
  static const char *text =
      "HloModule m\n"
      "ENTRY e {\n"
      "  x = f32[1,1,3] parameter(0)\n"
      "  w = f32[1,1,3] parameter(1)\n"
      "  ROOT c = f32[1,1,3] convolution(x, w), window={size=3 pad=1_1}, dim_labels=bf0_oi0->bf0\n"
      "}\n";
  rt_value *args[] = {values(HLO_F32, 3, (int64_t[]){1, 1, 3}, (double[]){1, 2, 3}),
                      values(HLO_F32, 3, (int64_t[]){1, 1, 3}, (double[]){INFINITY, 1, 0})};
  double want[] = {1, INFINITY, INFINITY};
  EXPECT(text, args, want, 0);
}

static void test_conv_types(void) {
  /* s32 wraps: 65536*65536 + 2*3 = 2^32 + 6 -> 6 */
  static const char *ints =
      "HloModule m\n"
      "ENTRY e {\n"
      "  x = s32[1,1,2] parameter(0)\n"
      "  w = s32[1,1,2] parameter(1)\n"
      "  ROOT c = s32[1,1,1] convolution(x, w), window={size=2}, dim_labels=bf0_oi0->bf0\n"
      "}\n";
  rt_value *args[] = {values(HLO_S32, 3, (int64_t[]){1, 1, 2}, (double[]){65536, 2}),
                      values(HLO_S32, 3, (int64_t[]){1, 1, 2}, (double[]){65536, 3})};
  double want[] = {6};
  EXPECT(ints, args, want, 0);
  /* bf16 in and out: 1*0.5 + 2*0.25 = 1, 2*0.5 + 3*0.25 = 1.75 */
  static const char *bf16 =
      "HloModule m\n"
      "ENTRY e {\n"
      "  x = bf16[1,1,3] parameter(0)\n"
      "  w = bf16[1,1,2] parameter(1)\n"
      "  ROOT c = bf16[1,1,2] convolution(x, w), window={size=2}, dim_labels=bf0_oi0->bf0\n"
      "}\n";
  rt_value *args2[] = {values(HLO_BF16, 3, (int64_t[]){1, 1, 3}, (double[]){1, 2, 3}),
                       values(HLO_BF16, 3, (int64_t[]){1, 1, 2}, (double[]){0.5, 0.25})};
  double want2[] = {1, 1.75};
  EXPECT(bf16, args2, want2, 0);
}

/* A convolution large enough to take the matrix-product path on several threads gives the
 * same numbers as the row path (which integers take) and as fp64 mode: integer data keeps
 * every sum exact. */
static void test_conv_paths_agree(void) {
  static const char *f32_text =
      "HloModule m\n"
      "ENTRY e {\n"
      "  x = f32[8,32,20,20] parameter(0)\n"
      "  w = f32[32,32,3,3] parameter(1)\n"
      "  ROOT c = f32[8,32,10,20] convolution(x, w), window={size=3x3 stride=2x1 pad=1_0x1_1},\n"
      "      dim_labels=bf01_oi01->bf01\n"
      "}\n";
  static const char *s32_text =
      "HloModule m\n"
      "ENTRY e {\n"
      "  x = s32[8,32,20,20] parameter(0)\n"
      "  w = s32[32,32,3,3] parameter(1)\n"
      "  ROOT c = s32[8,32,10,20] convolution(x, w), window={size=3x3 stride=2x1 pad=1_0x1_1},\n"
      "      dim_labels=bf01_oi01->bf01\n"
      "}\n";
  int64_t x_dims[4] = {8, 32, 20, 20}, w_dims[4] = {32, 32, 3, 3};
  rt_value *fx = pattern(HLO_F32, 4, x_dims, 7, 5, -2), *fw = pattern(HLO_F32, 4, w_dims, 3, 5, -2);
  rt_value *ix = pattern(HLO_S32, 4, x_dims, 7, 5, -2), *iw = pattern(HLO_S32, 4, w_dims, 3, 5, -2);
  rt_value *fargs[2] = {fx, fw}, *iargs[2] = {ix, iw};
  hlo_diag diag;
  rt_value *f = run_text(f32_text, fargs, 2, false, &diag);
  CHECK_MSG(f != NULL, "f32: %s", diag.message);
  rt_value *d = run_text(f32_text, fargs, 2, true, &diag);
  CHECK_MSG(d != NULL, "fp64: %s", diag.message);
  rt_value *i = run_text(s32_text, iargs, 2, false, &diag);
  CHECK_MSG(i != NULL, "s32: %s", diag.message);
  if (f && d && i) {
    int64_t mismatches = 0;
    double sum = 0;
    for (int64_t k = 0; k < f->count; k++) {
      double a = rt_get_f64(f, k), b = rt_get_f64(d, k), c = rt_get_f64(i, k);
      mismatches += a != b || a != c;
      sum += fabs(c);
    }
    CHECK_EQ_INT(mismatches, 0);
    CHECK(sum > 0);
  }
  rt_value_release(f);
  rt_value_release(d);
  rt_value_release(i);
  rt_value_release(fx);
  rt_value_release(fw);
  rt_value_release(ix);
  rt_value_release(iw);
}

static void test_conv_errors(void) {
  /* The window says 2 taps, the kernel has 3. */
  static const char *text =
      "HloModule m\n"
      "ENTRY e {\n"
      "  x = f32[1,1,5] parameter(0)\n"
      "  w = f32[1,1,3] parameter(1)\n"
      "  ROOT bad_conv = f32[1,1,4] convolution(x, w), window={size=2}, dim_labels=bf0_oi0->bf0\n"
      "}\n";
  rt_value *x = rt_value_new_array(HLO_F32, 3, (int64_t[]){1, 1, 5});
  rt_value *w = rt_value_new_array(HLO_F32, 3, (int64_t[]){1, 1, 3});
  rt_value *args[2] = {x, w};
  hlo_diag diag;
  rt_value *got = run_text(text, args, 2, false, &diag);
  CHECK(got == NULL);
  CHECK_MSG(strstr(diag.message, "bad_conv") != NULL, "message: %s", diag.message);
  rt_value_release(got);
  rt_value_release(x);
  rt_value_release(w);
}

/* Not a check: how long one 3x3 convolution of a [8,32,56,56] input takes, for the record. */
static void time_conv(void) {
  static const char *text =
      "HloModule m\n"
      "ENTRY e {\n"
      "  x = f32[8,32,56,56] parameter(0)\n"
      "  w = f32[32,32,3,3] parameter(1)\n"
      "  ROOT c = f32[8,32,56,56] convolution(x, w), window={size=3x3 pad=1_1x1_1},\n"
      "      dim_labels=bf01_oi01->bf01\n"
      "}\n";
  rt_value *x = pattern(HLO_F32, 4, (int64_t[]){8, 32, 56, 56}, 7, 13, -6);
  rt_value *w = pattern(HLO_F32, 4, (int64_t[]){32, 32, 3, 3}, 5, 7, -3);
  rt_value *args[2] = {x, w};
  hlo_diag diag;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  rt_value *got = run_text(text, args, 2, false, &diag);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  double macs = 8.0 * 32 * 56 * 56 * 32 * 9;
  fprintf(stderr, "timing: 3x3 convolution f32[8,32,56,56] -> 32 features: %.1f ms (%.2f GMAC/s)\n",
          seconds * 1e3, macs / seconds * 1e-9);
  CHECK(got != NULL);
  rt_value_release(got);
  rt_value_release(x);
  rt_value_release(w);
}

int main(void) {
  RUN(test_dot_batch);
  RUN(test_dot_contracting_first);
  RUN(test_dot_vectors);
  RUN(test_dot_blocks);
  RUN(test_dot_int_wraps);
  RUN(test_dot_bf16_to_f32);
  RUN(test_dot_accumulates_in_type);
  RUN(test_dot_errors);
  RUN(test_conv_1d);
  RUN(test_conv_2d);
  RUN(test_conv_groups);
  RUN(test_conv_dim_labels);
  RUN(test_conv_skips_padding);
  RUN(test_conv_types);
  RUN(test_conv_paths_agree);
  RUN(test_conv_errors);
  RUN(time_conv);
  return TEST_REPORT();
}
