/* Reduces whose kept dims sit between reduced ones (a batch norm's statistics and gradient
 * sums over N, H and W of [N, C, H, W]) on the cpu backend: the plain kernel (reduce.c) and a
 * fused group feeding one (fusion_run.c), against loops written here. An f32 sum adds element
 * b of each run of the innermost dims into lane b % 16 (b when the run is shorter), the lanes
 * from -0, added in lane order at the end, then to the init (kernel_internal.h): the loops
 * below sum so and must match bit for bit, and the fp64 sum within 1e-5. Other reducers and
 * types combine in row-major order, exactly. Run-lengths of 63 (lanes and a tail), 4 (fewer
 * than the lanes), 1024 (longer than a fused tile), outputs 37 (groups and a remainder), an
 * input large enough to split over the threads, a NaN, and a leading dim of 1 (an innermost
 * reduce, in row order). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cpu_util.h"
#include "runtime/cpu/fusion_internal.h"

static const char *const reducers =
    "HloModule m\nadd {\n x = f32[] parameter(0)\n y = f32[] parameter(1)\n ROOT s = f32[] add(x, y)\n}\n"
    "max {\n x = f32[] parameter(0)\n y = f32[] parameter(1)\n ROOT s = f32[] maximum(x, y)\n}\n"
    "addi {\n x = s32[] parameter(0)\n y = s32[] parameter(1)\n ROOT s = s32[] add(x, y)\n}\n"
    "addd {\n x = f64[] parameter(0)\n y = f64[] parameter(1)\n ROOT s = f64[] add(x, y)\n}\n";

/* Output o of an f32 sum of x [outer, kept, inner] over outer and inner, in lanes. */
static float lane_sum(const float *x, int64_t outer, int64_t kept, int64_t inner, int64_t o, float init) {
  float lane[16];
  int width = inner < 16 ? (int)inner : 16;
  for (int l = 0; l < 16; l++) lane[l] = -0.0f;
  for (int64_t a = 0; a < outer; a++)
    for (int64_t b = 0; b < inner; b++) lane[b % width] += x[(a * kept + o) * inner + b];
  float sum = -0.0f;
  for (int l = 0; l < width; l++) sum += lane[l];
  return init + sum;
}

static double exact_sum(const float *x, int64_t outer, int64_t kept, int64_t inner, int64_t o, double init) {
  double sum = init;
  for (int64_t a = 0; a < outer; a++)
    for (int64_t b = 0; b < inner; b++) sum += x[(a * kept + o) * inner + b];
  return sum;
}

static float *values(int64_t count, int seed) {
  float *x = malloc(sizeof(float) * (size_t)count);
  for (int64_t i = 0; i < count; i++) x[i] = (float)(((i * 7919 + seed) % 1013) * 0.0137 - 6.1);
  return x;
}

static rt_value *f32_value(int64_t n, int64_t c, int64_t h, int64_t w, const float *x) {
  rt_value *v = rt_value_new_array(HLO_F32, 4, (int64_t[]){n, c, h, w});
  memcpy(v->data, x, sizeof(float) * (size_t)v->count);
  return v;
}

