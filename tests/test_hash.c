/* Canonical hashing: equal graphs get equal keys whatever their names, any semantic change
 * gives a different key, and keys are the same in every process (pinned below). */
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cache/cache.h"
#include "hlo/hlo.h"
#include "test.h"

/* ---- building modules by hand ---- */

/* The hashes as values; memory never runs out here (tests/test_oom.c covers that). */
static cache_key hash_of_module(const hlo_module *m) {
  cache_key key = {0, 0};
  if (!cache_hash_module(m, &key)) CHECK(!"cache_hash_module ran out of memory");
  return key;
}

static cache_key hash_of_comp(const hlo_comp *comp) {
  cache_key key = {0, 0};
  if (!cache_hash_comp(comp, &key)) CHECK(!"cache_hash_comp ran out of memory");
  return key;
}

static cache_key hash_of_instr(const hlo_instr *instr, const cache_key *operand_keys) {
  cache_key key = {0, 0};
  if (!cache_hash_instr(instr, operand_keys, &key)) CHECK(!"cache_hash_instr ran out of memory");
  return key;
}

static hlo_shape array(hlo_dtype dtype, int rank, int64_t d0, int64_t d1) {
  int64_t dims[2] = {d0, d1};
  return hlo_shape_make(dtype, rank, dims);
}

static hlo_instr *add_param(hlo_comp *comp, const char *name, int number, hlo_shape shape) {
  hlo_instr *param = hlo_comp_append(comp, HLO_OP_PARAMETER, name, 0, NULL);
  param->shape = shape;
  param->parameter_number = number;
  hlo_comp_set_param(comp, param);
  return param;
}

static hlo_instr *add_op(hlo_comp *comp, hlo_opcode opcode, const char *name, hlo_shape shape,
                         int count, hlo_instr *a, hlo_instr *b, hlo_instr *c) {
  hlo_instr *operands[3] = {a, b, c};
  hlo_instr *instr = hlo_comp_append(comp, opcode, name, count, operands);
  instr->shape = shape;
  return instr;
}

static hlo_instr *add_constant(hlo_comp *comp, const char *name, hlo_shape shape,
                               const void *data) {
  hlo_arena *arena = &comp->module->arena;
  hlo_instr *constant = add_op(comp, HLO_OP_CONSTANT, name, shape, 0, NULL, NULL, NULL);
  constant->literal = hlo_arena_alloc(arena, sizeof *constant->literal);
  constant->literal->shape = shape;
  constant->literal->data = hlo_arena_memdup(arena, data, (size_t)hlo_shape_bytes(&shape));
  return constant;
}

static void set_ints(hlo_module *m, hlo_ints *ints, int count, int64_t a, int64_t b) {
  int64_t values[2] = {a, b};
  *ints = hlo_ints_copy(&m->arena, count, values);
}

static void add_raw_attr(hlo_module *m, hlo_instr *instr, const char *name, const char *value) {
  size_t size = sizeof(hlo_raw_attr) * (size_t)(instr->raw_attr_count + 1);
  hlo_raw_attr *attrs = hlo_arena_alloc(&m->arena, size);
  for (int i = 0; i < instr->raw_attr_count; i++) attrs[i] = instr->raw_attrs[i];
  attrs[instr->raw_attr_count].name = hlo_arena_strdup(&m->arena, name);
  attrs[instr->raw_attr_count].value = hlo_arena_strdup(&m->arena, value);
  instr->raw_attrs = attrs;
  instr->raw_attr_count++;
}

/* One change each to the module below; BASE is none. */
typedef enum variant {
  BASE, RENAMED, DEFAULT_LAYOUT_WRITTEN, METADATA, ATTRS_AB, ATTRS_BA,
  /* the ones that must change the key start here */
  DIM, DTYPE, LAYOUT, DYNAMIC_DIM, CONSTANT_BYTE, OPERAND_ORDER, PARAMETER_ORDER,
  TRANSPOSE_DIMS, REDUCE_DIMS, SLICE_LIMIT, DIRECTION, COMPARE_TYPE, CALLEE_OP, CALLEE_PARAMS,
  BACKEND_CONFIG, MODULE_ATTR, DEAD_CODE, OUTPUT_ORDER, EXTRA_PARAMETER,
  VARIANT_COUNT
} variant;

