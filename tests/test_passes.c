/* The hlo/ passes: each test checks the rewritten graph (which instructions remain, what the
 * root is) and that the reference evaluator computes the same values before and after. */
#include "eval_util.h"
#include "hlo/hlo.h"

static hlo_module *parse(const char *text) {
  hlo_diag diag = {0};
  hlo_module *module = hlo_parse_module(text, strlen(text), "t", &diag);
  CHECK_MSG(module != NULL, "%s", diag.message);
  return module;
}

static int count_op(const hlo_comp *comp, hlo_opcode op) {
  int n = 0;
  for (int i = 0; i < comp->instr_count; i++) n += comp->instrs[i]->opcode == op;
  return n;
}

/* Runs text before and after pass on args and checks the results are bit-identical and the
 * rewritten module verifies. Returns the rewritten module for further checks. */
static hlo_module *check_same(const char *text, int (*pass)(hlo_module *), rt_value **args, int count, int *rewrites) {
  hlo_diag diag = {0};
  rt_value *before = run_text(text, args, count, false, &diag);
  CHECK_MSG(before != NULL, "%s", diag.message);
  hlo_module *module = parse(text);
  *rewrites = pass(module);
  CHECK_MSG(hlo_verify_module(module, &diag) == HLO_OK, "%s", diag.message);
  char *printed = hlo_module_to_text(module);
  rt_value *after = run_text(printed, args, count, false, &diag);
  CHECK_MSG(after != NULL, "%s", diag.message);
  if (before && after) {
    CHECK_EQ_INT(after->count, before->count);
    CHECK(memcmp(after->data, before->data, (size_t)hlo_shape_bytes(&before->shape)) == 0);
  }
  free(printed);
  rt_value_release(before);
  rt_value_release(after);
  return module;
}

static void test_dce(void) {
  const char *text = "HloModule m\nENTRY e {\n x = f32[3] parameter(0)\n unused = f32[] parameter(1)\n"
                     " dead = f32[3] exponential(x)\n dead2 = f32[3] negate(dead)\n ROOT y = f32[3] add(x, x)\n}\n";
  rt_value *args[] = {make_value(HLO_F32, 1, (int64_t[]){3}, (double[]){1, 2, 3}), make_value(HLO_F32, 0, NULL, (double[]){0})};
  int n = 0;
  hlo_module *m = check_same(text, hlo_pass_dce, args, 2, &n);
  CHECK_EQ_INT(n, 2); /* exponential and negate; the unused parameter stays */
  CHECK_EQ_INT(m->entry->instr_count, 3);
  CHECK_EQ_INT(count_op(m->entry, HLO_OP_PARAMETER), 2);
  for (int i = 0; i < m->entry->instr_count; i++) CHECK_EQ_INT(m->entry->instrs[i]->id, i);
  CHECK_EQ_INT(hlo_pass_dce(m), 0); /* a fixed point */
  hlo_module_free(m);
  rt_value_release(args[0]);
  rt_value_release(args[1]);
}

