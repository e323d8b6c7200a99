/* sort, batch norm, the random bit generators and single-device collectives in the reference
 * evaluator. Expected values: by hand (arithmetic in comments), from the Random123
 * known-answer vectors, or from tests' independent Python (noted where used). */
#include "eval_util.h"

/* Runs text and checks the array result (or element `index` of a tuple result, index >= 0)
 * against want. A function rather than eval_util.h's CHECK_RUN, whose locals collide with
 * those of CHECK_NEAR. */
static void expect_element(int line, const char *text, rt_value *const *args, int arg_count, int index,
                           const double *want, int64_t want_count, double tol) {
  hlo_diag diag;
  rt_value *got = run_text(text, args, arg_count, false, &diag);
  CHECK_MSG(got != NULL, "line %d: evaluation failed: %s", line, diag.message);
  if (!got) return;
  const rt_value *array = got;
  if (index >= 0) {
    bool ok = got->shape.dtype == HLO_TUPLE && got->tuple_count > index;
    CHECK_MSG(ok, "line %d: the result is not a tuple with element %d", line, index);
    array = ok ? got->tuple[index] : NULL;
  }
  if (array) {
    expect_values(line, array, want, want_count, tol);
  }
  rt_value_release(got);
}
#define EXPECT_RUN(text, args, n, want, count, tol) expect_element(__LINE__, text, args, n, -1, want, count, tol)
#define EXPECT_TUPLE(text, args, n, index, want, count, tol) \
  expect_element(__LINE__, text, args, n, index, want, count, tol)

/* Evaluates text; NULL (and the message in diag) on failure. */
static rt_value *run(const char *text, rt_value *const *args, int arg_count, hlo_diag *diag) {
  return run_text(text, args, arg_count, false, diag);
}

/* ---- sort ---- */

static void test_sort_ascending_descending(void) {
  static const char *ascending =
      "HloModule m\n"
      "lt {\n"
      "  a = f32[] parameter(0)\n"
      "  b = f32[] parameter(1)\n"
      "  ROOT c = pred[] compare(a, b), direction=LT\n"
      "}\n"
      "ENTRY e {\n"
      "  x = f32[6] parameter(0)\n"
      "  ROOT s = f32[6] sort(x), dimensions={0}, to_apply=lt\n"
      "}\n";
  int64_t six[1] = {6};
  rt_value *x = make_value(HLO_F32, 1, six, (double[]){3, 1, 2.5, 5, -1, 0});
  EXPECT_RUN(ascending, &x, 1, ((double[]){-1, 0, 1, 2.5, 3, 5}), 6, 0);
  rt_value_release(x);

  static const char *descending =
      "HloModule m\n"
      "gt {\n"
      "  a = s32[] parameter(0)\n"
      "  b = s32[] parameter(1)\n"
      "  ROOT c = pred[] compare(a, b), direction=GT\n"
      "}\n"
      "ENTRY e {\n"
      "  x = s32[5] parameter(0)\n"
      "  ROOT s = s32[5] sort(x), dimensions={0}, to_apply=gt\n"
      "}\n";
  int64_t five[1] = {5};
  x = make_value(HLO_S32, 1, five, (double[]){4, -7, 9, 0, 4});
  EXPECT_RUN(descending, &x, 1, ((double[]){9, 4, 4, 0, -7}), 5, 0);
  rt_value_release(x);

  /* u32 compares unsigned: 4000000000 is the largest. */
  static const char *unsigned_text =
      "HloModule m\n"
      "lt {\n"
      "  a = u32[] parameter(0)\n"
      "  b = u32[] parameter(1)\n"
      "  ROOT c = pred[] compare(a, b), direction=LT\n"
      "}\n"
      "ENTRY e {\n"
      "  x = u32[3] parameter(0)\n"
      "  ROOT s = u32[3] sort(x), dimensions={0}, to_apply=lt\n"
      "}\n";
  int64_t three[1] = {3};
  x = make_value(HLO_U32, 1, three, (double[]){4000000000.0, 1, 70000});
  EXPECT_RUN(unsigned_text, &x, 1, ((double[]){1, 70000, 4000000000.0}), 3, 0);
  rt_value_release(x);
}

