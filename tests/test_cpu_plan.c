/* The cpu backend's buffer plan: which results are written over their operands (and which
 * must not be), that batch-norm results and kernel scratch are planned into the arena, and
 * that an execute allocates what the plan says and nothing per step. Every case also runs
 * against the reference evaluator: a plan decision must never change a result. */
#include <stdlib.h>

#include "cpu_util.h"
#include "runtime/cpu/exec_internal.h"
#include "runtime/runtime.h"
#include "test.h"

/* The plan of text (no passes, so step i is instruction i); NULL after a failed check. */
static rt_cpu_plan *plan_of(const char *text, hlo_module **module) {
  hlo_diag diag = {0};
  *module = parse_checked(text);
  rt_cpu_plan *plan = *module ? rt_cpu_plan_build(*module, cpu_util_options, &diag) : NULL;
  CHECK_MSG(!*module || plan != NULL, "%s", diag.message);
  return plan;
}

static const rt_cpu_step *step_named(const rt_cpu_plan *plan, const char *name) {
  for (int i = 0; i < plan->step_count; i++)
    if (strcmp(plan->steps[i].instr->name, name) == 0) return &plan->steps[i];
  return NULL;
}

/* Expects step `name` of text to write in place (or not), and the results to match. */
static void expect_in_place(const char *text, const char *name, bool in_place) {
  hlo_module *module;
  rt_cpu_plan *plan = plan_of(text, &module);
  const rt_cpu_step *step = plan ? step_named(plan, name) : NULL;
  CHECK_MSG(step != NULL, "no step %s", name);
  if (step) CHECK_MSG(step->in_place == in_place, "%s: in_place %d, want %d\n%s", name, step->in_place, in_place, text);
  rt_cpu_plan_free(plan);
  hlo_module_free(module);
  expect_same_as_reference(text, 1);
}

static void test_in_place(void) {
  /* in-place is decided for unfused steps: fusion would take these f32 chains whole */
  const rt_compile_options unfused = {.no_fusion = true, .keep_arena_bytes = -1};
  cpu_util_options = &unfused;
  /* b's operand a dies at b: b writes over it, and c over b */
  const char *chain = "HloModule m\nENTRY e {\n x = f32[37] parameter(0)\n a = f32[37] exponential(x)\n"
                      " b = f32[37] negate(a)\n ROOT c = f32[37] tanh(b)\n}\n";
  expect_in_place(chain, "b", true);
  /* a is read again by c: b must not overwrite it; c may take either dying operand */
  const char *read_later = "HloModule m\nENTRY e {\n x = f32[37] parameter(0)\n a = f32[37] exponential(x)\n"
                           " b = f32[37] negate(a)\n c = f32[37] add(b, a)\n ROOT d = f32[37] sqrt(c)\n}\n";
  expect_in_place(read_later, "b", false);
  expect_in_place(read_later, "c", true);
  /* read later through a view: r is a reshape of a, read by c */
  const char *through_view = "HloModule m\nENTRY e {\n x = f32[6,5] parameter(0)\n a = f32[6,5] exponential(x)\n"
                             " r = f32[30] reshape(a)\n b = f32[6,5] negate(a)\n c = f32[30] negate(r)\n"
                             " rb = f32[30] reshape(b)\n ROOT t = (f32[30], f32[30]) tuple(c, rb)\n}\n";
  expect_in_place(through_view, "b", false);
  /* parameters and constants are never written */
  const char *param = "HloModule m\nENTRY e {\n x = f32[37] parameter(0)\n a = f32[37] negate(x)\n ROOT b = f32[37] exponential(a)\n}\n";
  expect_in_place(param, "a", false);
  const char *constant = "HloModule m\nENTRY e {\n x = f32[3] parameter(0)\n k = f32[3] constant({1, 2, 3})\n"
                         " a = f32[3] negate(k)\n b = f32[3] add(a, x)\n ROOT c = f32[3] exponential(b)\n}\n";
  expect_in_place(constant, "a", false);
  expect_in_place(constant, "b", true);
  /* an entry result keeps its value: a is an output, so b may not take it */
  const char *output = "HloModule m\nENTRY e {\n x = f32[37] parameter(0)\n a = f32[37] exponential(x)\n"
                       " b = f32[37] negate(a)\n ROOT t = (f32[37], f32[37]) tuple(a, b)\n}\n";
  expect_in_place(output, "b", false);
  /* results of another type or size get their own buffer */
  const char *types = "HloModule m\nENTRY e {\n x = f32[37] parameter(0)\n a = f32[37] exponential(x)\n"
                      " h = f16[37] convert(a)\n n = f16[37] negate(h)\n ROOT c = f32[37] convert(n)\n}\n";
  expect_in_place(types, "h", false);
  expect_in_place(types, "n", true);
  const char *compare = "HloModule m\nENTRY e {\n x = f32[37] parameter(0)\n y = f32[37] parameter(1)\n"
                        " a = f32[37] exponential(x)\n b = f32[37] negate(y)\n p = pred[37] compare(a, b), direction=GT\n"
                        " s = f32[37] select(p, a, b)\n ROOT c = f32[37] abs(s)\n}\n";
  expect_in_place(compare, "p", false);
  expect_in_place(compare, "s", true);
  /* a dot's operand dies at the dot, but a dot reads whole rows: never in place */
  const char *dot = "HloModule m\nENTRY e {\n x = f32[8,8] parameter(0)\n a = f32[8,8] exponential(x)\n"
                    " d = f32[8,8] dot(a, a), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n ROOT c = f32[8,8] negate(d)\n}\n";
  expect_in_place(dot, "d", false);
  expect_in_place(dot, "c", false); /* d is the root's operand but c is the root: its own value */
  cpu_util_options = NULL;
}