static void test_cse(void) {
  /* two equal exponentials and two equal adds of them collapse; the different slices and the
   * rng stay apart */
  const char *text = "HloModule m\nENTRY e {\n x = f32[4] parameter(0)\n a = f32[4] exponential(x)\n"
                     " b = f32[4] exponential(x)\n c = f32[4] add(a, x)\n d = f32[4] add(b, x)\n"
                     " s1 = f32[2] slice(c), slice={[0:2]}\n s2 = f32[2] slice(d), slice={[2:4]}\n"
                     " ROOT y = f32[2] multiply(s1, s2)\n}\n";
  rt_value *args[] = {make_value(HLO_F32, 1, (int64_t[]){4}, (double[]){0.5, -1, 2, 0})};
  int n = 0;
  hlo_module *m = check_same(text, hlo_pass_cse, args, 1, &n);
  CHECK_EQ_INT(n, 2);
  hlo_pass_dce(m);
  CHECK_EQ_INT(count_op(m->entry, HLO_OP_EXP), 1);
  CHECK_EQ_INT(count_op(m->entry, HLO_OP_ADD), 1);
  CHECK_EQ_INT(count_op(m->entry, HLO_OP_SLICE), 2);
  hlo_module_free(m);
  rt_value_release(args[0]);
  /* equal constants merge; different attributes do not */
  const char *consts = "HloModule m\nENTRY e {\n x = f32[2] parameter(0)\n c1 = f32[] constant(2)\n c2 = f32[] constant(2)\n"
                       " b1 = f32[2] broadcast(c1), dimensions={}\n b2 = f32[2] broadcast(c2), dimensions={}\n"
                       " p = pred[2] compare(b1, x), direction=LT\n q = pred[2] compare(b2, x), direction=GT\n"
                       " ROOT r = pred[2] and(p, q)\n}\n";
  rt_value *xs[] = {make_value(HLO_F32, 1, (int64_t[]){2}, (double[]){1, 3})};
  m = check_same(consts, hlo_pass_cse, xs, 1, &n);
  CHECK_EQ_INT(n, 2); /* c2 -> c1, then b2 -> b1 */
  hlo_pass_dce(m);
  CHECK_EQ_INT(count_op(m->entry, HLO_OP_COMPARE), 2);
  CHECK_EQ_INT(count_op(m->entry, HLO_OP_CONSTANT), 1);
  hlo_module_free(m);
  rt_value_release(xs[0]);
}

static void test_simplify(void) {
  /* x * 1 and 1 * x go; f32 x + 0 stays (-0 + 0 is +0); s32 x + 0 goes; convert to the
   * same type, reshape to the same shape, transpose of transpose back to identity, a full
   * slice and an identity broadcast all go */
  const char *text =
      "HloModule m\nENTRY e {\n x = f32[2,3] parameter(0)\n one = f32[] constant(1)\n ones = f32[2,3] broadcast(one), dimensions={}\n"
      " m1 = f32[2,3] multiply(x, ones)\n m2 = f32[2,3] multiply(ones, m1)\n zero = f32[] constant(0)\n"
      " zeros = f32[2,3] broadcast(zero), dimensions={}\n keep = f32[2,3] add(m2, zeros)\n"
      " cv = f32[2,3] convert(keep)\n rs = f32[2,3] reshape(cv)\n t1 = f32[3,2] transpose(rs), dimensions={1,0}\n"
      " t2 = f32[2,3] transpose(t1), dimensions={1,0}\n sl = f32[2,3] slice(t2), slice={[0:2], [0:3]}\n"
      " bc = f32[2,3] broadcast(sl), dimensions={0,1}\n ROOT n = f32[2,3] negate(bc)\n}\n";
  rt_value *args[] = {make_value(HLO_F32, 2, (int64_t[]){2, 3}, (double[]){-0.0, 1, -2, 3.5, NAN, 0})};
  int n = 0;
  hlo_module *m = check_same(text, hlo_pass_simplify, args, 1, &n);
  CHECK(n >= 7);
  hlo_pass_dce(m);
  CHECK_EQ_INT(count_op(m->entry, HLO_OP_MULTIPLY), 0);
  CHECK_EQ_INT(count_op(m->entry, HLO_OP_ADD), 1); /* the float x + 0 is kept */
  CHECK_EQ_INT(count_op(m->entry, HLO_OP_TRANSPOSE), 0);
  CHECK_EQ_INT(count_op(m->entry, HLO_OP_SLICE) + count_op(m->entry, HLO_OP_CONVERT) + count_op(m->entry, HLO_OP_RESHAPE), 0);
  CHECK(m->entry->root->opcode == HLO_OP_NEGATE && m->entry->root->operands[0]->opcode == HLO_OP_ADD);
  hlo_module_free(m);
  rt_value_release(args[0]);

  const char *ints = "HloModule m\nENTRY e {\n x = s32[4] parameter(0)\n z = s32[] constant(0)\n zs = s32[4] broadcast(z), dimensions={}\n"
                     " a = s32[4] add(zs, x)\n r1 = s32[2,2] reshape(a)\n r2 = s32[4,1] reshape(r1)\n"
                     " t1 = s32[1,4] transpose(r2), dimensions={1,0}\n ROOT t2 = s32[4,1] transpose(t1), dimensions={1,0}\n}\n";
  rt_value *xs[] = {make_value(HLO_S32, 1, (int64_t[]){4}, (double[]){1, -2, 3, 7})};
  m = check_same(ints, hlo_pass_run_all, xs, 1, &n);
  /* add of zero gone, reshape(reshape(x)) is one reshape of x, the transposes cancel */
  CHECK_EQ_INT(count_op(m->entry, HLO_OP_ADD), 0);
  CHECK_EQ_INT(count_op(m->entry, HLO_OP_TRANSPOSE), 0);
  CHECK_EQ_INT(count_op(m->entry, HLO_OP_RESHAPE), 1);
  CHECK(m->entry->root->opcode == HLO_OP_RESHAPE && m->entry->root->operands[0]->opcode == HLO_OP_PARAMETER);
  CHECK_EQ_INT(m->entry->instr_count, 2);
  hlo_module_free(m);
  rt_value_release(xs[0]);
}