/* Keys with ties carry values along; stable keeps equal keys in input order. */
static void test_sort_stable_pairs(void) {
  static const char *fast =
      "HloModule m\n"
      "lt {\n"
      "  k0 = s32[] parameter(0)\n"
      "  k1 = s32[] parameter(1)\n"
      "  v0 = s32[] parameter(2)\n"
      "  v1 = s32[] parameter(3)\n"
      "  ROOT c = pred[] compare(k0, k1), direction=LT\n"
      "}\n"
      "ENTRY e {\n"
      "  k = s32[6] parameter(0)\n"
      "  v = s32[6] parameter(1)\n"
      "  ROOT s = (s32[6], s32[6]) sort(k, v), dimensions={0}, is_stable=true, to_apply=lt\n"
      "}\n";
  int64_t six[1] = {6};
  rt_value *k = make_value(HLO_S32, 1, six, (double[]){2, 1, 2, 1, 0, 2});
  rt_value *v = make_value(HLO_S32, 1, six, (double[]){0, 1, 2, 3, 4, 5});
  rt_value *args[2] = {k, v};
  /* key 0: value 4; key 1: values 1, 3; key 2: values 0, 2, 5 (input order) */
  EXPECT_TUPLE(fast, args, 2, 0, ((double[]){0, 1, 1, 2, 2, 2}), 6, 0);
  EXPECT_TUPLE(fast, args, 2, 1, ((double[]){4, 1, 3, 0, 2, 5}), 6, 0);

  /* A comparator that is more than one compare runs as a computation: descending via
   * negation, still stable. */
  static const char *general =
      "HloModule m\n"
      "neg_lt {\n"
      "  k0 = s32[] parameter(0)\n"
      "  k1 = s32[] parameter(1)\n"
      "  v0 = s32[] parameter(2)\n"
      "  v1 = s32[] parameter(3)\n"
      "  n0 = s32[] negate(k0)\n"
      "  n1 = s32[] negate(k1)\n"
      "  ROOT c = pred[] compare(n0, n1), direction=LT\n"
      "}\n"
      "ENTRY e {\n"
      "  k = s32[6] parameter(0)\n"
      "  v = s32[6] parameter(1)\n"
      "  ROOT s = (s32[6], s32[6]) sort(k, v), dimensions={0}, is_stable=true, to_apply=neg_lt\n"
      "}\n";
  EXPECT_TUPLE(general, args, 2, 0, ((double[]){2, 2, 2, 1, 1, 0}), 6, 0);
  EXPECT_TUPLE(general, args, 2, 1, ((double[]){0, 2, 5, 1, 3, 4}), 6, 0);

  /* Sorting by the second operand: the fast path must look at operand 1, not operand 0. */
  static const char *by_value =
      "HloModule m\n"
      "gt_v {\n"
      "  k0 = s32[] parameter(0)\n"
      "  k1 = s32[] parameter(1)\n"
      "  v0 = s32[] parameter(2)\n"
      "  v1 = s32[] parameter(3)\n"
      "  ROOT c = pred[] compare(v0, v1), direction=GT\n"
      "}\n"
      "ENTRY e {\n"
      "  k = s32[6] parameter(0)\n"
      "  v = s32[6] parameter(1)\n"
      "  ROOT s = (s32[6], s32[6]) sort(k, v), dimensions={0}, to_apply=gt_v\n"
      "}\n";
  EXPECT_TUPLE(by_value, args, 2, 1, ((double[]){5, 4, 3, 2, 1, 0}), 6, 0);
  EXPECT_TUPLE(by_value, args, 2, 0, ((double[]){2, 0, 1, 2, 1, 2}), 6, 0);
  rt_value_release(k);
  rt_value_release(v);
}

/* TOTALORDER: -NaN < -Inf < -0 < +0 < 1 < +NaN. */
static void test_sort_nan_total_order(void) {
  static const char *text =
      "HloModule m\n"
      "lt {\n"
      "  a = f32[] parameter(0)\n"
      "  b = f32[] parameter(1)\n"
      "  ROOT c = pred[] compare(a, b), direction=LT, type=TOTALORDER\n"
      "}\n"
      "ENTRY e {\n"
      "  x = f32[6] parameter(0)\n"
      "  ROOT s = f32[6] sort(x), dimensions={0}, to_apply=lt\n"
      "}\n";
  int64_t six[1] = {6};
  rt_value *x = make_value(HLO_F32, 1, six, (double[]){NAN, 1, -NAN, -INFINITY, 0.0, -0.0});
  for (int fp64 = 0; fp64 < 2; fp64++) { /* fp64 mode sorts the widened f64 values */
    hlo_diag diag;
    rt_value *got = run_text(text, &x, 1, fp64, &diag);
    CHECK_MSG(got != NULL, "evaluation failed: %s", diag.message);
    if (got && got->count == 6) {
      CHECK(got->shape.dtype == (fp64 ? HLO_F64 : HLO_F32));
      CHECK(isnan(rt_get_f64(got, 0)) && signbit(rt_get_f64(got, 0)));
      CHECK(rt_get_f64(got, 1) == -INFINITY);
      CHECK(rt_get_f64(got, 2) == 0 && signbit(rt_get_f64(got, 2)));
      CHECK(rt_get_f64(got, 3) == 0 && !signbit(rt_get_f64(got, 3)));
      CHECK(rt_get_f64(got, 4) == 1);
      CHECK(isnan(rt_get_f64(got, 5)) && !signbit(rt_get_f64(got, 5)));
    }
    rt_value_release(got);
  }
  rt_value_release(x);
}

