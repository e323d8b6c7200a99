/* The minifier's rewrites (minify/rewrite.c) on planted faults: each module is minified with
 * the rewrites and without them, and the repro with them must be smaller or plainer as the
 * comments work out by hand, and still fail the same way when checked again on its own. */
#include <stdlib.h>

#include "eval_util.h"
#include "hlo/hlo.h"
#include "minify/minify.h"
#include "minify/minify_internal.h"
#include "runtime/runtime.h"

static hlo_module *parse(const char *text) {
  hlo_diag d = {HLO_OK, ""};
  hlo_module *m = hlo_parse_module(text, strlen(text), "test", &d);
  CHECK_MSG(m != NULL, "%s", d.message);
  return m;
}

static min_options options_for(min_check_kind kind, rt_fault_kind fault_kind, hlo_opcode op) {
  min_options o = {0};
  rt_fault fault = {.kind = fault_kind, .opcode = op, .eps = 0.5};
  o.predicate.kind = kind;
  o.predicate.backend = rt_fault_backend(&rt_backend_reference, &fault);
  o.predicate.tol = RT_ACCURACY_DEFAULT_TOL;
  o.predicate.timeout_s = 30;
  return o;
}

static int total_instrs(const hlo_module *m) {
  int count = 0;
  for (int c = 0; c < m->comp_count; c++) count += m->comps[c]->instr_count;
  return count;
}

static int count_op(const hlo_module *m, hlo_opcode op) {
  int count = 0;
  for (int c = 0; c < m->comp_count; c++)
    for (int i = 0; i < m->comps[c]->instr_count; i++) count += m->comps[c]->instrs[i]->opcode == op;
  return count;
}

static const hlo_instr *first_op(const hlo_module *m, hlo_opcode op) {
  for (int c = 0; c < m->comp_count; c++)
    for (int i = 0; i < m->comps[c]->instr_count; i++)
      if (m->comps[c]->instrs[i]->opcode == op) return m->comps[c]->instrs[i];
  return NULL;
}

/* Minifies m under o (rewrites on or off) into r; the repro must fail as the original did,
 * in the minifier's rechecks and in one more check of its own. */
static bool minify(const hlo_module *m, rt_value **in, int n, min_options o, bool rewrite, min_report *r) {
  o.no_rewrite = !rewrite;
  hlo_diag d = {HLO_OK, ""};
  hlo_status status = min_minify(m, in, n, &o, r, &d);
  CHECK_MSG(status == HLO_OK, "%s", d.message);
  if (status != HLO_OK) return false;
  CHECK_EQ_INT(r->reproduced, 3);
  min_outcome again;
  CHECK(min_check(&o.predicate, r->module, r->inputs, r->input_count, &again, &d) == HLO_OK);
  CHECK_MSG(min_outcome_same(&r->failure, &again), "the repro fails otherwise (kind %d)", again.kind);
  return true;
}

/* A compile fault on cosine inside a loop body: cuts only reach the entry, so without the
 * rewrites the body keeps negate, exponential and tanh around the cosine. With bypass each
 * is replaced by its operand and dies: the body computes cosine(x) alone, three
 * instructions fewer. */
