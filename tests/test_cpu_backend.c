/* The cpu backend's kernels one by one, with expected values worked out by hand (the
 * arithmetic is in the comments), corner cases (empty dims, rank 0, broadcast dim mapping,
 * grouped, strided, dilated and padded convolutions, dot batch dims), compile errors,
 * serialization and buffer reuse in the plan. */
#include "cpu_util.h"
#include "hlo/hlo.h"
#include "runtime/cpu/blob_internal.h"
#include "runtime/cpu/exec_internal.h"
#include "runtime/runtime.h"
#include "capture/capture.h"

static rt_value *f32v(int rank, const int64_t *dims, const double *v) { return make_value(HLO_F32, rank, dims, v); }

static void test_elementwise(void) {
  /* erf against tabulated values: erf(0.5) = 0.5204998778, erf(1) = 0.8427007929,
   * erf(3) = 0.9999779095 */
  rt_value *ev[] = {f32v(1, (int64_t[]){4}, (double[]){0, 0.5, -1, 3})};
  EXPECT_CPU("HloModule m\nENTRY e {\n a = f32[4] parameter(0)\n ROOT c = f32[4] erf(a)\n}\n", ev,
             ((double[]){0, 0.5204998778, -0.8427007929, 0.9999779095}), 1e-6);
  int64_t d4[] = {4};
  /* max(-0, +0) is +0 and NaN wins; 1.5 * 2 = 3 */
  rt_value *a[] = {f32v(1, d4, (double[]){-0.0, NAN, 1.5, -3}), f32v(1, d4, (double[]){0.0, 1, 2, -4})};
  EXPECT_CPU("HloModule m\nENTRY e {\n a = f32[4] parameter(0)\n b = f32[4] parameter(1)\n"
             " ROOT c = f32[4] maximum(a, b)\n}\n", a, ((double[]){0, NAN, 2, -3}), 0);
  rt_value *b[] = {f32v(1, d4, (double[]){-0.0, 2, 1.5, -3}), f32v(1, d4, (double[]){0.0, 1, 2, -4})};
  EXPECT_CPU("HloModule m\nENTRY e {\n a = f32[4] parameter(0)\n b = f32[4] parameter(1)\n"
             " m = f32[4] multiply(a, b)\n s = f32[4] subtract(m, b)\n ROOT n = f32[4] negate(s)\n}\n", b,
             ((double[]){0, -1, -1, -16}), 0); /* -(a*b - b): -(0-0), -(2-1), -(3-2), -(12+4) */
  /* s32 wraps: INT_MAX + 1 = INT_MIN; -INT_MIN = INT_MIN */
  rt_value *c[] = {make_value(HLO_S32, 1, (int64_t[]){2}, (double[]){2147483647, -2147483648.0})};
  EXPECT_CPU("HloModule m\nENTRY e {\n a = s32[2] parameter(0)\n one = s32[] constant(1)\n"
             " b = s32[2] broadcast(one), dimensions={}\n s = s32[2] add(a, b)\n ROOT n = s32[2] negate(s)\n}\n",
             c, ((double[]){2147483648.0 - 4294967296.0, 2147483647}), 0);
  /* f16: 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even gives 1 */
  rt_value *h[] = {make_value(HLO_F16, 1, (int64_t[]){2}, (double[]){1, 1}),
                   make_value(HLO_F16, 1, (int64_t[]){2}, (double[]){0.00048828125, 0.0009765625})};
  EXPECT_CPU("HloModule m\nENTRY e {\n a = f16[2] parameter(0)\n b = f16[2] parameter(1)\n ROOT c = f16[2] add(a, b)\n}\n",
             h, ((double[]){1, 1.0009765625}), 0);
  /* bf16 keeps 8 significant bits: 1 + 1/256 ties to 1, 1 + 3/256 to 1 + 4/256 */
  rt_value *bf[] = {make_value(HLO_BF16, 1, (int64_t[]){2}, (double[]){1, 1}),
                    make_value(HLO_BF16, 1, (int64_t[]){2}, (double[]){0.00390625, 0.01171875})};
  EXPECT_CPU("HloModule m\nENTRY e {\n a = bf16[2] parameter(0)\n b = bf16[2] parameter(1)\n ROOT c = bf16[2] add(a, b)\n}\n",
             bf, ((double[]){1, 1.015625}), 0);
  /* rank 0 */
  rt_value *s[] = {f32v(0, NULL, (double[]){2.5})};
  EXPECT_CPU("HloModule m\nENTRY e {\n a = f32[] parameter(0)\n ROOT c = f32[] multiply(a, a)\n}\n", s,
             ((double[]){6.25}), 0);
  /* compare + select: pick the larger of a and b by hand */
  rt_value *sel[] = {f32v(1, d4, (double[]){1, 5, -2, 0}), f32v(1, d4, (double[]){3, 4, -1, 0})};
  EXPECT_CPU("HloModule m\nENTRY e {\n a = f32[4] parameter(0)\n b = f32[4] parameter(1)\n"
             " p = pred[4] compare(a, b), direction=GT\n ROOT s = f32[4] select(p, a, b)\n}\n", sel,
             ((double[]){3, 5, -1, 0}), 0);
  /* clamp(0, x, 6) (relu6) with scalar bounds: -1 -> 0, 3 -> 3, 7 -> 6, NaN stays NaN */
  rt_value *cl[] = {f32v(1, d4, (double[]){-1, 3, 7, NAN})};
  EXPECT_CPU("HloModule m\nENTRY e {\n x = f32[4] parameter(0)\n lo = f32[] constant(0)\n hi = f32[] constant(6)\n"
             " ROOT c = f32[4] clamp(lo, x, hi)\n}\n", cl, ((double[]){0, 3, 6, NAN}), 0);
  /* convert: f32 -> s32 truncates toward zero, saturates, NaN -> 0 */
  rt_value *cv[] = {f32v(1, d4, (double[]){-2.7, 3e9, NAN, -3e9})};
  EXPECT_CPU("HloModule m\nENTRY e {\n a = f32[4] parameter(0)\n ROOT c = s32[4] convert(a)\n}\n", cv,
             ((double[]){-2, 2147483647, 0, -2147483648.0}), 0);
  /* empty arrays */
  rt_value *e[] = {f32v(2, (int64_t[]){0, 3}, NULL)};
  hlo_diag diag;
  rt_value *got = run_on(&rt_backend_cpu, "HloModule m\nENTRY e {\n a = f32[0,3] parameter(0)\n ROOT c = f32[0,3] exponential(a)\n}\n",
                         e, 1, &diag);
  CHECK_MSG(got && got->count == 0, "%s", diag.message);
  rt_value_release(got);
  rt_value_release(e[0]);
}

static void test_layout(void) {
  int64_t d2[] = {2};
  /* operand dim 0 -> result dim 0: rows repeat the element; -> dim 1: columns do */
  rt_value *a[] = {f32v(1, d2, (double[]){1, 2})};
  EXPECT_CPU("HloModule m\nENTRY e {\n a = f32[2] parameter(0)\n ROOT b = f32[2,3] broadcast(a), dimensions={0}\n}\n", a,
             ((double[]){1, 1, 1, 2, 2, 2}), 0);
  rt_value *b[] = {f32v(1, d2, (double[]){1, 2})};
  EXPECT_CPU("HloModule m\nENTRY e {\n a = f32[2] parameter(0)\n ROOT b = f32[3,2] broadcast(a), dimensions={1}\n}\n", b,
             ((double[]){1, 2, 1, 2, 1, 2}), 0);
  /* [[1,2,3],[4,5,6]] transposed */
  rt_value *t[] = {f32v(2, (int64_t[]){2, 3}, (double[]){1, 2, 3, 4, 5, 6})};
  EXPECT_CPU("HloModule m\nENTRY e {\n a = f32[2,3] parameter(0)\n ROOT t = f32[3,2] transpose(a), dimensions={1,0}\n}\n", t,
             ((double[]){1, 4, 2, 5, 3, 6}), 0);
  /* 0..9 [1:8:3] = 1, 4, 7 */
  EXPECT_CPU0("HloModule m\nENTRY e {\n i = s32[10] iota(), iota_dimension=0\n ROOT s = s32[3] slice(i), slice={[1:8:3]}\n}\n", ((double[]){1, 4, 7}), 0);
  /* [[1],[2]] ++ [[3,4],[5,6]] along dim 1 */
  rt_value *c[] = {f32v(2, (int64_t[]){2, 1}, (double[]){1, 2}), f32v(2, (int64_t[]){2, 2}, (double[]){3, 4, 5, 6})};
  EXPECT_CPU("HloModule m\nENTRY e {\n a = f32[2,1] parameter(0)\n b = f32[2,2] parameter(1)\n"
             " ROOT c = f32[2,3] concatenate(a, b), dimensions={1}\n}\n", c, ((double[]){1, 3, 4, 2, 5, 6}), 0);
  /* [1,2]: low 1, interior 1, high 2 -> [0,1,0,2,0,0] with pad value 0 */
  rt_value *p[] = {f32v(1, d2, (double[]){1, 2})};
  EXPECT_CPU("HloModule m\nENTRY e {\n a = f32[2] parameter(0)\n z = f32[] constant(0)\n"
             " ROOT p = f32[6] pad(a, z), padding=1_2_1\n}\n", p, ((double[]){0, 1, 0, 2, 0, 0}), 0);
  /* iota along dim 1, then reversed along dim 1 */
  EXPECT_CPU0("HloModule m\nENTRY e {\n i = f32[2,3] iota(), iota_dimension=1\n ROOT r = f32[2,3] reverse(i), dimensions={1}\n}\n", ((double[]){2, 1, 0, 2, 1, 0}), 0);
  /* reshape of a computed value is a view of its bytes */
  EXPECT_CPU0("HloModule m\nENTRY e {\n i = f32[6] iota(), iota_dimension=0\n r = f32[2,3] reshape(i)\n"
             " ROOT t = f32[3,2] transpose(r), dimensions={1,0}\n}\n", ((double[]){0, 3, 1, 4, 2, 5}), 0);
}

