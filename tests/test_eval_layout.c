/* The reference evaluator's data-movement kernels, run from HLO text: broadcast, reshape,
 * bitcast (with layouts), transpose, slice, dynamic-slice, dynamic-update-slice,
 * concatenate, pad, reverse, iota. Expected values are worked out by hand (comments) or
 * with a few lines of Python over nested lists, and pasted as literals. */
#include <stdint.h>

#include "eval_util.h"

#define HLO(body) "HloModule m\nENTRY e {\n" body "}\n"

static rt_value *run(const char *text, bool fp64) {
  hlo_diag diag;
  rt_value *value = run_text(text, NULL, 0, fp64, &diag);
  CHECK_MSG(value != NULL, "evaluation failed: %s\n%s", diag.message, text);
  return value;
}

/* Checks type, dims and every element (exactly: these kernels only move values). */
static void check(rt_value *value, hlo_dtype dtype, int rank, const int64_t *dims, const double *want) {
  if (!value) return;
  CHECK_EQ_INT(value->shape.dtype, dtype);
  CHECK_EQ_INT(value->shape.rank, rank);
  int64_t count = 1;
  for (int i = 0; i < rank && i < value->shape.rank; i++) {
    CHECK_EQ_INT(value->shape.dims[i], dims[i]);
    count *= dims[i];
  }
  CHECK_EQ_INT(value->count, count);
  for (int64_t i = 0; i < count && i < value->count; i++) {
    double got = hlo_dtype_is_float(value->shape.dtype) ? rt_get_f64(value, i) : (double)rt_get_i64(value, i);
    CHECK_MSG(got == want[i], "element %lld: got %.17g, want %.17g", (long long)i, got, want[i]);
  }
  rt_value_release(value);
}

#define DIMS(...) (int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), ((const int64_t[]){__VA_ARGS__})
#define WANT(...) ((const double[]){__VA_ARGS__})

static void test_broadcast(void) {
  /* operand dimension 0 becomes result dimension 1: out[i,j,k] = x[j] */
  check(run(HLO("  x = f32[3] constant({1, 2, 3})\n"
                "  ROOT b = f32[2,3,4] broadcast(x), dimensions={1}\n"), false),
        HLO_F32, DIMS(2, 3, 4),
        WANT(1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3));
  /* out[a,b,c] = x[c,a]: operand dim 0 -> result dim 2, operand dim 1 -> result dim 0 */
  check(run(HLO("  x = s32[2,3] constant({{0, 1, 2}, {3, 4, 5}})\n"
                "  ROOT b = s32[3,4,2] broadcast(x), dimensions={2,0}\n"), false),
        HLO_S32, DIMS(3, 4, 2),
        WANT(0, 3, 0, 3, 0, 3, 0, 3, 1, 4, 1, 4, 1, 4, 1, 4, 2, 5, 2, 5, 2, 5, 2, 5));
  check(run(HLO("  x = s8[] constant(-7)\n"
                "  ROOT b = s8[2,2] broadcast(x), dimensions={}\n"), false),
        HLO_S8, DIMS(2, 2), WANT(-7, -7, -7, -7));
  check(run(HLO("  x = f32[2] constant({0.5, -1})\n"
                "  ROOT b = f32[2,2] broadcast(x), dimensions={1}\n"), true),
        HLO_F64, DIMS(2, 2), WANT(0.5, -1, 0.5, -1));
}

static void test_reshape(void) {
  check(run(HLO("  x = f32[2,3] constant({{1, 2, 3}, {4, 5, 6}})\n"
                "  ROOT r = f32[3,2] reshape(x)\n"), false),
        HLO_F32, DIMS(3, 2), WANT(1, 2, 3, 4, 5, 6));
  check(run(HLO("  x = u64[6] constant({0, 1, 2, 3, 4, 18446744073709551615})\n"
                "  ROOT r = u64[1,2,3] reshape(x)\n"), false),
        HLO_U64, DIMS(1, 2, 3), WANT(0, 1, 2, 3, 4, -1 /* 2^64-1 read as s64 */));
  check(run(HLO("  x = f32[1] constant({2.5})\n"
                "  ROOT r = f32[] reshape(x)\n"), true),
        HLO_F64, 0, NULL, WANT(2.5));
}

