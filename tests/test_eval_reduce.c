/* reduce, reduce-window and select-and-scatter in the reference evaluator: HLO text snippets
 * with expected values worked out by hand (the arithmetic is in the comments). */
#include "eval_util.h"

/* Runs text on args (released here) and checks the array result, or element `element` of a
 * tuple result when element >= 0. */
static void expect_run(int line, const char *text, rt_value **args, int arg_count, bool fp64, int element,
                       const double *want, int64_t want_count) {
  hlo_diag diag;
  rt_value *got = run_text(text, args, arg_count, fp64, &diag);
  for (int i = 0; i < arg_count; i++) rt_value_release(args[i]);
  CHECK_MSG(got != NULL, "line %d: evaluation failed: %s", line, diag.message);
  if (!got) return;
  const rt_value *array = got;
  if (element >= 0) {
    bool is_tuple = got->shape.dtype == HLO_TUPLE && got->tuple_count > element;
    CHECK_MSG(is_tuple, "line %d: expected a tuple with element %d", line, element);
    array = is_tuple ? got->tuple[element] : NULL;
  }
  if (array) {
    expect_values(line, array, want, want_count, 0);
  }
  rt_value_release(got);
}
#define COUNT(array) (int)(sizeof(array) / sizeof *(array))
#define EXPECT(text, args, want) \
  expect_run(__LINE__, (text), (args), COUNT(args), false, -1, (want), COUNT(want))

static rt_value *values(hlo_dtype dtype, int rank, const int64_t *dims, const double *elements) {
  return make_value(dtype, rank, dims, elements);
}

static rt_value *iota(hlo_dtype dtype, int rank, const int64_t *dims, double first) {
  rt_value *value = rt_value_new_array(dtype, rank, dims);
  for (int64_t i = 0; i < value->count; i++) rt_set_f64(value, i, first + (double)i);
  return value;
}

#define ADD_F32                                                                         \
  "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n"
#define MAX_F32                                                                         \
  "max {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] maximum(a, b)\n}\n"

/* ---------------------------------------------------------------------------------------
 * reduce */

static void test_reduce_one_dim(void) {
  /* [[1,2,3],[4,5,6]]: rows sum to 6 and 15, columns to 5, 7, 9 */
  static const char *rows =
      "HloModule m\n" ADD_F32
      "ENTRY e {\n"
      "  x = f32[2,3] parameter(0)\n"
      "  zero = f32[] constant(0)\n"
      "  ROOT r = f32[2] reduce(x, zero), dimensions={1}, to_apply=add\n"
      "}\n";
  static const char *columns =
      "HloModule m\n" ADD_F32
      "ENTRY e {\n"
      "  x = f32[2,3] parameter(0)\n"
      "  zero = f32[] constant(0)\n"
      "  ROOT r = f32[3] reduce(x, zero), dimensions={0}, to_apply=add\n"
      "}\n";
  rt_value *args[] = {iota(HLO_F32, 2, (int64_t[]){2, 3}, 1)};
  double want[] = {6, 15};
  EXPECT(rows, args, want);
  rt_value *args2[] = {iota(HLO_F32, 2, (int64_t[]){2, 3}, 1)};
  double want2[] = {5, 7, 9};
  EXPECT(columns, args2, want2);

  /* maximum from -inf: [[3,-1,2],[-5,-7,-6]] -> 3, -5 */
  static const char *max =
      "HloModule m\n" MAX_F32
      "ENTRY e {\n"
      "  x = f32[2,3] parameter(0)\n"
      "  low = f32[] constant(-inf)\n"
      "  ROOT r = f32[2] reduce(x, low), dimensions={1}, to_apply=max\n"
      "}\n";
  rt_value *args3[] = {values(HLO_F32, 2, (int64_t[]){2, 3}, (double[]){3, -1, 2, -5, -7, -6})};
  double want3[] = {3, -5};
  EXPECT(max, args3, want3);
}