/* Boxes of short rows split over the threads, each part stepping its rows from a place in the
 * middle: a kernel [1000, 8, 3, 3] reversed in its 3x3 window (rows of 9, read backwards) and
 * a [1000, 8, 4, 4] one sliced to its first 3 rows and columns 1..3; against loops written here. */
static void test_short_rows(void) {
  enum { O = 1000, I = 8 };
  double *w = malloc(sizeof(double) * O * I * 16), *rev = malloc(sizeof(double) * O * I * 9),
         *cut = malloc(sizeof(double) * O * I * 9);
  for (int i = 0; i < O * I * 16; i++) w[i] = i % 9973;
  for (int p = 0; p < O * I; p++)
    for (int h = 0; h < 3; h++)
      for (int x = 0; x < 3; x++) {
        rev[p * 9 + h * 3 + x] = w[p * 9 + (2 - h) * 3 + (2 - x)];
        cut[p * 9 + h * 3 + x] = w[p * 16 + h * 4 + x + 1];
      }
  char text[512];
  rt_value *a[] = {f32v(4, (int64_t[]){O, I, 3, 3}, w)};
  snprintf(text, sizeof text, "HloModule m\nENTRY e {\n a = f32[%d,%d,3,3] parameter(0)\n"
           " ROOT r = f32[%d,%d,3,3] reverse(a), dimensions={2,3}\n}\n", O, I, O, I);
  expect_cpu(__LINE__, text, a, 1, rev, O * I * 9, 0);
  rt_value *b[] = {f32v(4, (int64_t[]){O, I, 4, 4}, w)};
  snprintf(text, sizeof text, "HloModule m\nENTRY e {\n a = f32[%d,%d,4,4] parameter(0)\n"
           " ROOT r = f32[%d,%d,3,3] slice(a), slice={[0:%d], [0:%d], [0:3], [1:4]}\n}\n", O, I, O, I, O, I);
  expect_cpu(__LINE__, text, b, 1, cut, O * I * 9, 0);
  free(w);
  free(rev);
  free(cut);
}

static void test_reduce(void) {
  const char *sum =
      "HloModule m\nadd {\n x = f32[] parameter(0)\n y = f32[] parameter(1)\n ROOT s = f32[] add(x, y)\n}\n"
      "max {\n x = f32[] parameter(0)\n y = f32[] parameter(1)\n ROOT s = f32[] maximum(x, y)\n}\n";
  char text[1024];
  /* [[1,2,3],[4,5,6]]: columns sum to 5 7 9 (leading dim: the row-major walk) */
  rt_value *a[] = {f32v(2, (int64_t[]){2, 3}, (double[]){1, 2, 3, 4, 5, 6})};
  snprintf(text, sizeof text, "%sENTRY e {\n a = f32[2,3] parameter(0)\n z = f32[] constant(0)\n"
           " ROOT r = f32[3] reduce(a, z), dimensions={0}, to_apply=add\n}\n", sum);
  EXPECT_CPU(text, a, ((double[]){5, 7, 9}), 0);
  /* rows' maxima 3 and 6 (trailing dim: contiguous runs); init 4 raises the first to 4 */
  rt_value *b[] = {f32v(2, (int64_t[]){2, 3}, (double[]){1, 2, 3, 4, 5, 6})};
  snprintf(text, sizeof text, "%sENTRY e {\n a = f32[2,3] parameter(0)\n z = f32[] constant(4)\n"
           " ROOT r = f32[2] reduce(a, z), dimensions={1}, to_apply=max\n}\n", sum);
  EXPECT_CPU(text, b, ((double[]){4, 6}), 0);
  /* reducing an empty dim gives the init value */
  rt_value *c[] = {f32v(2, (int64_t[]){0, 3}, NULL)};
  snprintf(text, sizeof text, "%sENTRY e {\n a = f32[0,3] parameter(0)\n z = f32[] constant(7)\n"
           " ROOT r = f32[3] reduce(a, z), dimensions={0}, to_apply=add\n}\n", sum);
  EXPECT_CPU(text, c, ((double[]){7, 7, 7}), 0);
  /* 2x2 max pooling, stride 2, on 0..15 as 4x4: maxima 5 7 13 15 */
  snprintf(text, sizeof text, "%sENTRY e {\n i = f32[16] iota(), iota_dimension=0\n a = f32[4,4] reshape(i)\n"
           " z = f32[] constant(-1000)\n ROOT r = f32[2,2] reduce-window(a, z), window={size=2x2 stride=2x2}, to_apply=max\n}\n", sum);
  EXPECT_CPU0(text, ((double[]){5, 7, 13, 15}), 0);
  /* 1-D sum pooling of [1,2,3] with size 2 and padding 1 on both sides: 0+1, 2+3 taps
   * stride 2 -> windows [pad,1], [2,3] = 1, 5 */
  rt_value *d[] = {f32v(1, (int64_t[]){3}, (double[]){1, 2, 3})};
  snprintf(text, sizeof text, "%sENTRY e {\n a = f32[3] parameter(0)\n z = f32[] constant(0)\n"
           " ROOT r = f32[2] reduce-window(a, z), window={size=2 stride=2 pad=1_1}, to_apply=add\n}\n", sum);
  EXPECT_CPU(text, d, ((double[]){1, 5}), 0);
}

/* f32 maximum and minimum over the last dim (a softmax's row maximum) fold each row in vector
 * lanes and again in order when the row holds a NaN or its result is a zero: rows of 1 to
 * 40 elements and 197 with NaNs (two payloads, at the start, middle and end), zeros of both
 * signs, infinities and an init that is NaN, against the in-order fold written here, bit for
 * bit (the first NaN comes out; +0 wins a maximum over -0, -0 a minimum). */
static float fold_extreme(bool max, float acc, float v) {
  if (isnan(acc)) return acc;
  if (isnan(v)) return v;
  if (acc == v) return (signbit(acc) == max) ? v : acc;
  return (max ? v > acc : v < acc) ? v : acc;
}

static void test_reduce_extreme_rows(void) {
  const char *reducers =
      "HloModule m\nmax {\n x = f32[] parameter(0)\n y = f32[] parameter(1)\n ROOT s = f32[] maximum(x, y)\n}\n"
      "min {\n x = f32[] parameter(0)\n y = f32[] parameter(1)\n ROOT s = f32[] minimum(x, y)\n}\n";
  uint32_t nan_a = 0x7fc00001u, nan_b = 0xffc00002u;
  float na, nb;
  memcpy(&na, &nan_a, sizeof na);
  memcpy(&nb, &nan_b, sizeof nb);
  enum { ROWS = 12 };
  int mismatches = 0, compared = 0;
  for (int n = 1; n <= 197; n = n < 40 ? n + 1 : 197) {
    for (int op = 0; op < 2; op++)
      for (int nan_init = 0; nan_init < 2; nan_init++) {
        int64_t dims[2] = {ROWS, n};
        hlo_shape shape = hlo_shape_make(HLO_F32, 2, dims);
        rt_value *x = rt_value_new(&shape);
        float *v = x->data;
        for (int r = 0; r < ROWS; r++)
          for (int i = 0; i < n; i++) {
            float e = (float)((r * 31 + i * 17) % 23) - 11;
            if (r == 1 || r == 2) e = 0.0f;                 /* all zeros: +0 ... */
            if (r == 2 && i == n / 2) e = -0.0f;             /* ... and one -0 */
            if (r == 3) e = -0.0f;                           /* all -0 */
            if (r == 4 && i == n - 1) e = INFINITY;
            if (r == 5 && i == 0) e = -INFINITY;
            if (r == 6 && i == n / 2) e = na;                /* NaNs: the first comes out */
            if (r == 7 && i == 0) e = nb;
            if (r == 7 && i == n - 1) e = na;
            if (r == 8) e = -(float)i - 0.5f;                /* negatives only */
            v[r * n + i] = e;
          }
        float init = nan_init ? nb : op == 0 ? -INFINITY : INFINITY;
        char text[1024];
        snprintf(text, sizeof text, "%sENTRY e {\n a = f32[%d,%d] parameter(0)\n z = f32[] parameter(1)\n"
                 " ROOT r = f32[%d] reduce(a, z), dimensions={1}, to_apply=%s\n}\n",
                 reducers, ROWS, n, ROWS, op == 0 ? "max" : "min");
        hlo_shape scalar = hlo_shape_make(HLO_F32, 0, NULL);
        rt_value *z = rt_value_new(&scalar);
        *(float *)z->data = init;
        rt_value *args[2] = {x, z};
        hlo_diag diag;
        rt_value *got = run_on(&rt_backend_cpu, text, args, 2, &diag);
        CHECK_MSG(got != NULL, "n %d: %s", n, diag.message);
        for (int r = 0; got && r < ROWS; r++) {
          float want = init;
          for (int i = 0; i < n; i++) want = fold_extreme(op == 0, want, v[r * n + i]);
          float have = ((const float *)got->data)[r];
          mismatches += memcmp(&want, &have, sizeof want) != 0;
          compared++;
        }
        rt_value_release(got);
        rt_value_release(x);
        rt_value_release(z);
      }
    if (n == 197) break;
  }
  CHECK_EQ_INT(mismatches, 0);
  CHECK_EQ_INT(compared, 41 * 4 * ROWS);
}

/* A reduce over middle dims with the first kept is split over the first dim's slices (a
 * weight [256, 36, 4096] summed over its 36), four rows of an output row at a time: f32
 * sums of small integers (exact in any order), max, s32 sums that wrap, f64 sums over one
 * and two dims, and f32 sums that round, bit for bit as a loop adding in row order does
 * (11 rows per output: four, four, two, one); against loops written here. */
