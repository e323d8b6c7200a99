/* The minifier's data: the record of the original run (minify/record.h) and the accuracy
 * scan that fills it, smaller shapes and simpler inputs after the ops; expected values are
 * worked out by hand from the modules below. */
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "cli_util.h"
#include "eval_util.h"
#include "hlo/hlo.h"
#include "minify/minify.h"
#include "minify/minify_internal.h"
#include "runtime/runtime.h"
#include "runtime/reference/reference.h"

static hlo_module *parse(const char *text) {
  hlo_diag d = {HLO_OK, ""};
  hlo_module *m = hlo_parse_module(text, strlen(text), "test", &d);
  CHECK_MSG(m != NULL, "%s", d.message);
  return m;
}

static void remove_dir(const char *dir) {
  char command[256];
  snprintf(command, sizeof command, "rm -rf '%s'", dir);
  CHECK(system(command) == 0);
}

static void free_inputs(rt_value **in, int n) {
  for (int i = 0; i < n; i++) rt_value_release(in[i]);
  free(in);
}

/* The only op of m that is neither a parameter, a constant nor a broadcast, or NULL. */
static const hlo_instr *only_op(const hlo_module *m) {
  const hlo_instr *op = NULL;
  for (int i = 0; i < m->entry->instr_count; i++) {
    const hlo_instr *instr = m->entry->instrs[i];
    hlo_opcode code = instr->opcode;
    if (code == HLO_OP_PARAMETER || code == HLO_OP_CONSTANT || code == HLO_OP_BROADCAST) continue;
    if (op) return NULL;
    op = instr;
  }
  return op;
}

static void test_record(void) {
  min_record *r = min_record_new();
  int64_t dims[1] = {2};
  rt_value *a = make_value(HLO_F32, 1, dims, (double[]){1, 2});
  rt_value *a64 = make_value(HLO_F64, 1, dims, (double[]){1, 2});
  rt_value *b = make_value(HLO_F32, 1, dims, (double[]){3, 4});
  /* Enough names to make the table grow several times. */
  char name[32];
  for (int i = 0; i < 5000; i++) {
    snprintf(name, sizeof name, "v.%d", i);
    CHECK(min_record_put(r, name, false, a));
  }
  CHECK(min_record_put(r, "a", true, a64));
  CHECK(min_record_put(r, "b", false, b));
  CHECK(min_record_put(r, "b", true, a64));
  CHECK(min_record_put(r, "b", false, a)); /* an existing value is kept */
  CHECK(min_record_get(r, "b", false) == b);
  CHECK(min_record_get(r, "v.4999", false) == a);
  CHECK(min_record_get(r, "v.5000", false) == NULL);
  CHECK_NEAR(min_record_bytes(r), 5000 * 8 + 16 + 8 + 16, 0);
  for (int i = 0; i < 5000; i += 2) {
    snprintf(name, sizeof name, "v.%d", i);
    min_record_drop(r, name);
  }
  CHECK(min_record_get(r, "v.2", false) == NULL && min_record_get(r, "v.3", false) == a);
  CHECK_NEAR(min_record_bytes(r), 2500 * 8 + 16 + 8 + 16, 0);
  /* A tuple root gets its references from its elements. */
  hlo_module *m = parse("HloModule t\nENTRY e {\n  a = f32[2] parameter(0)\n  b = f32[2] parameter(1)\n"
                        "  ROOT t = (f32[2], f32[2]) tuple(b, a)\n}\n");
  min_refs refs;
  CHECK(!min_record_refs(r, m, &refs)); /* a has no declared value */
  CHECK(min_record_put(r, "a", false, a));
  CHECK(min_record_refs(r, m, &refs));
  CHECK(refs.declared->tuple_count == 2 && refs.declared->tuple[0] == b && refs.declared->tuple[1] == a);
  CHECK(refs.fp64->tuple_count == 2 && refs.fp64->tuple[0] == a64 && refs.fp64->tuple[1] == a64);
  min_refs_release(&refs);
  hlo_module_free(m);
  min_record_free(r);
  rt_value_release(a);
  rt_value_release(a64);
  rt_value_release(b);
}