static void test_reduce_several_dims(void) {
  /* x[a][j][c] = 12a + 4j + c over a and c: sum = 32j + 60 -> 60, 92, 124 */
  static const char *text =
      "HloModule m\n" ADD_F32
      "ENTRY e {\n"
      "  x = f32[2,3,4] parameter(0)\n"
      "  zero = f32[] constant(0)\n"
      "  ROOT r = f32[3] reduce(x, zero), dimensions={0,2}, to_apply=add\n"
      "}\n";
  rt_value *args[] = {iota(HLO_F32, 3, (int64_t[]){2, 3, 4}, 0)};
  double want[] = {60, 92, 124};
  EXPECT(text, args, want);
  /* all of them, into a scalar: 0 + 1 + ... + 23 = 276 */
  static const char *all =
      "HloModule m\n" ADD_F32
      "ENTRY e {\n"
      "  x = f32[2,3,4] parameter(0)\n"
      "  zero = f32[] constant(0)\n"
      "  ROOT r = f32[] reduce(x, zero), dimensions={0,1,2}, to_apply=add\n"
      "}\n";
  rt_value *args2[] = {iota(HLO_F32, 3, (int64_t[]){2, 3, 4}, 0)};
  double want2[] = {276};
  EXPECT(all, args2, want2);
  /* an empty dimension leaves the init value */
  static const char *empty =
      "HloModule m\n" ADD_F32
      "ENTRY e {\n"
      "  x = f32[2,0] parameter(0)\n"
      "  five = f32[] constant(5)\n"
      "  ROOT r = f32[2] reduce(x, five), dimensions={1}, to_apply=add\n"
      "}\n";
  rt_value *args3[] = {rt_value_new_array(HLO_F32, 2, (int64_t[]){2, 0})};
  double want3[] = {5, 5};
  EXPECT(empty, args3, want3);
}

static void test_reduce_argmax(void) {
  /* Variadic: (value, index) pairs; the larger value wins, ties go to the lower index.
   * [[3,7,2,7],[1,-1,5,0]] -> values 7, 5 at indices 1, 2. */
  static const char *text =
      "HloModule m\n"
      "argmax {\n"
      "  av = f32[] parameter(0)\n"
      "  ai = s32[] parameter(1)\n"
      "  bv = f32[] parameter(2)\n"
      "  bi = s32[] parameter(3)\n"
      "  gt = pred[] compare(av, bv), direction=GT\n"
      "  eq = pred[] compare(av, bv), direction=EQ\n"
      "  lower = pred[] compare(ai, bi), direction=LT\n"
      "  tie = pred[] and(eq, lower)\n"
      "  keep = pred[] or(gt, tie)\n"
      "  v = f32[] select(keep, av, bv)\n"
      "  i = s32[] select(keep, ai, bi)\n"
      "  ROOT t = (f32[], s32[]) tuple(v, i)\n"
      "}\n"
      "ENTRY e {\n"
      "  x = f32[2,4] parameter(0)\n"
      "  idx = s32[2,4] iota(), iota_dimension=1\n"
      "  low = f32[] constant(-inf)\n"
      "  none = s32[] constant(-1)\n"
      "  ROOT r = (f32[2], s32[2]) reduce(x, idx, low, none), dimensions={1}, to_apply=argmax\n"
      "}\n";
  double x[] = {3, 7, 2, 7, 1, -1, 5, 0};
  rt_value *args[] = {values(HLO_F32, 2, (int64_t[]){2, 4}, x)};
  double want_values[] = {7, 5};
  expect_run(__LINE__, text, args, 1, false, 0, want_values, 2);
  rt_value *args2[] = {values(HLO_F32, 2, (int64_t[]){2, 4}, x)};
  double want_indices[] = {1, 2};
  expect_run(__LINE__, text, args2, 1, false, 1, want_indices, 2);
}

