/* The cpu backend's serialized executable (runtime/cpu/serialize.c, deserialize.c):
 *   - the module codec round-trips every corpus module (same text, same origins), and each
 *     one the cpu backend compiles runs loaded as compiled;
 *   - differential: compile -> run, compile -> serialize -> deserialize -> run and the
 *     reference evaluator agree, on convolutions with post-ops, blocked layouts between
 *     them, a max pool and a concatenation kept blocked between them, a row-major residual
 *     reordered into a blocked result and a folded batch norm; on fused elementwise groups
 *     (a reduce tail, a flat dot head); on kept weight work with the weights written in
 *     place between calls; on an executable loaded and then bound to another batch size;
 *     on a bound executable loaded, run and bound again; and on a call the passes inlined (its computation left out of the blob); the loaded
 *     one gives the compiled one's bytes exactly (same plan, same kernels);
 *   - a load runs no pass and builds no plan (rt_cpu_pass_runs, rt_cpu_plans_built);
 *   - every truncation and every flipped byte of a blob is an error, the format version is
 *     checked, a module that does not verify (written with a right checksum) is refused, and a damaged blob with a recomputed checksum (each byte flipped, then 3000
 *     random multi-byte damages) is an error or an executable that runs or says why, never
 *     a crash (run under ASan); out of memory at any allocation of a load is an error saying so. */
#include <dirent.h>
#include <stdlib.h>

#include "cpu_util.h"
#include "runtime/cpu/blob_internal.h"
#include "runtime/cpu/exec_internal.h"
#include "runtime/cpu/dnnl_internal.h"

static const char *add_comp = "add {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] add(a, b)\n}\n";

/* conv -> batch norm -> relu (the fold's case: the scale goes into the weights, a kept step),
 * then a second conv with a bias and a residual add of the first (blocked between them). */
static char *conv_bn_text(int batch) {
  static char text[4][4096];
  static int next;
  char *s = text[next++ % 4];
  snprintf(s, sizeof text[0],
           "HloModule c\nENTRY e {\n x = f32[%1$d,8,10,10] parameter(0)\n w = f32[8,8,3,3] parameter(1)\n"
           " mean = f32[8] parameter(2)\n var = f32[8] parameter(3)\n gamma = f32[8] parameter(4)\n"
           " beta = f32[8] parameter(5)\n w2 = f32[8,8,3,3] parameter(6)\n bias = f32[8] parameter(7)\n"
           " c = f32[%1$d,8,10,10] convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01\n"
           " bm = f32[%1$d,8,10,10] broadcast(mean), dimensions={1}\n bv = f32[%1$d,8,10,10] broadcast(var), dimensions={1}\n"
           " eps = f32[] constant(1e-05)\n be = f32[%1$d,8,10,10] broadcast(eps), dimensions={}\n"
           " vv = f32[%1$d,8,10,10] multiply(bv, bv)\n ve = f32[%1$d,8,10,10] add(vv, be)\n r = f32[%1$d,8,10,10] rsqrt(ve)\n"
           " s = f32[%1$d,8,10,10] subtract(c, bm)\n n = f32[%1$d,8,10,10] multiply(s, r)\n"
           " bg = f32[%1$d,8,10,10] broadcast(gamma), dimensions={1}\n g = f32[%1$d,8,10,10] multiply(n, bg)\n"
           " bb = f32[%1$d,8,10,10] broadcast(beta), dimensions={1}\n b = f32[%1$d,8,10,10] add(g, bb)\n"
           " zero = f32[] constant(0)\n z = f32[%1$d,8,10,10] broadcast(zero), dimensions={}\n"
           " a = f32[%1$d,8,10,10] maximum(b, z)\n"
           " c2 = f32[%1$d,8,10,10] convolution(a, w2), window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01\n"
           " bb2 = f32[%1$d,8,10,10] broadcast(bias), dimensions={1}\n d2 = f32[%1$d,8,10,10] add(c2, bb2)\n"
           " s2 = f32[%1$d,8,10,10] add(d2, a)\n ROOT y = f32[%1$d,8,10,10] maximum(s2, z)\n}\n",
           batch);
  return s;
}

/* conv + a residual parameter (row-major, reordered into the blocked result's layout) ->
 * relu -> a 3x3 max pool kept blocked between the convolutions -> conv -> relu. */
static const char *pool_text =
    "HloModule p\nmax {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT m = f32[] maximum(a, b)\n}\n"
    "ENTRY e {\n x = f32[1,8,12,12] parameter(0)\n w = f32[8,8,3,3] parameter(1)\n res = f32[1,8,12,12] parameter(2)\n"
    " w2 = f32[8,8,3,3] parameter(3)\n"
    " c = f32[1,8,12,12] convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01\n"
    " s = f32[1,8,12,12] add(c, res)\n zero = f32[] constant(0)\n z = f32[1,8,12,12] broadcast(zero), dimensions={}\n"
    " a = f32[1,8,12,12] maximum(s, z)\n ninf = f32[] constant(-inf)\n"
    " p = f32[1,8,6,6] reduce-window(a, ninf), window={size=1x1x3x3 stride=1x1x2x2 pad=0_0x0_0x1_1x1_1}, to_apply=max\n"
    " c2 = f32[1,8,6,6] convolution(p, w2), window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01\n"
    " z2 = f32[1,8,6,6] broadcast(zero), dimensions={}\n ROOT y = f32[1,8,6,6] maximum(c2, z2)\n}\n";

