/* The cpu backend's bind: an executable compiled at one batch size runs other batch sizes
 * of the same graph without compiling, and refuses what it cannot prove. Results are
 * checked against sums computed here in plain C, and against a fresh compile at that size
 * (bit for bit: binding keeps the compiled passes, kernels are chosen again the same way). */
#include <stdio.h>

#include "cpu_util.h"
#include "hlo/hlo.h"
#include "runtime/cpu/exec_internal.h"

/* relu(x @ w) through a call the passes inline, its first 3 columns sliced (a slice whose
 * limit is the batch), summed over the batch after a transpose (a reduce that keeps its
 * reducer), and the slice reshaped to itself (a no-op the passes remove at every size). */
static char *mlp_text(int64_t n) {
  static char text[2048];
  snprintf(text, sizeof text,
           "HloModule bind_mlp\n"
           "add_f {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n"
           "act {\n  p = f32[%1$lld,6] parameter(0)\n  z = f32[] constant(0)\n"
           "  bz = f32[%1$lld,6] broadcast(z), dimensions={}\n  ROOT r = f32[%1$lld,6] maximum(p, bz)\n}\n"
           "ENTRY e {\n  x = f32[%1$lld,4] parameter(0)\n  w = f32[4,6] parameter(1)\n"
           "  d = f32[%1$lld,6] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
           "  a = f32[%1$lld,6] call(d), to_apply=act\n"
           "  s = f32[%1$lld,3] slice(a), slice={[0:%1$lld], [0:3]}\n"
           "  t = f32[3,%1$lld] transpose(s), dimensions={1,0}\n  z = f32[] constant(0)\n"
           "  r = f32[3] reduce(t, z), dimensions={1}, to_apply=add_f\n"
           "  rs = f32[%1$lld,3] reshape(s)\n"
           "  ROOT out = (f32[3], f32[%1$lld,3]) tuple(r, rs)\n}\n",
           (long long)n);
  return text;
}

/* bind's result, or NULL with the message in diag. */
static rt_executable *bind_text(rt_executable *exe, const char *text, hlo_diag *diag) {
  hlo_diag_clear(diag);
  hlo_module *binding = parse_checked(text);
  rt_executable *bound = binding ? rt_backend_cpu.bind(exe, binding, diag) : NULL;
  hlo_module_free(binding); /* the bound executable must not need it */
  return bound;
}

static double x_at(int64_t i, int64_t k) { return 0.01 * (double)((i * 7 + k * 3) % 23) - 0.1; }
static double w_at(int64_t k, int64_t j) { return 0.2 * (double)((k * 5 + j) % 7) - 0.5; }

static rt_value *run(rt_executable *exe, int64_t n) {
  double *xs = malloc(sizeof(double) * (size_t)(n * 4)), ws[24];
  for (int64_t i = 0; i < n; i++)
    for (int k = 0; k < 4; k++) xs[i * 4 + k] = x_at(i, k);
  for (int k = 0; k < 4; k++)
    for (int j = 0; j < 6; j++) ws[k * 6 + j] = w_at(k, j);
  rt_value *args[2] = {make_value(HLO_F32, 2, (int64_t[]){n, 4}, xs), make_value(HLO_F32, 2, (int64_t[]){4, 6}, ws)};
  rt_value *result = NULL;
  hlo_diag diag = {0};
  hlo_status status = rt_backend_cpu.execute(exe, args, 2, &result, &diag);
  CHECK_MSG(status == HLO_OK, "execute at batch %lld: %s", (long long)n, diag.message);
  rt_value_release(args[0]);
  rt_value_release(args[1]);
  free(xs);
  return result;
}

/* relu(x @ w)[:, :3] and its column sums, in double. */
static void expect_mlp(const rt_value *result, int64_t n) {
  CHECK(result && result->shape.dtype == HLO_TUPLE && result->tuple_count == 2);
  if (!result || result->tuple_count != 2) return;
  double *rows = malloc(sizeof(double) * (size_t)(n * 3)), sums[3] = {0, 0, 0};
  for (int64_t i = 0; i < n; i++)
    for (int j = 0; j < 3; j++) {
      double v = 0;
      for (int k = 0; k < 4; k++) v += x_at(i, k) * w_at(k, j);
      rows[i * 3 + j] = v > 0 ? v : 0;
      sums[j] += rows[i * 3 + j];
    }
  expect_values(__LINE__, result->tuple[0], sums, 3, 1e-5);
  expect_values(__LINE__, result->tuple[1], rows, n * 3, 1e-5);
  free(rows);
}

static bool same_bits(const rt_value *a, const rt_value *b) {
  if (a->shape.dtype == HLO_TUPLE) {
    for (int i = 0; i < a->tuple_count; i++)
      if (!same_bits(a->tuple[i], b->tuple[i])) return false;
    return true;
  }
  return hlo_shape_equal(&a->shape, &b->shape) && !memcmp(a->data, b->data, (size_t)hlo_shape_bytes(&a->shape));
}