static void test_reduce_split(void) {
  const char *reducers =
      "HloModule m\nadd {\n x = f32[] parameter(0)\n y = f32[] parameter(1)\n ROOT s = f32[] add(x, y)\n}\n"
      "max {\n x = f32[] parameter(0)\n y = f32[] parameter(1)\n ROOT s = f32[] maximum(x, y)\n}\n"
      "addi {\n x = s32[] parameter(0)\n y = s32[] parameter(1)\n ROOT s = s32[] add(x, y)\n}\n"
      "addd {\n x = f64[] parameter(0)\n y = f64[] parameter(1)\n ROOT s = f64[] add(x, y)\n}\n";
  enum { A = 48, J = 11, N = 700 };
  double *x = malloc(sizeof(double) * A * J * N), *sum = malloc(sizeof(double) * A * N),
         *most = malloc(sizeof(double) * A * N), *wrapped = malloc(sizeof(double) * A * N),
         *sum2 = malloc(sizeof(double) * A);
  for (int i = 0; i < A * J * N; i++) x[i] = (i * 37 % 101) - 50;
  for (int a = 0; a < A; a++) {
    sum2[a] = 0;
    for (int n = 0; n < N; n++) {
      double s = 0, m = -1000;
      uint32_t w = 7;
      for (int j = 0; j < J; j++) {
        double v = x[(a * J + j) * N + n];
        s += v, m = v > m ? v : m;
        w += (uint32_t)(int32_t)v * 50000000u;
      }
      sum[a * N + n] = s, most[a * N + n] = m, wrapped[a * N + n] = (double)(int32_t)w;
      sum2[a] += s;
    }
  }
  char text[2048];
  const char *cases[][3] = {{"f32", "add", "0"}, {"f32", "max", "-1000"}};
  for (int c = 0; c < 2; c++) {
    rt_value *args[] = {make_value(HLO_F32, 3, (int64_t[]){A, J, N}, x)};
    snprintf(text, sizeof text, "%sENTRY e {\n a = f32[%d,%d,%d] parameter(0)\n z = f32[] constant(%s)\n"
             " ROOT r = f32[%d,%d] reduce(a, z), dimensions={1}, to_apply=%s\n}\n",
             reducers, A, J, N, cases[c][2], A, N, cases[c][1]);
    expect_cpu(__LINE__, text, args, 1, c == 0 ? sum : most, A * N, 0);
  }
  /* s32: each element times 50,000,000 (the product wraps), summed from 7 */
  double *scaled = malloc(sizeof(double) * A * J * N);
  for (int i = 0; i < A * J * N; i++) scaled[i] = (double)(int32_t)((uint32_t)(int32_t)x[i] * 50000000u);
  rt_value *ints[] = {make_value(HLO_S32, 3, (int64_t[]){A, J, N}, scaled)};
  snprintf(text, sizeof text, "%sENTRY e {\n a = s32[%d,%d,%d] parameter(0)\n z = s32[] constant(7)\n"
           " ROOT r = s32[%d,%d] reduce(a, z), dimensions={1}, to_apply=addi\n}\n", reducers, A, J, N, A, N);
  expect_cpu(__LINE__, text, ints, 1, wrapped, A * N, 0);
  rt_value *wide[] = {make_value(HLO_F64, 3, (int64_t[]){A, J, N}, x)};
  snprintf(text, sizeof text, "%sENTRY e {\n a = f64[%d,%d,%d] parameter(0)\n z = f64[] constant(0)\n"
           " ROOT r = f64[%d] reduce(a, z), dimensions={1,2}, to_apply=addd\n}\n", reducers, A, J, N, A);
  expect_cpu(__LINE__, text, wide, 1, sum2, A, 0);
  rt_value *wide2[] = {make_value(HLO_F64, 3, (int64_t[]){A, J, N}, x)};
  snprintf(text, sizeof text, "%sENTRY e {\n a = f64[%d,%d,%d] parameter(0)\n z = f64[] constant(0)\n"
           " ROOT r = f64[%d,%d] reduce(a, z), dimensions={1}, to_apply=addd\n}\n", reducers, A, J, N, A, N);
  expect_cpu(__LINE__, text, wide2, 1, sum, A * N, 0);
  for (int i = 0; i < A * J * N; i++) x[i] = (float)((i * 37 % 101) * 0.013 - 0.6);
  for (int a = 0; a < A; a++)
    for (int n = 0; n < N; n++) {
      float acc = 0.25f;
      for (int j = 0; j < J; j++) acc = acc + (float)x[(a * J + j) * N + n];
      sum[a * N + n] = acc;
    }
  rt_value *rounding[] = {make_value(HLO_F32, 3, (int64_t[]){A, J, N}, x)};
  snprintf(text, sizeof text, "%sENTRY e {\n a = f32[%d,%d,%d] parameter(0)\n z = f32[] constant(0.25)\n"
           " ROOT r = f32[%d,%d] reduce(a, z), dimensions={1}, to_apply=add\n}\n", reducers, A, J, N, A, N);
  expect_cpu(__LINE__, text, rounding, 1, sum, A * N, 0);
  free(scaled);
  free(x);
  free(sum);
  free(most);
  free(wrapped);
  free(sum2);
}

/* Pooling windows (over the last two dims) against loops written here: max 3x3 stride 2
 * with padding 1 (resnet's stem), sums of 2x3 windows with uneven strides and padding on
 * f64 and s32, and windows that fall wholly in padding (the init value). */
typedef struct pool_case {
  const char *type, *reducer, *init;
  int64_t kh, kw, sh, sw, ph0, ph1, pw0, pw1;
  bool max;
} pool_case;

static void test_pool(void) {
  const char *reducers =
      "HloModule m\nmax {\n x = f32[] parameter(0)\n y = f32[] parameter(1)\n ROOT s = f32[] maximum(x, y)\n}\n"
      "addd {\n x = f64[] parameter(0)\n y = f64[] parameter(1)\n ROOT s = f64[] add(x, y)\n}\n"
      "addi {\n x = s32[] parameter(0)\n y = s32[] parameter(1)\n ROOT s = s32[] add(x, y)\n}\n";
  pool_case cases[] = {{"f32", "max", "-1000", 3, 3, 2, 2, 1, 1, 1, 1, true},
                       {"f64", "addd", "0.5", 2, 3, 1, 2, 0, 1, 1, 2, false},
                       {"s32", "addi", "3", 2, 3, 1, 2, 0, 1, 1, 2, false},
                       {"f32", "max", "-1000", 2, 2, 2, 2, 0, 4, 0, 3, true}};
  enum { B = 2, C = 3, H = 7, W = 6 };
  double x[B * C * H * W], want[B * C * 16 * 16];
  for (int i = 0; i < B * C * H * W; i++) x[i] = (i * 7919 % 101) - 50;
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    const pool_case *pc = &cases[c];
    int64_t oh = (H + pc->ph0 + pc->ph1 - pc->kh) / pc->sh + 1, ow = (W + pc->pw0 + pc->pw1 - pc->kw) / pc->sw + 1;
    double init = atof(pc->init);
    for (int64_t p = 0; p < B * C; p++)
      for (int64_t i = 0; i < oh; i++)
        for (int64_t k = 0; k < ow; k++) {
          double acc = init;
          for (int64_t a = 0; a < pc->kh; a++)
            for (int64_t b = 0; b < pc->kw; b++) {
              int64_t h = i * pc->sh + a - pc->ph0, w = k * pc->sw + b - pc->pw0;
              if (h < 0 || h >= H || w < 0 || w >= W) continue;
              double v = x[(p * H + h) * W + w];
              acc = pc->max ? (v > acc ? v : acc) : acc + v;
            }
          want[(p * oh + i) * ow + k] = acc;
        }
    char text[2048];
    snprintf(text, sizeof text,
             "%sENTRY e {\n a = %s[%d,%d,%d,%d] parameter(0)\n z = %s[] constant(%s)\n"
             " ROOT r = %s[%d,%d,%lld,%lld] reduce-window(a, z), window={size=1x1x%lldx%lld stride=1x1x%lldx%lld "
             "pad=0_0x0_0x%lld_%lldx%lld_%lld}, to_apply=%s\n}\n",
             reducers, pc->type, B, C, H, W, pc->type, pc->init, pc->type, B, C, (long long)oh, (long long)ow,
             (long long)pc->kh, (long long)pc->kw, (long long)pc->sh, (long long)pc->sw, (long long)pc->ph0,
             (long long)pc->ph1, (long long)pc->pw0, (long long)pc->pw1, pc->reducer);
    hlo_dtype type = pc->type[0] == 's' ? HLO_S32 : pc->type[1] == '6' ? HLO_F64 : HLO_F32;
    rt_value *args[] = {make_value(type, 4, (int64_t[]){B, C, H, W}, x)};
    expect_cpu(__LINE__, text, args, 1, want, B * C * oh * ow, 0);
  }
}

/* An f32 sum over whole planes (a classifier's global average pool before its division), as
 * a reduce-window and as a reduce over the last two dims, adds each plane in row-major order
 * from the init, as a loop written here does, bit for bit with values that round: 21 planes
 * (eight at a time, then a tail of five) of 13x13. */
static void test_global_sum_pool(void) {
  enum { B = 3, C = 7, H = 13, W = 13 };
  double *x = malloc(sizeof(double) * B * C * H * W), want[B * C];
  for (int i = 0; i < B * C * H * W; i++) x[i] = (float)((i * 7919 % 1013) * 0.0137 - 6.1);
  for (int p = 0; p < B * C; p++) {
    float acc = 0.25f;
    for (int t = 0; t < H * W; t++) acc = acc + (float)x[p * H * W + t];
    want[p] = acc;
  }
  char text[1024];
  snprintf(text, sizeof text,
           "HloModule m\nadd {\n x = f32[] parameter(0)\n y = f32[] parameter(1)\n ROOT s = f32[] add(x, y)\n}\n"
           "ENTRY e {\n a = f32[%d,%d,%d,%d] parameter(0)\n z = f32[] constant(0.25)\n"
           " ROOT r = f32[%d,%d,1,1] reduce-window(a, z), window={size=1x1x%dx%d}, to_apply=add\n}\n",
           B, C, H, W, B, C, H, W);
  rt_value *args[] = {make_value(HLO_F32, 4, (int64_t[]){B, C, H, W}, x)};
  expect_cpu(__LINE__, text, args, 1, want, B * C, 0);
  snprintf(text, sizeof text,
           "HloModule m\nadd {\n x = f32[] parameter(0)\n y = f32[] parameter(1)\n ROOT s = f32[] add(x, y)\n}\n"
           "ENTRY e {\n a = f32[%d,%d,%d,%d] parameter(0)\n z = f32[] constant(0.25)\n"
           " ROOT r = f32[%d,%d] reduce(a, z), dimensions={2,3}, to_apply=add\n}\n",
           B, C, H, W, B, C);
  rt_value *reduced[] = {make_value(HLO_F32, 4, (int64_t[]){B, C, H, W}, x)};
  expect_cpu(__LINE__, text, reduced, 1, want, B * C, 0);
  free(x);
}