/* dimensions={0} of s32[3,2] sorts each column on its own. */
static void test_sort_dim0(void) {
  static const char *text =
      "HloModule m\n"
      "lt {\n"
      "  a = s32[] parameter(0)\n"
      "  b = s32[] parameter(1)\n"
      "  ROOT c = pred[] compare(a, b), direction=LT\n"
      "}\n"
      "ENTRY e {\n"
      "  x = s32[3,2] parameter(0)\n"
      "  ROOT s = s32[3,2] sort(x), dimensions={0}, to_apply=lt\n"
      "}\n";
  int64_t dims[2] = {3, 2};
  rt_value *x = make_value(HLO_S32, 2, dims, (double[]){3, 1, 1, 2, 2, 0});
  /* column 0: 3,1,2 -> 1,2,3; column 1: 1,2,0 -> 0,1,2 */
  EXPECT_RUN(text, &x, 1, ((double[]){1, 0, 2, 1, 3, 2}), 6, 0);
  rt_value_release(x);
}

/* ---- batch norm ---- */

/* x of f32[2,2,2,2], row-major. With feature_index 1 the feature of flat index i is
 * (i / 4) % 2; with feature_index 3 it is i % 2. */
static const double bn_x[16] = {1, 2, 3, 4, 5, 6, 7, 8, 2, 4, 6, 8, 1, 3, 5, 7};

static rt_value *vec2(double a, double b) {
  int64_t two[1] = {2};
  return make_value(HLO_F32, 1, two, (double[]){a, b});
}

static void test_batch_norm_inference(void) {
  /* var + epsilon = 3.75 + 0.25 = 4 and 0.75 + 0.25 = 1, so sqrt is 2 and 1:
   *   feature 0: 2 * (x - 2) / 2 + 1 = x - 1
   *   feature 1: 0.5 * (x - 5) / 1 - 1 = 0.5 x - 3.5 */
  int64_t dims[4] = {2, 2, 2, 2};
  rt_value *args[5] = {make_value(HLO_F32, 4, dims, bn_x), vec2(2, 0.5), vec2(1, -1), vec2(2, 5), vec2(3.75, 0.75)};
  double want1[16], want3[16];
  for (int i = 0; i < 16; i++) {
    want1[i] = (i / 4) % 2 == 0 ? bn_x[i] - 1 : 0.5 * bn_x[i] - 3.5;
    want3[i] = i % 2 == 0 ? bn_x[i] - 1 : 0.5 * bn_x[i] - 3.5;
  }
  const char *format =
      "HloModule m\n"
      "ENTRY e {\n"
      "  x = f32[2,2,2,2] parameter(0)\n"
      "  s = f32[2] parameter(1)\n"
      "  o = f32[2] parameter(2)\n"
      "  m = f32[2] parameter(3)\n"
      "  v = f32[2] parameter(4)\n"
      "  ROOT y = f32[2,2,2,2] batch-norm-inference(x, s, o, m, v), epsilon=0.25, feature_index=%d\n"
      "}\n";
  char text[512];
  snprintf(text, sizeof text, format, 1);
  EXPECT_RUN(text, args, 5, want1, 16, 0);
  snprintf(text, sizeof text, format, 3);
  EXPECT_RUN(text, args, 5, want3, 16, 0);
  hlo_diag diag;
  rt_value *got = run_text(text, args, 5, true, &diag); /* fp64 mode: same exact numbers, in f64 */
  CHECK_MSG(got && got->shape.dtype == HLO_F64, "fp64: %s", diag.message);
  for (int i = 0; got && i < 16; i++) CHECK_NEAR(rt_get_f64(got, i), want3[i], 0);
  rt_value_release(got);
  for (int i = 0; i < 5; i++) rt_value_release(args[i]);
}

/* Expected values from an independent pure-Python script of the XLA semantics formulas
 * (epsilon 0.001 rounded to f32 first, as XLA stores it). By hand for feature_index 1:
 * feature 0 holds {1,2,3,4,2,4,6,8}: mean 30/8 = 3.75, E[x^2] = 150/8 = 18.75, so var =
 * 18.75 - 3.75^2 = 4.6875; feature 1 holds {5,6,7,8,1,3,5,7}: mean 42/8 = 5.25, E[x^2] =
 * 258/8 = 32.25, var = 32.25 - 27.5625 = 4.6875. y[0] = 2 * (1 - 3.75) / sqrt(4.6885) + 1
 * = -1.54007. */
