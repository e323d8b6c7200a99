/* The verifier: a sound module passes; each kind of damage gives a message naming the
 * computation and the instruction. */
#include <stdlib.h>

#include "hlo/hlo.h"
#include "test.h"

static hlo_module *module;
static hlo_comp *main_comp;
static hlo_diag diag;
static const int64_t d23[2] = {2, 3};

/* main(x: f32[2,3]) = x + x */
static hlo_instr *begin(void) {
  module = hlo_module_new("t");
  main_comp = hlo_build_computation(module, "main", true);
  hlo_shape shape = hlo_shape_make(HLO_F32, 2, d23);
  hlo_instr *x = hlo_build_parameter(main_comp, 0, &shape, "x", &diag);
  hlo_instr *sum = hlo_build_binary(main_comp, HLO_OP_ADD, x, x, &diag);
  hlo_comp_set_root(main_comp, sum, &diag);
  hlo_diag_clear(&diag);
  return sum;
}

static void end(void) { hlo_module_free(module); }

#define CHECK_VERIFY_FAILS(want)                                                      \
  do {                                                                                \
    hlo_diag_clear(&diag);                                                            \
    CHECK(hlo_verify_module(module, &diag) == HLO_ERR_INPUT);                         \
    CHECK_MSG(strstr(diag.message, (want)) != NULL, "message \"%s\" lacks \"%s\"",    \
              diag.message, (want));                                                  \
  } while (0)

static void sound_module_verifies(void) {
  begin();
  CHECK_MSG(hlo_verify_module(module, &diag) == HLO_OK, "%s", diag.message);
  end();
}

static void declared_shape_must_match(void) {
  hlo_instr *sum = begin();
  sum->shape.dims[0] = 3;
  sum->shape.dims[1] = 2;
  CHECK_VERIFY_FAILS("computation main: add %add.1: declared shape f32[3,2] but the operands give f32[2,3] "
                     "(operand 0 f32[2,3], operand 1 f32[2,3])");
  sum->shape.dims[0] = 2;
  sum->shape.dims[1] = 3;
  sum->shape.has_layout = true; /* layouts do not matter */
  sum->shape.minor_to_major[0] = 0;
  sum->shape.minor_to_major[1] = 1;
  hlo_diag_clear(&diag);
  CHECK_MSG(hlo_verify_module(module, &diag) == HLO_OK, "%s", diag.message);
  sum->shape.minor_to_major[1] = 0; /* but a layout must be a permutation */
  CHECK_VERIFY_FAILS("computation main: instruction %add.1 has an invalid shape");
  end();
}

static void structure_is_checked(void) {
  begin();
  main_comp->root = NULL;
  CHECK_VERIFY_FAILS("computation main: has no root instruction");
  end();

  begin();
  module->entry = NULL;
  main_comp->is_entry = false;
  CHECK_VERIFY_FAILS("module t has no entry computation");
  end();

  begin();
  hlo_shape scalar = hlo_shape_scalar(HLO_F32);
  hlo_build_parameter(main_comp, 2, &scalar, "z", &diag);
  CHECK_VERIFY_FAILS("computation main: parameter numbers are not dense: 1 is missing");
  end();

  hlo_instr *sum = begin();
  hlo_comp_append(main_comp, HLO_OP_NEGATE, "add.1", 1, &sum)->shape = sum->shape;
  CHECK_VERIFY_FAILS("computation main: instruction name %add.1 is used twice");
  end();
}

/* hlo_verify_decoded (a decoder checked the links): the same refusals of shapes, layouts and
 * parameter tables, worded the same; duplicate names pass. */