static const char *const variant_names[VARIANT_COUNT] = {
    "BASE", "RENAMED", "DEFAULT_LAYOUT_WRITTEN", "METADATA", "ATTRS_AB", "ATTRS_BA", "DIM",
    "DTYPE", "LAYOUT", "DYNAMIC_DIM", "CONSTANT_BYTE", "OPERAND_ORDER", "PARAMETER_ORDER",
    "TRANSPOSE_DIMS", "REDUCE_DIMS", "SLICE_LIMIT", "DIRECTION", "COMPARE_TYPE", "CALLEE_OP",
    "CALLEE_PARAMS", "BACKEND_CONFIG", "MODULE_ATTR", "DEAD_CODE", "OUTPUT_ORDER",
    "EXTRA_PARAMETER"};

/*   add { x = f32[] parameter(0)  y = f32[] parameter(1)  ROOT s = f32[] add(x, y) }
 *   ENTRY main {
 *     a = f32[2,3] parameter(0)   b = f32[2,3] parameter(1)
 *     c = f32[2,3] constant({{1,2,3},{4,5,6}})
 *     m = multiply(a, b)   s = add(m, c)   t = f32[3,2] transpose(s), dimensions={1,0}
 *     zero = f32[] constant(0)   r = f32[3] reduce(t, zero), dimensions={1}, to_apply=add
 *     sl = f32[2,2] slice(s), slice={[0:2],[0:2]}   cmp = pred[2,3] compare(a, b), direction=LT
 *     ROOT out = tuple(r, sl, cmp) } */
static hlo_module *build(variant v) {
  bool renamed = v == RENAMED;
#define NAME(n) (renamed ? "renamed_" n : n)
  hlo_module *m = hlo_module_new(NAME("module"));

  hlo_comp *add = hlo_module_add_comp(m, NAME("add"));
  hlo_instr *x = add_param(add, NAME("x"), 0, hlo_shape_scalar(HLO_F32));
  hlo_instr *y = add_param(add, NAME("y"), 1, hlo_shape_scalar(HLO_F32));
  if (v == CALLEE_PARAMS) {
    x->parameter_number = 1, y->parameter_number = 0;
    add->params[0] = y, add->params[1] = x;
  }
  add->root = add_op(add, v == CALLEE_OP ? HLO_OP_MAXIMUM : HLO_OP_ADD, NAME("s"),
                     hlo_shape_scalar(HLO_F32), 2, x, y, NULL);

  hlo_comp *entry = hlo_module_add_comp(m, NAME("main"));
  entry->is_entry = true;
  m->entry = entry;
  hlo_shape s23 = array(HLO_F32, 2, 2, 3);
  hlo_shape a_shape = s23;
  if (v == DIM) a_shape.dims[1] = 4;
  if (v == LAYOUT) a_shape.minor_to_major[0] = 0, a_shape.minor_to_major[1] = 1;
  if (v == LAYOUT || v == DEFAULT_LAYOUT_WRITTEN) a_shape.has_layout = true;
  if (v == DYNAMIC_DIM) a_shape.dim_kind[1] = HLO_DIM_BOUNDED;
  hlo_shape b_shape = s23;
  if (v == DTYPE) b_shape.dtype = HLO_F16;
  hlo_instr *a = add_param(entry, NAME("a"), 0, a_shape);
  hlo_instr *b = add_param(entry, NAME("b"), 1, b_shape);
  if (v == PARAMETER_ORDER) {
    a->parameter_number = 1, b->parameter_number = 0;
    entry->params[0] = b, entry->params[1] = a;
  }
  if (v == EXTRA_PARAMETER) add_param(entry, NAME("unused"), 2, hlo_shape_scalar(HLO_S32));

  float c_data[6] = {1, 2, 3, 4, 5, 6};
  if (v == CONSTANT_BYTE) ((unsigned char *)c_data)[17] ^= 1;
  hlo_instr *c = add_constant(entry, NAME("c"), s23, c_data);
  hlo_instr *mul = v == OPERAND_ORDER
                       ? add_op(entry, HLO_OP_MULTIPLY, NAME("m"), s23, 2, b, a, NULL)
                       : add_op(entry, HLO_OP_MULTIPLY, NAME("m"), s23, 2, a, b, NULL);
  if (v == METADATA) add_raw_attr(m, mul, "metadata", "{op_name=\"jit(f)/mul\" source_line=3}");
  if (v == BACKEND_CONFIG) add_raw_attr(m, mul, "backend_config", "{\"x\":1}");
  if (v == ATTRS_AB) add_raw_attr(m, mul, "sharding", "{replicated}"),
                     add_raw_attr(m, mul, "frontend_attributes", "{k=\"v\"}");
  if (v == ATTRS_BA) add_raw_attr(m, mul, "frontend_attributes", "{k=\"v\"}"),
                     add_raw_attr(m, mul, "sharding", "{replicated}");
  hlo_instr *sum = add_op(entry, HLO_OP_ADD, NAME("s"), s23, 2, mul, c, NULL);
  hlo_instr *t = add_op(entry, HLO_OP_TRANSPOSE, NAME("t"), array(HLO_F32, 2, 3, 2), 1, sum,
                        NULL, NULL);
  set_ints(m, &t->dimensions, 2, v == TRANSPOSE_DIMS ? 0 : 1, v == TRANSPOSE_DIMS ? 1 : 0);
  float zero_data = 0;
  hlo_instr *zero = add_constant(entry, NAME("zero"), hlo_shape_scalar(HLO_F32), &zero_data);
  hlo_instr *r = add_op(entry, HLO_OP_REDUCE, NAME("r"), array(HLO_F32, 1, 3, 0), 2, t, zero,
                        NULL);
  set_ints(m, &r->dimensions, 1, v == REDUCE_DIMS ? 0 : 1, 0);
  r->called_count = 1;
  r->called = hlo_arena_alloc(&m->arena, sizeof(hlo_comp *));
  r->called[0] = add;
  hlo_instr *sl = add_op(entry, HLO_OP_SLICE, NAME("sl"), array(HLO_F32, 2, 2, 2), 1, sum, NULL,
                         NULL);
  set_ints(m, &sl->slice_starts, 2, 0, 0);
  set_ints(m, &sl->slice_limits, 2, 2, v == SLICE_LIMIT ? 3 : 2);
  set_ints(m, &sl->slice_strides, 2, 1, 1);
  hlo_instr *cmp = add_op(entry, HLO_OP_COMPARE, NAME("cmp"), array(HLO_PRED, 2, 2, 3), 2, a, b,
                          NULL);
  cmp->direction = v == DIRECTION ? HLO_DIR_GT : HLO_DIR_LT;
  if (v == COMPARE_TYPE) cmp->compare_type = HLO_CMP_TOTALORDER;
  if (v == DEAD_CODE) add_op(entry, HLO_OP_NEGATE, NAME("dead"), s23, 1, a, NULL, NULL);
  hlo_shape outs[3] = {r->shape, sl->shape, cmp->shape};
  entry->root = v == OUTPUT_ORDER
                    ? add_op(entry, HLO_OP_TUPLE, NAME("out"), hlo_shape_tuple(&m->arena, 3, outs),
                             3, sl, r, cmp)
                    : add_op(entry, HLO_OP_TUPLE, NAME("out"), hlo_shape_tuple(&m->arena, 3, outs),
                             3, r, sl, cmp);
  if (v == MODULE_ATTR) {
    m->raw_attrs = hlo_arena_alloc(&m->arena, sizeof *m->raw_attrs);
    m->raw_attrs[0] = (hlo_raw_attr){"input_output_alias", "{ {}: (0, {}, may-alias) }"};
    m->raw_attr_count = 1;
  }
#undef NAME
  return m;
}