/* Conv, dot and batch-norm run as planned fast steps (scratch and tuple elements in the
 * arena), and repeated executes allocate only the root and its elements: the arena is kept
 * between executes. */
static const char *training_step =
    "HloModule m\nENTRY e {\n"
    " x = f32[3,4,9,7] parameter(0)\n k = f32[6,4,3,3] parameter(1)\n s = f32[6] parameter(2)\n o = f32[6] parameter(3)\n"
    " w = f32[6,5] parameter(4)\n"
    " c = f32[3,6,5,4] convolution(x, k), window={size=3x3 stride=2x2 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01\n"
    " t = (f32[3,6,5,4], f32[6], f32[6]) batch-norm-training(c, s, o), epsilon=0.001, feature_index=1\n"
    " y = f32[3,6,5,4] get-tuple-element(t), index=0\n mean = f32[6] get-tuple-element(t), index=1\n"
    " var = f32[6] get-tuple-element(t), index=2\n"
    " r = f32[3,6,5,4] maximum(y, y)\n"
    " g = (f32[3,6,5,4], f32[6], f32[6]) batch-norm-grad(c, s, mean, var, r), epsilon=0.001, feature_index=1\n"
    " dx = f32[3,6,5,4] get-tuple-element(g), index=0\n gs = f32[6] get-tuple-element(g), index=1\n"
    " wg = f32[6,6,1,1] convolution(c, dx), window={size=5x4}, dim_labels=fb01_io01->bf01\n"
    " wg2 = f32[6,6] reshape(wg)\n"
    " d = f32[6,5] dot(wg2, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    " ROOT out = (f32[6,5], f32[6], f32[6]) tuple(d, gs, var)\n}\n";