/* Max and min pools keep the reference's rules: a NaN in a window wins, +0 is the larger
 * zero and -0 the smaller (values worked out by hand). */
static void test_pool_special(void) {
  static const char *const texts[2] = {
      "HloModule m\nmx {\n x = f32[] parameter(0)\n y = f32[] parameter(1)\n ROOT s = f32[] maximum(x, y)\n}\n"
      "ENTRY e {\n a = f32[1,1,3,4] parameter(0)\n z = f32[] constant(-inf)\n"
      " ROOT r = f32[1,1,2,2] reduce-window(a, z), window={size=1x1x2x2 stride=1x1x1x2}, to_apply=mx\n}\n",
      "HloModule m\nmn {\n x = f32[] parameter(0)\n y = f32[] parameter(1)\n ROOT s = f32[] minimum(x, y)\n}\n"
      "ENTRY e {\n a = f32[1,1,3,4] parameter(0)\n z = f32[] constant(inf)\n"
      " ROOT r = f32[1,1,2,2] reduce-window(a, z), window={size=1x1x2x2 stride=1x1x1x2}, to_apply=mn\n}\n"};
  const double x[12] = {-0.0, 0.0, 5, NAN, 0.0, -0.0, 1, 2, -3, -0.0, -1, -2};
  const float want[2][4] = {{0.0f, NAN, 0.0f, 2}, {-0.0f, NAN, -3, -2}};
  for (int k = 0; k < 2; k++) {
    rt_value *args[] = {make_value(HLO_F32, 4, (int64_t[]){1, 1, 3, 4}, x)};
    hlo_diag diag;
    rt_value *got = run_on(&rt_backend_cpu, texts[k], args, 1, &diag);
    rt_value_release(args[0]);
    CHECK_MSG(got != NULL, "%s", diag.message);
    for (int i = 0; got && i < 4; i++) {
      float g = ((const float *)got->data)[i], w = want[k][i];
      CHECK_MSG(isnan(w) ? isnan(g) : g == w && signbit(g) == signbit(w), "%s pool [%d]: got %g want %g",
                k ? "min" : "max", i, g, w);
    }
    rt_value_release(got);
  }
}

/* The pool tests again with the pools run by each other vector variant this processor has
 * (runtime/cpu/pooling.c follows the fused groups' choice): each must give the same values. */
static void test_pool_variants(void) {
  rt_cpu_isa widest = rt_cpu_isa_in_use();
  int ran = 0;
  for (int isa = 0; isa < RT_CPU_ISA_COUNT; isa++) {
    if (isa == (int)widest || !rt_cpu_use_isa((rt_cpu_isa)isa)) continue;
    test_pool();
    test_pool_special();
    ran++;
  }
  CHECK(ran >= 1); /* the portable loops at least */
  CHECK(rt_cpu_use_isa(widest));
}

static void test_dot(void) {
  /* [[1,2,3],[4,5,6]] x [[7,8],[9,10],[11,12]] = [[58,64],[139,154]] */
  rt_value *a[] = {f32v(2, (int64_t[]){2, 3}, (double[]){1, 2, 3, 4, 5, 6}),
                   f32v(2, (int64_t[]){3, 2}, (double[]){7, 8, 9, 10, 11, 12})};
  EXPECT_CPU("HloModule m\nENTRY e {\n a = f32[2,3] parameter(0)\n b = f32[3,2] parameter(1)\n"
             " ROOT d = f32[2,2] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n", a,
             ((double[]){58, 64, 139, 154}), 0);
  /* the same with rhs given as [n, k] = [[7,9,11],[8,10,12]]: the transpose flag */
  rt_value *b[] = {f32v(2, (int64_t[]){2, 3}, (double[]){1, 2, 3, 4, 5, 6}),
                   f32v(2, (int64_t[]){2, 3}, (double[]){7, 9, 11, 8, 10, 12})};
  EXPECT_CPU("HloModule m\nENTRY e {\n a = f32[2,3] parameter(0)\n b = f32[2,3] parameter(1)\n"
             " ROOT d = f32[2,2] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={1}\n}\n", b,
             ((double[]){58, 64, 139, 154}), 0);
  /* the same with lhs given as [k, m] = [[1,4],[2,5],[3,6]] (contracting dim 0): the
   * transpose flag on A */
  rt_value *at[] = {f32v(2, (int64_t[]){3, 2}, (double[]){1, 4, 2, 5, 3, 6}),
                    f32v(2, (int64_t[]){3, 2}, (double[]){7, 8, 9, 10, 11, 12})};
  EXPECT_CPU("HloModule m\nENTRY e {\n a = f32[3,2] parameter(0)\n b = f32[3,2] parameter(1)\n"
             " ROOT d = f32[2,2] dot(a, b), lhs_contracting_dims={0}, rhs_contracting_dims={0}\n}\n", at,
             ((double[]){58, 64, 139, 154}), 0);
  /* batch dims: batch 0 is [1,2].[3,4] = 11, batch 1 is [5,6].[7,8] = 83; lhs laid out
   * [k, b] (contracting dim first) needs the packing copy: lhs = [[1,5],[2,6]] */
  rt_value *c[] = {make_value(HLO_F64, 2, (int64_t[]){2, 2}, (double[]){1, 5, 2, 6}),
                   make_value(HLO_F64, 2, (int64_t[]){2, 2}, (double[]){3, 4, 7, 8})};
  EXPECT_CPU("HloModule m\nENTRY e {\n a = f64[2,2] parameter(0)\n b = f64[2,2] parameter(1)\n"
             " ROOT d = f64[2] dot(a, b), lhs_batch_dims={1}, lhs_contracting_dims={0}, rhs_batch_dims={0},"
             " rhs_contracting_dims={1}\n}\n", c, ((double[]){11, 83}), 0);
  /* a zero-length contraction sums nothing: zeros */
  rt_value *z[] = {f32v(2, (int64_t[]){2, 0}, NULL), f32v(2, (int64_t[]){0, 2}, NULL)};
  EXPECT_CPU("HloModule m\nENTRY e {\n a = f32[2,0] parameter(0)\n b = f32[0,2] parameter(1)\n"
             " ROOT d = f32[2,2] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n", z,
             ((double[]){0, 0, 0, 0}), 0);
}

/* Transposes big enough for the tiled copy (16 x 16 tiles, ragged edges): in[b][i][j] =
 * 1000b + 100i + j, so out[b][j][i] must hold exactly that; f64 [40,17] -> [17,40] too. */
static void test_transpose_tiled(void) {
  static double in[2 * 20 * 33], want[2 * 33 * 20], in2[40 * 17], want2[17 * 40];
  for (int b = 0; b < 2; b++)
    for (int i = 0; i < 20; i++)
      for (int j = 0; j < 33; j++) {
        in[(b * 20 + i) * 33 + j] = 1000 * b + 100 * i + j;
        want[(b * 33 + j) * 20 + i] = 1000 * b + 100 * i + j;
      }
  for (int i = 0; i < 40; i++)
    for (int j = 0; j < 17; j++) in2[i * 17 + j] = want2[j * 40 + i] = i * 17 + j + 0.5;
  rt_value *a[] = {f32v(3, (int64_t[]){2, 20, 33}, in)};
  EXPECT_CPU("HloModule m\nENTRY e {\n x = f32[2,20,33] parameter(0)\n"
             " ROOT t = f32[2,33,20] transpose(x), dimensions={0,2,1}\n}\n", a, want, 0);
  rt_value *c[] = {make_value(HLO_F64, 2, (int64_t[]){40, 17}, in2)};
  EXPECT_CPU("HloModule m\nENTRY e {\n x = f64[40,17] parameter(0)\n"
             " ROOT t = f64[17,40] transpose(x), dimensions={1,0}\n}\n", c, want2, 0);
}

/* An embedding lookup (a gather of whole rows) copies rows: table row r is (10r, 10r+1,
 * 10r+2); ids outside [0, 5) are clamped into it as XLA's gather clamps start indices (-1
 * reads row 0, 7 and 9 read row 4). s32 ids [2,3] with the index vector implied, s64 ids
 * [4,1] with it as their last dim, u8 ids, and an f64 table. The kernel is the plan's
 * fast step, not the reference's. */