/* Two convolutions' results (kept blocked) joined along the channels, read by a third. */
static const char *concat_text =
    "HloModule k\nENTRY e {\n x = f32[1,16,8,8] parameter(0)\n w1 = f32[16,16,1,1] parameter(1)\n"
    " w2 = f32[16,16,3,3] parameter(2)\n w3 = f32[16,32,1,1] parameter(3)\n"
    " zero = f32[] constant(0)\n z = f32[1,16,8,8] broadcast(zero), dimensions={}\n"
    " c1 = f32[1,16,8,8] convolution(x, w1), window={size=1x1}, dim_labels=bf01_oi01->bf01\n"
    " a1 = f32[1,16,8,8] maximum(c1, z)\n"
    " c2 = f32[1,16,8,8] convolution(x, w2), window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01\n"
    " a2 = f32[1,16,8,8] maximum(c2, z)\n j = f32[1,32,8,8] concatenate(a1, a2), dimensions={1}\n"
    " ROOT c3 = f32[1,16,8,8] convolution(j, w3), window={size=1x1}, dim_labels=bf01_oi01->bf01\n}\n";

/* A batched matmul by a broadcast weight (a flat dot head), tanh, exp and a multiply fused
 * into it, and a reduce absorbing the group. */
static char fused_text[2048];

/* A weight scaled per column (kept: computed once per contents of w and g) feeding a dot,
 * then a relu. */
static char kept_text[2048];

static void make_texts(void) {
  snprintf(fused_text, sizeof fused_text,
           "HloModule f\n%s\nENTRY e {\n x = f32[4,8,16] parameter(0)\n w = f32[16,32] parameter(1)\n"
           " wb = f32[4,16,32] broadcast(w), dimensions={1,2}\n"
           " d = f32[4,8,32] dot(x, wb), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, "
           "rhs_contracting_dims={1}\n"
           " t = f32[4,8,32] tanh(d)\n e = f32[4,8,32] exponential(t)\n m = f32[4,8,32] multiply(e, t)\n"
           " zero = f32[] constant(0)\n ROOT r = f32[4,8] reduce(m, zero), dimensions={2}, to_apply=add\n}\n",
           add_comp);
  snprintf(kept_text, sizeof kept_text,
           "HloModule k\nENTRY e {\n x = f32[6,16] parameter(0)\n w = f32[16,32] parameter(1)\n g = f32[32] parameter(2)\n"
           " gb = f32[16,32] broadcast(g), dimensions={1}\n ws = f32[16,32] multiply(w, gb)\n"
           " d = f32[6,32] dot(x, ws), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
           " zero = f32[] constant(0)\n z = f32[6,32] broadcast(zero), dimensions={}\n"
           " ROOT y = f32[6,32] maximum(d, z)\n}\n");
}

/* ---- helpers ---- */

static rt_value **random_args(const hlo_module *module, uint64_t seed) {
  int n = module->entry->param_count;
  rt_value **args = calloc((size_t)n + 1, sizeof *args);
  hlo_diag diag = {0};
  for (int i = 0; args && i < n; i++) args[i] = rt_random_value(&module->entry->params[i]->shape, seed, (uint64_t)i, &diag);
  return args;
}

static void free_args(rt_value **args, int n) {
  for (int i = 0; args && i < n; i++) rt_value_release(args[i]);
  free(args);
}

static rt_value *run(rt_executable *exe, rt_value **args, int n) {
  hlo_diag diag = {0};
  rt_value *out = NULL;
  hlo_status status = exe ? rt_backend_cpu.execute(exe, args, n, &out, &diag) : HLO_ERR_INTERNAL;
  CHECK_MSG(status == HLO_OK, "execute: %s", diag.message);
  return out;
}

static bool same_bytes(const rt_value *a, const rt_value *b) {
  if (!a || !b || a->shape.dtype != b->shape.dtype || a->count != b->count) return false;
  return memcmp(a->data, b->data, (size_t)hlo_shape_bytes(&a->shape)) == 0;
}

/* exe serialized and loaded again, checking that the load ran no pass and built no plan. */
/* adopt: through rt_backend_cpu.adopt, which keeps the bytes (the disk cache's load). */
static rt_executable *reload_by(const rt_executable *exe, bool adopt) {
  hlo_diag diag = {0};
  void *bytes = NULL;
  size_t len = 0;
  CHECK_MSG(rt_backend_cpu.serialize(exe, &bytes, &len, &diag) == HLO_OK, "serialize: %s", diag.message);
  int64_t passes = rt_cpu_pass_runs(), plans = rt_cpu_plans_built();
  rt_executable *loaded = NULL;
  if (bytes && adopt) loaded = rt_backend_cpu.adopt(bytes, len, NULL, &diag);
  else if (bytes) loaded = rt_backend_cpu.deserialize(bytes, len, NULL, &diag);
  CHECK_MSG(loaded != NULL, "deserialize: %s", diag.message);
  CHECK_EQ_INT(rt_cpu_pass_runs(), passes);
  CHECK_EQ_INT(rt_cpu_plans_built(), plans);
  if (!adopt) free(bytes);
  return loaded;
}

static rt_executable *reload(const rt_executable *exe) { return reload_by(exe, false); }