static void test_reduce_general_reducer(void) {
  /* f(acc, x) = 2 acc + x is not associative, so the order shows: XLA's evaluator takes
   * the reduced elements in row-major order. [[1,2],[3,4]] from 0 over both dims:
   * 1, 2*1+2 = 4, 2*4+3 = 11, 2*11+4 = 26; over dim 0 only: 2*1+3 = 5, 2*2+4 = 8. */
  static const char *both =
      "HloModule m\n"
      "f {\n"
      "  acc = f32[] parameter(0)\n"
      "  x = f32[] parameter(1)\n"
      "  two = f32[] constant(2)\n"
      "  twice = f32[] multiply(acc, two)\n"
      "  ROOT r = f32[] add(twice, x)\n"
      "}\n"
      "ENTRY e {\n"
      "  x = f32[2,2] parameter(0)\n"
      "  zero = f32[] constant(0)\n"
      "  ROOT r = f32[] reduce(x, zero), dimensions={0,1}, to_apply=f\n"
      "}\n";
  rt_value *args[] = {iota(HLO_F32, 2, (int64_t[]){2, 2}, 1)};
  double want[] = {26};
  EXPECT(both, args, want);
  static const char *first =
      "HloModule m\n"
      "f {\n"
      "  acc = f32[] parameter(0)\n"
      "  x = f32[] parameter(1)\n"
      "  two = f32[] constant(2)\n"
      "  twice = f32[] multiply(acc, two)\n"
      "  ROOT r = f32[] add(twice, x)\n"
      "}\n"
      "ENTRY e {\n"
      "  x = f32[2,2] parameter(0)\n"
      "  zero = f32[] constant(0)\n"
      "  ROOT r = f32[2] reduce(x, zero), dimensions={0}, to_apply=f\n"
      "}\n";
  rt_value *args2[] = {iota(HLO_F32, 2, (int64_t[]){2, 2}, 1)};
  double want2[] = {5, 8};
  EXPECT(first, args2, want2);
}

