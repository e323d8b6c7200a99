/* Strided convolutions over few features as stride-1 convolutions over space-to-depth blocks
 * (rt_cpu_pass_space_to_depth): which convolutions the pass rewrites and which it leaves;
 * the rewritten module on the reference evaluator against the original on the reference
 * (the same sums in another order); the cpu backend against the reference at alexnet's
 * stem and at odd sizes, strides and paddings; the kernel's rewrite kept between calls as
 * parameter-only work; and a bound executable at other batch sizes, whose pass-made reshapes
 * follow the batch. */
#include <stdio.h>

#include "cpu_util.h"
#include "hlo/hlo.h"
#include "runtime/cpu/exec_internal.h"

typedef struct graph_text {
  char s[1024];
} graph_text;

/* x [n, c, h, w] convolved with [o, c, kh, kw] at the given strides and paddings (NCHW). */
static graph_text conv_graph(int n, int c, int h, int w, int o, int kh, int kw, int sh, int sw, int ph, int pw,
                             const char *labels) {
  int oh = (h + 2 * ph - kh) / sh + 1, ow = (w + 2 * pw - kw) / sw + 1;
  graph_text t;
  snprintf(t.s, sizeof t.s,
           "HloModule s\nENTRY e {\n x = f32[%d,%d,%d,%d] parameter(0)\n k = f32[%d,%d,%d,%d] parameter(1)\n"
           " ROOT y = f32[%d,%d,%d,%d] convolution(x, k), window={size=%dx%d stride=%dx%d pad=%d_%dx%d_%d}, "
           "dim_labels=%s\n}\n",
           n, c, h, w, o, c, kh, kw, n, o, oh, ow, kh, kw, sh, sw, ph, ph, pw, pw, labels);
  return t;
}

static const char *nchw = "bf01_oi01->bf01";

static graph_text stem(int n, int h) { return conv_graph(n, 3, h, h, 16, 11, 11, 4, 4, 2, 2, nchw); }

/* The pass's rewrites of text; when it rewrote, the result is a stride-1 convolution over
 * c * sh * sw features. */
static void expect_rewrites(int line, const char *text, int want, int64_t features) {
  hlo_module *module = parse_checked(text);
  if (!module) return;
  int got = rt_cpu_pass_space_to_depth(module);
  CHECK_MSG(got == want, "line %d: %d rewritten, want %d", line, got, want);
  hlo_diag diag = {0};
  CHECK_MSG(hlo_verify_module(module, &diag) == HLO_OK, "line %d: %s", line, diag.message);
  const hlo_instr *root = module->entry->root;
  if (want)
    CHECK_MSG(root->opcode == HLO_OP_CONVOLUTION && root->window->dims[0].stride == 1 &&
                  root->window->dims[1].stride == 1 && root->operands[0]->shape.dims[1] == features,
              "line %d: not the blocked convolution:\n%s", line, hlo_module_to_text(module));
  hlo_module_free(module);
}

static void test_which(void) {
  expect_rewrites(__LINE__, stem(2, 39).s, 1, 48);                                       /* alexnet's stem */
  expect_rewrites(__LINE__, conv_graph(1, 2, 23, 30, 5, 7, 9, 3, 4, 1, 3, nchw).s, 1, 24); /* 3x4 strides */
  expect_rewrites(__LINE__, conv_graph(1, 3, 32, 32, 8, 7, 7, 2, 2, 3, 3, nchw).s, 0, 0);  /* resnet's stem: stride 2 */
  expect_rewrites(__LINE__, conv_graph(1, 16, 39, 39, 8, 11, 11, 4, 4, 2, 2, nchw).s, 0, 0); /* 256 block features */
  expect_rewrites(__LINE__, conv_graph(1, 3, 32, 32, 8, 2, 2, 4, 4, 0, 0, nchw).s, 0, 0);    /* kernel < stride */
  expect_rewrites(__LINE__,
                  "HloModule s\nENTRY e {\n x = f32[1,39,39,3] parameter(0)\n k = f32[11,11,3,8] parameter(1)\n"
                  " ROOT y = f32[1,9,9,8] convolution(x, k), window={size=11x11 stride=4x4 pad=2_2x2_2}, "
                  "dim_labels=b01f_01io->b01f\n}\n",
                  0, 0); /* NHWC */
}