static void test_batch_norm_training(void) {
  int64_t dims[4] = {2, 2, 2, 2};
  rt_value *args[3] = {make_value(HLO_F32, 4, dims, bn_x), vec2(2, 0.5), vec2(1, -1)};
  const char *format =
      "HloModule m\n"
      "ENTRY e {\n"
      "  x = f32[2,2,2,2] parameter(0)\n"
      "  s = f32[2] parameter(1)\n"
      "  o = f32[2] parameter(2)\n"
      "  ROOT t = (f32[2,2,2,2], f32[2], f32[2]) batch-norm-training(x, s, o), epsilon=0.001,\n"
      "      feature_index=%d\n"
      "}\n";
  char text[512];
  snprintf(text, sizeof text, format, 1);
  double y1[16] = {-1.5400703, -0.616408348, 0.307253569, 1.23091543, -1.05772889, -0.8268134,
                   -0.595897913, -0.364982426, -0.616408348, 1.23091543, 3.0782392, 4.92556334,
                   -1.98139083, -1.51955986, -1.05772889, -0.595897913};
  EXPECT_TUPLE(text, args, 3, 0, y1, 16, 1e-6);
  EXPECT_TUPLE(text, args, 3, 1, ((double[]){3.75, 5.25}), 2, 0);
  EXPECT_TUPLE(text, args, 3, 2, ((double[]){4.6875, 4.6875}), 2, 0);
  snprintf(text, sizeof text, format, 3);
  double y3[16] = {-1.5400703, -1.75047529, 0.307253569, -1.28864431, 2.15457749, -0.8268134,
                   4.00190115, -0.364982426, -0.616408348, -1.28864431, 3.0782392, -0.364982426,
                   -1.5400703, -1.51955986, 2.15457749, -0.595897913};
  EXPECT_TUPLE(text, args, 3, 0, y3, 16, 1e-6);
  /* even elements {1,3,5,7,2,6,1,5}: 30/8; odd {2,4,6,8,4,8,3,7}: 42/8 */
  EXPECT_TUPLE(text, args, 3, 1, ((double[]){3.75, 5.25}), 2, 0);
  for (int i = 0; i < 3; i++) rt_value_release(args[i]);
}

/* grad with the batch moments above; values from the same independent Python script. By hand,
 * grad_offset = sum(dy) per feature: feature_index 1, feature 0 = 1-1+2+0+3+1+0-1 = 5. */
static void test_batch_norm_grad(void) {
  static const double dy[16] = {1, -1, 2, 0, 0.5, 1, -2, 1, 3, 1, 0, -1, 2, 2, -1, 0.5};
  int64_t dims[4] = {2, 2, 2, 2};
  rt_value *args[5] = {make_value(HLO_F32, 4, dims, bn_x), vec2(2, 0.5), vec2(3.75, 5.25), vec2(4.6875, 4.6875),
                       make_value(HLO_F32, 4, dims, dy)};
  const char *format =
      "HloModule m\n"
      "ENTRY e {\n"
      "  x = f32[2,2,2,2] parameter(0)\n"
      "  s = f32[2] parameter(1)\n"
      "  m = f32[2] parameter(2)\n"
      "  v = f32[2] parameter(3)\n"
      "  dy = f32[2,2,2,2] parameter(4)\n"
      "  ROOT t = (f32[2,2,2,2], f32[2], f32[2]) batch-norm-grad(x, s, m, v, dy), epsilon=0.001,\n"
      "      feature_index=%d\n"
      "}\n";
  char text[512];
  snprintf(text, sizeof text, format, 1);
  double gx1[16] = {-0.449345708, -2.0073173, 1.05302083, -0.504950583, -0.0184692983, 0.17086564,
                    -0.44800362, 0.318620026, 1.68733048, 0.418711305, 0.0737540647, -0.27120316,
                    0.0323951505, 0.18014954, -0.364842504, 0.129285082};
  EXPECT_TUPLE(text, args, 5, 0, gx1, 16, 1e-6);
  EXPECT_TUPLE(text, args, 5, 1, ((double[]){-5.42651367, -5.54197168}), 2, 1e-6);
  EXPECT_TUPLE(text, args, 5, 2, ((double[]){5, 4}), 2, 0);
  snprintf(text, sizeof text, format, 3);
  double gx3[16] = {-1.20967746, -0.349448353, 0.803673029, -0.107759118, 0.507868767, 0.133930117,
                    -0.711597443, 0.14470388, 1.18249071, 0.123156361, 0.590882123, -0.317127079,
                    -0.28601554, 0.348684967, -0.877624094, 0.023859255};
  EXPECT_TUPLE(text, args, 5, 0, gx3, 16, 1e-6);
  EXPECT_TUPLE(text, args, 5, 1, ((double[]){-10.2180099, -0.404102087}), 2, 1e-6);
  EXPECT_TUPLE(text, args, 5, 2, ((double[]){5.5, 3.5}), 2, 0);
  for (int i = 0; i < 5; i++) rt_value_release(args[i]);
}