static void test_planned_steps(void) {
  hlo_module *module;
  rt_cpu_plan *plan = plan_of(training_step, &module);
  if (!plan) {
    hlo_module_free(module);
    return;
  }
  for (int i = 0; i < plan->step_count; i++) CHECK_MSG(plan->steps[i].kind != RT_STEP_SLOW, "%s runs slow", plan->steps[i].instr->name);
  /* the convolutions run on oneDNN (runtime/cpu/dnnl_*.c) or, where it refuses, im2col */
  const rt_cpu_step *c = step_named(plan, "c"), *wg = step_named(plan, "wg");
  CHECK(c->kind == RT_STEP_DNNL || c->fast_scratch != NULL);
  CHECK(wg->kind == RT_STEP_DNNL || (wg->fast_scratch != NULL && wg->scratch_bytes > 0));
  CHECK(step_named(plan, "d")->fast_scratch != NULL && step_named(plan, "d")->output);
  CHECK_EQ_INT(step_named(plan, "t")->part_count, 3);
  CHECK(step_named(plan, "y")->kind == RT_STEP_PART && step_named(plan, "var")->kind == RT_STEP_PART);
  rt_cpu_plan_free(plan);
  hlo_module_free(module);
  expect_same_as_reference(training_step, 2);

  /* three executes of one executable: the first allocates the arena, each allocates the
   * root tuple, its fast element d, and copies of the two statistics it views */
  hlo_diag diag = {0};
  module = parse_checked(training_step);
  rt_executable *exe = module ? rt_backend_cpu.compile(module, NULL, &diag) : NULL;
  CHECK_MSG(exe != NULL, "%s", diag.message);
  rt_value *args[5] = {0};
  for (int i = 0; exe && i < 5; i++) args[i] = rt_random_value(&module->entry->params[i]->shape, 3, (uint64_t)i, &diag);
  for (int run = 0; exe && run < 3; run++) {
    int64_t before = rt_cpu_allocation_count();
    rt_value *result = NULL;
    CHECK(rt_backend_cpu.execute(exe, args, 5, &result, &diag) == HLO_OK);
    CHECK_EQ_INT(rt_cpu_allocation_count() - before, run == 0 ? 5 : 4);
    rt_value_release(result);
  }
  for (int i = 0; i < 5; i++) rt_value_release(args[i]);
  rt_backend_cpu.destroy(exe);
  hlo_module_free(module);
}

/* Allocations of three executes of the training step compiled with options. */
static void count_allocations(const rt_compile_options *options, int64_t counts[3]) {
  hlo_diag diag = {0};
  hlo_module *module = parse_checked(training_step);
  rt_executable *exe = module ? rt_backend_cpu.compile(module, options, &diag) : NULL;
  rt_value *args[5] = {0};
  for (int i = 0; exe && i < 5; i++) args[i] = rt_random_value(&module->entry->params[i]->shape, 3, (uint64_t)i, &diag);
  for (int run = 0; run < 3; run++) {
    int64_t before = rt_cpu_allocation_count();
    rt_value *result = NULL;
    counts[run] = exe && rt_backend_cpu.execute(exe, args, 5, &result, &diag) == HLO_OK ? rt_cpu_allocation_count() - before : -1;
    rt_value_release(result);
  }
  for (int i = 0; i < 5; i++) rt_value_release(args[i]);
  if (exe) rt_backend_cpu.destroy(exe);
  hlo_module_free(module);
}

/* keep_arena_bytes 0 (LATCH_KEEP_ARENA_MB=0): no arena is kept, so every execute allocates its
 * own (one more than the 4 results). */
static void test_keep_no_arena(void) {
  const rt_compile_options keep_none = {.no_fusion = false, .keep_arena_bytes = 0};
  int64_t counts[3];
  count_allocations(&keep_none, counts);
  CHECK_MSG(counts[0] == 5 && counts[1] == 5 && counts[2] == 5,
            "with no arena kept, an execute did not allocate 5 times: %lld %lld %lld", (long long)counts[0],
            (long long)counts[1], (long long)counts[2]);
}

/* Same-shape results of a training step reuse buffers: the arena holds far less than all the
 * buffers and scratch placed end to end. */
static void test_arena_smaller_than_buffers(void) {
  hlo_module *module;
  rt_cpu_plan *plan = plan_of(training_step, &module);
  if (plan) {
    CHECK_MSG(plan->arena_bytes < plan->buffer_bytes, "%lld >= %lld", (long long)plan->arena_bytes, (long long)plan->buffer_bytes);
    CHECK(plan->peak_live_bytes <= plan->arena_bytes); /* no placement beats the live bytes */
  }
  rt_cpu_plan_free(plan);
  hlo_module_free(module);
}

/* Depthwise (one input feature per group) and 1x1 convolutions, which skip the im2col gather,
 * against the reference: strides, padding, dilations, batch > 1, odd sizes, both layouts. */