static cache_key module_key(variant v) {
  hlo_module *m = build(v);
  cache_key key = hash_of_module(m);
  hlo_module_free(m);
  return key;
}

/* ---- module-level properties ---- */

static void test_same_module_same_key(void) {
  cache_key first = module_key(BASE), second = module_key(BASE);
  CHECK(cache_key_equal(first, second));
  CHECK(first.lo != 0 || first.hi != 0);
}

static void test_names_do_not_matter(void) {
  CHECK(cache_key_equal(module_key(BASE), module_key(RENAMED)));
}

static void test_noise_does_not_matter(void) {
  cache_key base = module_key(BASE);
  CHECK(cache_key_equal(base, module_key(METADATA)));
  CHECK(cache_key_equal(base, module_key(DEFAULT_LAYOUT_WRITTEN)));
  CHECK(cache_key_equal(module_key(ATTRS_AB), module_key(ATTRS_BA))); /* attribute order */
  CHECK(!cache_key_equal(base, module_key(ATTRS_AB)));
}

static void test_every_change_matters(void) {
  cache_key keys[VARIANT_COUNT];
  for (int v = 0; v < VARIANT_COUNT; v++) keys[v] = module_key((variant)v);
  for (int v = DIM; v < VARIANT_COUNT; v++) {
    for (int w = 0; w < v; w++) {
      if (w == RENAMED || w == DEFAULT_LAYOUT_WRITTEN || w == METADATA || w == ATTRS_BA) continue;
      CHECK_MSG(!cache_key_equal(keys[v], keys[w]), "%s and %s give the same key",
                variant_names[v], variant_names[w]);
    }
  }
}