/* x=(1,2,3), y=(1,1,1): a=(2,3,4), b=a*a=(4,9,16), c=cos(b), d=tanh(c). */
static const char *const chain =
    "HloModule s\n"
    "ENTRY e {\n"
    "  x = f32[3] parameter(0)\n"
    "  y = f32[3] parameter(1)\n"
    "  a = f32[3] add(x, y)\n"
    "  b = f32[3] multiply(a, a)\n"
    "  c = f32[3] cosine(b)\n"
    "  d = f32[3] tanh(c)\n"
    "  ROOT r = (f32[3], f32[3]) tuple(d, a)\n"
    "}\n";

static rt_value **chain_inputs(void) {
  int64_t dims[1] = {3};
  rt_value **in = calloc(2, sizeof *in);
  in[0] = make_value(HLO_F32, 1, dims, (double[]){1, 2, 3});
  in[1] = make_value(HLO_F32, 1, dims, (double[]){1, 1, 1});
  return in;
}

static min_options accuracy_options(hlo_opcode op) {
  min_options o = {0};
  rt_fault fault = {.kind = RT_FAULT_ACCURACY, .opcode = op, .eps = 0.5};
  o.predicate.kind = MIN_CHECK_ACCURACY;
  o.predicate.backend = rt_fault_backend(&rt_backend_reference, &fault);
  o.predicate.tol = RT_ACCURACY_DEFAULT_TOL;
  o.predicate.timeout_s = 30;
  return o;
}

/* The module whole fails first (its references recorded on the way); the scan checks a
 * (passes: the fault is on multiply), then b alone fed with a's recorded value (2, 3, 4),
 * which fails: the repro is b. */
static void test_scan(void) {
  hlo_module *m = parse(chain);
  rt_value **in = chain_inputs();
  min_options o = accuracy_options(HLO_OP_MULTIPLY);
  o.progress = getenv("TEST_VERBOSE") ? stderr : NULL;
  min_report r;
  hlo_diag d = {HLO_OK, ""};
  CHECK_EQ_INT(min_minify(m, in, 2, &o, &r, &d), HLO_OK);
  CHECK_EQ_INT(r.failure.kind, MIN_ACCURACY);
  CHECK_EQ_INT(r.wins[MIN_SCAN], 1);
  const hlo_instr *op = only_op(r.module);
  CHECK(op && op->opcode == HLO_OP_MULTIPLY);
  CHECK_EQ_INT(r.input_count, 1);
  if (r.input_count == 1) {
    CHECK_NEAR(rt_get_f64(r.inputs[0], 0), 2, 0);
    CHECK_NEAR(rt_get_f64(r.inputs[0], 2), 4, 0);
  }
  /* the whole module; groups of 1 then 2 ops: a passes; b and c fail (b's error reaches
   * both outputs); one truncation drops c; the multiply bypassed by its operand (passes);
   * three rechecks */
  CHECK_EQ_INT(r.checks, 1 + 2 + 1 + 1 + 3);
  CHECK_EQ_INT(r.reproduced, 3);
  min_report_free(&r);
  /* Without the scan the module is checked whole first, and ends at the same repro. */
  o.no_scan = true;
  CHECK_EQ_INT(min_minify(m, in, 2, &o, &r, &d), HLO_OK);
  CHECK_EQ_INT(r.wins[MIN_SCAN], 0);
  op = only_op(r.module);
  CHECK(op && op->opcode == HLO_OP_MULTIPLY);
  min_report_free(&r);
  /* A module that does not fail: the scan passes every group, then the whole check says so. */
  o = accuracy_options(HLO_OP_SUBTRACT);
  CHECK_EQ_INT(min_minify(m, in, 2, &o, &r, &d), HLO_ERR_INPUT);
  CHECK_EQ_INT(r.failure.kind, MIN_PASS);
  free_inputs(in, 2);
  hlo_module_free(m);
}