/* ---- random bits ---- */

static rt_value *u64_state(int count, const uint64_t *words) {
  int64_t dims[1] = {count};
  rt_value *state = rt_value_new_array(HLO_U64, 1, dims);
  for (int i = 0; i < count; i++) rt_set_u64(state, i, words[i]);
  return state;
}

static const char *rbg_format =
    "HloModule m\n"
    "ENTRY e {\n"
    "  s = u64[%d] parameter(0)\n"
    "  ROOT r = (u64[%d], %s) rng-bit-generator(s), algorithm=%s\n"
    "}\n";

/* Runs rng-bit-generator on state; returns the (state, bits) tuple or NULL. */
static rt_value *generate(const char *algorithm, const char *bits_shape, int words, const uint64_t *state_words) {
  char text[512];
  snprintf(text, sizeof text, rbg_format, words, words, bits_shape, algorithm);
  rt_value *state = u64_state(words, state_words);
  hlo_diag diag;
  rt_value *got = run(text, &state, 1, &diag);
  CHECK_MSG(got != NULL, "%s %s: %s", algorithm, bits_shape, diag.message);
  rt_value_release(state);
  if (got && (got->shape.dtype != HLO_TUPLE || got->tuple_count != 2)) {
    CHECK(!"rng-bit-generator returned no pair");
    rt_value_release(got);
    got = NULL;
  }
  return got;
}

/* Random123 kat_vectors, "threefry2x32 20" lines: counter (2 words), key (2 words), result.
 * Through rng-bit-generator: key = state[0], counter = state[1] (low word first), and a u64
 * output element joins the two result words (low first). */
static void test_threefry_known_answers(void) {
  static const struct { uint64_t key, counter, want; } kat[] = {
      {0, 0, 0x99ba4efe6b200159u},
      {UINT64_MAX, UINT64_MAX, 0xbb002be71cb996fcu},
      {0x0370734413198a2eu, 0x85a308d3243f6a88u, 0x483df7a0c4923a9cu},
  };
  for (int i = 0; i < 3; i++) {
    uint64_t state[2] = {kat[i].key, kat[i].counter};
    rt_value *got = generate("rng_three_fry", "u64[1]", 2, state);
    if (!got) continue;
    CHECK_MSG(rt_get_u64(got->tuple[1], 0) == kat[i].want, "vector %d: got %016llx", i,
              (unsigned long long)rt_get_u64(got->tuple[1], 0));
    CHECK(rt_get_u64(got->tuple[0], 0) == kat[i].key);
    CHECK(rt_get_u64(got->tuple[0], 1) == kat[i].counter + 1);
    rt_value_release(got);
  }
  /* u32[2] takes both words of one block: 6b200159, 99ba4efe for the zero vector. */
  rt_value *got = generate("rng_three_fry", "u32[2]", 2, (uint64_t[]){0, 0});
  if (got) {
    CHECK_EQ_INT(rt_get_u64(got->tuple[1], 0), 0x6b200159u);
    CHECK_EQ_INT(rt_get_u64(got->tuple[1], 1), 0x99ba4efeu);
    CHECK_EQ_INT(rt_get_u64(got->tuple[0], 1), 1); /* one block used */
    rt_value_release(got);
  }
}

/* Random123 "philox4x32 10" lines: counter (4 words), key (2 words), result (4 words). With a
 * u64[3] state: key = state[0], counter = (state[1], state[2]) low word first. */