static void test_reduce_types(void) {
  /* f32 sums round at each step: 1e8 + 1 is 1e8 in f32, so [1e8, 1, -1e8] sums to 0;
   * fp64 mode keeps the 1. */
  static const char *f32 =
      "HloModule m\n" ADD_F32
      "ENTRY e {\n"
      "  x = f32[3] parameter(0)\n"
      "  zero = f32[] constant(0)\n"
      "  ROOT r = f32[] reduce(x, zero), dimensions={0}, to_apply=add\n"
      "}\n";
  double big[] = {1e8, 1, -1e8}, zero[] = {0}, one[] = {1};
  rt_value *args[] = {values(HLO_F32, 1, (int64_t[]){3}, big)};
  EXPECT(f32, args, zero);
  rt_value *args2[] = {values(HLO_F32, 1, (int64_t[]){3}, big)};
  expect_run(__LINE__, f32, args2, 1, true, -1, one, 1);

  /* bf16 too: 256 + 1 = 257 is a tie between bf16's 256 and 258, to even: 256, twice. */
  static const char *bf16 =
      "HloModule m\n"
      "add {\n  a = bf16[] parameter(0)\n  b = bf16[] parameter(1)\n  ROOT s = bf16[] add(a, b)\n}\n"
      "ENTRY e {\n"
      "  x = bf16[3] parameter(0)\n"
      "  zero = bf16[] constant(0)\n"
      "  ROOT r = bf16[] reduce(x, zero), dimensions={0}, to_apply=add\n"
      "}\n";
  rt_value *args3[] = {values(HLO_BF16, 1, (int64_t[]){3}, (double[]){256, 1, 1})};
  double want3[] = {256};
  EXPECT(bf16, args3, want3);

  /* s8 wraps: 100 + 100 = 200 = 256 - 56 */
  static const char *s8 =
      "HloModule m\n"
      "add {\n  a = s8[] parameter(0)\n  b = s8[] parameter(1)\n  ROOT s = s8[] add(a, b)\n}\n"
      "ENTRY e {\n"
      "  x = s8[2] parameter(0)\n"
      "  zero = s8[] constant(0)\n"
      "  ROOT r = s8[] reduce(x, zero), dimensions={0}, to_apply=add\n"
      "}\n";
  rt_value *args4[] = {values(HLO_S8, 1, (int64_t[]){2}, (double[]){100, 100})};
  double want4[] = {-56};
  EXPECT(s8, args4, want4);

  /* u32 maximum compares unsigned: 0xFFFFFFFF beats 1 */
  static const char *u32 =
      "HloModule m\n"
      "max {\n  a = u32[] parameter(0)\n  b = u32[] parameter(1)\n  ROOT s = u32[] maximum(a, b)\n}\n"
      "ENTRY e {\n"
      "  x = u32[2] parameter(0)\n"
      "  zero = u32[] constant(0)\n"
      "  ROOT r = u32[] reduce(x, zero), dimensions={0}, to_apply=max\n"
      "}\n";
  rt_value *args5[] = {values(HLO_U32, 1, (int64_t[]){2}, (double[]){1, 4294967295.0})};
  double want5[] = {4294967295.0};
  EXPECT(u32, args5, want5);

  /* pred: any and all of [1, 0, 0, 1] */
  static const char *any =
      "HloModule m\n"
      "or {\n  a = pred[] parameter(0)\n  b = pred[] parameter(1)\n  ROOT s = pred[] or(a, b)\n}\n"
      "ENTRY e {\n"
      "  x = pred[4] parameter(0)\n"
      "  no = pred[] constant(false)\n"
      "  ROOT r = pred[] reduce(x, no), dimensions={0}, to_apply=or\n"
      "}\n";
  static const char *all =
      "HloModule m\n"
      "and {\n  a = pred[] parameter(0)\n  b = pred[] parameter(1)\n  ROOT s = pred[] and(a, b)\n}\n"
      "ENTRY e {\n"
      "  x = pred[4] parameter(0)\n"
      "  yes = pred[] constant(true)\n"
      "  ROOT r = pred[] reduce(x, yes), dimensions={0}, to_apply=and\n"
      "}\n";
  double bits[] = {1, 0, 0, 1};
  rt_value *args6[] = {values(HLO_PRED, 1, (int64_t[]){4}, bits)};
  EXPECT(any, args6, one);
  rt_value *args7[] = {values(HLO_PRED, 1, (int64_t[]){4}, bits)};
  EXPECT(all, args7, zero);

  /* maximum propagates NaN */
  static const char *nan =
      "HloModule m\n" MAX_F32
      "ENTRY e {\n"
      "  x = f32[3] parameter(0)\n"
      "  low = f32[] constant(-inf)\n"
      "  ROOT r = f32[] reduce(x, low), dimensions={0}, to_apply=max\n"
      "}\n";
  rt_value *args8[] = {values(HLO_F32, 1, (int64_t[]){3}, (double[]){1, NAN, 3})};
  double want8[] = {NAN};
  EXPECT(nan, args8, want8);
}

/* ---------------------------------------------------------------------------------------
 * reduce-window */

static void test_reduce_window_max_pool(void) {
  /* 3x3 max pool, stride 2, pad 1 on x[i][j] = 4i + j + 1 (4x4): the windows cover rows and
   * columns {-1,0,1} and {1,2,3}; the padded ones are skipped.
   * (0,0): max of x[0..1][0..1] = 6; (0,1): x[0..1][1..3] = 8; (1,0): x[1..3][0..1] = 14;
   * (1,1): 16. */
  static const char *text =
      "HloModule m\n" MAX_F32
      "ENTRY e {\n"
      "  x = f32[1,1,4,4] parameter(0)\n"
      "  low = f32[] constant(-inf)\n"
      "  ROOT r = f32[1,1,2,2] reduce-window(x, low),\n"
      "      window={size=1x1x3x3 stride=1x1x2x2 pad=0_0x0_0x1_1x1_1},\n"
      "      to_apply=max\n"
      "}\n";
  rt_value *args[] = {iota(HLO_F32, 4, (int64_t[]){1, 1, 4, 4}, 1)};
  double want[] = {6, 8, 14, 16};
  EXPECT(text, args, want);
}