static void test_bitcast(void) {
  /* default layouts: a reshape */
  check(run(HLO("  x = f32[2,3]{1,0} constant({{0, 1, 2}, {3, 4, 5}})\n"
                "  ROOT r = f32[6]{0} bitcast(x)\n"), false),
        HLO_F32, DIMS(6), WANT(0, 1, 2, 3, 4, 5));
  /* a column-major result over the same bytes is the transpose: result[i,j] = x[j,i] */
  check(run(HLO("  x = f32[2,3]{1,0} constant({{0, 1, 2}, {3, 4, 5}})\n"
                "  ROOT r = f32[3,2]{0,1} bitcast(x)\n"), false),
        HLO_F32, DIMS(3, 2), WANT(0, 3, 1, 4, 2, 5));
  /* a column-major operand: its bytes are x00 x10 x01 x11 x02 x12 */
  check(run(HLO("  x = f32[2,3]{0,1} constant({{0, 1, 2}, {3, 4, 5}})\n"
                "  ROOT r = f32[6]{0} bitcast(x)\n"), false),
        HLO_F32, DIMS(6), WANT(0, 3, 1, 4, 2, 5));
  /* 3-D: result layout {0,2,1} puts result dims 1,2,0 major to minor, i.e. [2,3,4], the
   * operand's physical shape; so result[a,b,c] = x[b,c,a] = 12b + 4c + a */
  check(run(HLO("  i = f32[24]{0} iota(), iota_dimension=0\n"
                "  x = f32[2,3,4]{2,1,0} reshape(i)\n"
                "  ROOT r = f32[4,2,3]{0,2,1} bitcast(x)\n"), false),
        HLO_F32, DIMS(4, 2, 3),
        WANT(0, 4, 8, 12, 16, 20, 1, 5, 9, 13, 17, 21, 2, 6, 10, 14, 18, 22, 3, 7, 11, 15, 19, 23));
}

static void test_transpose(void) {
  /* out[i,j,k] = x[j,k,i] with x[a,b,c] = 12a + 4b + c */
  check(run(HLO("  i = f32[24] iota(), iota_dimension=0\n"
                "  x = f32[2,3,4] reshape(i)\n"
                "  ROOT t = f32[4,2,3] transpose(x), dimensions={2,0,1}\n"), false),
        HLO_F32, DIMS(4, 2, 3),
        WANT(0, 4, 8, 12, 16, 20, 1, 5, 9, 13, 17, 21, 2, 6, 10, 14, 18, 22, 3, 7, 11, 15, 19, 23));
  /* out[i,j,k] = x[k,i,j] */
  check(run(HLO("  i = s16[24] iota(), iota_dimension=0\n"
                "  x = s16[2,3,4] reshape(i)\n"
                "  ROOT t = s16[3,4,2] transpose(x), dimensions={1,2,0}\n"), false),
        HLO_S16, DIMS(3, 4, 2),
        WANT(0, 12, 1, 13, 2, 14, 3, 15, 4, 16, 5, 17, 6, 18, 7, 19, 8, 20, 9, 21, 10, 22, 11, 23));
  check(run(HLO("  x = bf16[2,2] constant({{1, 2}, {3, 4}})\n"
                "  ROOT t = bf16[2,2] transpose(x), dimensions={1,0}\n"), true),
        HLO_F64, DIMS(2, 2), WANT(1, 3, 2, 4));
}

static void test_slice(void) {
  check(run(HLO("  x = f32[10] iota(), iota_dimension=0\n"
                "  ROOT s = f32[3] slice(x), slice={[1:8:3]}\n"), false),
        HLO_F32, DIMS(3), WANT(1, 4, 7));
  /* rows 1 and 3, columns 0, 2, 4 of x[r,c] = 5r + c */
  check(run(HLO("  i = s32[20] iota(), iota_dimension=0\n"
                "  x = s32[4,5] reshape(i)\n"
                "  ROOT s = s32[2,3] slice(x), slice={[1:4:2], [0:5:2]}\n"), false),
        HLO_S32, DIMS(2, 3), WANT(5, 7, 9, 15, 17, 19));
  check(run(HLO("  x = pred[4] constant({0, 1, 1, 0})\n"
                "  ROOT s = pred[2] slice(x), slice={[1:3]}\n"), false),
        HLO_PRED, DIMS(2), WANT(1, 1));
  check(run(HLO("  x = f32[4] constant({1, 2, 3, 4})\n"
                "  ROOT s = f32[0] slice(x), slice={[2:2]}\n"), false),
        HLO_F32, DIMS(0), NULL);
}