/* x: f32[8,6] = 0, 1, ..., 47, y = 1: a = x + y, c = cos(a), under a cosine fault. */
static const char *const wide =
    "HloModule w\n"
    "ENTRY e {\n"
    "  x = f32[8,6] parameter(0)\n"
    "  y = f32[8,6] parameter(1)\n"
    "  a = f32[8,6] add(x, y)\n"
    "  c = f32[8,6] cosine(a)\n"
    "  ROOT t = f32[8,6] tanh(c)\n"
    "}\n";

static rt_value **wide_inputs(void) {
  int64_t dims[2] = {8, 6};
  double x[48], y[48];
  for (int i = 0; i < 48; i++) x[i] = i, y[i] = 1;
  rt_value **in = calloc(2, sizeof *in);
  in[0] = make_value(HLO_F32, 2, dims, x);
  in[1] = make_value(HLO_F32, 2, dims, y);
  return in;
}

/* With a target of 1 byte: the cosine on a promoted f32[8,6] (192 bytes) shrinks to f32[1,1]
 * and its input then gives way to a broadcast zero (cos(0) = 1 still gets the fault's error):
 * no input bytes left. */
static void test_shapes_and_inputs(void) {
  hlo_module *m = parse(wide);
  rt_value **in = wide_inputs();
  min_options o = accuracy_options(HLO_OP_COS);
  o.small_inputs_bytes = 1;
  min_report r;
  hlo_diag d = {HLO_OK, ""};
  CHECK_EQ_INT(min_minify(m, in, 2, &o, &r, &d), HLO_OK);
  const hlo_instr *op = only_op(r.module);
  CHECK(op && op->opcode == HLO_OP_COS);
  CHECK_NEAR(r.input_bytes_before, 384, 0);
  CHECK_NEAR(r.input_bytes_after, 0, 0);
  CHECK_EQ_INT(r.input_count, 0);
  CHECK_EQ_INT(r.wins[MIN_SHAPES], 2);
  CHECK_EQ_INT(r.wins[MIN_INPUTS], 1);
  if (op) CHECK(op->shape.rank == 2 && op->shape.dims[0] == 1 && op->shape.dims[1] == 1);
  CHECK_EQ_INT(r.reproduced, 3);
  min_report_free(&r);
  /* The default target, 64 KB: 384 bytes are small already, nothing changes shape. */
  o.small_inputs_bytes = 0;
  CHECK_EQ_INT(min_minify(m, in, 2, &o, &r, &d), HLO_OK);
  CHECK_EQ_INT(r.wins[MIN_SHAPES] + r.wins[MIN_INPUTS], 0);
  CHECK_NEAR(r.input_bytes_after, 192, 0);
  min_report_free(&r);
  free_inputs(in, 2);
  hlo_module_free(m);
}

/* A failure that needs values that vary: under shift:cosine the cosine's results come out
 * moved one place along the last dim, which constant inputs hide. The shapes go to f32[1,3]
 * (one column, or a constant column, hides it too), zeros, ones and the mean are rejected,
 * and the seeded array is kept: element i = ((3i + 0) mod 7) - 3 = -3, 0, 3, a generator in
 * the module, so no input bytes are left. The repro, run by the reference evaluator on no
 * inputs, is cos(-3), cos(0), cos(3); report.txt names the replacement. */