/* (2 + 3) * 4 - max(1, 7) folds to the constant 13; an f32 max of -0 and +0 is left
 * alone (maximum's signed-zero rule belongs to the kernels); the fold feeds a broadcast. */
static void test_fold(void) {
  const char *text = "HloModule m\nENTRY e {\n x = s32[3] parameter(0)\n a = s32[] constant(2)\n b = s32[] constant(3)\n"
                     " c = s32[] add(a, b)\n four = s32[] constant(4)\n d = s32[] multiply(c, four)\n"
                     " one = s32[] constant(1)\n seven = s32[] constant(7)\n m = s32[] maximum(one, seven)\n"
                     " e = s32[] subtract(d, m)\n be = s32[3] broadcast(e), dimensions={}\n ROOT r = s32[3] add(x, be)\n}\n";
  rt_value *xs[] = {make_value(HLO_S32, 1, (int64_t[]){3}, (double[]){0, 1, -13})};
  int n = 0;
  hlo_module *m = check_same(text, hlo_pass_run_all, xs, 1, &n);
  CHECK_EQ_INT(count_op(m->entry, HLO_OP_CONSTANT), 1);
  CHECK_EQ_INT(count_op(m->entry, HLO_OP_MULTIPLY) + count_op(m->entry, HLO_OP_SUBTRACT) + count_op(m->entry, HLO_OP_MAXIMUM), 0);
  for (int i = 0; i < m->entry->instr_count; i++)
    if (m->entry->instrs[i]->opcode == HLO_OP_CONSTANT) CHECK_EQ_INT(*(int32_t *)m->entry->instrs[i]->literal->data, 13);
  hlo_module_free(m);
  rt_value_release(xs[0]);
  const char *zeros = "HloModule m\nENTRY e {\n a = f32[] constant(-0)\n b = f32[] constant(0)\n"
                      " ROOT c = f32[] maximum(a, b)\n}\n";
  m = parse(zeros);
  CHECK_EQ_INT(hlo_pass_simplify(m), 0);
  hlo_module_free(m);
}

/* A transposed dot operand is folded into the dimension numbers (x @ W^T, a Linear layer:
 * the transpose goes, rhs contracts on W's dim 1); one whose free dims would come out in
 * another order is kept. */