static void test_direct_convolutions(void) {
  char text[1024];
  for (int seed = 0; seed < 24; seed++) {
    uint64_t r = rt_mix64((uint64_t)seed + 11);
    int64_t batch = 1 + (int64_t)(r % 3), channels = 1 + (int64_t)(r >> 4) % 7, h = 1 + (int64_t)(r >> 8) % 9;
    int64_t w = 2 + (int64_t)(r >> 12) % 6, stride = 1 + (int64_t)(r >> 16) % 2, pad = (int64_t)(r >> 20) % 2;
    int64_t dil = 1 + (int64_t)(r >> 24) % 2, mult = 1 + (int64_t)(r >> 28) % 2;
    bool nhwc = (r >> 32) & 1;
    /* depthwise 3x3: output size per XLA's window rule */
    int64_t span = 2 * dil + 1;
    int64_t hp = h + 2 * pad, wp = w + 2 * pad;
    if (hp < span) h += span - hp, hp = span;
    if (wp < span) w += span - wp, wp = span;
    int64_t oh = (hp - span) / stride + 1, ow = (wp - span) / stride + 1;
    if (nhwc)
      snprintf(text, sizeof text,
               "HloModule m\nENTRY e {\n x = f32[%lld,%lld,%lld,%lld] parameter(0)\n k = f32[3,3,1,%lld] parameter(1)\n"
               " ROOT c = f32[%lld,%lld,%lld,%lld] convolution(x, k), window={size=3x3 stride=%lldx%lld pad=%lld_%lldx%lld_%lld rhs_dilate=%lldx%lld},"
               " dim_labels=b01f_01io->b01f, feature_group_count=%lld\n}\n",
               (long long)batch, (long long)h, (long long)w, (long long)channels, (long long)(channels * mult),
               (long long)batch, (long long)oh, (long long)ow, (long long)(channels * mult), (long long)stride,
               (long long)stride, (long long)pad, (long long)pad, (long long)pad, (long long)pad, (long long)dil,
               (long long)dil, (long long)channels);
    else
      snprintf(text, sizeof text,
               "HloModule m\nENTRY e {\n x = f32[%lld,%lld,%lld,%lld] parameter(0)\n k = f32[%lld,1,3,3] parameter(1)\n"
               " ROOT c = f32[%lld,%lld,%lld,%lld] convolution(x, k), window={size=3x3 stride=%lldx%lld pad=%lld_%lldx%lld_%lld rhs_dilate=%lldx%lld},"
               " dim_labels=bf01_oi01->bf01, feature_group_count=%lld\n}\n",
               (long long)batch, (long long)channels, (long long)h, (long long)w, (long long)(channels * mult),
               (long long)batch, (long long)(channels * mult), (long long)oh, (long long)ow, (long long)stride,
               (long long)stride, (long long)pad, (long long)pad, (long long)pad, (long long)pad, (long long)dil,
               (long long)dil, (long long)channels);
    expect_same_as_reference(text, seed);
    /* 1x1, stride 1 (no gather at all) or strided (a gather of one tap) */
    int64_t out_f = 1 + (int64_t)(r >> 36) % 9, h1 = (h - 1) / stride + 1, w1 = (w - 1) / stride + 1;
    snprintf(text, sizeof text,
             "HloModule m\nENTRY e {\n x = f32[%lld,%lld,%lld,%lld] parameter(0)\n k = f32[%lld,%lld,1,1] parameter(1)\n"
             " ROOT c = f32[%lld,%lld,%lld,%lld] convolution(x, k), window={size=1x1 stride=%lldx%lld}, dim_labels=bf01_oi01->bf01\n}\n",
             (long long)batch, (long long)channels, (long long)h, (long long)w, (long long)out_f, (long long)channels,
             (long long)batch, (long long)out_f, (long long)h1, (long long)w1, (long long)stride, (long long)stride);
    expect_same_as_reference(text, seed);
  }
}

int main(void) {
  RUN(test_keep_no_arena); /* first: its child must read the budget before this process does */
  RUN(test_in_place);
  RUN(test_planned_steps);
  RUN(test_arena_smaller_than_buffers);
  RUN(test_direct_convolutions);
  return TEST_REPORT();
}