/* The rewritten graph against the original, both on the reference evaluator. */
static void expect_same_sums(int line, const char *text) {
  hlo_module *module = parse_checked(text);
  if (!module) return;
  hlo_diag diag = {0};
  rt_value *args[2];
  for (int i = 0; i < 2; i++) args[i] = rt_random_value(&module->entry->params[i]->shape, 5, (uint64_t)i, &diag);
  rt_value *want = run_on(&rt_backend_reference, text, args, 2, &diag);
  rt_cpu_pass_space_to_depth(module);
  char *rewritten = hlo_module_to_text(module);
  rt_value *got = rewritten ? run_on(&rt_backend_reference, rewritten, args, 2, &diag) : NULL;
  CHECK_MSG(want && got && cpu_agree(want, got), "line %d: the rewrite changed the result: %s", line, diag.message);
  free(rewritten);
  rt_value_release(want);
  rt_value_release(got);
  for (int i = 0; i < 2; i++) rt_value_release(args[i]);
  hlo_module_free(module);
}

static void test_values(void) {
  const graph_text graphs[] = {
      stem(2, 39), stem(1, 63),
      conv_graph(1, 2, 23, 30, 5, 7, 9, 3, 4, 1, 3, nchw), /* 3x4 strides, uneven padding to cover */
      conv_graph(2, 1, 17, 17, 4, 4, 4, 4, 4, 0, 0, nchw), /* kernel == stride: one block */
      conv_graph(1, 4, 20, 21, 3, 5, 6, 3, 3, 0, 2, nchw),
  };
  for (size_t i = 0; i < sizeof graphs / sizeof graphs[0]; i++) {
    expect_same_sums(__LINE__, graphs[i].s);
    for (int seed = 1; seed <= 2; seed++) expect_same_as_reference(graphs[i].s, seed);
  }
}

/* The kernel's pad, reshapes and transpose run once per weight version; at batch 3 and 1 the
 * bound executables' reshapes follow the batch. */
static void test_kept_and_bound(void) {
  graph_text text = stem(2, 39);
  rt_executable *exe = compile_checked(text.s);
  if (!exe) return;
  hlo_module *module = parse_checked(text.s);
  hlo_diag diag = {0};
  rt_value *args[2];
  for (int i = 0; i < 2; i++) args[i] = rt_random_value(&module->entry->params[i]->shape, 9, (uint64_t)i, &diag);
  hlo_module_free(module);
  rt_value *want = run_on(&rt_backend_reference, text.s, args, 2, &diag);
  for (int run = 0; run < 2; run++) {
    int64_t before = rt_cpu_kept_reuse_count();
    rt_value *got = NULL;
    CHECK_MSG(rt_backend_cpu.execute(exe, args, 2, &got, &diag) == HLO_OK && cpu_agree(want, got), "run %d: %s", run,
              diag.message);
    CHECK_MSG((rt_cpu_kept_reuse_count() > before) == (run == 1), "run %d: kept steps reused %lld", run,
              (long long)(rt_cpu_kept_reuse_count() - before));
    rt_value_release(got);
  }
  rt_value_release(want);
  for (int batch = 3; batch >= 1; batch -= 2) {
    graph_text other = stem(batch, 39);
    hlo_module *binding = parse_checked(other.s);
    rt_executable *bound = binding ? rt_backend_cpu.bind(exe, binding, &diag) : NULL;
    CHECK_MSG(bound != NULL, "batch %d: bind: %s", batch, diag.message);
    rt_value *x = binding ? rt_random_value(&binding->entry->params[0]->shape, 11, 0, &diag) : NULL;
    hlo_module_free(binding);
    rt_value *bound_args[2] = {x, args[1]};
    rt_value *bwant = run_on(&rt_backend_reference, other.s, bound_args, 2, &diag), *bgot = NULL;
    CHECK_MSG(bound && rt_backend_cpu.execute(bound, bound_args, 2, &bgot, &diag) == HLO_OK && cpu_agree(bwant, bgot),
              "batch %d: bound result: %s", batch, diag.message);
    rt_value_release(bwant);
    rt_value_release(bgot);
    rt_value_release(x);
    if (bound) rt_backend_cpu.destroy(bound);
  }
  for (int i = 0; i < 2; i++) rt_value_release(args[i]);
  rt_backend_cpu.destroy(exe);
}

int main(void) {
  RUN(test_which);
  RUN(test_values);
  RUN(test_kept_and_bound);
  return TEST_REPORT();
}