static void test_dot_transpose(void) {
  const char *text = "HloModule m\nENTRY e {\n x = f32[2,3] parameter(0)\n w = f32[4,3] parameter(1)\n"
                     " wt = f32[3,4] transpose(w), dimensions={1,0}\n"
                     " ROOT d = f32[2,4] dot(x, wt), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n";
  double xv[6] = {1, -2, 3, 0.5, 4, -1}, wv[12];
  for (int i = 0; i < 12; i++) wv[i] = i - 5.5;
  rt_value *args[] = {make_value(HLO_F32, 2, (int64_t[]){2, 3}, xv), make_value(HLO_F32, 2, (int64_t[]){4, 3}, wv)};
  int n = 0;
  hlo_module *m = check_same(text, hlo_pass_run_all, args, 2, &n);
  CHECK_EQ_INT(count_op(m->entry, HLO_OP_TRANSPOSE), 0);
  CHECK(m->entry->root->opcode == HLO_OP_DOT && m->entry->root->operands[1]->opcode == HLO_OP_PARAMETER);
  CHECK_EQ_INT(m->entry->root->dot->rhs_contracting.values[0], 1);
  hlo_module_free(m);
  rt_value_release(args[0]);
  rt_value_release(args[1]);
  /* lhs [3, 2, 5] -> transpose {1,2,0} = [2, 5, 3], contracting 2 (x dim 0): the free dims
   * 0, 1 of the transpose are x dims 1, 2, in order: folded. With {2,1,0} ([5,2,3]) the
   * free dims are x dims 2, 1: reversed, kept. */
  const char *folds = "HloModule m\nENTRY e {\n x = f32[3,2,5] parameter(0)\n y = f32[3] parameter(1)\n"
                      " xt = f32[2,5,3] transpose(x), dimensions={1,2,0}\n"
                      " ROOT d = f32[2,5] dot(xt, y), lhs_contracting_dims={2}, rhs_contracting_dims={0}\n}\n";
  const char *keeps = "HloModule m\nENTRY e {\n x = f32[3,2,5] parameter(0)\n y = f32[3] parameter(1)\n"
                      " xt = f32[5,2,3] transpose(x), dimensions={2,1,0}\n"
                      " ROOT d = f32[5,2] dot(xt, y), lhs_contracting_dims={2}, rhs_contracting_dims={0}\n}\n";
  double x3[30];
  for (int i = 0; i < 30; i++) x3[i] = (i * 7 % 11) - 5;
  for (int pass = 0; pass < 2; pass++) {
    rt_value *a[] = {make_value(HLO_F32, 3, (int64_t[]){3, 2, 5}, x3), make_value(HLO_F32, 1, (int64_t[]){3}, (double[]){1, -1, 2})};
    m = check_same(pass == 0 ? folds : keeps, hlo_pass_run_all, a, 2, &n);
    CHECK_EQ_INT(count_op(m->entry, HLO_OP_TRANSPOSE), pass == 0 ? 0 : 1);
    hlo_module_free(m);
    rt_value_release(a[0]);
    rt_value_release(a[1]);
  }
}

/* Transposed convolution operands are folded into the dimension numbers (a weights
 * gradient: the source and the result's gradient with batch and features swapped): the
 * transposes go, the labels name the dims of the operands as they are; the values stay the
 * same bits (check_same evaluates both). */