static void test_dynamic_slice(void) {
  /* start 3 with size 3 in a dimension of 5 is clamped to 2; -2 to 0; a huge u32 to 2 */
  check(run(HLO("  x = f32[5] constant({0, 1, 2, 3, 4})\n"
                "  s = s32[] constant(3)\n"
                "  ROOT d = f32[3] dynamic-slice(x, s), dynamic_slice_sizes={3}\n"), false),
        HLO_F32, DIMS(3), WANT(2, 3, 4));
  check(run(HLO("  x = f32[5] constant({0, 1, 2, 3, 4})\n"
                "  s = s32[] constant(-2)\n"
                "  ROOT d = f32[3] dynamic-slice(x, s), dynamic_slice_sizes={3}\n"), false),
        HLO_F32, DIMS(3), WANT(0, 1, 2));
  check(run(HLO("  x = f32[5] constant({0, 1, 2, 3, 4})\n"
                "  s = u32[] constant(4000000000)\n"
                "  ROOT d = f32[3] dynamic-slice(x, s), dynamic_slice_sizes={3}\n"), false),
        HLO_F32, DIMS(3), WANT(2, 3, 4));
  /* the 2-D example of XLA's docs: b[r,c] = 3r + c, starts {2, 1}, sizes {2, 2} */
  check(run(HLO("  i = f32[12] iota(), iota_dimension=0\n"
                "  b = f32[4,3] reshape(i)\n"
                "  r = s64[] constant(2)\n"
                "  c = s64[] constant(1)\n"
                "  ROOT d = f32[2,2] dynamic-slice(b, r, c), dynamic_slice_sizes={2,2}\n"), false),
        HLO_F32, DIMS(2, 2), WANT(7, 8, 10, 11));
  /* starts {5, -1} clamp to {2, 0} */
  check(run(HLO("  i = s8[12] iota(), iota_dimension=0\n"
                "  b = s8[4,3] reshape(i)\n"
                "  r = s32[] constant(5)\n"
                "  c = s8[] constant(-1)\n"
                "  ROOT d = s8[2,2] dynamic-slice(b, r, c), dynamic_slice_sizes={2,2}\n"), false),
        HLO_S8, DIMS(2, 2), WANT(6, 7, 9, 10));
  check(run(HLO("  x = f32[5] constant({0, 1, 2, 3, 4})\n"
                "  s = s32[] constant(1)\n"
                "  ROOT d = f32[2] dynamic-slice(x, s), dynamic_slice_sizes={2}\n"), true),
        HLO_F64, DIMS(2), WANT(1, 2));
}

static void test_dynamic_update_slice(void) {
  /* start 4 for an update of 2 in 5 is clamped to 3; -1 to 0 */
  check(run(HLO("  a = f32[5] constant({0, 1, 2, 3, 4})\n"
                "  u = f32[2] constant({5, 6})\n"
                "  s = s32[] constant(4)\n"
                "  ROOT d = f32[5] dynamic-update-slice(a, u, s)\n"), false),
        HLO_F32, DIMS(5), WANT(0, 1, 2, 5, 6));
  check(run(HLO("  a = f32[5] constant({0, 1, 2, 3, 4})\n"
                "  u = f32[2] constant({5, 6})\n"
                "  s = s32[] constant(-1)\n"
                "  ROOT d = f32[5] dynamic-update-slice(a, u, s)\n"), false),
        HLO_F32, DIMS(5), WANT(5, 6, 2, 3, 4));
  /* the 2-D example of XLA's docs */
  check(run(HLO("  i = s32[12] iota(), iota_dimension=0\n"
                "  b = s32[4,3] reshape(i)\n"
                "  u = s32[3,2] constant({{12, 13}, {14, 15}, {16, 17}})\n"
                "  r = s32[] constant(1)\n"
                "  c = u8[] constant(1)\n"
                "  ROOT d = s32[4,3] dynamic-update-slice(b, u, r, c)\n"), false),
        HLO_S32, DIMS(4, 3), WANT(0, 1, 2, 3, 12, 13, 6, 14, 15, 9, 16, 17));
  /* starts {9, 9} clamp to {1, 1}: the same result */
  check(run(HLO("  i = s32[12] iota(), iota_dimension=0\n"
                "  b = s32[4,3] reshape(i)\n"
                "  u = s32[3,2] constant({{12, 13}, {14, 15}, {16, 17}})\n"
                "  r = s32[] constant(9)\n"
                "  c = s32[] constant(9)\n"
                "  ROOT d = s32[4,3] dynamic-update-slice(b, u, r, c)\n"), false),
        HLO_S32, DIMS(4, 3), WANT(0, 1, 2, 3, 12, 13, 6, 14, 15, 9, 16, 17));
  check(run(HLO("  a = f16[3] constant({1, 2, 3})\n"
                "  u = f16[1] constant({-1})\n"
                "  s = s32[] constant(1)\n"
                "  ROOT d = f16[3] dynamic-update-slice(a, u, s)\n"), true),
        HLO_F64, DIMS(3), WANT(1, -1, 3));
}