static void test_philox_known_answers(void) {
  static const struct { uint64_t key, low, high; uint32_t want[4]; } kat[] = {
      {0, 0, 0, {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}},
      {UINT64_MAX, UINT64_MAX, UINT64_MAX, {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}},
      {0x299f31d0a4093822u, 0x85a308d3243f6a88u, 0x0370734413198a2eu,
       {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}},
  };
  for (int i = 0; i < 3; i++) {
    uint64_t state[3] = {kat[i].key, kat[i].low, kat[i].high};
    rt_value *got = generate("rng_philox", "u32[4]", 3, state);
    if (!got) continue;
    for (int w = 0; w < 4; w++)
      CHECK_MSG(rt_get_u64(got->tuple[1], w) == kat[i].want[w], "vector %d word %d: got %08llx", i, w,
                (unsigned long long)rt_get_u64(got->tuple[1], w));
    /* one block: the 128-bit counter + 1, carrying into the high word for all-ones */
    CHECK(rt_get_u64(got->tuple[0], 1) == kat[i].low + 1);
    CHECK(rt_get_u64(got->tuple[0], 2) == kat[i].high + (kat[i].low == UINT64_MAX));
    rt_value_release(got);
  }
  /* rng_default is philox: same bits. */
  rt_value *got = generate("rng_default", "u32[4]", 3, (uint64_t[]){0, 0, 0});
  if (got) {
    CHECK_EQ_INT(rt_get_u64(got->tuple[1], 0), 0x6627e8d5u);
    CHECK_EQ_INT(rt_get_u64(got->tuple[1], 3), 0x9b00dbd8u);
    rt_value_release(got);
  }
}

static bool same_bits(const rt_value *a, const rt_value *b) {
  return a->count == b->count && memcmp(a->data, b->data, (size_t)hlo_shape_bytes(&a->shape)) == 0;
}

/* Same state, same bits; the new state differs, and feeding it back gives new bits. */
static void check_deterministic(const char *algorithm, const char *shape, int words, const uint64_t *state) {
  rt_value *first = generate(algorithm, shape, words, state);
  rt_value *again = generate(algorithm, shape, words, state);
  if (!first || !again) {
    rt_value_release(first);
    rt_value_release(again);
    return;
  }
  CHECK_MSG(same_bits(first->tuple[1], again->tuple[1]), "%s %s: not deterministic", algorithm, shape);
  uint64_t next[3];
  bool moved = false;
  for (int i = 0; i < words; i++) {
    next[i] = rt_get_u64(first->tuple[0], i);
    moved = moved || next[i] != state[i];
  }
  CHECK_MSG(moved, "%s %s: the state did not advance", algorithm, shape);
  rt_value *second = generate(algorithm, shape, words, next);
  if (second) {
    CHECK_MSG(!same_bits(first->tuple[1], second->tuple[1]), "%s %s: two calls gave the same bits", algorithm,
              shape);
    rt_value_release(second);
  }
  rt_value_release(first);
  rt_value_release(again);
}

static void test_rng_bit_generator_determinism(void) {
  uint64_t state3[3] = {42, 7, 0}, state2[2] = {42, 7};
  check_deterministic("rng_three_fry", "u32[3,5]", 2, state2);
  check_deterministic("rng_three_fry", "u64[4]", 2, state2);
  check_deterministic("rng_three_fry", "u8[7]", 2, state2);
  check_deterministic("rng_philox", "u32[10]", 3, state3);
  check_deterministic("rng_philox", "u64[3,3]", 3, state3);
  check_deterministic("rng_philox", "u16[5]", 2, state2);
  check_deterministic("rng_default", "u32[]", 3, state3);

  /* How far the counter moves: three-fry u32[3,5] halves its longest dim (no even one) to
   * [3,3] = 9 counters; philox u32[10] uses ceil(10/4) = 3 blocks. */
  rt_value *got = generate("rng_three_fry", "u32[3,5]", 2, state2);
  if (got) {
    CHECK_EQ_INT(rt_get_u64(got->tuple[0], 0), 42);
    CHECK_EQ_INT(rt_get_u64(got->tuple[0], 1), 7 + 9);
    rt_value_release(got);
  }
  got = generate("rng_philox", "u32[10]", 3, state3);
  if (got) {
    CHECK_EQ_INT(rt_get_u64(got->tuple[0], 1), 7 + 3);
    CHECK_EQ_INT(rt_get_u64(got->tuple[0], 2), 0);
    rt_value_release(got);
  }
  /* A u64[2] philox state keeps the key and advances its one counter word. */
  got = generate("rng_philox", "u64[6]", 2, state2);
  if (got) {
    CHECK_EQ_INT(rt_get_u64(got->tuple[0], 0), 42);
    CHECK_EQ_INT(rt_get_u64(got->tuple[0], 1), 7 + 3); /* 6 u64 = 12 words = 3 blocks */
    rt_value_release(got);
  }
}

/* Coarse statistics on 8192 philox words: the mean of u / 2^32 and the frequency of every bit
 * are near 1/2 (standard error about 0.0032 and 0.0055). */