static void test_conv_transpose(void) {
  const char *text = "HloModule m\nENTRY e {\n x = f32[2,3,4,4] parameter(0)\n g = f32[2,5,4,4] parameter(1)\n"
                     " xt = f32[3,2,4,4] transpose(x), dimensions={1,0,2,3}\n"
                     " gt = f32[5,2,4,4] transpose(g), dimensions={1,0,2,3}\n"
                     " ROOT c = f32[3,5,3,3] convolution(xt, gt), window={size=4x4 pad=1_1x1_1}, "
                     "dim_labels=bf01_oi01->bf01\n}\n";
  double xv[96], gv[160];
  for (int i = 0; i < 96; i++) xv[i] = (i * 7 % 13) - 6;
  for (int i = 0; i < 160; i++) gv[i] = (i * 5 % 11) - 5;
  rt_value *args[] = {make_value(HLO_F32, 4, (int64_t[]){2, 3, 4, 4}, xv),
                      make_value(HLO_F32, 4, (int64_t[]){2, 5, 4, 4}, gv)};
  int n = 0;
  hlo_module *m = check_same(text, hlo_pass_run_all, args, 2, &n);
  CHECK_EQ_INT(count_op(m->entry, HLO_OP_TRANSPOSE), 0);
  const hlo_instr *c = m->entry->root;
  CHECK(c->opcode == HLO_OP_CONVOLUTION && c->operands[0]->opcode == HLO_OP_PARAMETER &&
        c->operands[1]->opcode == HLO_OP_PARAMETER);
  CHECK(c->conv->input_batch == 1 && c->conv->input_feature == 0 && c->conv->kernel_output_feature == 1 &&
        c->conv->kernel_input_feature == 0 && c->conv->input_spatial[1] == 3 && c->conv->kernel_spatial[0] == 2);
  hlo_module_free(m);
  /* the result transposed to [O, C, KH, KW] (the weights' order): the convolution writes it
   * so (output labels fb01); a convolution read twice keeps its transpose */
  const char *out = "HloModule m\nENTRY e {\n x = f32[2,3,4,4] parameter(0)\n g = f32[2,5,4,4] parameter(1)\n"
                    " xt = f32[3,2,4,4] transpose(x), dimensions={1,0,2,3}\n"
                    " gt = f32[5,2,4,4] transpose(g), dimensions={1,0,2,3}\n"
                    " c = f32[3,5,3,3] convolution(xt, gt), window={size=4x4 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01\n"
                    " ROOT w = f32[5,3,3,3] transpose(c), dimensions={1,0,2,3}\n}\n";
  m = check_same(out, hlo_pass_run_all, args, 2, &n);
  CHECK_EQ_INT(count_op(m->entry, HLO_OP_TRANSPOSE), 0);
  CHECK_EQ_INT(count_op(m->entry, HLO_OP_CONVOLUTION), 1);
  c = m->entry->root;
  CHECK(c->opcode == HLO_OP_CONVOLUTION && c->conv->output_feature == 0 && c->conv->output_batch == 1 &&
        c->shape.dims[0] == 5 && c->shape.dims[1] == 3);
  hlo_module_free(m);
  const char *twice = "HloModule m\nENTRY e {\n x = f32[2,3,4,4] parameter(0)\n g = f32[2,5,4,4] parameter(1)\n"
                      " xt = f32[3,2,4,4] transpose(x), dimensions={1,0,2,3}\n"
                      " gt = f32[5,2,4,4] transpose(g), dimensions={1,0,2,3}\n"
                      " c = f32[3,5,3,3] convolution(xt, gt), window={size=4x4 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01\n"
                      " w = f32[5,3,3,3] transpose(c), dimensions={1,0,2,3}\n"
                      " n = f32[3,5,3,3] negate(c)\n nt = f32[5,3,3,3] transpose(n), dimensions={1,0,2,3}\n"
                      " ROOT r = f32[5,3,3,3] add(w, nt)\n}\n";
  m = check_same(twice, hlo_pass_run_all, args, 2, &n);
  CHECK_EQ_INT(count_op(m->entry, HLO_OP_TRANSPOSE), 2);
  CHECK_EQ_INT(count_op(m->entry, HLO_OP_CONVOLUTION), 1);
  hlo_module_free(m);
  rt_value_release(args[0]);
  rt_value_release(args[1]);
}

/* Calls are inlined, nested ones too (inner is inlined into outer first, then outer into
 * the entry), with parameters mapped by number (outer takes (b, a) and computes
 * inner(a, b) * a = (a - b) * a); values stay bit-identical: -((x - y) * x) = 3, -6, -7.5. */
/* A transpose that moves only size-1 dims ([2, 1, 3, 4] -> [2, 3, 1, 4], the heads of a
 * one-token step) is a reshape, the same values in the same order; one that reorders dims
 * larger than 1 stays a transpose. */