static void decoded_modules_skip_links_and_names(void) {
  hlo_instr *sum = begin();
  hlo_comp_append(main_comp, HLO_OP_NEGATE, "add.1", 1, &sum)->shape = sum->shape;
  CHECK(hlo_verify_module(module, &diag) == HLO_ERR_INPUT);
  hlo_diag_clear(&diag);
  CHECK_MSG(hlo_verify_decoded(module, &diag) == HLO_OK, "%s", diag.message);
  sum->shape.dims[0] = 3;
  CHECK(hlo_verify_decoded(module, &diag) == HLO_ERR_INPUT);
  CHECK_MSG(strstr(diag.message, "computation main: add %add.1: declared shape f32[3,3] but the operands give f32[2,3]"),
            "%s", diag.message);
  sum->shape.dims[0] = 2;
  sum->shape.minor_to_major[1] = sum->shape.minor_to_major[0];
  hlo_diag_clear(&diag);
  CHECK(hlo_verify_decoded(module, &diag) == HLO_ERR_INPUT);
  CHECK_MSG(strstr(diag.message, "computation main: instruction %add.1 has an invalid shape"), "%s", diag.message);
  end();

  begin();
  hlo_shape scalar = hlo_shape_scalar(HLO_F32);
  hlo_build_parameter(main_comp, 2, &scalar, "z", &diag);
  hlo_diag_clear(&diag);
  CHECK(hlo_verify_decoded(module, &diag) == HLO_ERR_INPUT);
  CHECK_MSG(strstr(diag.message, "parameter numbers are not dense: 1 is missing"), "%s", diag.message);
  end();
}

static void operands_stay_in_their_computation(void) {
  hlo_instr *sum = begin();
  hlo_comp *other = hlo_build_computation(module, "other", false);
  hlo_instr *stray = hlo_comp_append(other, HLO_OP_NEGATE, "stray", 1, &sum);
  stray->shape = sum->shape;
  other->root = stray;
  CHECK_VERIFY_FAILS("computation other: instruction %stray: operand %add.1 belongs to computation main");
  end();

  sum = begin();
  hlo_instr *late = hlo_comp_append(main_comp, HLO_OP_NEGATE, "late", 1, &sum);
  late->shape = sum->shape;
  sum->operands[0] = late; /* a cycle: add uses an instruction that comes after it */
  CHECK_VERIFY_FAILS("computation main: instruction %add.1: operand %late does not come before it");
  end();
}

static void called_computations_must_fit(void) {
  hlo_instr *sum = begin();
  hlo_comp *add = hlo_build_scalar_reducer(module, HLO_OP_ADD, HLO_F32);
  hlo_instr *zero = hlo_build_constant_scalar(main_comp, HLO_F32, 0, &diag);
  int64_t dim = 1;
  hlo_instr *r = hlo_build_reduce(main_comp, sum, zero, 1, &dim, add, &diag);
  CHECK(r != NULL);
  hlo_comp_set_root(main_comp, r, &diag);
  CHECK_MSG(hlo_verify_module(module, &diag) == HLO_OK, "%s", diag.message);
  /* The reducer comes first in the module; damage it: its root now returns pred[]. */
  hlo_instr *x = add->params[0], *y = add->params[1];
  hlo_instr *both[2] = {x, y};
  hlo_instr *cmp = hlo_comp_append(add, HLO_OP_COMPARE, "cmp", 2, both);
  cmp->direction = HLO_DIR_LT;
  cmp->shape = hlo_shape_scalar(HLO_PRED);
  add->root = cmp;
  CHECK_VERIFY_FAILS("computation main: reduce %reduce.7: called computation %add_f32.2 returns pred[] but needs f32[]");
  end();
}