static void test_gather_rows(void) {
  double table[15], want[18];
  for (int r = 0; r < 5; r++)
    for (int c = 0; c < 3; c++) table[r * 3 + c] = 10 * r + c;
  const int rows[6] = {0, 4, 2, 0, 4, 1};
  for (int i = 0; i < 6; i++)
    for (int c = 0; c < 3; c++) want[i * 3 + c] = 10 * rows[i] + c;
  const char *s32 = "HloModule m\nENTRY e {\n t = f32[5,3] parameter(0)\n i = s32[2,3] parameter(1)\n"
                    " ROOT g = f32[2,3,3] gather(t, i), offset_dims={2}, collapsed_slice_dims={0},"
                    " start_index_map={0}, index_vector_dim=2, slice_sizes={1,3}\n}\n";
  rt_value *a[] = {f32v(2, (int64_t[]){5, 3}, table), make_value(HLO_S32, 2, (int64_t[]){2, 3}, (double[]){0, 4, 2, -1, 7, 1})};
  EXPECT_CPU(s32, a, want, 0);
  const char *s64 = "HloModule m\nENTRY e {\n t = f64[5,3] parameter(0)\n i = s64[4,1] parameter(1)\n"
                    " ROOT g = f64[4,3] gather(t, i), offset_dims={1}, collapsed_slice_dims={0},"
                    " start_index_map={0}, index_vector_dim=1, slice_sizes={1,3}\n}\n";
  rt_value *b[] = {make_value(HLO_F64, 2, (int64_t[]){5, 3}, table), make_value(HLO_S64, 2, (int64_t[]){4, 1}, (double[]){4, 2, -1, 9})};
  const double want_b[12] = {40, 41, 42, 20, 21, 22, 0, 1, 2, 40, 41, 42};
  EXPECT_CPU(s64, b, want_b, 0);
  const char *u8 = "HloModule m\nENTRY e {\n t = f32[5,3] parameter(0)\n i = u8[3] parameter(1)\n"
                   " ROOT g = f32[3,3] gather(t, i), offset_dims={1}, collapsed_slice_dims={0},"
                   " start_index_map={0}, index_vector_dim=1, slice_sizes={1,3}\n}\n";
  rt_value *c[] = {f32v(2, (int64_t[]){5, 3}, table), make_value(HLO_U8, 1, (int64_t[]){3}, (double[]){3, 200, 0})};
  const double want_c[9] = {30, 31, 32, 40, 41, 42, 0, 1, 2};
  EXPECT_CPU(u8, c, want_c, 0);
  /* the reference evaluator clamps alike */
  hlo_diag diag = {0};
  rt_value *r[] = {f32v(2, (int64_t[]){5, 3}, table), make_value(HLO_S32, 2, (int64_t[]){2, 3}, (double[]){0, 4, 2, -1, 7, 1})};
  rt_value *ref = run_on(&rt_backend_reference, s32, r, 2, &diag);
  CHECK_MSG(ref != NULL, "%s", diag.message);
  if (ref) expect_values(__LINE__, ref, want, 18, 0);
  rt_value_release(ref);
  rt_value_release(r[0]);
  rt_value_release(r[1]);
  /* the plan runs it as a fast step */
  hlo_module *module = hlo_parse_module(s32, strlen(s32), "t", &diag);
  rt_cpu_plan *plan = module ? rt_cpu_plan_build(module, NULL, &diag) : NULL;
  CHECK_MSG(plan != NULL, "%s", diag.message);
  if (plan) CHECK_EQ_INT(plan->steps[module->entry->root->id].kind, RT_STEP_FAST);
  rt_cpu_plan_free(plan);
  hlo_module_free(module);
}

/* A large single-row product against a [k][n] matrix (a weight stored [in, out]) is summed
 * in blocks of k into partials then added up: a and B hold small integers from a hash of
 * their indices (no pattern whose sum over a block of k vanishes), so every sum is exact
 * and c[j] is computed here by plain loops. K x N is
 * 16.8M elements (16 blocks, uneven) for f32, 2.2M (16 blocks) for f64; 600 x 500 (2 blocks)
 * for f32 again. */
static void expect_split_gemv(hlo_dtype dtype, const char *type, int64_t k, int64_t n) {
  double *a = malloc(sizeof(double) * (size_t)k), *b = malloc(sizeof(double) * (size_t)(k * n));
  double *want = calloc((size_t)n, sizeof(double));
  for (int64_t i = 0; i < k; i++) a[i] = (double)((uint32_t)(i * 2654435761u) >> 29) - 3;
  for (int64_t i = 0; i < k; i++)
    for (int64_t j = 0; j < n; j++) {
      b[i * n + j] = (double)((uint32_t)((i * n + j) * 2246822519u) >> 29) - 4;
      want[j] += a[i] * b[i * n + j];
    }
  char text[512];
  snprintf(text, sizeof text,
           "HloModule m\nENTRY e {\n a = %s[1,%lld] parameter(0)\n b = %s[%lld,%lld] parameter(1)\n"
           " ROOT d = %s[1,%lld] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n",
           type, (long long)k, type, (long long)k, (long long)n, type, (long long)n);
  rt_value *args[] = {make_value(dtype, 2, (int64_t[]){1, k}, a), make_value(dtype, 2, (int64_t[]){k, n}, b)};
  expect_cpu(__LINE__, text, args, 2, want, n, 0);
  free(a);
  free(b);
  free(want);
}

static void test_split_gemv(void) {
  expect_split_gemv(HLO_F32, "f32", 4099, 4097);
  expect_split_gemv(HLO_F64, "f64", 1100, 2001);
  expect_split_gemv(HLO_F32, "f32", 600, 500);
}

/* Single-row products take the gemv path, in column blocks of 256: 300 columns are two
 * blocks. a = [1, 2, 3], B[k][j] = (k + 1) * j, so c[j] = (1 + 4 + 9) * j = 14j; batch b of
 * the batched f64 case scales B by (b + 1): 14j(b + 1). */
static void test_gemv(void) {
  enum { N = 300 };
  static double bkn[3 * N], bnk[N * 3], bb[2 * 3 * N], want[N], want2[2 * N];
  for (int j = 0; j < N; j++) {
    for (int k = 0; k < 3; k++) {
      bkn[k * N + j] = bnk[j * 3 + k] = (k + 1) * j;
      for (int b = 0; b < 2; b++) bb[(b * 3 + k) * N + j] = (b + 1) * (k + 1) * j;
    }
    want[j] = 14.0 * j;
    want2[j] = 14.0 * j, want2[N + j] = 28.0 * j;
  }
  rt_value *a[] = {f32v(2, (int64_t[]){1, 3}, (double[]){1, 2, 3}), f32v(2, (int64_t[]){3, N}, bkn)};
  EXPECT_CPU("HloModule m\nENTRY e {\n a = f32[1,3] parameter(0)\n b = f32[3,300] parameter(1)\n"
             " ROOT d = f32[1,300] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n", a, want, 0);
  rt_value *t[] = {f32v(2, (int64_t[]){1, 3}, (double[]){1, 2, 3}), f32v(2, (int64_t[]){N, 3}, bnk)};
  EXPECT_CPU("HloModule m\nENTRY e {\n a = f32[1,3] parameter(0)\n b = f32[300,3] parameter(1)\n"
             " ROOT d = f32[1,300] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={1}\n}\n", t, want, 0);
  /* the same through an explicit transpose, which the simplifier folds into the dot */
  rt_value *tt[] = {f32v(2, (int64_t[]){1, 3}, (double[]){1, 2, 3}), f32v(2, (int64_t[]){N, 3}, bnk)};
  EXPECT_CPU("HloModule m\nENTRY e {\n a = f32[1,3] parameter(0)\n b = f32[300,3] parameter(1)\n"
             " bt = f32[3,300] transpose(b), dimensions={1,0}\n"
             " ROOT d = f32[1,300] dot(a, bt), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n", tt, want, 0);
  rt_value *c[] = {make_value(HLO_F64, 3, (int64_t[]){2, 1, 3}, (double[]){1, 2, 3, 1, 2, 3}),
                   make_value(HLO_F64, 3, (int64_t[]){2, 3, N}, bb)};
  EXPECT_CPU("HloModule m\nENTRY e {\n a = f64[2,1,3] parameter(0)\n b = f64[2,3,300] parameter(1)\n"
             " ROOT d = f64[2,1,300] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0},"
             " rhs_contracting_dims={1}\n}\n", c, want2, 0);
}

/* Two to eight rows against a matrix stored [n][k] (a Linear layer's weight, the transpose
 * folded into the dot) take dot_rows.c: whole tiles of 4 rows x 3 columns, then the rows
 * left (m % 4) and the columns left (n % 3), k in vectors of 8 then the k % 8 left. Small
 * integers from a hash of the indices keep every sum exact, so c is computed here by plain
 * loops and must match to the bit: m = 2, 3, 5 and 8, n = 7 (two tiles and one column) and
 * 100 (two column blocks of 96), k = 5 (no whole vector), 13 and 40; then a batch of two. */
static void expect_few_rows(int64_t batch, int64_t m, int64_t n, int64_t k) {
  double *a = malloc(sizeof(double) * (size_t)(batch * m * k)), *b = malloc(sizeof(double) * (size_t)(batch * n * k));
  double *want = calloc((size_t)(batch * m * n), sizeof(double));
  for (int64_t i = 0; i < batch * m * k; i++) a[i] = (double)((uint32_t)(i * 2654435761u) >> 29) - 3;
  for (int64_t i = 0; i < batch * n * k; i++) b[i] = (double)((uint32_t)(i * 2246822519u) >> 28) - 7;
  for (int64_t g = 0; g < batch; g++)
    for (int64_t r = 0; r < m; r++)
      for (int64_t j = 0; j < n; j++)
        for (int64_t t = 0; t < k; t++) want[(g * m + r) * n + j] += a[(g * m + r) * k + t] * b[(g * n + j) * k + t];
  char text[512];
  if (batch == 1)
    snprintf(text, sizeof text,
             "HloModule m\nENTRY e {\n a = f32[%lld,%lld] parameter(0)\n b = f32[%lld,%lld] parameter(1)\n"
             " ROOT d = f32[%lld,%lld] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={1}\n}\n",
             (long long)m, (long long)k, (long long)n, (long long)k, (long long)m, (long long)n);
  else
    snprintf(text, sizeof text,
             "HloModule m\nENTRY e {\n a = f32[%lld,%lld,%lld] parameter(0)\n b = f32[%lld,%lld,%lld] parameter(1)\n"
             " ROOT d = f32[%lld,%lld,%lld] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2},"
             " rhs_batch_dims={0}, rhs_contracting_dims={2}\n}\n",
             (long long)batch, (long long)m, (long long)k, (long long)batch, (long long)n, (long long)k,
             (long long)batch, (long long)m, (long long)n);
  rt_value *args[] = {batch == 1 ? f32v(2, (int64_t[]){m, k}, a) : f32v(3, (int64_t[]){batch, m, k}, a),
                      batch == 1 ? f32v(2, (int64_t[]){n, k}, b) : f32v(3, (int64_t[]){batch, n, k}, b)};
  expect_cpu(__LINE__, text, args, 2, want, batch * m * n, 0);
  free(a);
  free(b);
  free(want);
}

static void test_few_rows(void) {
  const int64_t rows[] = {2, 3, 5, 8}, cols[] = {7, 100}, depth[] = {5, 13, 40};
  for (int r = 0; r < 4; r++)
    for (int c = 0; c < 2; c++)
      for (int d = 0; d < 3; d++) expect_few_rows(1, rows[r], cols[c], depth[d]);
  expect_few_rows(2, 3, 10, 17);
}

/* The few-row kernel's order is fixed by the shapes (dot_rows.c): with values whose sums
 * round, every vector variant this processor has gives the same bits as the widest, and a
 * call for a block of columns gives the bits of the call for all of them. */