/* reduce(x, init) over {0, 2, 3} of f32[n, c, h, w] against the lanes, bit for bit, and fp64. */
static void check_sum(int64_t n, int64_t c, int64_t h, int64_t w, float init) {
  float *x = values(n * c * h * w, (int)(n + c + h + w));
  char text[2048];
  snprintf(text, sizeof text,
           "%sENTRY e {\n a = f32[%lld,%lld,%lld,%lld] parameter(0)\n z = f32[] constant(%g)\n"
           " ROOT r = f32[%lld] reduce(a, z), dimensions={0,2,3}, to_apply=add\n}\n",
           reducers, (long long)n, (long long)c, (long long)h, (long long)w, init, (long long)c);
  double *want = malloc(sizeof(double) * (size_t)c), *near = malloc(sizeof(double) * (size_t)c);
  for (int64_t o = 0; o < c; o++) {
    want[o] = lane_sum(x, n, c, h * w, o, init);
    near[o] = exact_sum(x, n, c, h * w, o, init);
  }
  rt_value *args[] = {f32_value(n, c, h, w, x)};
  hlo_diag diag;
  rt_value *got = run_on(&rt_backend_cpu, text, args, 1, &diag);
  CHECK_MSG(got != NULL, "%lldx%lldx%lldx%lld: %s", (long long)n, (long long)c, (long long)h, (long long)w,
            diag.message);
  if (got) {
    expect_values(__LINE__, got, want, c, 0);
    expect_values(__LINE__, got, near, c, 1e-5);
  }
  rt_value_release(got);
  rt_value_release(args[0]);
  free(x);
  free(want);
  free(near);
}

static void test_sums(void) {
  check_sum(5, 37, 7, 9, 0.25f);   /* runs of 63: lanes and a tail; 37 outputs */
  check_sum(6, 40, 2, 2, 0);       /* runs of 4 */
  check_sum(3, 5, 32, 32, -1.5f);  /* runs of 1024 */
  check_sum(8, 24, 32, 32, 0);     /* large enough for several threads */
}

/* The other reducers and types keep the row-major order: max, s32 sums that wrap, f64 sums;
 * and small integers sum exactly in any order. A NaN makes its output NaN. */
static void test_in_order(void) {
  enum { N = 4, C = 6, H = 3, W = 5 };
  double x[N * C * H * W], most[C], wrapped[C], sum[C];
  for (int i = 0; i < N * C * H * W; i++) x[i] = (i * 37 % 101) - 50;
  for (int o = 0; o < C; o++) {
    double m = -1000, s = 0;
    uint32_t acc = 7;
    for (int a = 0; a < N; a++)
      for (int b = 0; b < H * W; b++) {
        double v = x[(a * C + o) * H * W + b];
        m = v > m ? v : m;
        s += v;
        acc += (uint32_t)(int32_t)v * 50000000u;
      }
    most[o] = m, wrapped[o] = (double)(int32_t)acc, sum[o] = s;
  }
  char text[2048];
  int64_t dims[] = {N, C, H, W};
  snprintf(text, sizeof text, "%sENTRY e {\n a = f32[%d,%d,%d,%d] parameter(0)\n z = f32[] constant(-1000)\n"
           " ROOT r = f32[%d] reduce(a, z), dimensions={0,2,3}, to_apply=max\n}\n", reducers, N, C, H, W, C);
  rt_value *a1[] = {make_value(HLO_F32, 4, dims, x)};
  expect_cpu(__LINE__, text, a1, 1, most, C, 0);
  snprintf(text, sizeof text, "%sENTRY e {\n a = f32[%d,%d,%d,%d] parameter(0)\n z = f32[] constant(0)\n"
           " ROOT r = f32[%d] reduce(a, z), dimensions={0,2,3}, to_apply=add\n}\n", reducers, N, C, H, W, C);
  rt_value *a2[] = {make_value(HLO_F32, 4, dims, x)};
  expect_cpu(__LINE__, text, a2, 1, sum, C, 0);
  double scaled[N * C * H * W];
  for (int i = 0; i < N * C * H * W; i++) scaled[i] = (double)(int32_t)((uint32_t)(int32_t)x[i] * 50000000u);
  snprintf(text, sizeof text, "%sENTRY e {\n a = s32[%d,%d,%d,%d] parameter(0)\n z = s32[] constant(7)\n"
           " ROOT r = s32[%d] reduce(a, z), dimensions={0,2,3}, to_apply=addi\n}\n", reducers, N, C, H, W, C);
  rt_value *a3[] = {make_value(HLO_S32, 4, dims, scaled)};
  expect_cpu(__LINE__, text, a3, 1, wrapped, C, 0);
  /* f64: values that round, added in row-major order */
  for (int i = 0; i < N * C * H * W; i++) x[i] = (i * 7919 % 1013) * 0.0137 - 6.1;
  for (int o = 0; o < C; o++) {
    double s = 0.25;
    for (int a = 0; a < N; a++)
      for (int b = 0; b < H * W; b++) s += x[(a * C + o) * H * W + b];
    sum[o] = s;
  }
  snprintf(text, sizeof text, "%sENTRY e {\n a = f64[%d,%d,%d,%d] parameter(0)\n z = f64[] constant(0.25)\n"
           " ROOT r = f64[%d] reduce(a, z), dimensions={0,2,3}, to_apply=addd\n}\n", reducers, N, C, H, W, C);
  rt_value *a4[] = {make_value(HLO_F64, 4, dims, x)};
  expect_cpu(__LINE__, text, a4, 1, sum, C, 0);
  /* a NaN in output 2's elements */
  for (int i = 0; i < N * C * H * W; i++) x[i] = 1;
  x[(1 * C + 2) * H * W + 4] = NAN;
  double nan_sum[C];
  for (int o = 0; o < C; o++) nan_sum[o] = o == 2 ? NAN : N * H * W;
  snprintf(text, sizeof text, "%sENTRY e {\n a = f32[%d,%d,%d,%d] parameter(0)\n z = f32[] constant(0)\n"
           " ROOT r = f32[%d] reduce(a, z), dimensions={0,2,3}, to_apply=add\n}\n", reducers, N, C, H, W, C);
  rt_value *a5[] = {make_value(HLO_F32, 4, dims, x)};
  expect_cpu(__LINE__, text, a5, 1, nan_sum, C, 0);
}

