/* rt_cpu_pass_dot_of_repeats: a dot whose lhs repeats values along the contracting dim (an
 * adaptive pool's 1x1 -> 3x3 growth flattened into a classifier) multiplies the values by
 * the weight summed over the repeats. Checked: which graphs are rewritten and into what;
 * the cpu backend's results (which run the rewrite) against sums worked out here in plain
 * C and against the reference evaluator (which runs the graph as written); binding the
 * rewritten graph to other batch sizes. */
#include <stdio.h>

#include "cpu_util.h"
#include "hlo/hlo.h"
#include "runtime/cpu/cpu.h"
#include "runtime/cpu/exec_internal.h"

/* relu(flatten(v grown 1x1 -> 3x3 by two concatenations of copies) @ w + b): v [n, 4, 1, 1],
 * w [36, 5], b [5]. */
static const char *pool_text(int64_t n, const char *type) {
  static char text[2048];
  snprintf(text, sizeof text,
           "HloModule pool\nENTRY e {\n"
           "  v = %2$s[%1$lld,4,1,1] parameter(0)\n  w = %2$s[36,5] parameter(1)\n  b = %2$s[5] parameter(2)\n"
           "  r1 = %2$s[%1$lld,4,1,1,1] reshape(v)\n"
           "  c1 = %2$s[%1$lld,4,1,3,1] concatenate(r1, r1, r1), dimensions={3}\n"
           "  r2 = %2$s[%1$lld,4,3,1,1] reshape(c1)\n"
           "  c2 = %2$s[%1$lld,4,3,1,3] concatenate(r2, r2, r2), dimensions={4}\n"
           "  r3 = %2$s[%1$lld,4,3,3] reshape(c2)\n  l = %2$s[%1$lld,36] reshape(r3)\n"
           "  d = %2$s[%1$lld,5] dot(l, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
           "  bb = %2$s[%1$lld,5] broadcast(b), dimensions={1}\n  s = %2$s[%1$lld,5] add(d, bb)\n"
           "  z = %2$s[] constant(0)\n  zb = %2$s[%1$lld,5] broadcast(z), dimensions={}\n"
           "  ROOT y = %2$s[%1$lld,5] maximum(s, zb)\n}\n",
           (long long)n, type);
  return text;
}

/* Values that are multiples of 1/8 and 1/16 with small numerators: every sum is exact in
 * f32, in any order, so the rewritten graph's results equal the plain sums exactly. */
static double v_at(int64_t i, int64_t c) { return (double)((i * 3 + c * 5) % 9 - 4) / 8; }
static double w_at(int64_t k, int64_t j) { return (double)((k * 7 + j * 3) % 11 - 5) / 16; }
static double b_at(int64_t j) { return (double)j / 4 - 0.5; }

static rt_value *run_pool(const rt_backend *backend, rt_executable *exe, int64_t n, hlo_dtype type) {
  double *vs = malloc(sizeof(double) * (size_t)(n * 4)), ws[36 * 5], bs[5];
  for (int64_t i = 0; i < n * 4; i++) vs[i] = v_at(i / 4, i % 4);
  for (int k = 0; k < 36 * 5; k++) ws[k] = w_at(k / 5, k % 5);
  for (int j = 0; j < 5; j++) bs[j] = b_at(j);
  rt_value *args[3] = {make_value(type, 4, (int64_t[]){n, 4, 1, 1}, vs), make_value(type, 2, (int64_t[]){36, 5}, ws),
                       make_value(type, 1, (int64_t[]){5}, bs)};
  rt_value *result = NULL;
  hlo_diag diag = {0};
  hlo_status status = backend->execute(exe, args, 3, &result, &diag);
  CHECK_MSG(status == HLO_OK, "execute at batch %lld: %s", (long long)n, diag.message);
  for (int i = 0; i < 3; i++) rt_value_release(args[i]);
  free(vs);
  return result;
}

/* The product as written: l[i][k] = v[i][k / 9] (each of v's 4 values fills a 3x3 block). */
static void expect_pool(const rt_value *got, int64_t n) {
  CHECK(got != NULL);
  if (!got) return;
  double *want = malloc(sizeof(double) * (size_t)(n * 5));
  for (int64_t i = 0; i < n; i++)
    for (int j = 0; j < 5; j++) {
      double sum = b_at(j);
      for (int k = 0; k < 36; k++) sum += v_at(i, k / 9) * w_at(k, j);
      want[i * 5 + j] = sum > 0 ? sum : 0;
    }
  expect_values(__LINE__, got, want, n * 5, 0);
  free(want);
}

static int count_op(const hlo_comp *comp, hlo_opcode op) {
  int n = 0;
  for (int i = 0; i < comp->instr_count; i++) n += comp->instrs[i]->opcode == op;
  return n;
}

static const hlo_instr *find_op(const hlo_comp *comp, hlo_opcode op) {
  for (int i = 0; i < comp->instr_count; i++)
    if (comp->instrs[i]->opcode == op) return comp->instrs[i];
  return NULL;
}