static void test_bitcast_transpose(void) {
  double values[24];
  for (int i = 0; i < 24; i++) values[i] = i * 1.5 - 7;
  const char *moves_one = "HloModule m\nENTRY e {\n x = f32[2,1,3,4] parameter(0)\n"
                          " ROOT t = f32[2,3,1,4] transpose(x), dimensions={0,2,1,3}\n}\n";
  rt_value *a[] = {make_value(HLO_F32, 4, (int64_t[]){2, 1, 3, 4}, values)};
  int n;
  hlo_module *m = check_same(moves_one, hlo_pass_simplify, a, 1, &n);
  CHECK_EQ_INT(n, 1);
  CHECK_EQ_INT(count_op(m->entry, HLO_OP_TRANSPOSE), 0);
  CHECK(m->entry->root->opcode == HLO_OP_RESHAPE && m->entry->root->shape.dims[1] == 3);
  CHECK(!hlo_transpose_is_bitcast(m->entry->root));
  hlo_module_free(m);
  rt_value_release(a[0]);
  const char *reorders = "HloModule m\nENTRY e {\n x = f32[2,1,3,4] parameter(0)\n"
                         " ROOT t = f32[2,4,1,3] transpose(x), dimensions={0,3,1,2}\n}\n";
  rt_value *b[] = {make_value(HLO_F32, 4, (int64_t[]){2, 1, 3, 4}, values)};
  m = check_same(reorders, hlo_pass_simplify, b, 1, &n);
  CHECK_EQ_INT(n, 0);
  CHECK(m->entry->root->opcode == HLO_OP_TRANSPOSE && !hlo_transpose_is_bitcast(m->entry->root));
  hlo_module_free(m);
  rt_value_release(b[0]);
}

static void test_inline_calls(void) {
  const char *text =
      "HloModule m\ninner {\n p = f32[3] parameter(0)\n q = f32[3] parameter(1)\n ROOT d = f32[3] subtract(p, q)\n}\n"
      "outer {\n b = f32[3] parameter(0)\n a = f32[3] parameter(1)\n"
      " s = f32[3] call(a, b), to_apply=inner\n ROOT m = f32[3] multiply(s, a)\n}\n"
      "ENTRY e {\n x = f32[3] parameter(0)\n y = f32[3] parameter(1)\n"
      " c = f32[3] call(y, x), to_apply=outer\n ROOT n = f32[3] negate(c)\n}\n";
  rt_value *args[] = {make_value(HLO_F32, 1, (int64_t[]){3}, (double[]){1, 2, 3}),
                      make_value(HLO_F32, 1, (int64_t[]){3}, (double[]){4, -1, 0.5})};
  int n = 0;
  hlo_module *m = check_same(text, hlo_pass_run_all, args, 2, &n);
  CHECK_EQ_INT(count_op(m->entry, HLO_OP_CALL), 0);
  CHECK_EQ_INT(count_op(m->entry, HLO_OP_SUBTRACT), 1);
  CHECK_EQ_INT(count_op(m->entry, HLO_OP_MULTIPLY), 1);
  CHECK(m->entry->root->opcode == HLO_OP_NEGATE && m->entry->root->operands[0]->opcode == HLO_OP_MULTIPLY);
  /* (x - y) * x: the subtract reads x first */
  const hlo_instr *sub = m->entry->root->operands[0]->operands[0];
  CHECK(sub->opcode == HLO_OP_SUBTRACT && sub->operands[0]->parameter_number == 0);
  hlo_module_free(m);
  rt_value *got = run_text(text, args, 2, false, &(hlo_diag){0});
  CHECK(got && rt_get_f64(got, 0) == 3 && rt_get_f64(got, 1) == -6 && rt_get_f64(got, 2) == -7.5);
  rt_value_release(got);
  rt_value_release(args[0]);
  rt_value_release(args[1]);
}