static void test_concatenate(void) {
  check(run(HLO("  a = f32[2,2] constant({{1, 2}, {3, 4}})\n"
                "  b = f32[2,1] constant({{5}, {6}})\n"
                "  ROOT c = f32[2,3] concatenate(a, b), dimensions={1}\n"), false),
        HLO_F32, DIMS(2, 3), WANT(1, 2, 5, 3, 4, 6));
  check(run(HLO("  a = u16[2] constant({2, 3})\n"
                "  b = u16[2] constant({4, 5})\n"
                "  c = u16[2] constant({6, 7})\n"
                "  ROOT r = u16[6] concatenate(a, b, c), dimensions={0}\n"), false),
        HLO_U16, DIMS(6), WANT(2, 3, 4, 5, 6, 7));
  check(run(HLO("  a = f32[1,2] constant({{1, 2}})\n"
                "  b = f32[0,2] constant({})\n"
                "  c = f32[1,2] constant({{3, 4}})\n"
                "  ROOT r = f32[2,2] concatenate(a, b, c), dimensions={0}\n"), true),
        HLO_F64, DIMS(2, 2), WANT(1, 2, 3, 4));
}

static void test_pad(void) {
  /* interior 1 gives 1 0 2 0 3; low -1 crops the 1; high 2 appends two zeros */
  check(run(HLO("  x = f32[3] constant({1, 2, 3})\n"
                "  z = f32[] constant(0)\n"
                "  ROOT p = f32[6] pad(x, z), padding=-1_2_1\n"), false),
        HLO_F32, DIMS(6), WANT(0, 2, 0, 3, 0, 0));
  /* low -2 crops 1 and the padding after it */
  check(run(HLO("  x = f32[3] constant({1, 2, 3})\n"
                "  z = f32[] constant(0)\n"
                "  ROOT p = f32[3] pad(x, z), padding=-2_0_1\n"), false),
        HLO_F32, DIMS(3), WANT(2, 0, 3));
  /* rows: one row of padding above; columns: a p b, then high -1 crops b */
  check(run(HLO("  x = s32[2,2] constant({{1, 2}, {3, 4}})\n"
                "  z = s32[] constant(9)\n"
                "  ROOT p = s32[3,2] pad(x, z), padding=1_0_0x0_-1_1\n"), false),
        HLO_S32, DIMS(3, 2), WANT(9, 9, 1, 9, 3, 9));
  check(run(HLO("  x = f32[2,2] constant({{1, 2}, {3, 4}})\n"
                "  z = f32[] constant(-1)\n"
                "  ROOT p = f32[4,3] pad(x, z), padding=1_1x0_1\n"), false),
        HLO_F32, DIMS(4, 3), WANT(-1, -1, -1, 1, 2, -1, 3, 4, -1, -1, -1, -1));
  /* everything cropped away */
  check(run(HLO("  x = f32[2] constant({1, 2})\n"
                "  z = f32[] constant(0)\n"
                "  ROOT p = f32[0] pad(x, z), padding=0_-2\n"), false),
        HLO_F32, DIMS(0), NULL);
  check(run(HLO("  x = bf16[2] constant({1, 2})\n"
                "  z = bf16[] constant(0.5)\n"
                "  ROOT p = bf16[4] pad(x, z), padding=1_1\n"), true),
        HLO_F64, DIMS(4), WANT(0.5, 1, 2, 0.5));
}