static void test_reduce_window_sum_pool(void) {
  /* 2x2 sums, stride 1, over 1..9: 1+2+4+5, 2+3+5+6, 4+5+7+8, 5+6+8+9 */
  static const char *text =
      "HloModule m\n" ADD_F32
      "ENTRY e {\n"
      "  x = f32[3,3] parameter(0)\n"
      "  zero = f32[] constant(0)\n"
      "  ROOT r = f32[2,2] reduce-window(x, zero), window={size=2x2}, to_apply=add\n"
      "}\n";
  rt_value *args[] = {iota(HLO_F32, 2, (int64_t[]){3, 3}, 1)};
  double want[] = {12, 16, 24, 28};
  EXPECT(text, args, want);
}

static void test_reduce_window_dilations(void) {
  /* base dilation 2: [1,2,3] reads as 1 . 2 . 3; windows of 2: 1, 2, 2, 3 (holes skipped) */
  static const char *base =
      "HloModule m\n" ADD_F32
      "ENTRY e {\n"
      "  x = f32[3] parameter(0)\n"
      "  zero = f32[] constant(0)\n"
      "  ROOT r = f32[4] reduce-window(x, zero), window={size=2 lhs_dilate=2}, to_apply=add\n"
      "}\n";
  rt_value *args[] = {iota(HLO_F32, 1, (int64_t[]){3}, 1)};
  double want[] = {1, 2, 2, 3};
  EXPECT(base, args, want);
  /* window dilation 2: x[i] + x[i+2] over 1..5: 4, 6, 8 */
  static const char *window =
      "HloModule m\n" ADD_F32
      "ENTRY e {\n"
      "  x = f32[5] parameter(0)\n"
      "  zero = f32[] constant(0)\n"
      "  ROOT r = f32[3] reduce-window(x, zero), window={size=2 rhs_dilate=2}, to_apply=add\n"
      "}\n";
  rt_value *args2[] = {iota(HLO_F32, 1, (int64_t[]){5}, 1)};
  double want2[] = {4, 6, 8};
  EXPECT(window, args2, want2);
  /* Padded positions are skipped, as XLA's evaluator does, so a non-identity init value
   * counts once per window: init 100, [1,2,3], windows of 2 with pad 1_0:
   * (pad, 1) = 101, (1, 2) = 103, (2, 3) = 105. */
  static const char *padded =
      "HloModule m\n" ADD_F32
      "ENTRY e {\n"
      "  x = f32[3] parameter(0)\n"
      "  init = f32[] constant(100)\n"
      "  ROOT r = f32[3] reduce-window(x, init), window={size=2 pad=1_0}, to_apply=add\n"
      "}\n";
  rt_value *args3[] = {iota(HLO_F32, 1, (int64_t[]){3}, 1)};
  double want3[] = {101, 103, 105};
  EXPECT(padded, args3, want3);
}