static void check_bound(rt_executable *exe, int64_t n) {
  hlo_diag diag;
  rt_executable *bound = bind_text(exe, mlp_text(n), &diag);
  CHECK_MSG(bound != NULL, "bind to batch %lld: %s", (long long)n, diag.message);
  if (!bound) return;
  rt_value *got = run(bound, n);
  expect_mlp(got, n);
  rt_executable *fresh = compile_checked(mlp_text(n));
  rt_value *want = fresh ? run(fresh, n) : NULL;
  CHECK_MSG(got && want && same_bits(got, want), "batch %lld: bound and compiled results differ", (long long)n);
  rt_value_release(got);
  rt_value_release(want);
  rt_backend_cpu.destroy(fresh);
  rt_backend_cpu.destroy(bound);
}

static void test_bind_batches(void) {
  rt_executable *exe = compile_checked(mlp_text(3));
  if (!exe) return;
  rt_value *own = run(exe, 3);
  expect_mlp(own, 3);
  rt_value_release(own);
  check_bound(exe, 5);
  check_bound(exe, 17);
  check_bound(exe, 64);
  check_bound(exe, 1);
  rt_backend_cpu.destroy(exe);
}

/* Binding what was itself bound binds the compiled executable: several bound ones live
 * side by side and each runs its own size. */
static void test_bind_from_bound(void) {
  rt_executable *exe = compile_checked(mlp_text(3));
  hlo_diag diag;
  rt_executable *b8 = exe ? bind_text(exe, mlp_text(8), &diag) : NULL;
  rt_executable *b9 = b8 ? bind_text(b8, mlp_text(9), &diag) : NULL;
  CHECK_MSG(b9 != NULL, "bind: %s", diag.message);
  if (b9) {
    rt_value *r9 = run(b9, 9), *r8 = run(b8, 8);
    expect_mlp(r9, 9);
    expect_mlp(r8, 8);
    rt_value_release(r9);
    rt_value_release(r8);
  }
  rt_backend_cpu.destroy(b9);
  rt_backend_cpu.destroy(b8);
  rt_backend_cpu.destroy(exe);
}

/* The executable loaded from its serialized form (the disk cache's) binds as well. */
static void test_bind_after_deserialize(void) {
  rt_executable *exe = compile_checked(mlp_text(3));
  void *bytes = NULL;
  size_t len = 0;
  hlo_diag diag = {0};
  CHECK(exe && rt_backend_cpu.serialize(exe, &bytes, &len, &diag) == HLO_OK);
  rt_backend_cpu.destroy(exe);
  rt_executable *loaded = bytes ? rt_backend_cpu.deserialize(bytes, len, NULL, &diag) : NULL;
  free(bytes);
  CHECK_MSG(loaded != NULL, "deserialize: %s", diag.message);
  if (!loaded) return;
  check_bound(loaded, 33);
  rt_backend_cpu.destroy(loaded);
}

static void expect_refusal(const char *compiled_text, const char *binding_text, const char *why) {
  rt_executable *exe = compile_checked(compiled_text);
  if (!exe) return;
  hlo_diag diag;
  rt_executable *bound = bind_text(exe, binding_text, &diag);
  CHECK_MSG(bound == NULL, "bind should refuse (%s)", why);
  CHECK_MSG(strstr(diag.message, why) != NULL, "message \"%s\" does not say \"%s\"", diag.message, why);
  CHECK_EQ_INT(diag.status, HLO_ERR_UNSUPPORTED);
  rt_backend_cpu.destroy(bound);
  rt_backend_cpu.destroy(exe);
}

/* expect_refusal for text (one size, %1$lld) compiled at one size and bound to another. */
static void expect_refusal_between(const char *text, long long compiled_size, long long bound_size, const char *why) {
  char compiled[512], bound[512];
  snprintf(compiled, sizeof compiled, text, compiled_size);
  snprintf(bound, sizeof bound, text, bound_size);
  expect_refusal(compiled, bound, why);
}