/* compile -> run, reload -> run (the same bytes, no pass or plan, also on its first run when
 * oneDNN's primitives are made) and the reference (within cpu_agree's tolerance). */
static void expect_round_trip(int line, const char *text, uint64_t seed) {
  hlo_module *module = parse_checked(text);
  rt_executable *exe = compile_checked(text);
  rt_executable *loaded = exe ? reload(exe) : NULL;
  int n = module ? module->entry->param_count : 0;
  rt_value **args = module ? random_args(module, seed) : NULL;
  hlo_diag diag = {0};
  rt_value *want = NULL;
  if (module) rt_evaluate(module, args, n, &(rt_eval_options){.fp64 = false}, &want, &diag);
  rt_value *compiled = exe ? run(exe, args, n) : NULL;
  int64_t passes = rt_cpu_pass_runs(), plans = rt_cpu_plans_built();
  rt_value *got = loaded ? run(loaded, args, n) : NULL;
  CHECK_EQ_INT(rt_cpu_pass_runs(), passes);
  CHECK_EQ_INT(rt_cpu_plans_built(), plans);
  CHECK_MSG(cpu_agree(want, compiled), "line %d: compiled against the reference", line);
  CHECK_MSG(same_bytes(compiled, got), "line %d: loaded against compiled", line);
  rt_value_release(want);
  rt_value_release(compiled);
  rt_value_release(got);
  free_args(args, n);
  rt_backend_cpu.destroy(loaded);
  rt_backend_cpu.destroy(exe);
  hlo_module_free(module);
}

/* text compiled, serialized, and the blob decoded again: the module and plan as a load reads
 * them (NULL where a stage failed). */
typedef struct decoded {
  rt_executable *exe;
  void *bytes;
  size_t len, source_len;
  hlo_module *module;
  rt_cpu_plan *plan;
  const char *source;
} decoded;

static decoded decode_compiled(const char *text) {
  decoded d = {.exe = compile_checked(text)};
  hlo_diag diag = {0};
  if (d.exe && rt_backend_cpu.serialize(d.exe, &d.bytes, &d.len, &diag) == HLO_OK)
    rt_cpu_deserialize(d.bytes, d.len, &d.module, &d.plan, &d.source, &d.source_len, &diag);
  return d;
}

static void decoded_free(decoded *d) {
  rt_cpu_plan_free(d->plan);
  hlo_module_free(d->module);
  free(d->bytes);
  rt_backend_cpu.destroy(d->exe);
}

/* ---- tests ---- */

/* The DNNL steps of text's plan, as serialized: blocked pools and concatenations, and
 * reordered residuals. */
static void count_dnnl(const char *text, int *pools, int *concats, int *residual_reorders) {
  *pools = *concats = *residual_reorders = 0;
  decoded dec = decode_compiled(text);
  const rt_cpu_plan *plan = dec.plan;
  for (int i = 0; plan && i < plan->step_count; i++) {
    const rt_cpu_dnnl *d = plan->steps[i].kind == RT_STEP_DNNL ? plan->steps[i].dnnl : NULL;
    *pools += d && d->pool && d->block;
    *concats += d && d->concat && d->block;
    for (int k = 0; d && k < d->post_count; k++) *residual_reorders += (d->prims & RT_DNNL_HAS_POST_REORDER(k)) != 0;
  }
  decoded_free(&dec);
}

/* A 3x3 convolution oneDNN runs by Winograd on AVX-512 (batch 8, 64 channels, 14x14): its
 * transformed weights' layout (a oneDNN format of its own, not blocked) and its direct safe
 * primitive's go through the blob. How many of the decoded plan's steps are Winograd's. */
static const char *winograd_text =
    "HloModule c\nENTRY e {\n x = f32[8,64,14,14] parameter(0)\n w = f32[64,64,3,3] parameter(1)\n"
    " c = f32[8,64,14,14] convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01\n"
    " z = f32[] constant(0)\n zb = f32[8,64,14,14] broadcast(z), dimensions={}\n"
    " ROOT y = f32[8,64,14,14] maximum(c, zb)\n}\n";

static int decoded_winograd(const char *text) {
  decoded dec = decode_compiled(text);
  int count = 0;
  for (int i = 0; dec.plan && i < dec.plan->step_count; i++)
    count += dec.plan->steps[i].kind == RT_STEP_DNNL && dec.plan->steps[i].dnnl->alg == dnnl_convolution_winograd;
  decoded_free(&dec);
  return count;
}