static void test_reduce_window_variadic(void) {
  /* (value, index) argmax over windows of 2 of [3,1,4,1,5]: 3@0, 4@2, 4@2, 5@4 */
  static const char *text =
      "HloModule m\n"
      "argmax {\n"
      "  av = f32[] parameter(0)\n"
      "  ai = s32[] parameter(1)\n"
      "  bv = f32[] parameter(2)\n"
      "  bi = s32[] parameter(3)\n"
      "  keep = pred[] compare(av, bv), direction=GE\n"
      "  v = f32[] select(keep, av, bv)\n"
      "  i = s32[] select(keep, ai, bi)\n"
      "  ROOT t = (f32[], s32[]) tuple(v, i)\n"
      "}\n"
      "ENTRY e {\n"
      "  x = f32[5] parameter(0)\n"
      "  idx = s32[5] iota(), iota_dimension=0\n"
      "  low = f32[] constant(-inf)\n"
      "  none = s32[] constant(-1)\n"
      "  ROOT r = (f32[4], s32[4]) reduce-window(x, idx, low, none), window={size=2}, to_apply=argmax\n"
      "}\n";
  double x[] = {3, 1, 4, 1, 5};
  rt_value *args[] = {values(HLO_F32, 1, (int64_t[]){5}, x)};
  double want_values[] = {3, 4, 4, 5};
  expect_run(__LINE__, text, args, 1, false, 0, want_values, 4);
  rt_value *args2[] = {values(HLO_F32, 1, (int64_t[]){5}, x)};
  double want_indices[] = {0, 2, 2, 4};
  expect_run(__LINE__, text, args2, 1, false, 1, want_indices, 4);
}

/* ---------------------------------------------------------------------------------------
 * select-and-scatter: the gradient of max pooling */

#define GE_F32 \
  "ge {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT c = pred[] compare(a, b), direction=GE\n}\n"

/* x =  1 5 2 0
 *      3 4 8 1
 *      0 6 2 7
 *      9 1 3 5 */
static const double pool_input[16] = {1, 5, 2, 0, 3, 4, 8, 1, 0, 6, 2, 7, 9, 1, 3, 5};

static void test_select_and_scatter_overlapping(void) {
  /* 2x2 windows, stride 1, source 1..9 (row-major over the 3x3 windows):
   * (0,0) max 5 at [0][1] gets 1; (0,1), (0,2), (1,1), (1,2) all pick 8 at [1][2]: 2+3+5+6 = 16;
   * (1,0) and (2,1) pick 6 at [2][1]: 4+8 = 12; (2,0) picks 9 at [3][0]: 7; (2,2) picks 7 at
   * [2][3]: 9. */
  static const char *text =
      "HloModule m\n" GE_F32 ADD_F32
      "ENTRY e {\n"
      "  x = f32[4,4] parameter(0)\n"
      "  s = f32[3,3] parameter(1)\n"
      "  zero = f32[] constant(0)\n"
      "  ROOT r = f32[4,4] select-and-scatter(x, s, zero), window={size=2x2}, select=ge, scatter=add\n"
      "}\n";
  rt_value *args[] = {values(HLO_F32, 2, (int64_t[]){4, 4}, pool_input),
                      iota(HLO_F32, 2, (int64_t[]){3, 3}, 1)};
  double want[] = {0, 1, 0, 0, 0, 0, 16, 0, 0, 12, 0, 9, 7, 0, 0, 0};
  EXPECT(text, args, want);

  /* Ties keep the first candidate with ge: x = [[2,2,1],[2,0,1],[1,1,1]], source 1..4:
   * (0,0) picks [0][0], (0,1) [0][1], (1,0) [1][0], (1,1) the first 1, at [1][2]. */
  static const char *ties =
      "HloModule m\n" GE_F32 ADD_F32
      "ENTRY e {\n"
      "  x = f32[3,3] parameter(0)\n"
      "  s = f32[2,2] parameter(1)\n"
      "  zero = f32[] constant(0)\n"
      "  ROOT r = f32[3,3] select-and-scatter(x, s, zero), window={size=2x2}, select=ge, scatter=add\n"
      "}\n";
  rt_value *args2[] = {values(HLO_F32, 2, (int64_t[]){3, 3}, (double[]){2, 2, 1, 2, 0, 1, 1, 1, 1}),
                       iota(HLO_F32, 2, (int64_t[]){2, 2}, 1)};
  double want2[] = {1, 2, 0, 3, 0, 4, 0, 0, 0};
  EXPECT(ties, args2, want2);

  /* The same through computations that are not a bare compare or add (called per element):
   * select keeps a when b <= a, scatter adds a copy. */
  static const char *general =
      "HloModule m\n"
      "sel {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ca = f32[] copy(a)\n"
      "  ROOT c = pred[] compare(b, ca), direction=LE\n}\n"
      "sca {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  cb = f32[] copy(b)\n"
      "  ROOT s = f32[] add(a, cb)\n}\n"
      "ENTRY e {\n"
      "  x = f32[4,4] parameter(0)\n"
      "  s = f32[3,3] parameter(1)\n"
      "  zero = f32[] constant(0)\n"
      "  ROOT r = f32[4,4] select-and-scatter(x, s, zero), window={size=2x2}, select=sel, scatter=sca\n"
      "}\n";
  rt_value *args3[] = {values(HLO_F32, 2, (int64_t[]){4, 4}, pool_input),
                       iota(HLO_F32, 2, (int64_t[]){3, 3}, 1)};
  EXPECT(general, args3, want);
}