static void test_comp_and_module_keys(void) {
  hlo_module *m = build(BASE);
  cache_key entry = hash_of_comp(m->entry), callee = hash_of_comp(m->comps[0]);
  CHECK(!cache_key_equal(entry, callee));
  CHECK(!cache_key_equal(entry, hash_of_module(m)));
  /* Node keys in topological order, each from its operands' keys: what capture/ computes. */
  cache_key keys[64];
  for (int i = 0; i < m->entry->instr_count; i++) {
    hlo_instr *instr = m->entry->instrs[i];
    cache_key operands[3];
    for (int o = 0; o < instr->operand_count; o++) operands[o] = keys[instr->operands[o]->id];
    keys[i] = hash_of_instr(instr, operands);
  }
  hlo_instr *root = m->entry->root;
  cache_key operands[3] = {keys[root->operands[0]->id], keys[root->operands[1]->id],
                           keys[root->operands[2]->id]};
  CHECK(cache_key_equal(keys[root->id], hash_of_instr(root, operands)));
  cache_key swapped[3] = {operands[1], operands[0], operands[2]};
  CHECK(!cache_key_equal(keys[root->id], hash_of_instr(root, swapped)));
  hlo_module_free(m);
}

/* ---- every attribute of one instruction ---- */

enum { ATTR_MUTATIONS = 64 };

/* An instruction with every optional attribute present, then changed at one field. Returns
 * false when mutation is past the last one. */