static char *replace(const char *text, const char *from, const char *to) {
  static char out[2048];
  const char *at = strstr(text, from);
  CHECK(at != NULL);
  if (!at) return strcpy(out, text);
  snprintf(out, sizeof out, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
  return out;
}

static void test_refusals(void) {
  char compiled[2048];
  strcpy(compiled, mlp_text(3));
  /* a non-size attribute: the constant the reduce starts from */
  expect_refusal(compiled, replace(mlp_text(5), "z = f32[] constant(0)\n  r", "z = f32[] constant(1)\n  r"),
                 "constant value");
  /* another structure: the transpose's permutation as an attribute, a different op */
  expect_refusal(compiled, replace(mlp_text(5), "maximum(p, bz)", "minimum(p, bz)"), "opcode");
  /* a pass decision that held only at the compiled sizes: at batch 4 the reshape
   * f32[4,4] -> f32[4,4] is a no-op the passes removed, so its user reads x directly; at
   * batch 8 the reshape reorders rows and the user must not read x. */
  expect_refusal_between("HloModule bind_reshape\n"
                         "ENTRY e {\n  x = f32[%1$lld,4] parameter(0)\n  r = f32[4,%1$lld] reshape(x)\n"
                         "  ROOT s = f32[1,%1$lld] slice(r), slice={[0:1], [0:%1$lld]}\n}\n",
                         4, 8, "only at the compiled sizes");
  /* a transpose that moves only a size-1 dim (the heads of a one-token step) is a reshape
   * at the compiled sizes, a real transpose once that dim grows */
  expect_refusal_between("HloModule bind_heads\n"
                         "ENTRY e {\n  x = f32[2,%1$lld,3,4] parameter(0)\n"
                         "  ROOT t = f32[2,3,%1$lld,4] transpose(x), dimensions={0,2,1,3}\n}\n",
                         1, 5, "moves only size-1 dims at the compiled sizes");
  /* an extra instruction */
  expect_refusal(compiled, replace(mlp_text(5), "  z = f32[] constant(0)\n  r", "  z = f32[] constant(0)\n  z2 = f32[] constant(0)\n  r"),
                 "structure");
}

/* Executables bound from one compiled graph share its kept arena: a binding a little
 * larger than the last runs in the arena the last one left (a bound executable allocates a
 * quarter more than it needs), so it allocates only its result, not its buffers. */
static void test_bindings_share_the_arena(void) {
  enum { RESULT = 3 }; /* the result: a tuple and its two arrays */
  rt_executable *exe = compile_checked(mlp_text(40));
  hlo_diag diag;
  rt_executable *b40 = exe ? bind_text(exe, mlp_text(40), &diag) : NULL;
  rt_executable *b41 = exe ? bind_text(exe, mlp_text(41), &diag) : NULL;
  rt_executable *b64 = exe ? bind_text(exe, mlp_text(64), &diag) : NULL;
  CHECK_MSG(b40 && b41 && b64, "bind: %s", diag.message);
  if (b40 && b41 && b64) {
    rt_value *r = run(b40, 40); /* a fresh arena, kept by the family, and the result */
    rt_value_release(r);
    int64_t before = rt_cpu_allocation_count();
    r = run(b41, 41);
    expect_mlp(r, 41);
    rt_value_release(r);
    CHECK_EQ_INT(rt_cpu_allocation_count() - before, RESULT); /* the result only */
    before = rt_cpu_allocation_count();
    r = run(b64, 64); /* too large for the kept arena: one of its own */
    expect_mlp(r, 64);
    rt_value_release(r);
    CHECK_EQ_INT(rt_cpu_allocation_count() - before, RESULT + 1);
    before = rt_cpu_allocation_count();
    r = run(b40, 40); /* the larger arena was kept in place of the smaller */
    expect_mlp(r, 40);
    rt_value_release(r);
    CHECK_EQ_INT(rt_cpu_allocation_count() - before, RESULT);
  }
  rt_backend_cpu.destroy(b64);
  rt_backend_cpu.destroy(b41);
  rt_backend_cpu.destroy(b40);
  rt_backend_cpu.destroy(exe);
}

/* Origins number instructions by position; clones keep them, inlined copies carry their
 * callee instruction's. */
static void test_origins(void) {
  hlo_module *module = parse_checked(mlp_text(3));
  if (!module) return;
  int32_t count = hlo_module_number_origins(module);
  int32_t total = 0;
  for (int c = 0; c < module->comp_count; c++) total += module->comps[c]->instr_count;
  CHECK_EQ_INT(count, total);
  CHECK_EQ_INT(module->comps[0]->instrs[0]->origin, 1);
  hlo_diag diag = {0};
  hlo_module *copy = hlo_module_clone(module, &diag);
  CHECK(copy != NULL);
  for (int c = 0; copy && c < copy->comp_count; c++)
    for (int i = 0; i < copy->comps[c]->instr_count; i++)
      CHECK_EQ_INT(copy->comps[c]->instrs[i]->origin, module->comps[c]->instrs[i]->origin);
  hlo_module_free(copy);
  const hlo_comp *act = hlo_module_find_comp(module, "act");
  const hlo_instr *maximum = act ? act->root : NULL;
  CHECK(maximum && maximum->opcode == HLO_OP_MAXIMUM);
  CHECK_EQ_INT(hlo_pass_inline_calls(module), 1);
  int carried = 0;
  for (int i = 0; maximum && i < module->entry->instr_count; i++) {
    const hlo_instr *instr = module->entry->instrs[i];
    if (instr->opcode == HLO_OP_MAXIMUM) carried += instr->origin == maximum->origin;
  }
  CHECK_EQ_INT(carried, 1);
  hlo_module_free(module);
}

int main(void) {
  RUN(test_origins);
  RUN(test_bind_batches);
  RUN(test_bind_from_bound);
  RUN(test_bind_after_deserialize);
  RUN(test_refusals);
  RUN(test_bindings_share_the_arena);
  return TEST_REPORT();
}