static void test_select_and_scatter_padded(void) {
  /* 3x3 windows, stride 2, pad 1: windows over rows/cols {-1,0,1} and {1,2,3}.
   * (0,0) sees x[0..1][0..1] = 1 5 / 3 4: 5 at [0][1] gets 10;
   * (0,1) sees x[0..1][1..3]: 8 at [1][2] gets 20;
   * (1,0) sees x[1..3][0..1]: 9 at [3][0] gets 30;
   * (1,1) sees x[1..3][1..3]: 8 at [1][2] gets 40, 60 in all. Padding is never selected,
   * even though the values are all above the init. */
  static const char *text =
      "HloModule m\n" GE_F32 ADD_F32
      "ENTRY e {\n"
      "  x = f32[4,4] parameter(0)\n"
      "  s = f32[2,2] parameter(1)\n"
      "  zero = f32[] constant(0)\n"
      "  ROOT r = f32[4,4] select-and-scatter(x, s, zero), window={size=3x3 stride=2x2 pad=1_1x1_1},\n"
      "      select=ge, scatter=add\n"
      "}\n";
  rt_value *args[] = {values(HLO_F32, 2, (int64_t[]){4, 4}, pool_input),
                      values(HLO_F32, 2, (int64_t[]){2, 2}, (double[]){10, 20, 30, 40})};
  double want[] = {0, 10, 0, 0, 0, 0, 60, 0, 0, 0, 0, 0, 30, 0, 0, 0};
  EXPECT(text, args, want);
}

static void test_reduce_errors(void) {
  /* a reducer returning two values for one input */
  static const char *wrong_reducer =
      "HloModule m\n"
      "two {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT t = (f32[], f32[]) tuple(a, b)\n}\n"
      "ENTRY e {\n"
      "  x = f32[2,3] parameter(0)\n"
      "  zero = f32[] constant(0)\n"
      "  ROOT bad_reduce = f32[2] reduce(x, zero), dimensions={1}, to_apply=two\n"
      "}\n";
  rt_value *x = iota(HLO_F32, 2, (int64_t[]){2, 3}, 1);
  hlo_diag diag;
  rt_value *got = run_text(wrong_reducer, &x, 1, false, &diag);
  CHECK(got == NULL);
  CHECK_MSG(strstr(diag.message, "bad_reduce") != NULL, "message: %s", diag.message);
  rt_value_release(got);
  rt_value_release(x);
}

int main(void) {
  RUN(test_reduce_one_dim);
  RUN(test_reduce_several_dims);
  RUN(test_reduce_argmax);
  RUN(test_reduce_general_reducer);
  RUN(test_reduce_types);
  RUN(test_reduce_window_max_pool);
  RUN(test_reduce_window_sum_pool);
  RUN(test_reduce_window_dilations);
  RUN(test_reduce_window_variadic);
  RUN(test_select_and_scatter_overlapping);
  RUN(test_select_and_scatter_padded);
  RUN(test_reduce_errors);
  return TEST_REPORT();
}