static bool rich_instr_key(int mutation, cache_key *key) {
  hlo_module *m = hlo_module_new("m");
  hlo_comp *callee = hlo_module_add_comp(m, "callee");
  hlo_instr *p = add_param(callee, "p", 0, hlo_shape_scalar(HLO_F32));
  callee->root = add_op(callee, mutation == 63 ? HLO_OP_NEGATE : HLO_OP_ABS, "r",
                        hlo_shape_scalar(HLO_F32), 1, p, NULL, NULL);
  hlo_comp *comp = hlo_module_add_comp(m, "entry");
  m->entry = comp;
  hlo_instr *x = add_param(comp, "x", 0, array(HLO_F32, 2, 4, 4));
  hlo_instr *y = add_param(comp, "y", 1, array(HLO_F32, 2, 4, 4));
  hlo_instr *in = add_op(comp, HLO_OP_CUSTOM_CALL, "in", array(HLO_F32, 2, 4, 4), 2, x, y, NULL);
  hlo_arena *arena = &m->arena;
  in->called_count = 1;
  in->called = hlo_arena_alloc(arena, sizeof(hlo_comp *));
  in->called[0] = callee;
  set_ints(m, &in->dimensions, 2, 0, 1);
  set_ints(m, &in->slice_starts, 2, 0, 0);
  set_ints(m, &in->slice_limits, 2, 4, 4);
  set_ints(m, &in->slice_strides, 2, 1, 1);
  set_ints(m, &in->gather_slice_sizes, 2, 1, 4);
  in->padding = hlo_arena_alloc(arena, sizeof *in->padding);
  in->padding->rank = 2;
  in->window = hlo_arena_alloc(arena, sizeof *in->window);
  in->window->rank = 2;
  for (int i = 0; i < 2; i++)
    in->window->dims[i] = (hlo_window_dim){3, 1, 0, 0, 1, 1, false};
  in->conv = hlo_arena_alloc(arena, sizeof *in->conv);
  *in->conv = (hlo_conv_dims){.spatial_count = 2, .input_batch = 0, .input_feature = 3,
                              .input_spatial = {1, 2}, .kernel_input_feature = 2,
                              .kernel_output_feature = 3, .kernel_spatial = {0, 1},
                              .output_batch = 0, .output_feature = 3, .output_spatial = {1, 2}};
  in->dot = hlo_arena_alloc(arena, sizeof *in->dot);
  set_ints(m, &in->dot->lhs_contracting, 1, 1, 0);
  set_ints(m, &in->dot->rhs_contracting, 1, 0, 0);
  in->gather = hlo_arena_alloc(arena, sizeof *in->gather);
  set_ints(m, &in->gather->offset_dims, 1, 1, 0);
  set_ints(m, &in->gather->collapsed_slice_dims, 1, 0, 0);
  set_ints(m, &in->gather->start_index_map, 1, 0, 0);
  in->gather->index_vector_dim = 1;
  in->scatter = hlo_arena_alloc(arena, sizeof *in->scatter);
  set_ints(m, &in->scatter->update_window_dims, 1, 1, 0);
  set_ints(m, &in->scatter->inserted_window_dims, 1, 0, 0);
  set_ints(m, &in->scatter->scatter_dims_to_operand_dims, 1, 0, 0);
  in->scatter->index_vector_dim = 1;
  in->epsilon = 0.001;
  in->exponent_bits = 8;
  in->mantissa_bits = 7;
  in->custom_call_target = "target";
  in->fusion_kind = "kLoop";
  in->composite_name = "comp.name";
  int32_t data[2] = {7, 8};
  in->literal = hlo_arena_alloc(arena, sizeof *in->literal);
  in->literal->shape = array(HLO_S32, 1, 2, 0);
  in->literal->data = hlo_arena_memdup(arena, data, sizeof data);
  add_raw_attr(m, in, "backend_config", "abc");

  int64_t *first_int = NULL;
  switch (mutation) {
    case 0: break;
    case 1: in->opcode = HLO_OP_FUSION; break;
    case 2: in->shape.dtype = HLO_BF16; break;
    case 3: in->shape.dims[0] = 5; break;
    case 4: in->shape.rank = 1; break;
    case 5: in->shape.dim_kind[0] = HLO_DIM_UNBOUNDED; break;
    case 6: in->shape.minor_to_major[0] = 0, in->shape.minor_to_major[1] = 1; break;
    case 7: in->shape.layout_extra = "T(8,128)"; break;
    case 8: in->parameter_number = 1; break;
    case 9: in->index = 1; break;
    case 10: first_int = &in->dimensions.values[0]; break;
    case 11: first_int = &in->slice_starts.values[0]; break;
    case 12: first_int = &in->slice_limits.values[0]; break;
    case 13: first_int = &in->slice_strides.values[0]; break;
    case 14: in->padding->low[0] = 1; break;
    case 15: in->padding->high[1] = 1; break;
    case 16: in->padding->interior[0] = 1; break;
    case 17: in->window->dims[0].size = 2; break;
    case 18: in->window->dims[1].stride = 2; break;
    case 19: in->window->dims[0].pad_low = 1; break;
    case 20: in->window->dims[0].pad_high = 1; break;
    case 21: in->window->dims[0].lhs_dilate = 2; break;
    case 22: in->window->dims[0].rhs_dilate = 2; break;
    case 23: in->window->dims[0].reversal = true; break;
    case 24: in->conv->input_feature = 0, in->conv->input_batch = 3; break;
    case 25: in->conv->kernel_spatial[0] = 1, in->conv->kernel_spatial[1] = 0; break;
    case 26: in->conv->output_spatial[0] = 2, in->conv->output_spatial[1] = 1; break;
    case 27: in->feature_group_count = 2; break;
    case 28: in->batch_group_count = 2; break;
    case 29: first_int = &in->dot->lhs_contracting.values[0]; break;
    case 30: set_ints(m, &in->dot->lhs_batch, 1, 0, 0); break;
    case 31: first_int = &in->gather->offset_dims.values[0]; break;
    case 32: in->gather->index_vector_dim = 2; break;
    case 33: in->gather->indices_are_sorted = true; break;
    case 34: set_ints(m, &in->gather->operand_batching_dims, 1, 0, 0); break;
    case 35: first_int = &in->gather_slice_sizes.values[0]; break;
    case 36: first_int = &in->scatter->update_window_dims.values[0]; break;
    case 37: in->scatter->unique_indices = true; break;
    case 38: in->scatter->indices_are_sorted = true; break;
    case 39: in->direction = HLO_DIR_EQ; break;
    case 40: in->compare_type = HLO_CMP_FLOAT; break;
    case 41: in->epsilon = 0.002; break;
    case 42: in->is_stable = true; break;
    case 43: in->rng_algorithm = HLO_RNG_PHILOX; break;
    case 44: in->rng_distribution = HLO_RNG_NORMAL; break;
    case 45: in->exponent_bits = 5; break;
    case 46: in->mantissa_bits = 10; break;
    case 47: ((int32_t *)in->literal->data)[1] = 9; break;
    case 48: in->literal->elided = true; break;
    case 49: in->literal->shape.dtype = HLO_U32; break;
    case 50: in->custom_call_target = "targer"; break;
    case 51: in->custom_call_target = NULL; break;
    case 52: in->fusion_kind = "kInput"; break;
    case 53: in->is_composite = true; break;
    case 54: in->composite_name = "comp.other"; break;
    case 55: in->raw_attrs[0].value = "abd"; break;
    case 56: add_raw_attr(m, in, "sharding", "{maximal device=0}"); break;
    case 57: in->padding = NULL; break;
    case 58: in->window = NULL; break;
    case 59: in->dot = NULL; break;
    case 60: in->literal = NULL; break;
    case 61: in->operands[0] = y, in->operands[1] = x; break;
    case 62: in->called_count = 0; break;
    case 63: break; /* the callee's root changed above */
    default: hlo_module_free(m); return false;
  }
  if (first_int) *first_int += 1;

  cache_key operand_keys[2] = {hash_of_instr(in->operands[0], NULL),
                               hash_of_instr(in->operands[1], NULL)};
  *key = hash_of_instr(in, operand_keys);
  comp->root = in;
  hlo_module_free(m);
  return true;
}