static void test_differential(void) {
  bool avx512 = (dnnl_get_effective_cpu_isa() & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core;
  CHECK_EQ_INT(decoded_winograd(winograd_text), avx512 ? 1 : 0);
  expect_round_trip(__LINE__, winograd_text, 8);
  int pools, concats, residual_reorders;
  count_dnnl(pool_text, &pools, &concats, &residual_reorders);
  CHECK_EQ_INT(pools, 1);
  CHECK_EQ_INT(residual_reorders, 1);
  expect_round_trip(__LINE__, pool_text, 6);
  count_dnnl(concat_text, &pools, &concats, &residual_reorders);
  CHECK_EQ_INT(concats, 1);
  expect_round_trip(__LINE__, concat_text, 7);
  int64_t reorders = rt_cpu_dnnl_weight_reorder_count();
  expect_round_trip(__LINE__, conv_bn_text(2), 1);
  CHECK(rt_cpu_dnnl_weight_reorder_count() > reorders); /* the loaded run went through oneDNN */
  expect_round_trip(__LINE__, fused_text, 2);
  expect_round_trip(__LINE__, kept_text, 3);
  static const rt_compile_options unfused = {.no_fusion = true, .keep_arena_bytes = -1};
  cpu_util_options = &unfused;
  expect_round_trip(__LINE__, fused_text, 4);
  cpu_util_options = NULL;
}

/* Kept weight work on a loaded executable: skipped while the weight's contents are the same,
 * run again after the weight is written in place, right each time. */
static void test_kept_weights(void) {
  hlo_module *module = parse_checked(kept_text);
  rt_executable *exe = compile_checked(kept_text);
  rt_executable *loaded = exe ? reload(exe) : NULL;
  rt_value **args = module ? random_args(module, 5) : NULL;
  for (int call = 0; module && loaded && call < 3; call++) {
    if (call == 2) { /* new weights, written in place */
      for (int64_t i = 0; i < args[1]->count; i++) rt_set_f64(args[1], i, 0.25 * rt_get_f64(args[1], i) - 0.125);
      rt_value_touch(args[1]);
    }
    int64_t reuses = rt_cpu_kept_reuse_count();
    hlo_diag diag = {0};
    rt_value *want = NULL;
    rt_evaluate(module, args, 3, &(rt_eval_options){.fp64 = false}, &want, &diag);
    rt_value *got = run(loaded, args, 3);
    CHECK_MSG(cpu_agree(want, got), "call %d", call);
    CHECK_EQ_INT(rt_cpu_kept_reuse_count() - reuses, call == 1 ? 1 : 0);
    rt_value_release(want);
    rt_value_release(got);
  }
  free_args(args, 3);
  rt_backend_cpu.destroy(loaded);
  rt_backend_cpu.destroy(exe);
  hlo_module_free(module);
}

/* A loaded executable bound to another batch size: the source module is decoded then (no pass
 * runs), and the bound one agrees with the reference; loaded by copying its encoding out
 * of the bytes or by keeping them (adopt). */
static void bind_loaded(bool adopt) {
  rt_executable *exe = compile_checked(conv_bn_text(2));
  rt_executable *loaded = exe ? reload_by(exe, adopt) : NULL;
  for (int batch = 1; loaded && batch <= 5; batch += 2) {
    hlo_module *binding = parse_checked(conv_bn_text(batch));
    int64_t passes = rt_cpu_pass_runs();
    hlo_diag diag = {0};
    rt_executable *bound = binding ? rt_backend_cpu.bind(loaded, binding, &diag) : NULL;
    CHECK_MSG(bound != NULL, "bind to batch %d: %s", batch, diag.message);
    CHECK_EQ_INT(rt_cpu_pass_runs(), passes);
    rt_value **args = binding ? random_args(binding, 10 + (uint64_t)batch) : NULL;
    rt_value *want = NULL;
    if (binding) rt_evaluate(binding, args, 8, &(rt_eval_options){.fp64 = false}, &want, &diag);
    rt_value *got = bound ? run(bound, args, 8) : NULL;
    CHECK_MSG(cpu_agree(want, got), "batch %d", batch);
    rt_value_release(want);
    rt_value_release(got);
    free_args(args, 8);
    rt_backend_cpu.destroy(bound);
    hlo_module_free(binding);
  }
  rt_backend_cpu.destroy(loaded);
  rt_backend_cpu.destroy(exe);
}

static void test_bind_loaded(void) {
  bind_loaded(false);
  bind_loaded(true);
}

/* An adopted blob's executable keeps the source module inside the bytes it was given (the rest
 * given back): written again, it is the same bytes; a blob adopt refuses is freed (ASan). */
static void test_adopt_keeps_source(void) {
  rt_executable *exe = compile_checked(conv_bn_text(2));
  hlo_diag diag = {0};
  void *bytes = NULL, *again = NULL;
  size_t len = 0, again_len = 0;
  if (exe) CHECK(rt_backend_cpu.serialize(exe, &bytes, &len, &diag) == HLO_OK);
  void *copy = bytes ? malloc(len) : NULL;
  if (copy) memcpy(copy, bytes, len);
  rt_executable *loaded = copy ? rt_backend_cpu.adopt(copy, len, NULL, &diag) : NULL;
  CHECK_MSG(loaded != NULL, "adopt: %s", diag.message);
  if (loaded) CHECK(rt_backend_cpu.serialize(loaded, &again, &again_len, &diag) == HLO_OK);
  CHECK(again && again_len == len && memcmp(again, bytes, len) == 0);
  void *damaged = bytes ? malloc(len) : NULL;
  if (damaged) {
    memcpy(damaged, bytes, len);
    ((unsigned char *)damaged)[len - 1] ^= 1;
    hlo_diag_clear(&diag);
    CHECK(rt_backend_cpu.adopt(damaged, len, NULL, &diag) == NULL && diag.status == HLO_ERR_INPUT);
  }
  free(again);
  free(bytes);
  rt_backend_cpu.destroy(loaded);
  rt_backend_cpu.destroy(exe);
}

/* A bound executable serialized and loaded runs at its own sizes and binds to others (its
 * blob holds the source module of the executable it was bound from); each agrees with the
 * reference, and neither the load nor the binds run a pass. */
static void test_bound_reloaded(void) {
  rt_executable *exe = compile_checked(conv_bn_text(2));
  hlo_module *at3 = parse_checked(conv_bn_text(3));
  hlo_diag diag = {0};
  rt_executable *bound = exe && at3 ? rt_backend_cpu.bind(exe, at3, &diag) : NULL;
  CHECK_MSG(bound != NULL, "bind to batch 3: %s", diag.message);
  int64_t passes = rt_cpu_pass_runs();
  rt_executable *loaded = bound ? reload(bound) : NULL;
  for (int batch = 1; loaded && batch <= 5; batch += 2) {
    hlo_module *binding = batch == 3 ? at3 : parse_checked(conv_bn_text(batch));
    hlo_diag_clear(&diag);
    rt_executable *again = batch == 3 ? loaded : binding ? rt_backend_cpu.bind(loaded, binding, &diag) : NULL;
    CHECK_MSG(again != NULL, "bind the loaded binding to batch %d: %s", batch, diag.message);
    rt_value **args = binding ? random_args(binding, 20 + (uint64_t)batch) : NULL;
    rt_value *want = NULL;
    if (binding) rt_evaluate(binding, args, 8, &(rt_eval_options){.fp64 = false}, &want, &diag);
    rt_value *got = again ? run(again, args, 8) : NULL;
    CHECK_MSG(cpu_agree(want, got), "batch %d", batch);
    rt_value_release(want);
    rt_value_release(got);
    free_args(args, 8);
    if (again != loaded) rt_backend_cpu.destroy(again);
    if (binding != at3) hlo_module_free(binding);
  }
  CHECK_EQ_INT(rt_cpu_pass_runs(), passes);
  rt_backend_cpu.destroy(loaded);
  rt_backend_cpu.destroy(bound);
  hlo_module_free(at3);
  rt_backend_cpu.destroy(exe);
}

/* A called computation the passes inlined is left out of the blob (it never runs); the loaded
 * executable still runs as compiled, and binds (the source keeps the call). */
static char *call_text(int rows) {
  static char text[2][1024];
  static int next;
  char *s = text[next++ % 2];
  snprintf(s, sizeof text[0],
           "HloModule c\nsq {\n a = f32[%1$d,8] parameter(0)\n ROOT m = f32[%1$d,8] multiply(a, a)\n}\n"
           "ENTRY e {\n x = f32[%1$d,8] parameter(0)\n c = f32[%1$d,8] call(x), to_apply=sq\n"
           " ROOT y = f32[%1$d,8] add(c, x)\n}\n",
           rows);
  return s;
}

static void test_dead_computations(void) {
  expect_round_trip(__LINE__, call_text(4), 8);
  decoded dec = decode_compiled(call_text(4));
  rt_executable *exe = dec.exe;
  hlo_module *module = dec.module;
  hlo_diag diag = {0};
  CHECK_MSG(module && module->comp_count == 1, "%d computations", module ? module->comp_count : -1);
  rt_executable *loaded = exe ? reload(exe) : NULL;
  hlo_module *binding = parse_checked(call_text(6));
  rt_executable *bound = loaded && binding ? rt_backend_cpu.bind(loaded, binding, &diag) : NULL;
  CHECK_MSG(bound != NULL, "bind: %s", diag.message);
  rt_value **args = binding ? random_args(binding, 9) : NULL;
  rt_value *want = NULL;
  if (binding) rt_evaluate(binding, args, 1, &(rt_eval_options){.fp64 = false}, &want, &diag);
  rt_value *got = bound ? run(bound, args, 1) : NULL;
  CHECK(cpu_agree(want, got));
  rt_value_release(want);
  rt_value_release(got);
  free_args(args, 1);
  rt_backend_cpu.destroy(bound);
  hlo_module_free(binding);
  rt_backend_cpu.destroy(loaded);
  decoded_free(&dec);
}

/* A blob whose module the passes could not have made, written with a right checksum: a dot
 * contracting a dim its operand lacks (the blob fuzzer's first finding, which a kernel picker
 * read as an index of -61) is refused by the verifier at load, as input that says why. */
static void test_unverified_module(void) {
  static const char *text = "HloModule d\nENTRY e {\n a = f32[4,8] parameter(0)\n b = f32[8,3] parameter(1)\n"
                            " ROOT d = f32[4,3] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n";
  decoded dec = decode_compiled(text);
  hlo_module *module = dec.module;
  hlo_diag diag = {0};
  hlo_instr *dot = module ? module->entry->root : NULL;
  CHECK(dot && dot->opcode == HLO_OP_DOT && dot->dot && dot->dot->lhs_contracting.count == 1);
  int64_t bad[] = {-61, 2, 7};
  for (int k = 0; dot && dot->dot && k < 3; k++) {
    dot->dot->lhs_contracting.values[0] = bad[k];
    void *blob = NULL;
    size_t blob_len = 0;
    hlo_diag_clear(&diag);
    CHECK(rt_cpu_serialize(module, dec.plan, dec.source, dec.source_len, &blob, &blob_len, &diag) == HLO_OK);
    hlo_diag_clear(&diag);
    rt_executable *loaded = blob ? rt_backend_cpu.deserialize(blob, blob_len, NULL, &diag) : NULL;
    CHECK_MSG(loaded == NULL && diag.status == HLO_ERR_INPUT && strstr(diag.message, "does not verify"),
              "contracting dim %lld: %s", (long long)bad[k], diag.message);
    rt_backend_cpu.destroy(loaded);
    free(blob);
  }
  decoded_free(&dec);
}

/* A blob whose plan says a step that is no convolution keeps reordered weights, with a right
 * checksum (the blob fuzzer's finding once kept_places.c read that step's oneDNN weight
 * layout, which it has none of): refused at load as input that says why. */
static void test_weights_without_convolution(void) {
  static const char *text = "HloModule d\nENTRY e {\n a = f32[4,8] parameter(0)\n b = f32[8,3] parameter(1)\n"
                            " ROOT d = f32[4,3] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n";
  decoded dec = decode_compiled(text);
  hlo_diag diag = {0};
  for (int field = 0; dec.plan && field < 2; field++) {
    rt_cpu_step *dot = &dec.plan->steps[dec.module->entry->root->id];
    int *weights = field == 0 ? &dot->weight_param : &dot->weight_kept;
    *weights = field == 0 ? 1 : 0;
    void *blob = NULL;
    size_t blob_len = 0;
    CHECK(rt_cpu_serialize(dec.module, dec.plan, dec.source, dec.source_len, &blob, &blob_len, &diag) == HLO_OK);
    *weights = -1;
    hlo_diag_clear(&diag);
    rt_executable *loaded = blob ? rt_backend_cpu.deserialize(blob, blob_len, NULL, &diag) : NULL;
    CHECK_MSG(loaded == NULL && diag.status == HLO_ERR_INPUT && strstr(diag.message, "kept weights"),
              "field %d: %s", field, diag.message);
    rt_backend_cpu.destroy(loaded);
    free(blob);
  }
  decoded_free(&dec);
}

/* A loaded blob whose bytes were changed binds to another batch or refuses with a message:
 * its source module is decoded only then, and must not crash whatever it decodes to. */
static bool binds_or_says_why(rt_executable *loaded, const hlo_module *binding) {
  hlo_diag diag = {0};
  rt_executable *bound = rt_backend_cpu.bind(loaded, binding, &diag);
  rt_backend_cpu.destroy(bound);
  return bound || diag.message[0] != '\0';
}

/* A loaded blob whose bytes were changed runs on args or refuses with a message; under ASan
 * (`make sanitize`) it must not read or write outside its buffers either. */
static bool runs_or_says_why(rt_executable *loaded, rt_value *const *args, int count) {
  hlo_diag diag = {0};
  rt_value *result = NULL;
  bool ran = rt_backend_cpu.execute(loaded, args, count, &result, &diag) == HLO_OK;
  rt_value_release(result);
  return ran || diag.message[0] != '\0';
}

/* Every truncation and every flipped byte is refused with a message; flips with the
 * checksum made right again must not crash whatever they decode to, loaded, run or bound. */
static void test_damaged(void) {
  rt_executable *exe = compile_checked(conv_bn_text(1));
  hlo_module *binding = parse_checked(conv_bn_text(3)), *module = parse_checked(conv_bn_text(1));
  rt_value *args[8] = {NULL};
  for (int i = 0; module && i < module->entry->param_count && i < 8; i++)
    args[i] = rt_random_value(&module->entry->params[i]->shape, 7, (uint64_t)i, &(hlo_diag){0});
  int bind_answers = 0, bind_tries = 0, run_answers = 0, run_tries = 0;
  hlo_diag diag = {0};
  void *bytes = NULL;
  size_t len = 0;
  CHECK(exe && rt_backend_cpu.serialize(exe, &bytes, &len, &diag) == HLO_OK);
  unsigned char *copy = malloc(len + 1);
  int refused = 0, loaded = 0;
  for (size_t cut = 0; bytes && copy && cut < len; cut++) {
    memcpy(copy, bytes, cut);
    hlo_diag_clear(&diag);
    rt_executable *e = rt_backend_cpu.deserialize(copy, cut, NULL, &diag);
    refused += e == NULL && diag.status == HLO_ERR_INPUT && diag.message[0];
    rt_backend_cpu.destroy(e);
  }
  CHECK_EQ_INT(refused, (int)len);
  refused = 0;
  for (size_t at = 0; bytes && copy && at < len; at++) {
    memcpy(copy, bytes, len);
    copy[at] ^= 0xa5;
    hlo_diag_clear(&diag);
    rt_executable *e = rt_backend_cpu.deserialize(copy, len, NULL, &diag);
    refused += e == NULL && diag.status == HLO_ERR_INPUT;
    rt_backend_cpu.destroy(e);
  }
  CHECK_EQ_INT(refused, (int)len);
  refused = 0;
  for (size_t at = RT_CPU_BLOB_HEADER; bytes && copy && at < len; at++) {
    memcpy(copy, bytes, len);
    copy[at] ^= 0xa5;
    uint64_t sum = rt_blob_checksum(copy + RT_CPU_BLOB_HEADER, len - RT_CPU_BLOB_HEADER);
    for (int i = 0; i < 8; i++) copy[9 + i] = (unsigned char)(sum >> (8 * i));
    hlo_diag_clear(&diag);
    rt_executable *e = rt_backend_cpu.deserialize(copy, len, NULL, &diag);
    if (e) loaded++;
    else refused += diag.message[0] != '\0';
    if (e && args[7]) run_tries++, run_answers += runs_or_says_why(e, args, 8);
    if (e && binding) bind_tries++, bind_answers += binds_or_says_why(e, binding);
    rt_backend_cpu.destroy(e);
  }
  CHECK_EQ_INT(refused + loaded, (int)(len - RT_CPU_BLOB_HEADER));
  CHECK(refused > 0);
  /* a brief fuzz: 3000 blobs with 1 to 8 random bytes set at random places and the checksum
   * made right; a loaded one must serialize again */
  uint64_t seed = 12345;
  int fuzzed = 0;
  for (int round = 0; bytes && copy && round < 3000; round++) {
    memcpy(copy, bytes, len);
    int changes = 1 + (int)(rt_mix64(seed++) % 8);
    for (int c = 0; c < changes; c++) {
      uint64_t z = rt_mix64(seed++);
      copy[RT_CPU_BLOB_HEADER + z % (len - RT_CPU_BLOB_HEADER)] = (unsigned char)(z >> 56);
    }
    uint64_t sum = rt_blob_checksum(copy + RT_CPU_BLOB_HEADER, len - RT_CPU_BLOB_HEADER);
    for (int i = 0; i < 8; i++) copy[9 + i] = (unsigned char)(sum >> (8 * i));
    hlo_diag_clear(&diag);
    rt_executable *e = rt_backend_cpu.deserialize(copy, len, NULL, &diag);
    void *again = NULL;
    size_t again_len = 0;
    fuzzed += e ? rt_backend_cpu.serialize(e, &again, &again_len, &diag) == HLO_OK : diag.message[0] != '\0';
    if (e && args[7]) run_tries++, run_answers += runs_or_says_why(e, args, 8);
    if (e && binding) bind_tries++, bind_answers += binds_or_says_why(e, binding);
    free(again);
    rt_backend_cpu.destroy(e);
  }
  CHECK_EQ_INT(fuzzed, bytes && copy ? 3000 : 0);
  CHECK_EQ_INT(bind_answers, bind_tries);
  CHECK(bind_tries > 0);
  CHECK_EQ_INT(run_answers, run_tries);
  CHECK(run_tries > 0);
  if (bytes && copy) { /* another format version */
    memcpy(copy, bytes, len);
    copy[8] = RT_CPU_BLOB_VERSION + 1;
    hlo_diag_clear(&diag);
    CHECK(rt_backend_cpu.deserialize(copy, len, NULL, &diag) == NULL);
    CHECK_MSG(strstr(diag.message, "format version") != NULL, "%s", diag.message);
  }
  free(copy);
  free(bytes);
  for (int i = 0; i < 8; i++) rt_value_release(args[i]);
  hlo_module_free(module);
  hlo_module_free(binding);
  rt_backend_cpu.destroy(exe);
}

/* Whether exe serializes to the len bytes at want. */
static bool writes(const rt_executable *exe, const void *want, size_t len) {
  hlo_diag diag = {0};
  void *bytes = NULL;
  size_t got = 0;
  bool same = rt_backend_cpu.serialize(exe, &bytes, &got, &diag) == HLO_OK && got == len && memcmp(bytes, want, len) == 0;
  free(bytes);
  return same;
}

/* Out of memory at each allocation of a load in turn (alone, then with every one after it):
 * an error saying so, or (the hook spent) a load that runs as compiled; never a crash or a
 * leak (ASan). adopt: the load takes a copy of the bytes, and the one failure that is no
 * error there, the shrink of the bytes it keeps, must leave an executable that writes the
 * same blob. */
static void out_of_memory(bool adopt) {
  rt_executable *exe = compile_checked(conv_bn_text(1));
  hlo_diag diag = {0};
  void *bytes = NULL;
  size_t len = 0;
  CHECK(exe && rt_backend_cpu.serialize(exe, &bytes, &len, &diag) == HLO_OK);
  for (int every_after = 0; bytes && every_after < 2; every_after++) {
    int failing = 0, unclean = 0;
    long n;
    for (n = 1; n < 100000; n++) {
      void *copy = adopt ? malloc(len) : NULL; /* malloc, not hlo_malloc: the hook leaves it alone */
      if (copy) memcpy(copy, bytes, len);
      hlo_diag_clear(&diag);
      hlo_alloc_test_fail(n, every_after);
      rt_executable *e = adopt ? rt_backend_cpu.adopt(copy, len, NULL, &diag)
                               : rt_backend_cpu.deserialize(bytes, len, NULL, &diag);
      long failures = hlo_alloc_test_failures();
      hlo_alloc_test_fail(0, false);
      if (failures == 0) {
        CHECK_MSG(e != NULL, "%s", diag.message);
        rt_backend_cpu.destroy(e);
        break;
      }
      failing++;
      bool clean = e == NULL && diag.status == HLO_ERR_INTERNAL && strstr(diag.message, "out of memory");
      if (adopt && e) clean = writes(e, bytes, len);
      if (!clean && unclean++ < 3) fprintf(stderr, "allocation %ld failed: %s, status %d: %s\n", n, e ? "loaded" : "refused", diag.status, diag.message);
      rt_backend_cpu.destroy(e);
    }
    CHECK_MSG(unclean == 0 && failing > 10, "%d failing loads, %d unclean", failing, unclean);
  }
  free(bytes);
  rt_backend_cpu.destroy(exe);
}

static void test_out_of_memory(void) {
  out_of_memory(false);
  out_of_memory(true);
}

/* The module codec over the corpus: decode(encode(m)) prints as m and keeps its origins. */
static int codec_checked;

static void codec_round_trip(const char *path, const hlo_module *module) {
  hlo_strbuf out;
  hlo_sb_init(&out);
  rt_cpu_encode_module(&out, module, false);
  CHECK_MSG(!out.failed, "%s: encoding ran out of memory", path);
  rt_blob_in in;
  rt_blob_in_init(&in, out.data, out.len);
  hlo_module *back = rt_cpu_decode_module(&in);
  CHECK_MSG(back != NULL && in.p == in.end, "%s: decode: %s", path, in.why);
  char *want = hlo_module_to_text(module), *got = back ? hlo_module_to_text(back) : NULL;
  CHECK_MSG(want && got && strcmp(want, got) == 0, "%s: the decoded module prints otherwise", path);
  bool origins = back && back->comp_count == module->comp_count;
  for (int c = 0; origins && c < module->comp_count; c++)
    for (int i = 0; origins && i < module->comps[c]->instr_count; i++)
      origins = module->comps[c]->instrs[i]->origin == back->comps[c]->instrs[i]->origin;
  CHECK_MSG(origins, "%s: origins differ", path);
  codec_checked++;
  free(want);
  free(got);
  hlo_module_free(back);
  hlo_sb_free(&out);
}

/* Tuples and arrays: the same structure and bytes. */
static bool same_values(const rt_value *a, const rt_value *b) {
  if (!a || !b || a->shape.dtype != b->shape.dtype) return false;
  if (a->shape.dtype != HLO_TUPLE) return same_bytes(a, b);
  if (a->tuple_count != b->tuple_count) return false;
  for (int i = 0; i < a->tuple_count; i++)
    if (!same_values(a->tuple[i], b->tuple[i])) return false;
  return true;
}

/* A corpus module the cpu backend compiles: loaded again, it gives the compiled one's bytes
 * (the reference comparison is test_cpu_corpus's). Left out as test_cpu_corpus leaves them:
 * the training steps of large models, mobilenet_v2 and sharded_computation (tens of seconds
 * each on the cpu backend; test_warm_cache.sh loads the zoo's mobilenet_v2). */
static int executables_checked;

static void executable_round_trip(const char *path, const hlo_module *module) {
  const char *slow[] = {"llama", "maxtext", "mobilenet", "sharded_computation"};
  for (size_t i = 0; i < sizeof slow / sizeof slow[0]; i++)
    if (strstr(path, slow[i])) return;
  hlo_diag diag = {0};
  rt_executable *exe = rt_backend_cpu.compile(module, NULL, &diag);
  if (!exe) return; /* not one the cpu backend runs */
  rt_executable *loaded = reload(exe);
  int n = module->entry->param_count;
  rt_value **args = random_args(module, 7);
  rt_value *want = run(exe, args, n), *got = loaded ? run(loaded, args, n) : NULL;
  CHECK_MSG(same_values(want, got), "%s: loaded against compiled", path);
  executables_checked++;
  rt_value_release(want);
  rt_value_release(got);
  free_args(args, n);
  rt_backend_cpu.destroy(loaded);
  rt_backend_cpu.destroy(exe);
}

static void codec_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return;
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *text = malloc((size_t)size + 1);
  size_t got = text ? fread(text, 1, (size_t)size, f) : 0;
  fclose(f);
  hlo_diag diag = {0};
  hlo_module *module = text ? hlo_parse_module(text, got, path, &diag) : NULL;
  if (module) executable_round_trip(path, module);
  if (module) {
    hlo_module_number_origins(module);
    codec_round_trip(path, module);
    hlo_pass_run_all(module); /* and after the passes, as the cache writes it */
    rt_cpu_pass_fold_affine(module);
    codec_round_trip(path, module);
  }
  hlo_module_free(module);
  free(text);
}