static void test_few_rows_variants(void) {
  enum { M = 7, N = 11, K = 37 };
  float a[M * K], b[N * K], c[M * N], want[M * N], part[M * N];
  for (int i = 0; i < M * K; i++) a[i] = 1.0f / (float)(i % 13 + 1) - 0.3f;
  for (int i = 0; i < N * K; i++) b[i] = (float)(i % 17) * 0.37f - 2.9f;
  rt_cpu_dot_rows_f32(a, b, want, M, N, K, 0, N);
  double worst = 0;
  for (int r = 0; r < M; r++)
    for (int j = 0; j < N; j++) {
      double exact = 0, size = 0;
      for (int t = 0; t < K; t++) exact += (double)a[r * K + t] * b[j * K + t], size += fabs((double)a[r * K + t] * b[j * K + t]);
      double err = fabs(want[r * N + j] - exact) / size;
      if (err > worst) worst = err;
    }
  CHECK_MSG(worst < 1e-6, "relative error %g", worst);
  for (int i = 0; i < M * N; i++) part[i] = NAN;
  rt_cpu_dot_rows_f32(a, b, part, M, N, K, 3, 8);
  for (int r = 0; r < M; r++)
    for (int j = 0; j < N; j++)
      if (j >= 3 && j < 8) CHECK(memcmp(&part[r * N + j], &want[r * N + j], sizeof(float)) == 0);
      else CHECK(isnan(part[r * N + j])); /* columns outside the block are not written */
  rt_cpu_isa widest = rt_cpu_isa_in_use();
  int ran = 0;
  for (int isa = 0; isa < RT_CPU_ISA_COUNT; isa++) {
    if (isa == (int)widest || !rt_cpu_use_isa((rt_cpu_isa)isa)) continue;
    rt_cpu_dot_rows_f32(a, b, c, M, N, K, 0, N);
    CHECK_MSG(memcmp(c, want, sizeof c) == 0, "variant %s differs", rt_cpu_isa_name((rt_cpu_isa)isa));
    ran++;
  }
  CHECK(ran >= 1);
  CHECK(rt_cpu_use_isa(widest));
}

/* A batch of small planes runs as one product (folded): 3x3 windows with padding 1 and
 * stride 1 or 2, and a 1x1 window read in place, over batches of 3, in f32 and f64, against
 * loops written here (small integers: exact); then larger ones against the reference, with
 * the product split over output features (more of them than columns) or over columns. */
static void test_folded_conv(void) {
  enum { N = 3, F = 2, H = 5, W = 4, O = 4 };
  double x[N * F * H * W], k3[O * F * 9], k1[O * F], want[N * O * H * W];
  for (int i = 0; i < N * F * H * W; i++) x[i] = (i * 7 % 11) - 5;
  for (int i = 0; i < O * F * 9; i++) k3[i] = (i * 5 % 7) - 3;
  for (int i = 0; i < O * F; i++) k1[i] = i - 3;
  for (int t = 0; t < 2; t++) {
    const char *type = t ? "f64" : "f32";
    for (int window = 0; window < 3; window++) { /* 3x3 stride 1, 3x3 stride 2, 1x1 */
      int64_t size = window == 2 ? 1 : 3, stride = window == 1 ? 2 : 1, pad = window == 2 ? 0 : 1;
      int64_t oh = (H + 2 * pad - size) / stride + 1, ow = (W + 2 * pad - size) / stride + 1;
      const double *k = window == 2 ? k1 : k3;
      for (int n = 0; n < N; n++)
        for (int o = 0; o < O; o++)
          for (int64_t i = 0; i < oh; i++)
            for (int64_t j = 0; j < ow; j++) {
              double sum = 0;
              for (int f = 0; f < F; f++)
                for (int64_t a = 0; a < size; a++)
                  for (int64_t b = 0; b < size; b++) {
                    int64_t h = i * stride + a - pad, w = j * stride + b - pad;
                    if (h >= 0 && h < H && w >= 0 && w < W)
                      sum += x[((n * F + f) * H + h) * W + w] * k[((o * F + f) * size + a) * size + b];
                  }
              want[((n * O + o) * oh + i) * ow + j] = sum;
            }
      char text[1024];
      snprintf(text, sizeof text,
               "HloModule m\nENTRY e {\n x = %1$s[%2$d,%3$d,%4$d,%5$d] parameter(0)\n k = %1$s[%6$d,%3$d,%7$lld,%7$lld] parameter(1)\n"
               " ROOT y = %1$s[%2$d,%6$d,%8$lld,%9$lld] convolution(x, k), window={size=%7$lldx%7$lld stride=%10$lldx%10$lld "
               "pad=%11$lld_%11$lldx%11$lld_%11$lld}, dim_labels=bf01_oi01->bf01\n}\n",
               type, N, F, H, W, O, (long long)size, (long long)oh, (long long)ow, (long long)stride, (long long)pad);
      hlo_dtype dt = t ? HLO_F64 : HLO_F32;
      rt_value *args[] = {make_value(dt, 4, (int64_t[]){N, F, H, W}, x),
                          make_value(dt, 4, (int64_t[]){O, F, size, size}, k)};
      expect_cpu(__LINE__, text, args, 2, want, N * O * oh * ow, 0);
    }
  }
  /* 64 outputs of 8x8 planes over 4 images (256 columns: split by columns), 256 outputs of
   * 2x2 planes over 8 (32 columns: split by output features), a 1x1 window in place */
  expect_same_as_reference("HloModule m\nENTRY e {\n x = f32[4,32,8,8] parameter(0)\n k = f32[64,32,3,3] parameter(1)\n"
                           " ROOT y = f32[4,64,8,8] convolution(x, k), window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01\n}\n", 1);
  expect_same_as_reference("HloModule m\nENTRY e {\n x = f32[8,128,4,4] parameter(0)\n k = f32[256,128,3,3] parameter(1)\n"
                           " ROOT y = f32[8,256,2,2] convolution(x, k), window={size=3x3 stride=2x2 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01\n}\n", 2);
  expect_same_as_reference("HloModule m\nENTRY e {\n x = f32[8,256,2,2] parameter(0)\n k = f32[512,256,1,1] parameter(1)\n"
                           " ROOT y = f32[8,512,2,2] convolution(x, k), window={size=1x1}, dim_labels=bf01_oi01->bf01\n}\n", 3);
}