/* A non-default layout blocks the no-op rewrites: the bytes would differ. */
static void test_layout_kept(void) {
  const char *text = "HloModule m\nENTRY e {\n x = f32[2,3]{1,0} parameter(0)\n"
                     " ROOT c = f32[2,3]{0,1} convert(x)\n}\n";
  hlo_module *m = parse(text);
  CHECK_EQ_INT(hlo_pass_simplify(m), 0);
  CHECK(m->entry->root->opcode == HLO_OP_CONVERT);
  hlo_module_free(m);
}

/* A pad with no padding goes; a pad whose value is a max/min/add window's init becomes the
 * window's own padding (a ceil-mode max pool); a pad with another value stays. */
static void test_window_pad(void) {
  const char *text = "HloModule m\nmx {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT c = f32[] maximum(a, b)\n}\n"
                     "ENTRY e {\n x = f32[1,1,5,5] parameter(0)\n ninf = f32[] constant(-inf)\n"
                     " same = f32[1,1,5,5] pad(x, ninf), padding=0_0x0_0x0_0x0_0\n"
                     " p = f32[1,1,6,6] pad(same, ninf), padding=0_0x0_0x0_1x0_1\n"
                     " ROOT r = f32[1,1,2,2] reduce-window(p, ninf), window={size=1x1x3x3 stride=1x1x2x2}, to_apply=mx\n}\n";
  double values[25];
  for (int i = 0; i < 25; i++) values[i] = i;
  rt_value *xs[] = {make_value(HLO_F32, 4, (int64_t[]){1, 1, 5, 5}, values)};
  int n = 0;
  hlo_module *m = check_same(text, hlo_pass_run_all, xs, 1, &n);
  CHECK_EQ_INT(count_op(m->entry, HLO_OP_PAD), 0);
  const hlo_instr *root = m->entry->root;
  CHECK(root->opcode == HLO_OP_REDUCE_WINDOW && root->window->dims[2].pad_high == 1 && root->window->dims[3].pad_low == 0);
  hlo_diag diag = {0};
  char *printed = hlo_module_to_text(m);
  rt_value *y = run_text(printed, xs, 1, false, &diag);
  CHECK_MSG(y != NULL, "%s", diag.message);
  const float expect[4] = {12, 14, 22, 24}; /* the 3x3 maxima at (2,2), (2,4), (4,2), (4,4) */
  for (int i = 0; y && i < 4; i++) CHECK(((const float *)y->data)[i] == expect[i]);
  rt_value_release(y);
  free(printed);
  hlo_module_free(m);
  const char *zero_pad = "HloModule m\nmx {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT c = f32[] maximum(a, b)\n}\n"
                         "ENTRY e {\n x = f32[1,1,5,5] parameter(0)\n ninf = f32[] constant(-inf)\n zero = f32[] constant(0)\n"
                         " p = f32[1,1,6,6] pad(x, zero), padding=0_0x0_0x0_1x0_1\n"
                         " ROOT r = f32[1,1,2,2] reduce-window(p, ninf), window={size=1x1x3x3 stride=1x1x2x2}, to_apply=mx\n}\n";
  for (int i = 0; i < 25; i++) values[i] = -1 - i; /* the zero padding is the maximum where it is read */
  rt_value *negative[] = {make_value(HLO_F32, 4, (int64_t[]){1, 1, 5, 5}, values)};
  m = check_same(zero_pad, hlo_pass_run_all, negative, 1, &n);
  CHECK_EQ_INT(count_op(m->entry, HLO_OP_PAD), 1);
  hlo_module_free(m);
  rt_value_release(negative[0]);
  rt_value_release(xs[0]);
}

int main(void) {
  RUN(test_dce);
  RUN(test_cse);
  RUN(test_simplify);
  RUN(test_fold);
  RUN(test_dot_transpose);
  RUN(test_conv_transpose);
  RUN(test_bitcast_transpose);
  RUN(test_inline_calls);
  RUN(test_layout_kept);
  RUN(test_window_pad);
  return TEST_REPORT();
}