static void test_rng_bit_generator_statistics(void) {
  const char *algorithms[2] = {"rng_philox", "rng_three_fry"};
  for (int a = 0; a < 2; a++) {
    rt_value *got = generate(algorithms[a], "u32[8192]", a == 0 ? 3 : 2, (uint64_t[]){1234, 5, 0});
    if (!got) continue;
    const rt_value *bits = got->tuple[1];
    double sum = 0;
    int ones[32] = {0};
    for (int64_t i = 0; i < bits->count; i++) {
      uint64_t word = rt_get_u64(bits, i);
      sum += (double)word / 4294967296.0;
      for (int b = 0; b < 32; b++) ones[b] += (word >> b) & 1;
    }
    CHECK_NEAR(sum / (double)bits->count, 0.5, 0.02);
    for (int b = 0; b < 32; b++) CHECK_NEAR(ones[b] / (double)bits->count, 0.5, 0.03);
    rt_value_release(got);
  }
}

/* Random pred has no bit pattern XLA defines: a clear unsupported-type error. */
static void test_rng_bit_generator_unsupported(void) {
  static const char *text =
      "HloModule m\n"
      "ENTRY e {\n"
      "  s = u64[2] parameter(0)\n"
      "  ROOT pred_bits = (u64[2], pred[4]) rng-bit-generator(s), algorithm=rng_three_fry\n"
      "}\n";
  rt_value *state = u64_state(2, (uint64_t[]){1, 2});
  hlo_diag diag;
  rt_value *got = run(text, &state, 1, &diag);
  CHECK(got == NULL);
  rt_value_release(got);
  CHECK_EQ_INT(diag.status, HLO_ERR_UNSUPPORTED);
  CHECK_MSG(strstr(diag.message, "pred") && strstr(diag.message, "pred_bits") &&
                strstr(diag.message, "rng-bit-generator"),
            "message: %s", diag.message);
  rt_value_release(state);
}

/* The rng op: deterministic per instruction name, inside [a, b) for uniform. */
static void test_rng_op(void) {
  static const char *text =
      "HloModule m\n"
      "ENTRY e {\n"
      "  a = f32[] constant(2)\n"
      "  b = f32[] constant(3)\n"
      "  u = f32[2000] rng(a, b), distribution=rng_uniform\n"
      "  zero = f32[] constant(0)\n"
      "  one = f32[] constant(1)\n"
      "  n = f32[2000] rng(zero, one), distribution=rng_normal\n"
      "  ROOT t = (f32[2000], f32[2000]) tuple(u, n)\n"
      "}\n";
  hlo_diag diag;
  rt_value *first = run(text, NULL, 0, &diag);
  CHECK_MSG(first != NULL, "%s", diag.message);
  rt_value *second = run(text, NULL, 0, &diag);
  if (first && second) {
    CHECK(same_bits(first->tuple[0], second->tuple[0]) && same_bits(first->tuple[1], second->tuple[1]));
    const rt_value *u = first->tuple[0], *n = first->tuple[1];
    double sum = 0, normal_sum = 0, normal_squares = 0;
    bool in_range = true;
    for (int64_t i = 0; i < u->count; i++) {
      double x = rt_get_f64(u, i), z = rt_get_f64(n, i);
      in_range = in_range && x >= 2 && x < 3;
      sum += x;
      normal_sum += z;
      normal_squares += z * z;
    }
    CHECK(in_range);
    CHECK_NEAR(sum / 2000, 2.5, 0.03);           /* sd of the mean ~ 0.0065 */
    CHECK_NEAR(normal_sum / 2000, 0, 0.1);        /* ~ 0.022 */
    CHECK_NEAR(normal_squares / 2000, 1, 0.15);   /* ~ 0.032 */
  }
  rt_value_release(first);
  rt_value_release(second);
}

/* ---- collectives on one device ---- */

static const char *sum_f32 =
    "sum {\n"
    "  a = f32[] parameter(0)\n"
    "  b = f32[] parameter(1)\n"
    "  ROOT s = f32[] add(a, b)\n"
    "}\n";