/* The pass on the pool graph: the dot takes v itself and w summed over each 3x3 block
 * (w seen as [4, 9, 5], reduced over dim 1, shaped [4, 1, 1, 5]); the copies are gone. */
static void test_rewritten(void) {
  hlo_module *m = parse_checked(pool_text(2, "f32"));
  if (!m) return;
  hlo_pass_run_all(m);
  CHECK_EQ_INT(rt_cpu_pass_dot_of_repeats(m), 1);
  hlo_diag diag = {0};
  CHECK_MSG(hlo_verify_module(m, &diag) == HLO_OK, "%s", diag.message);
  const hlo_instr *dot = find_op(m->entry, HLO_OP_DOT), *reduce = find_op(m->entry, HLO_OP_REDUCE);
  CHECK_EQ_INT(count_op(m->entry, HLO_OP_CONCATENATE), 0);
  CHECK(dot && dot->operands[0]->opcode == HLO_OP_PARAMETER);
  CHECK(dot && dot->operands[1]->shape.rank == 4 && dot->operands[1]->shape.dims[0] == 4 &&
        dot->operands[1]->shape.dims[3] == 5);
  CHECK(dot && dot->dot->lhs_contracting.count == 3 && dot->dot->rhs_contracting.count == 3);
  CHECK(reduce && reduce->dimensions.count == 1 && reduce->dimensions.values[0] == 1);
  CHECK(reduce && reduce->operands[0]->shape.rank == 3 && reduce->operands[0]->shape.dims[1] == 9);
  CHECK_EQ_INT(rt_cpu_pass_dot_of_repeats(m), 0); /* a fixed point */
  hlo_module_free(m);
  /* one row: rewritten for a weight that is a parameter (a backend may keep its sum across
   * calls), not for one computed in the graph (the product reads it once already) */
  m = parse_checked(pool_text(1, "f32"));
  if (m) CHECK_EQ_INT(rt_cpu_pass_dot_of_repeats(m), 1);
  hlo_module_free(m);
  char computed[2048];
  const char *text = pool_text(1, "f32"), *at = strstr(text, "  d = ");
  snprintf(computed, sizeof computed, "%.*s  wn = f32[36,5] negate(w)\n%s", (int)(at - text), text, at);
  char *use = strstr(computed, "dot(l, w)");
  if (use) memcpy(use, "dot(l,wn)", 9);
  m = parse_checked(computed);
  if (m) CHECK_EQ_INT(rt_cpu_pass_dot_of_repeats(m), 0);
  hlo_module_free(m);
}

/* Compiled on the cpu backend, which runs the rewrite: exact against the plain sums (f32,
 * f64), and within rounding of the reference, which runs the graph as written. */
static void test_values(void) {
  for (int t = 0; t < 2; t++) {
    hlo_dtype type = t ? HLO_F64 : HLO_F32;
    rt_executable *exe = compile_checked(pool_text(3, t ? "f64" : "f32"));
    if (!exe) continue;
    rt_value *got = run_pool(&rt_backend_cpu, exe, 3, type);
    expect_pool(got, 3);
    rt_value_release(got);
    rt_backend_cpu.destroy(exe);
  }
  for (int seed = 1; seed <= 3; seed++) expect_same_as_reference(pool_text(5, "f32"), seed);
}

/* Compiled at batch 8, bound to 1, 3 and 20: the rewritten dot takes its shape from the
 * dot it replaced (one row runs the rewritten graph too: the passes ran at 8). */
static void test_bound(void) {
  rt_executable *exe = compile_checked(pool_text(8, "f32"));
  if (!exe) return;
  int64_t sizes[] = {1, 3, 20};
  for (int s = 0; s < 3; s++) {
    hlo_diag diag = {0};
    hlo_module *binding = parse_checked(pool_text(sizes[s], "f32"));
    rt_executable *bound = binding ? rt_backend_cpu.bind(exe, binding, &diag) : NULL;
    hlo_module_free(binding);
    CHECK_MSG(bound != NULL, "bind to %lld: %s", (long long)sizes[s], diag.message);
    if (!bound) continue;
    rt_value *got = run_pool(&rt_backend_cpu, bound, sizes[s], HLO_F32);
    expect_pool(got, sizes[s]);
    rt_value_release(got);
    rt_backend_cpu.destroy(bound);
  }
  rt_backend_cpu.destroy(exe);
}

/* Broadcasts repeat too, a weight stored [N, K] is summed along its rows, and a repeat
 * between real dims is summed where it sits (w seen as [5, 2, 4, 3], reduced over dim 2). */