static void test_every_attribute_matters(void) {
  cache_key keys[ATTR_MUTATIONS + 1];
  int count = 0;
  while (count <= ATTR_MUTATIONS && rich_instr_key(count, &keys[count])) count++;
  CHECK_EQ_INT(count, ATTR_MUTATIONS);
  cache_key again;
  CHECK(rich_instr_key(0, &again) && cache_key_equal(again, keys[0]));
  for (int i = 1; i < count; i++)
    for (int j = 0; j < i; j++)
      CHECK_MSG(!cache_key_equal(keys[i], keys[j]), "mutations %d and %d collide", i, j);
}

/* Length prefixes: moving a boundary between two variable-length fields changes the key. */
static void test_field_boundaries(void) {
  hlo_module *m = hlo_module_new("m");
  hlo_comp *comp = hlo_module_add_comp(m, "c");
  hlo_instr *a = add_op(comp, HLO_OP_CUSTOM_CALL, "a", hlo_shape_scalar(HLO_F32), 0, NULL, NULL,
                        NULL);
  hlo_instr *b = add_op(comp, HLO_OP_CUSTOM_CALL, "b", hlo_shape_scalar(HLO_F32), 0, NULL, NULL,
                        NULL);
  set_ints(m, &a->dimensions, 2, 1, 2);
  set_ints(m, &b->dimensions, 1, 1, 0);
  set_ints(m, &b->slice_starts, 1, 2, 0);
  CHECK(!cache_key_equal(hash_of_instr(a, NULL), hash_of_instr(b, NULL)));
  a->dimensions = b->dimensions;
  a->slice_starts = b->slice_starts;
  CHECK(cache_key_equal(hash_of_instr(a, NULL), hash_of_instr(b, NULL)));
  a->custom_call_target = "ab", a->fusion_kind = "c";
  b->custom_call_target = "a", b->fusion_kind = "bc";
  CHECK(!cache_key_equal(hash_of_instr(a, NULL), hash_of_instr(b, NULL)));
  add_raw_attr(m, a, "x", "yz");
  add_raw_attr(m, b, "xy", "z");
  b->custom_call_target = "ab", b->fusion_kind = "c";
  CHECK(!cache_key_equal(hash_of_instr(a, NULL), hash_of_instr(b, NULL)));
  hlo_module_free(m);
}

/* ---- size and shape of graphs ---- */

/* A constant bigger than the hasher's buffer takes the streaming path. */
static void test_big_constant(void) {
  enum { N = 10000 };
  float *data = malloc(sizeof(float) * N);
  for (int i = 0; i < N; i++) data[i] = (float)i;
  cache_key keys[3];
  for (int round = 0; round < 3; round++) {
    if (round == 2) data[N - 1] = -1;
    hlo_module *m = hlo_module_new("m");
    hlo_comp *comp = hlo_module_add_comp(m, "c");
    m->entry = comp;
    comp->root = add_constant(comp, "k", array(HLO_F32, 1, N, 0), data);
    keys[round] = hash_of_module(m);
    hlo_module_free(m);
  }
  CHECK(cache_key_equal(keys[0], keys[1]));
  CHECK(!cache_key_equal(keys[0], keys[2]));
  free(data);
}

/* Deep graphs and deep call chains are walked without recursion. */
static void test_deep_graphs(void) {
  enum { DEPTH = 20000, CALLS = 5000 };
  hlo_module *m = hlo_module_new("m");
  hlo_comp *inner = NULL;
  for (int level = 0; level < CALLS; level++) {
    char name[32];
    snprintf(name, sizeof name, "f%d", level);
    hlo_comp *comp = hlo_module_add_comp(m, name);
    hlo_instr *p = add_param(comp, "p", 0, hlo_shape_scalar(HLO_F32));
    hlo_instr *call = add_op(comp, inner ? HLO_OP_CALL : HLO_OP_NEGATE, "r",
                             hlo_shape_scalar(HLO_F32), 1, p, NULL, NULL);
    if (inner) {
      call->called_count = 1;
      call->called = hlo_arena_alloc(&m->arena, sizeof(hlo_comp *));
      call->called[0] = inner;
    }
    comp->root = call;
    inner = comp;
  }
  /* The entry is a long chain ending in a call to the deepest chain of calls. */
  hlo_comp *entry = hlo_module_add_comp(m, "main");
  m->entry = entry;
  hlo_instr *last = add_param(entry, "x", 0, hlo_shape_scalar(HLO_F32));
  for (int i = 0; i < DEPTH; i++)
    last = add_op(entry, HLO_OP_NEGATE, "n", hlo_shape_scalar(HLO_F32), 1, last, NULL, NULL);
  hlo_instr *call = add_op(entry, HLO_OP_CALL, "c", hlo_shape_scalar(HLO_F32), 1, last, NULL,
                           NULL);
  call->called_count = 1;
  call->called = hlo_arena_alloc(&m->arena, sizeof(hlo_comp *));
  call->called[0] = inner;
  entry->root = call;
  cache_key first = hash_of_module(m), second = hash_of_module(m);
  CHECK(cache_key_equal(first, second));
  entry->instrs[DEPTH / 2]->opcode = HLO_OP_ABS;
  CHECK(!cache_key_equal(first, hash_of_module(m)));
  hlo_module_free(m);
}