/* A leading dim of 1 leaves each output one run: the innermost kernel, in row order. */
static void test_unit_batch(void) {
  enum { C = 9, H = 7, W = 7 };
  float *x = values(C * H * W, 3);
  double want[C];
  for (int o = 0; o < C; o++) {
    float acc = 0.5f;
    for (int b = 0; b < H * W; b++) acc = acc + x[o * H * W + b];
    want[o] = acc;
  }
  char text[1024];
  snprintf(text, sizeof text, "%sENTRY e {\n a = f32[1,%d,%d,%d] parameter(0)\n z = f32[] constant(0.5)\n"
           " ROOT r = f32[%d] reduce(a, z), dimensions={0,2,3}, to_apply=add\n}\n", reducers, C, H, W, C);
  rt_value *args[] = {f32_value(1, C, H, W, x)};
  expect_cpu(__LINE__, text, args, 1, want, C, 0);
  free(x);
}

/* sum((x - m)^2) and sum(g * (x - m)) over {0, 2, 3}, m a per-channel [C] value: the chain
 * is the reduce's fused step (its values never stored), on each vector variant this
 * processor has, and without fusion: the same bits as the lanes over the chain's f32 values. */
static void check_fused(int64_t n, int64_t c, int64_t h, int64_t w) {
  int64_t count = n * c * h * w, inner = h * w;
  float *x = values(count, 1), *g = values(count, 2), *m = values(c, 5);
  float *sq = malloc(sizeof(float) * (size_t)count), *gx = malloc(sizeof(float) * (size_t)count);
  for (int64_t i = 0; i < count; i++) {
    float centered = x[i] - m[i / inner % c];
    sq[i] = centered * centered;
    gx[i] = g[i] * centered;
  }
  double *want_sq = malloc(sizeof(double) * (size_t)c), *want_gx = malloc(sizeof(double) * (size_t)c);
  for (int64_t o = 0; o < c; o++) {
    want_sq[o] = lane_sum(sq, n, c, inner, o, 0);
    want_gx[o] = lane_sum(gx, n, c, inner, o, 0);
  }
  char text[4096];
  snprintf(text, sizeof text,
           "%sENTRY e {\n x = f32[%lld,%lld,%lld,%lld] parameter(0)\n g = f32[%lld,%lld,%lld,%lld] parameter(1)\n"
           " m = f32[%lld] parameter(2)\n mb = f32[%lld,%lld,%lld,%lld] broadcast(m), dimensions={1}\n"
           " c = f32[%lld,%lld,%lld,%lld] subtract(x, mb)\n s = f32[%lld,%lld,%lld,%lld] multiply(c, c)\n"
           " p = f32[%lld,%lld,%lld,%lld] multiply(g, c)\n z = f32[] constant(0)\n"
           " r1 = f32[%lld] reduce(s, z), dimensions={0,2,3}, to_apply=add\n"
           " r2 = f32[%lld] reduce(p, z), dimensions={0,2,3}, to_apply=add\n"
           " ROOT t = (f32[%lld], f32[%lld]) tuple(r1, r2)\n}\n",
           reducers, (long long)n, (long long)c, (long long)h, (long long)w, (long long)n, (long long)c, (long long)h,
           (long long)w, (long long)c, (long long)n, (long long)c, (long long)h, (long long)w, (long long)n,
           (long long)c, (long long)h, (long long)w, (long long)n, (long long)c, (long long)h, (long long)w,
           (long long)n, (long long)c, (long long)h, (long long)w, (long long)c, (long long)c, (long long)c,
           (long long)c);
  /* the plan: both reduces run their chains (x - m, read by both, is stored) */
  hlo_diag diag = {0};
  hlo_module *module = parse_checked(text);
  rt_cpu_plan *plan = module ? rt_cpu_plan_build(module, NULL, &diag) : NULL;
  int tails = 0;
  for (int i = 0; plan && i < plan->step_count; i++)
    tails += plan->steps[i].kind == RT_STEP_FUSED && plan->steps[i].fusion->tail;
  CHECK_EQ_INT(tails, 2);
  rt_cpu_plan_free(plan);
  hlo_module_free(module);
  rt_cpu_isa widest = rt_cpu_isa_in_use();
  const rt_compile_options no_fusion = {.no_fusion = true, .keep_arena_bytes = -1};
  for (int isa = 0; isa <= RT_CPU_ISA_COUNT; isa++) { /* the last round: fusion off */
    if (isa < RT_CPU_ISA_COUNT && !rt_cpu_use_isa((rt_cpu_isa)isa)) continue;
    cpu_util_options = isa == RT_CPU_ISA_COUNT ? &no_fusion : NULL;
    rt_value *args[] = {f32_value(n, c, h, w, x), f32_value(n, c, h, w, g), rt_value_new_array(HLO_F32, 1, &c)};
    memcpy(args[2]->data, m, sizeof(float) * (size_t)c);
    rt_value *got = run_on(&rt_backend_cpu, text, args, 3, &diag);
    CHECK_MSG(got && got->shape.dtype == HLO_TUPLE && got->tuple_count == 2, "isa %d: %s", isa, diag.message);
    if (got && got->shape.dtype == HLO_TUPLE && got->tuple_count == 2) {
      expect_values(__LINE__, got->tuple[0], want_sq, c, 0);
      expect_values(__LINE__, got->tuple[1], want_gx, c, 0);
    }
    rt_value_release(got);
    for (int k = 0; k < 3; k++) rt_value_release(args[k]);
  }
  cpu_util_options = NULL;
  CHECK(rt_cpu_use_isa(widest));
  free(x), free(g), free(m), free(sq), free(gx), free(want_sq), free(want_gx);
}

static void test_fused(void) {
  check_fused(5, 37, 7, 9);
  check_fused(6, 40, 2, 2);
  check_fused(3, 5, 32, 32);
}

int main(void) {
  RUN(test_sums);
  RUN(test_in_order);
  RUN(test_unit_batch);
  RUN(test_fused);
  return TEST_REPORT();
}