static void test_all_reduce_identity(void) {
  char text[1024];
  snprintf(text, sizeof text,
           "HloModule m\n%s"
           "ENTRY e {\n"
           "  x = f32[3] parameter(0)\n"
           "  ROOT r = f32[3] all-reduce(x), replica_groups={}, to_apply=sum\n"
           "}\n",
           sum_f32);
  int64_t three[1] = {3};
  rt_value *args[2] = {make_value(HLO_F32, 1, three, (double[]){1.5, -2, 4}),
                       make_value(HLO_F32, 1, three, (double[]){7, 8, 9})};
  EXPECT_RUN(text, args, 1, ((double[]){1.5, -2, 4}), 3, 0);

  /* variadic: a tuple of both; replica_groups={{0}} is a group of one */
  snprintf(text, sizeof text,
           "HloModule m, replica_count=1\n%s"
           "ENTRY e {\n"
           "  x = f32[3] parameter(0)\n"
           "  y = f32[3] parameter(1)\n"
           "  ROOT r = (f32[3], f32[3]) all-reduce(x, y), replica_groups={{0}}, to_apply=sum\n"
           "}\n",
           sum_f32);
  EXPECT_TUPLE(text, args, 2, 1, ((double[]){7, 8, 9}), 3, 0);

  /* the async pair */
  snprintf(text, sizeof text,
           "HloModule m\n%s"
           "ENTRY e {\n"
           "  x = f32[3] parameter(0)\n"
           "  s = f32[3] all-reduce-start(x), replica_groups={}, to_apply=sum\n"
           "  ROOT d = f32[3] all-reduce-done(s)\n"
           "}\n",
           sum_f32);
  EXPECT_RUN(text, args, 1, ((double[]){1.5, -2, 4}), 3, 0);
  rt_value_release(args[0]);
  rt_value_release(args[1]);
}

static void test_other_collectives(void) {
  int64_t four[1] = {4};
  rt_value *x = make_value(HLO_S32, 1, four, (double[]){1, 2, 3, 4});
  static const char *gather_text =
      "HloModule m\n"
      "ENTRY e {\n"
      "  x = s32[4] parameter(0)\n"
      "  s = (s32[4], s32[4]) all-gather-start(x), replica_groups={{0}}, dimensions={0}\n"
      "  ROOT d = s32[4] all-gather-done(s)\n"
      "}\n";
  EXPECT_RUN(gather_text, &x, 1, ((double[]){1, 2, 3, 4}), 4, 0);
  static const char *permute_self =
      "HloModule m\n"
      "ENTRY e {\n"
      "  x = s32[4] parameter(0)\n"
      "  ROOT p = s32[4] collective-permute(x), source_target_pairs={{0,0}}\n"
      "}\n";
  EXPECT_RUN(permute_self, &x, 1, ((double[]){1, 2, 3, 4}), 4, 0);
  /* device 0 is nobody's target: zeros */
  static const char *permute_away =
      "HloModule m\n"
      "ENTRY e {\n"
      "  x = s32[4] parameter(0)\n"
      "  ROOT p = s32[4] collective-permute(x), source_target_pairs={{0,1}}\n"
      "}\n";
  EXPECT_RUN(permute_away, &x, 1, ((double[]){0, 0, 0, 0}), 4, 0);
  static const char *ids =
      "HloModule m\n"
      "ENTRY e {\n"
      "  r = u32[] replica-id()\n"
      "  p = u32[] partition-id()\n"
      "  ROOT t = (u32[], u32[]) tuple(r, p)\n"
      "}\n";
  EXPECT_TUPLE(ids, NULL, 0, 0, ((double[]){0}), 1, 0);
  EXPECT_TUPLE(ids, NULL, 0, 1, ((double[]){0}), 1, 0);

  /* More than one replica cannot be evaluated here: a clear error naming the instruction. */
  char text[1024];
  snprintf(text, sizeof text,
           "HloModule m, replica_count=2\n%s"
           "ENTRY e {\n"
           "  x = f32[3] parameter(0)\n"
           "  ROOT two_replicas = f32[3] all-reduce(x), replica_groups={{0,1}}, to_apply=sum\n"
           "}\n",
           sum_f32);
  int64_t three[1] = {3};
  rt_value *y = make_value(HLO_F32, 1, three, (double[]){1, 2, 3});
  hlo_diag diag;
  rt_value *got = run(text, &y, 1, &diag);
  CHECK(got == NULL);
  rt_value_release(got);
  CHECK_EQ_INT(diag.status, HLO_ERR_UNSUPPORTED);
  CHECK_MSG(strstr(diag.message, "two_replicas") != NULL, "message: %s", diag.message);
  rt_value_release(y);
  rt_value_release(x);
}

int main(void) {
  RUN(test_sort_ascending_descending);
  RUN(test_sort_stable_pairs);
  RUN(test_sort_nan_total_order);
  RUN(test_sort_dim0);
  RUN(test_batch_norm_inference);
  RUN(test_batch_norm_training);
  RUN(test_batch_norm_grad);
  RUN(test_threefry_known_answers);
  RUN(test_philox_known_answers);
  RUN(test_rng_bit_generator_determinism);
  RUN(test_rng_bit_generator_statistics);
  RUN(test_rng_bit_generator_unsupported);
  RUN(test_rng_op);
  RUN(test_all_reduce_identity);
  RUN(test_other_collectives);
  return TEST_REPORT();
}