static void test_seeded_inputs(void) {
  char dir[] = "/tmp/latch-test-seeded-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  hlo_module *m = parse(wide);
  rt_value **in = wide_inputs();
  min_options o = accuracy_options(HLO_OP_COS);
  rt_fault fault = {.kind = RT_FAULT_SHIFT, .opcode = HLO_OP_COS};
  o.predicate.backend = rt_fault_backend(&rt_backend_reference, &fault);
  o.small_inputs_bytes = 1;
  o.progress = getenv("TEST_VERBOSE") ? stderr : NULL;
  min_report r;
  hlo_diag d = {HLO_OK, ""};
  CHECK_MSG(min_minify(m, in, 2, &o, &r, &d) == HLO_OK, "%s", d.message);
  CHECK_NEAR(r.input_bytes_after, 0, 0);
  CHECK_EQ_INT(r.input_count, 0);
  CHECK_EQ_INT(r.wins[MIN_SHAPES], 2);
  CHECK_EQ_INT(r.wins[MIN_INPUTS], 1);
  CHECK_EQ_INT(r.seeded_inputs, 1);
  CHECK_EQ_INT(r.reproduced, 3);
  const hlo_instr *root = r.module->entry->root;
  CHECK(root->opcode == HLO_OP_COS && root->shape.rank == 2 && root->shape.dims[0] == 1 && root->shape.dims[1] == 3);
  rt_eval_options eval = {.fp64 = false};
  rt_value *out = NULL;
  CHECK_MSG(rt_evaluate(r.module, NULL, 0, &eval, &out, &d) == HLO_OK, "%s", d.message);
  if (out) {
    double want[3] = {cos(-3.0), 1, cos(3.0)};
    expect_values(__LINE__, out, want, 3, 1e-6);
    rt_value_release(out);
  }
  min_predicate predicate = o.predicate;
  min_repro_info info = {.backend = "reference"};
  CHECK_MSG(min_write_repro(dir, &r, &predicate, &info, &d) == HLO_OK, "%s", d.message);
  char path[256], text[4096];
  snprintf(path, sizeof path, "%s/report.txt", dir);
  cli_read_text(path, text, sizeof text);
  CHECK_MSG(strstr(text, "replaced:   %a (f32[1,3]) by a seeded array, element i = ((i * 3 + 0) mod 7) - 3") != NULL,
            "%s", text);
  CHECK_MSG(strstr(text, "inputs:     384 bytes before, 0 bytes after") != NULL, "%s", text);
  min_report_free(&r);
  /* The accuracy fault shows on constant data: zeros win, no seeded array. */
  o = accuracy_options(HLO_OP_COS);
  o.small_inputs_bytes = 1;
  CHECK_EQ_INT(min_minify(m, in, 2, &o, &r, &d), HLO_OK);
  CHECK_EQ_INT(r.seeded_inputs, 0);
  CHECK_MSG(strstr(r.simpler_inputs, "by zeros") != NULL, "%s", r.simpler_inputs);
  min_report_free(&r);
  free_inputs(in, 2);
  hlo_module_free(m);
  remove_dir(dir);
}

/* x: f32[8,6] = 0, 1, ..., 47 through a call and a while loop whose bodies take arrays: the
 * loop runs cosine twice on its f32[8,6] state. Under a cosine fault the sizes shrink
 * through both bodies: every f32[8,6] in the module becomes f32[1,1] (the bodies' parameters
 * and the loop's tuple with it), and the verifier accepts each candidate. */
static const char *const looped =
    "HloModule l\n"
    "twice {\n"
    "  q = f32[8,6] parameter(0)\n"
    "  ROOT d = f32[8,6] add(q, q)\n"
    "}\n"
    "cond {\n"
    "  s = (s32[], f32[8,6]) parameter(0)\n"
    "  i = s32[] get-tuple-element(s), index=0\n"
    "  n = s32[] constant(2)\n"
    "  ROOT lt = pred[] compare(i, n), direction=LT\n"
    "}\n"
    "body {\n"
    "  s = (s32[], f32[8,6]) parameter(0)\n"
    "  i = s32[] get-tuple-element(s), index=0\n"
    "  one = s32[] constant(1)\n"
    "  j = s32[] add(i, one)\n"
    "  v = f32[8,6] get-tuple-element(s), index=1\n"
    "  c = f32[8,6] cosine(v)\n"
    "  ROOT t = (s32[], f32[8,6]) tuple(j, c)\n"
    "}\n"
    "ENTRY e {\n"
    "  x = f32[8,6] parameter(0)\n"
    "  a = f32[8,6] call(x), to_apply=twice\n"
    "  zero = s32[] constant(0)\n"
    "  init = (s32[], f32[8,6]) tuple(zero, a)\n"
    "  w = (s32[], f32[8,6]) while(init), condition=cond, body=body\n"
    "  ROOT r = f32[8,6] get-tuple-element(w), index=1\n"
    "}\n";