/* Invalid IR (a computation calling itself) still hashes, and terminates. */
static void test_recursion_terminates(void) {
  hlo_module *m = hlo_module_new("m");
  hlo_comp *comp = hlo_module_add_comp(m, "loop");
  m->entry = comp;
  hlo_instr *p = add_param(comp, "p", 0, hlo_shape_scalar(HLO_F32));
  hlo_instr *call = add_op(comp, HLO_OP_CALL, "c", hlo_shape_scalar(HLO_F32), 1, p, NULL, NULL);
  call->called_count = 1;
  call->called = hlo_arena_alloc(&m->arena, sizeof(hlo_comp *));
  call->called[0] = comp;
  comp->root = call;
  cache_key key = hash_of_module(m);
  CHECK(cache_key_equal(key, hash_of_module(m)));
  hlo_module_free(m);
}

/* ---- through HLO text ---- */

/* The same program as JAX would dump it (metadata, written layouts, the entry layout) and as
 * a hand-written file with other names: one key. A changed reduce dimension: another. */
static const char *const dumped_text =
    "HloModule jit_f, entry_computation_layout={(f32[2,3]{1,0}, f32[2,3]{1,0})->f32[3]{0}}\n"
    "add { x = f32[] parameter(0)\n y = f32[] parameter(1)\n ROOT s = f32[] add(x, y) }\n"
    "ENTRY main {\n a = f32[2,3]{1,0} parameter(0)\n b = f32[2,3]{1,0} parameter(1)\n"
    " m = f32[2,3]{1,0} multiply(a, b), metadata={op_name=\"jit(f)/mul\" source_line=3}\n"
    " zero = f32[] constant(0)\n"
    " ROOT r = f32[3]{0} reduce(m, zero), dimensions={0}, to_apply=add\n}\n";
static const char *const renamed_text =
    "HloModule other\n"
    "sum.1 { lhs = f32[] parameter(0)\n rhs = f32[] parameter(1)\n ROOT o = f32[] add(lhs, rhs) }\n"
    "ENTRY e.2 {\n p0 = f32[2,3] parameter(0)\n p1 = f32[2,3] parameter(1)\n"
    " prod = f32[2,3] multiply(p0, p1)\n c = f32[] constant(0)\n"
    " ROOT red = f32[3] reduce(prod, c), dimensions={0}, to_apply=sum.1\n}\n";
static const char *const changed_text =
    "HloModule other\n"
    "sum.1 { lhs = f32[] parameter(0)\n rhs = f32[] parameter(1)\n ROOT o = f32[] add(lhs, rhs) }\n"
    "ENTRY e.2 {\n p0 = f32[2,3] parameter(0)\n p1 = f32[2,3] parameter(1)\n"
    " prod = f32[2,3] multiply(p0, p1)\n c = f32[] constant(0)\n"
    " ROOT red = f32[2] reduce(prod, c), dimensions={1}, to_apply=sum.1\n}\n";

static bool text_key(const char *text, cache_key *key) {
  hlo_diag diag = {0};
  hlo_module *m = hlo_parse_module(text, strlen(text), "test", &diag);
  CHECK_MSG(m != NULL, "%s", diag.message);
  if (!m) return false;
  *key = hash_of_module(m);
  hlo_module_free(m);
  return true;
}

static void test_parsed_text(void) {
  cache_key dumped, renamed, changed;
  if (!text_key(dumped_text, &dumped) || !text_key(renamed_text, &renamed) ||
      !text_key(changed_text, &changed))
    return;
  CHECK(cache_key_equal(dumped, renamed));
  CHECK(!cache_key_equal(renamed, changed));
}

/* ---- stability across processes ---- */

/*   ENTRY e { p = f32[4] parameter(0)  c = f32[4] constant({1, 2, 3, 4})
 *             ROOT r = f32[4] add(p, c) } */