static void test_broadcasts(void) {
  const char *after = "HloModule m\nENTRY e {\n  v = f32[3,6] parameter(0)\n  w = f32[5,24] parameter(1)\n"
                      "  g = f32[3,6,4] broadcast(v), dimensions={0,1}\n  l = f32[3,24] reshape(g)\n"
                      "  ROOT d = f32[3,5] dot(l, w), lhs_contracting_dims={1}, rhs_contracting_dims={1}\n}\n";
  const char *between = "HloModule m\nENTRY e {\n  v = f32[3,2,3] parameter(0)\n  w = f32[5,24] parameter(1)\n"
                        "  g = f32[3,2,4,3] broadcast(v), dimensions={0,1,3}\n  l = f32[3,24] reshape(g)\n"
                        "  ROOT d = f32[3,5] dot(l, w), lhs_contracting_dims={1}, rhs_contracting_dims={1}\n}\n";
  const char *texts[] = {after, between};
  int64_t reduced_dim[] = {2, 2}, view_rank[] = {3, 4};
  for (int t = 0; t < 2; t++) {
    hlo_module *m = parse_checked(texts[t]);
    if (!m) continue;
    CHECK_EQ_INT(rt_cpu_pass_dot_of_repeats(m), 1);
    const hlo_instr *reduce = find_op(m->entry, HLO_OP_REDUCE);
    CHECK(reduce && reduce->dimensions.count == 1 && reduce->dimensions.values[0] == reduced_dim[t]);
    CHECK(reduce && reduce->operands[0]->shape.rank == view_rank[t]);
    CHECK_EQ_INT(count_op(m->entry, HLO_OP_BROADCAST), 0);
    hlo_module_free(m);
    /* v = 1..18, w[j][k] = j - k / 8: l[i][k] = v[i][k / 4] (after) or
     * v[i][k / 12][k % 3] (between); sums of small integers and eighths are exact */
    double vs[18], ws[120], want[15];
    for (int i = 0; i < 18; i++) vs[i] = i + 1;
    for (int i = 0; i < 120; i++) ws[i] = (double)(i / 24) - (double)(i % 24) / 8;
    for (int i = 0; i < 3; i++)
      for (int j = 0; j < 5; j++) {
        double sum = 0;
        for (int k = 0; k < 24; k++) sum += vs[i * 6 + (t == 0 ? k / 4 : k / 12 * 3 + k % 3)] * ws[j * 24 + k];
        want[i * 5 + j] = sum;
      }
    rt_value *args[] = {t == 0 ? make_value(HLO_F32, 2, (int64_t[]){3, 6}, vs) : make_value(HLO_F32, 3, (int64_t[]){3, 2, 3}, vs),
                        make_value(HLO_F32, 2, (int64_t[]){5, 24}, ws)};
    expect_cpu(__LINE__, texts[t], args, 2, want, 15, 0);
  }
}

/* Left alone: copies of two different values; a repeat that splits one of v's dims (the
 * concatenation's dim starts inside v's 6); a repeat over the rows (each row the same, not
 * each k); a batched dot; a broadcast that transposes; integers. The cpu backend still agrees with the reference. */
static void test_left_alone(void) {
  const char *texts[] = {
      "HloModule m\nENTRY e {\n  v = f32[2,3] parameter(0)\n  u = f32[2,3] parameter(1)\n  w = f32[6,4] parameter(2)\n"
      "  l = f32[2,6] concatenate(v, u), dimensions={1}\n"
      "  ROOT d = f32[2,4] dot(l, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n",
      "HloModule m\nENTRY e {\n  v = f32[2,6] parameter(0)\n  w = f32[12,4] parameter(1)\n"
      "  r = f32[2,3,2] reshape(v)\n  c = f32[2,3,4] concatenate(r, r), dimensions={2}\n  l = f32[2,12] reshape(c)\n"
      "  ROOT d = f32[2,4] dot(l, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n",
      "HloModule m\nENTRY e {\n  v = f32[6] parameter(0)\n  w = f32[6,4] parameter(1)\n"
      "  l = f32[3,6] broadcast(v), dimensions={1}\n"
      "  ROOT d = f32[3,4] dot(l, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n",
      "HloModule m\nENTRY e {\n  v = f32[2,3,1] parameter(0)\n  w = f32[2,3,4] parameter(1)\n"
      "  l = f32[2,3,3] concatenate(v, v, v), dimensions={2}\n"
      "  ROOT d = f32[2,3,4] dot(l, w), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, "
      "rhs_contracting_dims={1}\n}\n",
      "HloModule m\nENTRY e {\n  v = f32[2,3] parameter(0)\n  w = f32[2,4] parameter(1)\n"
      "  l = f32[3,2] broadcast(v), dimensions={1,0}\n"
      "  ROOT d = f32[3,4] dot(l, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n",
      "HloModule m\nENTRY e {\n  v = s32[2,3] parameter(0)\n  w = s32[12,4] parameter(1)\n"
      "  g = s32[2,3,4] broadcast(v), dimensions={0,1}\n  l = s32[2,12] reshape(g)\n"
      "  ROOT d = s32[2,4] dot(l, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n",
  };
  for (size_t t = 0; t < sizeof texts / sizeof *texts; t++) {
    hlo_module *m = parse_checked(texts[t]);
    if (!m) continue;
    CHECK_MSG(rt_cpu_pass_dot_of_repeats(m) == 0, "text %zu was rewritten", t);
    hlo_module_free(m);
    expect_same_as_reference(texts[t], (int)t + 1);
  }
}

int main(void) {
  RUN(test_rewritten);
  RUN(test_values);
  RUN(test_bound);
  RUN(test_broadcasts);
  RUN(test_left_alone);
  return TEST_REPORT();
}