static void test_shapes_through_bodies(void) {
  hlo_module *m = parse(looped);
  rt_value **in = wide_inputs(); /* only x is used */
  min_options o = accuracy_options(HLO_OP_COS);
  o.small_inputs_bytes = 1;
  o.keep_shapes = false;
  o.progress = getenv("TEST_VERBOSE") ? stderr : NULL;
  min_report r;
  hlo_diag d = {HLO_OK, ""};
  CHECK_MSG(min_minify(m, in, 1, &o, &r, &d) == HLO_OK, "%s", d.message);
  CHECK_EQ_INT(r.wins[MIN_SHAPES], 2);
  char *text = hlo_module_to_text(r.module);
  CHECK_MSG(strstr(text, "f32[8") == NULL && strstr(text, ",6]") == NULL, "%s", text);
  CHECK_MSG(strstr(text, "(s32[], f32[1,1]) while(") != NULL, "%s", text);
  CHECK_MSG(strstr(text, "f32[1,1] cosine(") != NULL, "%s", text);
  free(text);
  /* the candidate runs: one loop of two cosines on the shrunk state */
  CHECK_EQ_INT(r.reproduced, 3);
  min_report_free(&r);
  free_inputs(in, 2);
  hlo_module_free(m);
}

/* A failure that needs the 8 rows and the parameter a: a --test command that wants
 * "cosine(%a)" on f32[8,...]. The 6 columns go to 1; the input keeps its data, the first
 * column of a = x + 1: 1, 7, 13, ..., 43. */
static void test_size_dependent(void) {
  char dir[] = "/tmp/latch-test-shapes-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  hlo_module *m = parse(wide);
  rt_value **in = wide_inputs();
  min_options o = {0};
  o.predicate.kind = MIN_CHECK_COMMAND;
  o.predicate.command = "grep -q 'f32\\[8,[0-9]*\\] cosine(%a)'";
  o.predicate.work_dir = dir;
  o.predicate.timeout_s = 30;
  o.small_inputs_bytes = 1;
  o.progress = getenv("TEST_VERBOSE") ? stderr : NULL;
  min_report r;
  hlo_diag d = {HLO_OK, ""};
  CHECK_MSG(min_minify(m, in, 2, &o, &r, &d) == HLO_OK, "%s", d.message);
  char *text = hlo_module_to_text(r.module);
  CHECK_MSG(strstr(text, "ROOT %c = f32[8,1] cosine(%a)") != NULL, "%s", text);
  free(text);
  CHECK_EQ_INT(r.input_count, 1);
  if (r.input_count == 1 && r.inputs[0]->count == 8)
    for (int i = 0; i < 8; i++) CHECK_NEAR(rt_get_f64(r.inputs[0], i), 6 * i + 1, 0);
  CHECK_NEAR(r.input_bytes_after, 32, 0);
  min_report_free(&r);
  free_inputs(in, 2);
  hlo_module_free(m);
  remove_dir(dir);
}

int main(void) {
  RUN(test_record);
  RUN(test_scan);
  RUN(test_shapes_and_inputs);
  RUN(test_seeded_inputs);
  RUN(test_shapes_through_bodies);
  RUN(test_size_dependent);
  return TEST_REPORT();
}