static void test_conv(void) {
  const char *head = "HloModule m\nENTRY e {\n x = f32[1,1,5] parameter(0)\n k = f32[1,1,3] parameter(1)\n ROOT c = ";
  char text[512];
#define CONV_ARGS rt_value *args[] = {f32v(3, (int64_t[]){1, 1, 5}, (double[]){1, 2, 3, 4, 5}), \
                                      f32v(3, (int64_t[]){1, 1, 3}, (double[]){1, 0, -1})}
  /* w = [1, 0, -1]: y[i] = x[i] - x[i+2] = -2 -2 -2 */
  {
    CONV_ARGS;
    snprintf(text, sizeof text, "%sf32[1,1,3] convolution(x, k), window={size=3}, dim_labels=bf0_oi0->bf0\n}\n", head);
    EXPECT_CPU(text, args, ((double[]){-2, -2, -2}), 0);
  }
  {
    /* padded 0 1 2 3 4 5 0: -2 -2 -2 -2 (4 - 0) */
    CONV_ARGS;
    snprintf(text, sizeof text, "%sf32[1,1,5] convolution(x, k), window={size=3 pad=1_1}, dim_labels=bf0_oi0->bf0\n}\n", head);
    EXPECT_CPU(text, args, ((double[]){-2, -2, -2, -2, 4}), 0);
  }
  {
    /* stride 2 over padded 0 1 2 3 4 5 0: windows at 0, 2, 4: (0 - 2), (2 - 4), (4 - 0) */
    CONV_ARGS;
    snprintf(text, sizeof text, "%sf32[1,1,3] convolution(x, k), window={size=3 stride=2 pad=1_1}, dim_labels=bf0_oi0->bf0\n}\n", head);
    EXPECT_CPU(text, args, ((double[]){-2, -2, 4}), 0);
  }
  {
    /* rhs_dilate 2: taps at 0, 2, 4: x[0] - x[4] = -4 */
    CONV_ARGS;
    snprintf(text, sizeof text, "%sf32[1,1,1] convolution(x, k), window={size=3 rhs_dilate=2}, dim_labels=bf0_oi0->bf0\n}\n", head);
    EXPECT_CPU(text, args, ((double[]){-4}), 0);
  }
  {
    /* lhs_dilate 2: the input becomes 1 _ 2 _ 3 _ 4 _ 5 (holes are zero):
     * windows: 1-2, _-_, 2-3, _-_, 3-4, _-_, 4-5 = -1 0 -1 0 -1 0 -1 */
    CONV_ARGS;
    snprintf(text, sizeof text, "%sf32[1,1,7] convolution(x, k), window={size=3 lhs_dilate=2}, dim_labels=bf0_oi0->bf0\n}\n", head);
    EXPECT_CPU(text, args, ((double[]){-1, 0, -1, 0, -1, 0, -1}), 0);
  }
  {
    /* an inf weight with padding (two input features, so the im2col path runs, not the
     * depthwise sum): the reference skips padded taps. Feature 1 is all zero with zero
     * weights. Over padded 0 1 2 3 4 5 0 with w = [inf, 0, 1]: y0 = 0*1 + 1*2 = 2 (no
     * inf*0 = NaN from the pad), y1..y4 = inf * x[i-1] + ... = inf */
    rt_value *args[] = {f32v(3, (int64_t[]){1, 2, 5}, (double[]){1, 2, 3, 4, 5, 0, 0, 0, 0, 0}),
                        f32v(3, (int64_t[]){1, 2, 3}, (double[]){INFINITY, 0, 1, 0, 0, 0})};
    EXPECT_CPU("HloModule m\nENTRY e {\n x = f32[1,2,5] parameter(0)\n k = f32[1,2,3] parameter(1)\n"
               " ROOT c = f32[1,1,5] convolution(x, k), window={size=3 pad=1_1}, dim_labels=bf0_oi0->bf0\n}\n",
               args, ((double[]){2, INFINITY, INFINITY, INFINITY, INFINITY}), 0);
  }
  {
    /* a NaN weight without padding reaches every output, as in the reference: NaN NaN NaN */
    rt_value *args[] = {f32v(3, (int64_t[]){1, 2, 5}, (double[]){1, 2, 3, 4, 5, 1, 1, 1, 1, 1}),
                        f32v(3, (int64_t[]){1, 2, 3}, (double[]){1, NAN, 0, 1, 1, 1})};
    EXPECT_CPU("HloModule m\nENTRY e {\n x = f32[1,2,5] parameter(0)\n k = f32[1,2,3] parameter(1)\n"
               " ROOT c = f32[1,1,3] convolution(x, k), window={size=3}, dim_labels=bf0_oi0->bf0\n}\n",
               args, ((double[]){NAN, NAN, NAN}), 0);
  }
  {
    /* one or two output positions take gemv per position. x = [[1,2,3],[4,5,6]],
     * k[0] = [[1,0,0],[0,0,1]], k[1] = all ones. No padding, one position: 1 + 6 = 7 and 21.
     * With pad=0_1, position 1 reads 2 3 _ and 5 6 _: k[0] gives 2, k[1] gives 16. */
    const char *kx = "HloModule m\nENTRY e {\n x = f32[1,2,3] parameter(0)\n k = f32[2,2,3] parameter(1)\n ROOT c = ";
    rt_value *one[] = {f32v(3, (int64_t[]){1, 2, 3}, (double[]){1, 2, 3, 4, 5, 6}),
                       f32v(3, (int64_t[]){2, 2, 3}, (double[]){1, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1})};
    snprintf(text, sizeof text, "%sf32[1,2,1] convolution(x, k), window={size=3}, dim_labels=bf0_oi0->bf0\n}\n", kx);
    EXPECT_CPU(text, one, ((double[]){7, 21}), 0);
    rt_value *two[] = {f32v(3, (int64_t[]){1, 2, 3}, (double[]){1, 2, 3, 4, 5, 6}),
                       f32v(3, (int64_t[]){2, 2, 3}, (double[]){1, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1})};
    snprintf(text, sizeof text, "%sf32[1,2,2] convolution(x, k), window={size=3 pad=0_1}, dim_labels=bf0_oi0->bf0\n}\n", kx);
    EXPECT_CPU(text, two, ((double[]){7, 2, 21, 16}), 0);
  }
  /* two feature groups: out feature 0 = 2 * channel 0, out feature 1 = 3 * channel 1 */
  rt_value *g[] = {f32v(3, (int64_t[]){1, 2, 3}, (double[]){1, 2, 3, 10, 20, 30}),
                   f32v(3, (int64_t[]){2, 1, 1}, (double[]){2, 3})};
  EXPECT_CPU("HloModule m\nENTRY e {\n x = f32[1,2,3] parameter(0)\n k = f32[2,1,1] parameter(1)\n"
             " ROOT c = f32[1,2,3] convolution(x, k), window={size=1}, dim_labels=bf0_oi0->bf0, feature_group_count=2\n}\n",
             g, ((double[]){2, 4, 6, 30, 60, 90}), 0);
  /* NHWC with an HWIO kernel of ones over a 2x2 image 1 2 3 4: one output, 10 */
  rt_value *n[] = {f32v(4, (int64_t[]){1, 2, 2, 1}, (double[]){1, 2, 3, 4}),
                   f32v(4, (int64_t[]){2, 2, 1, 1}, (double[]){1, 1, 1, 1})};
  EXPECT_CPU("HloModule m\nENTRY e {\n x = f32[1,2,2,1] parameter(0)\n k = f32[2,2,1,1] parameter(1)\n"
             " ROOT c = f32[1,1,1,1] convolution(x, k), window={size=2x2}, dim_labels=b01f_01io->b01f\n}\n",
             n, ((double[]){10}), 0);
  /* batch groups (a weight gradient): input batch 2 split in 2 groups, each feeding one
   * output feature: out 0 = sum x[b0] * 1 = 1+2 = 3, out 1 = sum x[b1] * 1 = 3+4 = 7 */
  rt_value *bg[] = {f32v(3, (int64_t[]){2, 1, 2}, (double[]){1, 2, 3, 4}),
                    f32v(3, (int64_t[]){2, 1, 2}, (double[]){1, 1, 1, 1})};
  EXPECT_CPU("HloModule m\nENTRY e {\n x = f32[2,1,2] parameter(0)\n k = f32[2,1,2] parameter(1)\n"
             " ROOT c = f32[1,2,1] convolution(x, k), window={size=2}, dim_labels=bf0_oi0->bf0, batch_group_count=2\n}\n",
             bg, ((double[]){3, 7}), 0);
}

static void test_control_and_tuples(void) {
  /* a while loop counting to 5 runs through the reference path; the root is a tuple of a
   * computed value and a parameter passed through */
  const char *text =
      "HloModule m\ncond {\n p = s32[] parameter(0)\n five = s32[] constant(5)\n"
      " ROOT lt = pred[] compare(p, five), direction=LT\n}\n"
      "body {\n p = s32[] parameter(0)\n one = s32[] constant(1)\n ROOT s = s32[] add(p, one)\n}\n"
      "ENTRY e {\n x = s32[] parameter(0)\n w = s32[] while(x), condition=cond, body=body\n"
      " ROOT t = (s32[], s32[]) tuple(w, x)\n}\n";
  rt_value *x = make_value(HLO_S32, 0, NULL, (double[]){1});
  hlo_diag diag;
  rt_value *got = run_on(&rt_backend_cpu, text, &x, 1, &diag);
  CHECK_MSG(got && got->shape.dtype == HLO_TUPLE && got->tuple_count == 2, "%s", diag.message);
  if (got && got->tuple_count == 2) {
    CHECK_EQ_INT(rt_get_i64(got->tuple[0], 0), 5);
    CHECK_EQ_INT(rt_get_i64(got->tuple[1], 0), 1);
    CHECK(got->tuple[1]->data != x->data); /* the caller gets its own copy */
  }
  rt_value_release(got);
  rt_value_release(x);
}

/* Whether the source module a serialized executable keeps still has a multiply. */
static bool source_has_multiply(const void *bytes, size_t len) {
  hlo_module *optimized = NULL, *source = NULL;
  rt_cpu_plan *plan = NULL;
  const char *encoded = NULL;
  size_t encoded_len = 0;
  hlo_diag diag = {0};
  if (rt_cpu_deserialize(bytes, len, &optimized, &plan, &encoded, &encoded_len, &diag) == HLO_OK && encoded) {
    rt_blob_in in;
    rt_blob_in_init(&in, encoded, encoded_len);
    source = rt_cpu_decode_module(&in);
  }
  bool found = false;
  for (int i = 0; source && i < source->entry->instr_count; i++) found |= source->entry->instrs[i]->opcode == HLO_OP_MULTIPLY;
  hlo_module_free(source);
  rt_cpu_plan_free(plan);
  hlo_module_free(optimized);
  return found;
}

static void test_errors_and_serialize(void) {
  hlo_diag diag = {0};
  const char *text = "HloModule m\nENTRY e {\n a = f32[2] parameter(0)\n"
                     " ROOT c = f32[2] custom-call(a), custom_call_target=\"foo\"\n}\n";
  hlo_module *module = hlo_parse_module(text, strlen(text), "t", &diag);
  rt_executable *exe = module ? rt_backend_cpu.compile(module, NULL, &diag) : NULL;
  CHECK(exe == NULL);
  CHECK_MSG(diag.status == HLO_ERR_UNSUPPORTED, "%s", diag.message);
  CHECK(strstr(diag.message, "custom-call") && strstr(diag.message, "%c"));
  hlo_module_free(module);

  /* serialize keeps the module compiled, before the passes (x * 1 is still there: the
   * positions of its instructions are what a loaded executable binds other sizes by), beside
   * the optimized executable that deserialize loads without compiling (test_cpu_serialize.c) */
  const char *affine = "HloModule a\nENTRY e {\n x = f32[3] parameter(0)\n one = f32[] constant(1)\n"
                       " b = f32[3] broadcast(one), dimensions={}\n m = f32[3] multiply(x, b)\n ROOT y = f32[3] add(m, m)\n}\n";
  module = hlo_parse_module(affine, strlen(affine), "a", &diag);
  exe = rt_backend_cpu.compile(module, NULL, &diag);
  hlo_module_free(module);
  CHECK_MSG(exe != NULL, "%s", diag.message);
  void *bytes = NULL;
  size_t len = 0;
  CHECK_EQ_INT(rt_backend_cpu.serialize(exe, &bytes, &len, &diag), HLO_OK);
  CHECK(bytes && source_has_multiply(bytes, len));
  rt_executable *again = rt_backend_cpu.deserialize(bytes, len, NULL, &diag);
  CHECK_MSG(again != NULL, "%s", diag.message);
  rt_value *x = f32v(1, (int64_t[]){3}, (double[]){1, -2, 0.5});
  rt_value *y = NULL;
  CHECK_EQ_INT(again ? rt_backend_cpu.execute(again, &x, 1, &y, &diag) : HLO_ERR_INTERNAL, HLO_OK);
  CHECK(y && y->count == 3 && rt_get_f64(y, 0) == 2 && rt_get_f64(y, 1) == -4 && rt_get_f64(y, 2) == 1);
  /* a wrong argument is an input error, not a crash */
  rt_value *wrong = f32v(1, (int64_t[]){4}, (double[]){1, 2, 3, 4});
  rt_value *none = NULL;
  CHECK_EQ_INT(rt_backend_cpu.execute(exe, &wrong, 1, &none, &diag), HLO_ERR_INPUT);
  CHECK(none == NULL);
  CHECK(rt_backend_cpu.deserialize("HloModule x\nENTRY {", 19, NULL, &diag) == NULL);
  rt_value_release(wrong);
  rt_value_release(y);
  rt_value_release(x);
  free(bytes);
  rt_backend_cpu.destroy(again);
  rt_backend_cpu.destroy(exe);
  CHECK(cap_backend_find("cpu") == &rt_backend_cpu);
  CHECK(strstr(cap_backend_names(), "cpu") != NULL);
}

