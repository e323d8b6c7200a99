/* A max pool's gradient (select-and-scatter with a >= select and an add scatter) on the cpu
 * backend's kernel (runtime/cpu/pool_grad.c) against the reference evaluator, bit for bit:
 * the pools PyTorch models use (3x3 stride 2 padding 1 over even and odd sizes, 2x2 stride 2,
 * 3x3 stride 1, a kernel smaller than its stride, stride 3), over values with ties (a few
 * small integers) and with NaN and infinities mixed in, on enough planes to split over the
 * threads; the kernel is the plan's (a fast step, not the reference's). A select the kernel
 * does not take (>) stays the reference's, with the same values. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cpu_util.h"
#include "runtime/cpu/plan_internal.h"

static const char *const comps =
    "HloModule m\nge {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT c = pred[] compare(a, b), direction=GE\n}\n"
    "gt {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT c = pred[] compare(a, b), direction=GT\n}\n"
    "add {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] add(a, b)\n}\n";

/* Bitwise equal, or both NaN. */
static bool same_floats(const rt_value *a, const rt_value *b) {
  if (!a || !b || a->count != b->count) return false;
  const float *x = a->data, *y = b->data;
  for (int64_t i = 0; i < a->count; i++)
    if (!(memcmp(&x[i], &y[i], sizeof(float)) == 0 || (isnan(x[i]) && isnan(y[i])))) return false;
  return true;
}

static rt_value *filled(int rank, const int64_t *dims, uint64_t seed, bool specials) {
  rt_value *v = rt_value_new_array(HLO_F32, rank, dims);
  float *p = v->data;
  uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (int64_t i = 0; i < v->count; i++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    int r = (int)(s >> 33);
    p[i] = (float)(r % 5) - 2; /* ties in most windows */
    if (specials && r % 37 == 0) p[i] = r % 3 == 0 ? NAN : r % 3 == 1 ? INFINITY : -INFINITY;
  }
  return v;
}

/* The pool's gradient on both backends; kind_out: the select-and-scatter step's kind. */
static void check(int kernel, int stride, int pad, int size, int planes, bool specials, const char *select,
                  rt_cpu_step_kind want_kind) {
  int out = (size + 2 * pad - kernel) / stride + 1;
  char text[4096];
  snprintf(text, sizeof text,
           "%sENTRY e {\n x = f32[%d,2,%d,%d] parameter(0)\n g = f32[%d,2,%d,%d] parameter(1)\n"
           " z = f32[] constant(0)\n ROOT r = f32[%d,2,%d,%d] select-and-scatter(x, g, z), "
           "window={size=1x1x%dx%d stride=1x1x%dx%d pad=0_0x0_0x%d_%dx%d_%d}, select=%s, scatter=add\n}\n",
           comps, planes, size, size, planes, out, out, planes, size, size, kernel, kernel, stride, stride, pad, pad,
           pad, pad, select);
  hlo_diag diag = {0};
  hlo_module *module = parse_checked(text);
  rt_cpu_plan *plan = module ? rt_cpu_plan_build(module, NULL, &diag) : NULL;
  CHECK_MSG(plan != NULL, "%s", diag.message);
  if (plan) CHECK_EQ_INT(plan->steps[module->entry->root->id].kind, want_kind);
  rt_cpu_plan_free(plan);
  hlo_module_free(module);
  rt_value *args[2] = {filled(4, (int64_t[]){planes, 2, size, size}, (uint64_t)(size * 31 + kernel), specials),
                       filled(4, (int64_t[]){planes, 2, out, out}, (uint64_t)(size + stride), false)};
  rt_value *want = run_on(&rt_backend_reference, text, args, 2, &diag);
  CHECK_MSG(want != NULL, "reference: %s", diag.message);
  rt_value *got = run_on(&rt_backend_cpu, text, args, 2, &diag);
  CHECK_MSG(got != NULL, "cpu: %s", diag.message);
  CHECK_MSG(same_floats(want, got), "kernel %d stride %d pad %d size %d planes %d specials %d select %s differ",
            kernel, stride, pad, size, planes, specials, select);
  rt_value_release(want);
  rt_value_release(got);
  rt_value_release(args[0]);
  rt_value_release(args[1]);
}

static void test_against_reference(void) {
  static const int cases[][4] = {{3, 2, 1, 8}, {3, 2, 1, 9}, {2, 2, 0, 7}, {3, 1, 1, 6}, {1, 2, 0, 7}, {3, 3, 1, 10}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
    for (int specials = 0; specials < 2; specials++)
      check(cases[c][0], cases[c][1], cases[c][2], cases[c][3], 3, specials, "ge", RT_STEP_FAST);
  check(3, 2, 1, 32, 64, true, "ge", RT_STEP_FAST); /* 128 planes of 32x32: several threads */
  check(3, 2, 1, 8, 2, true, "gt", RT_STEP_SLOW);
}

int main(void) {
  RUN(test_against_reference);
  return TEST_REPORT();
}