static void test_module_codec(void) {
  const char *dirs[] = {"../shared/corpus/xla"};
  for (size_t d = 0; d < sizeof dirs / sizeof dirs[0]; d++) {
    DIR *dir = opendir(dirs[d]);
    struct dirent *e;
    while (dir && (e = readdir(dir))) {
      size_t n = strlen(e->d_name);
      if (n < 5 || strcmp(e->d_name + n - 4, ".hlo") != 0) continue;
      char path[1024];
      snprintf(path, sizeof path, "%s/%s", dirs[d], e->d_name);
      codec_file(path);
    }
    if (dir) closedir(dir);
  }
  hlo_module *module = parse_checked(conv_bn_text(3));
  if (module) codec_round_trip("conv_bn", module);
  hlo_module_free(module);
  CHECK_MSG(codec_checked >= 20, "only %d modules checked", codec_checked);
  CHECK_MSG(executables_checked >= 8, "only %d executables checked", executables_checked);
}

int main(void) {
  make_texts();
  RUN(test_module_codec);
  RUN(test_differential);
  RUN(test_kept_weights);
  RUN(test_bind_loaded);
  RUN(test_adopt_keeps_source);
  RUN(test_bound_reloaded);
  RUN(test_dead_computations);
  RUN(test_unverified_module);
  RUN(test_weights_without_convolution);
  RUN(test_damaged);
  RUN(test_out_of_memory);
  return TEST_REPORT();
}