static hlo_module *build_pinned(void) {
  hlo_module *m = hlo_module_new("pinned");
  hlo_comp *entry = hlo_module_add_comp(m, "e");
  m->entry = entry;
  hlo_shape shape = array(HLO_F32, 1, 4, 0);
  hlo_instr *p = add_param(entry, "p", 0, shape);
  float data[4] = {1, 2, 3, 4};
  hlo_instr *c = add_constant(entry, "c", shape, data);
  entry->root = add_op(entry, HLO_OP_ADD, "r", shape, 2, p, c, NULL);
  return m;
}

/* Big enough (4000 bytes of constant) to take the streaming path rather than the one-shot. */
static hlo_module *build_pinned_big(void) {
  hlo_module *m = hlo_module_new("pinned_big");
  hlo_comp *entry = hlo_module_add_comp(m, "e");
  m->entry = entry;
  hlo_shape shape = array(HLO_F32, 1, 1000, 0);
  float data[1000];
  for (int i = 0; i < 1000; i++) data[i] = (float)i * 0.5f;
  entry->root = add_constant(entry, "c", shape, data);
  return m;
}

static void pinned_hex(char out[33]) {
  hlo_module *m = build_pinned();
  cache_key_hex(hash_of_module(m), out);
  hlo_module_free(m);
}

static void pinned_big_hex(char out[33]) {
  hlo_module *m = build_pinned_big();
  cache_key_hex(hash_of_module(m), out);
  hlo_module_free(m);
}

/* These keys were computed once and pasted here. They pin the canonical form across processes,
 * machines and latch versions: if this check fails, keys on every user's disk cache just
 * stopped matching. That is only acceptable on purpose, together with a bump of
 * CACHE_HASH_FORMAT (and then a new key pasted here). */
#define PINNED_KEY "a1f2c688e1bb2493a41100361d8ce1a3"
#define PINNED_BIG_KEY "966085eadc7b4d73e16959b9b0707f81"

static void test_pinned_key(void) {
  char hex[33];
  pinned_hex(hex);
  CHECK_STR(hex, PINNED_KEY);
  pinned_big_hex(hex);
  CHECK_STR(hex, PINNED_BIG_KEY);
  cache_key key = {0x0123456789abcdefu, 0xfedcba9876543210u};
  cache_key_hex(key, hex);
  CHECK_STR(hex, "fedcba98765432100123456789abcdef");
}

/* The child mode: perturb the heap so pointers differ, then print the keys. */
static int print_keys(void) {
  void *junk[64];
  for (int i = 0; i < 64; i++) junk[i] = malloc((size_t)(i * 37 + 1));
  char hex[33];
  pinned_hex(hex);
  printf("%s\n", hex);
  pinned_big_hex(hex);
  printf("%s\n", hex);
  cache_key_hex(module_key(BASE), hex);
  printf("%s\n", hex);
  for (int i = 0; i < 64; i++) free(junk[i]);
  return 0;
}

static const char *self_path = "/proc/self/exe"; /* argv[0] when it is a path: valgrind */

/* Runs this very program again as a child process and compares its keys with ours. */
static void test_keys_match_in_another_process(void) {
  int fds[2];
  CHECK(pipe(fds) == 0);
  pid_t child = fork();
  if (child == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    close(fds[1]);
    execl(self_path, "test_hash", "--print-keys", (char *)NULL);
    _exit(127);
  }
  close(fds[1]);
  char output[128] = {0};
  size_t got = 0;
  ssize_t n;
  while (got < sizeof output - 1 && (n = read(fds[0], output + got, sizeof output - 1 - got)) > 0)
    got += (size_t)n;
  close(fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);

  char expected[128], pinned[33], pinned_big[33], base[33];
  pinned_hex(pinned);
  pinned_big_hex(pinned_big);
  cache_key_hex(module_key(BASE), base);
  snprintf(expected, sizeof expected, "%s\n%s\n%s\n", pinned, pinned_big, base);
  CHECK_STR(output, expected);
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--print-keys") == 0) return print_keys();
  if (argc > 0 && strchr(argv[0], '/')) self_path = argv[0];
  RUN(test_same_module_same_key);
  RUN(test_names_do_not_matter);
  RUN(test_noise_does_not_matter);
  RUN(test_every_change_matters);
  RUN(test_comp_and_module_keys);
  RUN(test_every_attribute_matters);
  RUN(test_field_boundaries);
  RUN(test_big_constant);
  RUN(test_deep_graphs);
  RUN(test_recursion_terminates);
  RUN(test_parsed_text);
  RUN(test_pinned_key);
  RUN(test_keys_match_in_another_process);
  return TEST_REPORT();
}