/* batch-norm-training on x = [[1,3],[5,7]] with features along dim 1: feature 0 holds
 * 1, 5 (mean 3, variance 4), feature 1 holds 3, 7 (mean 5, variance 4); with epsilon 0,
 * scale 2 and offset 1 the output is 2 * (x - mean) / 2 + 1 = [[-1,-1],[3,3]]. Then
 * batch-norm-grad with dy = 1 everywhere: sum(dy) = 2, sum(dy * (x - mean)) = 0, so
 * grad_operand = scale / 2 * (1 - 1 - 0) = 0, grad_scale 0, grad_offset 2. */
static void test_batch_norm(void) {
  const char *text =
      "HloModule m\nENTRY e {\n x = f32[2,2] parameter(0)\n s = f32[2] parameter(1)\n o = f32[2] parameter(2)\n"
      " t = (f32[2,2], f32[2], f32[2]) batch-norm-training(x, s, o), epsilon=0, feature_index=1\n"
      " y = f32[2,2] get-tuple-element(t), index=0\n mean = f32[2] get-tuple-element(t), index=1\n"
      " var = f32[2] get-tuple-element(t), index=2\n one = f32[] constant(1)\n dy = f32[2,2] broadcast(one), dimensions={}\n"
      " g = (f32[2,2], f32[2], f32[2]) batch-norm-grad(x, s, mean, var, dy), epsilon=0, feature_index=1\n"
      " gx = f32[2,2] get-tuple-element(g), index=0\n gs = f32[2] get-tuple-element(g), index=1\n"
      " go = f32[2] get-tuple-element(g), index=2\n ROOT r = (f32[2,2], f32[2], f32[2], f32[2,2], f32[2], f32[2]) tuple(y, mean, var, gx, gs, go)\n}\n";
  rt_value *args[] = {f32v(2, (int64_t[]){2, 2}, (double[]){1, 3, 5, 7}), f32v(1, (int64_t[]){2}, (double[]){2, 2}),
                      f32v(1, (int64_t[]){2}, (double[]){1, 1})};
  hlo_diag diag;
  rt_value *got = run_on(&rt_backend_cpu, text, args, 3, &diag);
  CHECK_MSG(got && got->tuple_count == 6, "%s", diag.message);
  const double want[6][4] = {{-1, -1, 3, 3}, {3, 5}, {4, 4}, {0, 0, 0, 0}, {0, 0}, {2, 2}};
  for (int t = 0; got && t < 6; t++)
    for (int64_t i = 0; i < got->tuple[t]->count; i++) CHECK_NEAR(rt_get_f64(got->tuple[t], i), want[t][i], 1e-6);
  rt_value_release(got);
  for (int i = 0; i < 3; i++) rt_value_release(args[i]);
}

/* Ops the graph generator of test_cpu_differential does not build, as a training step uses
 * them: batch-group (weight gradient) and base-dilated (input gradient) convolutions,
 * reversed kernels, batch-norm-training and -grad; random sizes, seeded inputs, compared with
 * the reference within 1e-4 relative to 1 + |reference| (expect_same_as_reference). */
static void test_training_ops(void) {
  char text[2048];
  for (int seed = 0; seed < 60; seed++) {
    uint64_t r = rt_mix64((uint64_t)seed + 77);
    int64_t groups = 1 + (int64_t)(r % 3), batch = groups * (1 + (int64_t)(r >> 8) % 2), features = 1 + (int64_t)(r >> 12) % 3;
    int64_t size = 3 + (int64_t)(r >> 16) % 4, taps = 1 + (int64_t)(r >> 20) % 3, pad = (int64_t)(r >> 24) % 2;
    /* weight gradient: activations fb01 as input, output gradients as kernel, batch groups */
    int64_t out = size + 2 * pad - taps + 1;
    snprintf(text, sizeof text,
             "HloModule m\nENTRY e {\n x = f32[%lld,%lld,%lld,%lld] parameter(0)\n k = f32[%lld,%lld,%lld,%lld] parameter(1)\n"
             " ROOT c = f32[%lld,%lld,%lld,%lld] convolution(x, k), window={size=%lldx%lld pad=%lld_%lldx%lld_%lld},"
             " dim_labels=fb01_io01->01bf, batch_group_count=%lld\n}\n",
             (long long)features, (long long)batch, (long long)size, (long long)size,
             (long long)features, (long long)groups, (long long)taps, (long long)taps,
             (long long)out, (long long)out, (long long)(batch / groups), (long long)groups,
             (long long)taps, (long long)taps, (long long)pad, (long long)pad, (long long)pad, (long long)pad, (long long)groups);
    expect_same_as_reference(text, seed);
    /* input gradient: base dilation 2 with a reversed kernel, feature groups */
    int64_t c = groups * features, in = size, dil = (in - 1) * 2 + 1 + 2 * pad + 1 - taps + 1;
    snprintf(text, sizeof text,
             "HloModule m\nENTRY e {\n x = f32[2,%lld,%lld,%lld] parameter(0)\n k = f32[%lld,%lld,%lld,%lld] parameter(1)\n"
             " rk = f32[%lld,%lld,%lld,%lld] reverse(k), dimensions={2,3}\n"
             " ROOT c = f32[2,%lld,%lld,%lld] convolution(x, rk), window={size=%lldx%lld pad=%lld_%lldx%lld_%lld lhs_dilate=2x2},"
             " dim_labels=bf01_oi01->bf01, feature_group_count=%lld\n}\n",
             (long long)c, (long long)in, (long long)in, (long long)c, (long long)features, (long long)taps, (long long)taps,
             (long long)c, (long long)features, (long long)taps, (long long)taps, (long long)c, (long long)dil, (long long)dil,
             (long long)taps, (long long)taps, (long long)pad, (long long)(pad + 1), (long long)pad, (long long)(pad + 1),
             (long long)groups);
    expect_same_as_reference(text, seed);
    /* batch-norm-training, then its gradient, features along dim 1 */
    snprintf(text, sizeof text,
             "HloModule m\nENTRY e {\n x = f32[%lld,%lld,%lld] parameter(0)\n s = f32[%lld] parameter(1)\n o = f32[%lld] parameter(2)\n"
             " dy = f32[%lld,%lld,%lld] parameter(3)\n t = (f32[%lld,%lld,%lld], f32[%lld], f32[%lld]) batch-norm-training(x, s, o), epsilon=0.001, feature_index=1\n"
             " mean = f32[%lld] get-tuple-element(t), index=1\n var = f32[%lld] get-tuple-element(t), index=2\n"
             " g = (f32[%lld,%lld,%lld], f32[%lld], f32[%lld]) batch-norm-grad(x, s, mean, var, dy), epsilon=0.001, feature_index=1\n"
             " ROOT r = ((f32[%lld,%lld,%lld], f32[%lld], f32[%lld]), (f32[%lld,%lld,%lld], f32[%lld], f32[%lld])) tuple(t, g)\n}\n",
             (long long)batch, (long long)c, (long long)size, (long long)c, (long long)c,
             (long long)batch, (long long)c, (long long)size, (long long)batch, (long long)c, (long long)size, (long long)c, (long long)c,
             (long long)c, (long long)c, (long long)batch, (long long)c, (long long)size, (long long)c, (long long)c,
             (long long)batch, (long long)c, (long long)size, (long long)c, (long long)c,
             (long long)batch, (long long)c, (long long)size, (long long)c, (long long)c);
    expect_same_as_reference(text, seed);
  }
}

/* A chain of eight elementwise ops on one shape needs one buffer, not eight: each result
 * dies at its one user, which writes over it. f64, which fusion leaves alone
 * (test_cpu_fusion.c checks that an f32 chain needs none). */
static void test_buffer_reuse(void) {
  const char *text = "HloModule m\nENTRY e {\n x = f64[1000] parameter(0)\n a = f64[1000] exponential(x)\n"
                     " b = f64[1000] negate(a)\n c = f64[1000] tanh(b)\n d = f64[1000] negate(c)\n"
                     " e = f64[1000] exponential(d)\n f = f64[1000] negate(e)\n g = f64[1000] tanh(f)\n"
                     " ROOT h = f64[1000] negate(g)\n}\n";
  hlo_diag diag = {0};
  hlo_module *module = hlo_parse_module(text, strlen(text), "t", &diag);
  rt_cpu_plan *plan = module ? rt_cpu_plan_build(module, NULL, &diag) : NULL;
  CHECK_MSG(plan != NULL, "%s", diag.message);
  if (plan) {
    CHECK_EQ_INT(plan->buffer_count, 1);
    CHECK_EQ_INT(plan->arena_bytes, 8000); /* a multiple of 64 bytes already */
    for (int i = 2; i < plan->step_count - 1; i++) CHECK(plan->steps[i].in_place); /* all but a, the first */
    CHECK(plan->steps[plan->step_count - 1].output); /* the root writes its own value */
  }
  rt_cpu_plan_free(plan);
  hlo_module_free(module);
}

int main(void) {
  RUN(test_elementwise);
  RUN(test_layout);
  RUN(test_short_rows);
  RUN(test_reduce);
  RUN(test_reduce_split);
  RUN(test_reduce_extreme_rows);
  RUN(test_pool);
  RUN(test_global_sum_pool);
  RUN(test_pool_special);
  RUN(test_pool_variants);
  RUN(test_dot);
  bool dnnl_products = rt_cpu_dot_on_dnnl(); /* the products again on the other library */
  rt_cpu_dot_use_dnnl(!dnnl_products);
  RUN(test_dot);
  rt_cpu_dot_use_dnnl(dnnl_products);
  RUN(test_gemv);
  RUN(test_few_rows);
  RUN(test_few_rows_variants);
  RUN(test_gather_rows);
  RUN(test_split_gemv);
  RUN(test_transpose_tiled);
  RUN(test_conv);
  RUN(test_folded_conv);
  RUN(test_control_and_tuples);
  RUN(test_errors_and_serialize);
  RUN(test_batch_norm);
  RUN(test_training_ops);
  RUN(test_buffer_reuse);
  return TEST_REPORT();
}