static void test_bypass(void) {
  hlo_module *m = parse("HloModule w\n"
                        "cond {\n"
                        "  p = (s32[], f32[4]) parameter(0)\n"
                        "  i = s32[] get-tuple-element(p), index=0\n"
                        "  n = s32[] constant(3)\n"
                        "  ROOT lt = pred[] compare(i, n), direction=LT\n"
                        "}\n"
                        "body {\n"
                        "  p = (s32[], f32[4]) parameter(0)\n"
                        "  i = s32[] get-tuple-element(p), index=0\n"
                        "  x = f32[4] get-tuple-element(p), index=1\n"
                        "  one = s32[] constant(1)\n"
                        "  j = s32[] add(i, one)\n"
                        "  a = f32[4] negate(x)\n"
                        "  b = f32[4] exponential(a)\n"
                        "  c = f32[4] cosine(b)\n"
                        "  d = f32[4] tanh(c)\n"
                        "  ROOT t = (s32[], f32[4]) tuple(j, d)\n"
                        "}\n"
                        "ENTRY e {\n"
                        "  x = f32[4] parameter(0)\n"
                        "  z = s32[] constant(0)\n"
                        "  t = (s32[], f32[4]) tuple(z, x)\n"
                        "  w = (s32[], f32[4]) while(t), condition=cond, body=body\n"
                        "  ROOT r = f32[4] get-tuple-element(w), index=1\n"
                        "}\n");
  min_options o = options_for(MIN_CHECK_COMPILE, RT_FAULT_COMPILE, HLO_OP_COS);
  min_report cut, rewritten;
  if (minify(m, NULL, 0, o, false, &cut) && minify(m, NULL, 0, o, true, &rewritten)) {
    /* cuts alone: the body is untouched (negate, exponential, cosine, tanh all there) */
    CHECK_EQ_INT(count_op(cut.module, HLO_OP_NEGATE) + count_op(cut.module, HLO_OP_EXP) +
                     count_op(cut.module, HLO_OP_TANH),
                 3);
    /* rewritten: the three gone, the cosine kept, so three instructions fewer at least */
    CHECK_EQ_INT(count_op(rewritten.module, HLO_OP_NEGATE) + count_op(rewritten.module, HLO_OP_EXP) +
                     count_op(rewritten.module, HLO_OP_TANH),
                 0);
    CHECK_EQ_INT(count_op(rewritten.module, HLO_OP_COS), 1);
    CHECK_MSG(total_instrs(rewritten.module) <= total_instrs(cut.module) - 3, "%d instructions, cuts alone %d",
              total_instrs(rewritten.module), total_instrs(cut.module));
    CHECK(rewritten.wins[MIN_BYPASS] >= 3);
    CHECK_EQ_INT(cut.wins[MIN_BYPASS], 0);
  }
  min_report_free(&cut);
  min_report_free(&rewritten);
  hlo_module_free(m);
}

/* A compile fault on slice: x[1:9:2] becomes x[0:4:1], the same shape f32[4]; a
 * reduce-window fault: stride 2 and padding 1 become stride 1 and no padding. */
static void test_attributes(void) {
  hlo_module *m = parse("HloModule s\n"
                        "ENTRY e {\n"
                        "  x = f32[9] parameter(0)\n"
                        "  ROOT s = f32[4] slice(x), slice={[1:9:2]}\n"
                        "}\n");
  min_options o = options_for(MIN_CHECK_COMPILE, RT_FAULT_COMPILE, HLO_OP_SLICE);
  min_report cut, rewritten;
  if (minify(m, NULL, 0, o, false, &cut) && minify(m, NULL, 0, o, true, &rewritten)) {
    const hlo_instr *before = first_op(cut.module, HLO_OP_SLICE), *after = first_op(rewritten.module, HLO_OP_SLICE);
    CHECK(before && before->slice_starts.values[0] == 1 && before->slice_strides.values[0] == 2);
    CHECK(after && after->slice_starts.values[0] == 0 && after->slice_strides.values[0] == 1 &&
          after->slice_limits.values[0] == 4 && after->shape.dims[0] == 4);
    CHECK(rewritten.wins[MIN_ATTRS] >= 1);
  }
  min_report_free(&cut);
  min_report_free(&rewritten);
  hlo_module_free(m);

  m = parse("HloModule r\n"
            "add {\n"
            "  a = f32[] parameter(0)\n"
            "  b = f32[] parameter(1)\n"
            "  ROOT c = f32[] add(a, b)\n"
            "}\n"
            "ENTRY e {\n"
            "  x = f32[8] parameter(0)\n"
            "  z = f32[] constant(0)\n"
            "  ROOT w = f32[4] reduce-window(x, z), window={size=3 stride=2 pad=1_0}, to_apply=add\n"
            "}\n");
  o = options_for(MIN_CHECK_COMPILE, RT_FAULT_COMPILE, HLO_OP_REDUCE_WINDOW);
  if (minify(m, NULL, 0, o, true, &rewritten)) {
    const hlo_instr *w = first_op(rewritten.module, HLO_OP_REDUCE_WINDOW);
    CHECK(w && w->window->dims[0].stride == 1 && w->window->dims[0].pad_low == 0 && w->window->dims[0].size == 3);
    CHECK(w && w->shape.dims[0] == 6); /* (8 - 3) / 1 + 1, inferred again */
  }
  min_report_free(&rewritten);
  hlo_module_free(m);
}