static void while_needs_a_pred_condition(void) {
  begin();
  hlo_shape state = hlo_shape_scalar(HLO_S32);
  hlo_comp *cond = hlo_build_computation(module, "cond", false);
  hlo_comp *body = hlo_build_computation(module, "body", false);
  hlo_instr *c = hlo_build_parameter(cond, 0, &state, "c", &diag);
  hlo_instr *b = hlo_build_parameter(body, 0, &state, "b", &diag);
  hlo_instr *ten = hlo_build_constant_scalar(cond, HLO_S32, 10, &diag);
  hlo_comp_set_root(cond, hlo_build_compare(cond, HLO_DIR_LT, c, ten, &diag), &diag);
  hlo_instr *one = hlo_build_constant_scalar(body, HLO_S32, 1, &diag);
  hlo_comp_set_root(body, hlo_build_binary(body, HLO_OP_ADD, b, one, &diag), &diag);
  hlo_instr *start = hlo_build_constant_scalar(main_comp, HLO_S32, 0, &diag);
  hlo_instr *loop = hlo_comp_append(main_comp, HLO_OP_WHILE, "loop", 1, &start);
  loop->shape = state;
  loop->called_count = 2;
  loop->called = hlo_arena_alloc(&module->arena, 2 * sizeof(hlo_comp *));
  loop->called[0] = cond;
  loop->called[1] = body;
  /* main was made first, so it calls computations that come after it. */
  CHECK_VERIFY_FAILS("computation main: instruction %loop calls cond, which does not come before its caller");
  CHECK(hlo_module_sort(module, &diag));
  hlo_diag_clear(&diag);
  CHECK_MSG(hlo_verify_module(module, &diag) == HLO_OK, "%s", diag.message);
  loop->called[0] = body;
  loop->called[1] = cond;
  CHECK_VERIFY_FAILS("computation main: while %loop: called computation %body returns s32[] but needs pred[]");
  end();
}

/* What XLA's importer tolerates passes in computations the entry never calls, not in the
 * entry's own: here a reduce whose init is not a scalar. */
static void importer_leniency_only_where_unreachable(void) {
  begin();
  hlo_comp *dead = hlo_build_computation(module, "dead", false);
  int64_t d4[1] = {4}, d44[2] = {4, 4}, zero = 0;
  hlo_shape vec = hlo_shape_make(HLO_F32, 1, d4), mat = hlo_shape_make(HLO_F32, 2, d44);
  hlo_comp *vector_add = hlo_build_computation(module, "vector_add", false);
  hlo_instr *a = hlo_build_parameter(vector_add, 0, &vec, "a", &diag);
  hlo_instr *b = hlo_build_parameter(vector_add, 1, &vec, "b", &diag);
  hlo_comp_set_root(vector_add, hlo_build_binary(vector_add, HLO_OP_ADD, a, b, &diag), &diag);
  hlo_instr *m = hlo_build_parameter(dead, 0, &mat, "m", &diag);
  hlo_instr *init = hlo_build_parameter(dead, 1, &vec, "init", &diag);
  hlo_instr *operands[2] = {m, init};
  hlo_instr *r = hlo_comp_append(dead, HLO_OP_REDUCE, "r", 2, operands);
  r->shape = vec;
  r->dimensions = hlo_ints_copy(&module->arena, 1, &zero);
  r->called_count = 1;
  r->called = hlo_arena_alloc(&module->arena, sizeof(hlo_comp *));
  r->called[0] = vector_add;
  dead->root = r;
  CHECK(hlo_module_sort(module, &diag));
  hlo_diag_clear(&diag);
  CHECK_MSG(hlo_verify_module(module, &diag) == HLO_OK, "%s", diag.message);
  /* Make dead the entry: now the same reduce is an error. */
  main_comp->is_entry = false;
  dead->is_entry = true;
  module->entry = dead;
  CHECK_VERIFY_FAILS("computation dead: reduce %r: init must be a scalar, not f32[4]");
  end();
}

int main(void) {
  RUN(sound_module_verifies);
  RUN(declared_shape_must_match);
  RUN(structure_is_checked);
  RUN(decoded_modules_skip_links_and_names);
  RUN(operands_stay_in_their_computation);
  RUN(called_computations_must_fit);
  RUN(while_needs_a_pred_condition);
  RUN(importer_leniency_only_where_unreachable);
  return TEST_REPORT();
}