static void test_reverse(void) {
  check(run(HLO("  i = f32[6] iota(), iota_dimension=0\n"
                "  x = f32[2,3] reshape(i)\n"
                "  ROOT r = f32[2,3] reverse(x), dimensions={0,1}\n"), false),
        HLO_F32, DIMS(2, 3), WANT(5, 4, 3, 2, 1, 0));
  check(run(HLO("  i = u8[6] iota(), iota_dimension=0\n"
                "  x = u8[2,3] reshape(i)\n"
                "  ROOT r = u8[2,3] reverse(x), dimensions={1}\n"), false),
        HLO_U8, DIMS(2, 3), WANT(2, 1, 0, 5, 4, 3));
}

static void test_iota(void) {
  check(run(HLO("  ROOT i = s32[2,3] iota(), iota_dimension=1\n"), false), HLO_S32, DIMS(2, 3), WANT(0, 1, 2, 0, 1, 2));
  check(run(HLO("  ROOT i = f32[2,3] iota(), iota_dimension=0\n"), false), HLO_F32, DIMS(2, 3), WANT(0, 0, 0, 1, 1, 1));
  check(run(HLO("  ROOT i = f32[3] iota(), iota_dimension=0\n"), true), HLO_F64, DIMS(3), WANT(0, 1, 2));
  /* bf16 holds 8 significant bits: 257 ties to 256, 259 to 260 */
  rt_value *value = run(HLO("  ROOT i = bf16[300] iota(), iota_dimension=0\n"), false);
  if (value) {
    CHECK_EQ_INT(value->shape.dtype, HLO_BF16);
    CHECK_EQ_INT(rt_get_f64(value, 255), 255);
    CHECK_EQ_INT(rt_get_f64(value, 257), 256);
    CHECK_EQ_INT(rt_get_f64(value, 259), 260);
    rt_value_release(value);
  }
}

/* A larger case run end to end, to keep the copy loops honest about strides: transpose
 * a [5,6,7,8] array by {3,1,0,2} and compare against the formula. */
static void test_larger_transpose(void) {
  rt_value *value = run(HLO("  i = s32[1680] iota(), iota_dimension=0\n"
                            "  x = s32[5,6,7,8] reshape(i)\n"
                            "  ROOT t = s32[8,6,5,7] transpose(x), dimensions={3,1,0,2}\n"), false);
  if (!value) return;
  int bad = 0;
  for (int a = 0; a < 8; a++)
    for (int b = 0; b < 6; b++)
      for (int c = 0; c < 5; c++)
        for (int d = 0; d < 7; d++) {
          int64_t got = rt_get_i64(value, ((a * 6 + b) * 5 + c) * 7 + d);
          int64_t want = ((c * 6 + b) * 7 + d) * 8 + a; /* x[c,b,d,a] */
          bad += got != want;
        }
  CHECK_EQ_INT(bad, 0);
  rt_value_release(value);
}

/* Start indices passed in as arguments, as a traced loop would pass them. */
static void test_parameters(void) {
  const char *text = HLO("  x = f32[2,4] parameter(0)\n"
                         "  s = s32[] parameter(1)\n"
                         "  z = s32[] constant(0)\n"
                         "  ROOT d = f32[2,2] dynamic-slice(x, z, s), dynamic_slice_sizes={2,2}\n");
  int64_t dims[2] = {2, 4};
  rt_value *x = make_value(HLO_F32, 2, dims, (double[]){0, 1, 2, 3, 4, 5, 6, 7});
  for (int start = -1; start <= 3; start++) {
    rt_value *s = make_value(HLO_S32, 0, NULL, (double[]){start});
    rt_value *args[2] = {x, s};
    hlo_diag diag;
    rt_value *value = run_text(text, args, 2, false, &diag);
    CHECK_MSG(value != NULL, "evaluation failed: %s", diag.message);
    int64_t c = start < 0 ? 0 : start > 2 ? 2 : start; /* clamped into [0, 4 - 2] */
    check(value, HLO_F32, DIMS(2, 2), WANT(c, c + 1, 4 + c, 5 + c));
    rt_value_release(s);
  }
  rt_value_release(x);
}

int main(void) {
  RUN(test_broadcast);
  RUN(test_reshape);
  RUN(test_bitcast);
  RUN(test_transpose);
  RUN(test_slice);
  RUN(test_dynamic_slice);
  RUN(test_dynamic_update_slice);
  RUN(test_concatenate);
  RUN(test_pad);
  RUN(test_reverse);
  RUN(test_iota);
  RUN(test_larger_transpose);
  RUN(test_parameters);
  return TEST_REPORT();
}