/* f64 narrowed to f32, module and inputs together: an accuracy fault on cosine in an f64
 * module whose input comes through a convert from f32. Narrowed, the convert is f32 to
 * f32 and bypass removes it: one op fewer than the cuts leave, and the input keeps its
 * values (exactly representable in f32). */
static void test_types(void) {
  hlo_module *m = parse("HloModule t\n"
                        "ENTRY e {\n"
                        "  x = f32[3] parameter(0)\n"
                        "  y = f64[3] parameter(1)\n"
                        "  c = f64[3] convert(x)\n"
                        "  a = f64[3] add(c, y)\n"
                        "  ROOT k = f64[3] cosine(a)\n"
                        "}\n");
  min_options o = options_for(MIN_CHECK_ACCURACY, RT_FAULT_ACCURACY, HLO_OP_COS);
  int64_t dims[1] = {3};
  rt_value *in[2] = {make_value(HLO_F32, 1, dims, (double[]){0.5, 1, 2}),
                     make_value(HLO_F64, 1, dims, (double[]){0.25, 0.5, 0.75})};
  min_report cut, rewritten;
  if (minify(m, in, 2, o, false, &cut) && minify(m, in, 2, o, true, &rewritten)) {
    const hlo_instr *before = first_op(cut.module, HLO_OP_COS), *after = first_op(rewritten.module, HLO_OP_COS);
    CHECK(before && before->shape.dtype == HLO_F64);
    CHECK(after && after->shape.dtype == HLO_F32);
    CHECK(rewritten.wins[MIN_TYPES] == 1);
    CHECK_EQ_INT(count_op(rewritten.module, HLO_OP_CONVERT), 0);
    CHECK(rewritten.ops_after <= cut.ops_after);
    /* the inputs are f32 now, with the values cosine's operand had: (0.5+0.25, 1+0.5, 2+0.75)
     * when the add was promoted, or the two inputs when it was kept */
    for (int i = 0; i < rewritten.input_count; i++) CHECK(rewritten.inputs[i]->shape.dtype == HLO_F32);
    if (rewritten.ops_after == 1 && rewritten.input_count == 1) {
      double want[3] = {0.75, 1.5, 2.75};
      for (int i = 0; i < 3; i++) CHECK_NEAR(rt_get_f64(rewritten.inputs[0], i), want[i], 0);
    }
  }
  min_report_free(&cut);
  min_report_free(&rewritten);
  rt_value_release(in[0]);
  rt_value_release(in[1]);
  hlo_module_free(m);
}

/* Metadata, frontend attributes and a written non-default layout dropped, in two steps
 * (the first, metadata alone, is the same program by the hash and needs no check). */
static void test_metadata(void) {
  hlo_module *m = parse("HloModule md\n"
                        "ENTRY e {\n"
                        "  x = f32[2,3]{0,1} parameter(0)\n"
                        "  ROOT c = f32[2,3]{0,1} cosine(x), metadata={op_name=\"jit(f)/cos\" source_line=3}, "
                        "frontend_attributes={tag=\"t\"}\n"
                        "}\n");
  min_options o = options_for(MIN_CHECK_COMPILE, RT_FAULT_COMPILE, HLO_OP_COS);
  min_report cut, rewritten;
  if (minify(m, NULL, 0, o, false, &cut) && minify(m, NULL, 0, o, true, &rewritten)) {
    const hlo_instr *before = first_op(cut.module, HLO_OP_COS), *after = first_op(rewritten.module, HLO_OP_COS);
    CHECK(before && hlo_instr_raw_attr(before, "metadata") && !hlo_shape_is_default_layout(&before->shape));
    CHECK(after && !hlo_instr_raw_attr(after, "metadata") && !hlo_instr_raw_attr(after, "frontend_attributes"));
    CHECK(after && hlo_shape_is_default_layout(&after->shape) && !after->shape.has_layout);
    CHECK_EQ_INT(rewritten.wins[MIN_METADATA], 2);
  }
  min_report_free(&cut);
  min_report_free(&rewritten);
  hlo_module_free(m);
}

int main(void) {
  RUN(test_bypass);
  RUN(test_attributes);
  RUN(test_types);
  RUN(test_metadata);
  return TEST_REPORT();
}
