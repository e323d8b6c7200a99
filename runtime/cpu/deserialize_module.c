/* Reading a module written by rt_cpu_encode_module (serialize.c): the optimized module of a
 * serialized cpu executable, rebuilt in a new arena without parsing text. Every count, index
 * and kind is checked against its range as it is read (operands name earlier instructions of
 * the same computation, called computations earlier computations, ranks stay within
 * HLO_MAX_RANK, literal bytes match their shapes), so damaged bytes are an error, never a
 * pointer out of the module. */
#include <stdlib.h>
#include <string.h>

#include "blob_internal.h"
#include "exec_internal.h"

enum { MAX_TUPLE_DEPTH = 32 };

typedef struct reader {
  rt_blob_in *in;
  hlo_module *module;
  hlo_arena *arena;
} reader;

static bool get_ints(reader *r, hlo_ints *ints, const char *what) {
  int count = (int)rt_blob_get_count(r->in, INT32_MAX, what);
  *ints = (hlo_ints){0};
  if (r->in->failed || count == 0) return !r->in->failed;
  ints->values = hlo_arena_alloc(r->arena, sizeof(int64_t) * (size_t)count);
  if (!ints->values) return rt_blob_fail(r->in, "out of memory");
  ints->count = count;
  for (int i = 0; i < count; i++) ints->values[i] = rt_blob_get_int(r->in, what);
  return !r->in->failed;
}

/* The shape flags of serialize.c's put_shape. */
enum { SHAPE_HAS_LAYOUT = 1, SHAPE_DIM_KINDS = 2, SHAPE_LAYOUT = 4, SHAPE_LAYOUT_EXTRA = 8, SHAPE_TUPLE = 16 };

static bool get_shape(reader *r, hlo_shape *shape, int depth) {
  rt_blob_in *in = r->in;
  *shape = (hlo_shape){0};
  if (depth > MAX_TUPLE_DEPTH) return rt_blob_fail(in, "a shape nested too deep");
  shape->dtype = (hlo_dtype)rt_blob_get_range(in, 0, HLO_DTYPE_COUNT - 1, "an element type");
  shape->rank = (int)rt_blob_get_range(in, 0, HLO_MAX_RANK, "a rank");
  int flags = (int)rt_blob_get_range(in, 0, 31, "a shape");
  int64_t elements = 1;
  for (int d = 0; d < shape->rank && !in->failed; d++) {
    shape->dims[d] = rt_blob_get_range(in, -1, HLO_MAX_ELEMENTS, "a dim");
    if (shape->dims[d] > 0 && elements > HLO_MAX_ELEMENTS / shape->dims[d]) return rt_blob_fail(in, "dims too large");
    if (shape->dims[d] > 0) elements *= shape->dims[d];
  }
  for (int d = 0; (flags & SHAPE_DIM_KINDS) && d < shape->rank; d++)
    shape->dim_kind[d] = (uint8_t)rt_blob_get_range(in, HLO_DIM_STATIC, HLO_DIM_UNBOUNDED, "a dim kind");
  for (int d = 0; d < shape->rank; d++) /* the default, unless written */
    shape->minor_to_major[d] = (int8_t)(flags & SHAPE_LAYOUT ? rt_blob_get_range(in, 0, shape->rank - 1, "a layout")
                                                              : shape->rank - 1 - d);
  shape->has_layout = flags & SHAPE_HAS_LAYOUT;
  if (flags & SHAPE_LAYOUT_EXTRA) shape->layout_extra = rt_blob_get_str(in, r->arena, "a layout");
  if (in->failed) return false;
  if ((shape->dtype == HLO_TUPLE) != ((flags & SHAPE_TUPLE) != 0)) return rt_blob_fail(in, "a tuple shape");
  if (shape->dtype != HLO_TUPLE) return true;
  int count = (int)rt_blob_get_count(in, INT32_MAX, "a tuple");
  shape->tuple_count = count;
  shape->tuple = hlo_arena_alloc(r->arena, sizeof(hlo_shape) * ((size_t)count + 1));
  if (!shape->tuple) return rt_blob_fail(in, "out of memory");
  for (int i = 0; i < count; i++)
    if (!get_shape(r, &shape->tuple[i], depth + 1)) return false;
  return !in->failed;
}

static bool get_literal(reader *r, hlo_literal *literal, int depth) {
  rt_blob_in *in = r->in;
  if (!get_shape(r, &literal->shape, depth)) return false;
  size_t len;
  const void *data = rt_blob_get_bytes(in, &len, "a constant's data");
  if (data && (literal->shape.dtype == HLO_TUPLE || (int64_t)len != hlo_shape_bytes(&literal->shape)))
    return rt_blob_fail(in, "a constant's data (not its shape's size)");
  if (data && !(literal->data = hlo_arena_alloc(r->arena, len ? len : 1))) return rt_blob_fail(in, "out of memory");
  if (data) memcpy(literal->data, data, len);
  literal->elided = rt_blob_get_bool(in, "a constant");
  literal->raw_text = rt_blob_get_str(in, r->arena, "a constant's text");
  if (!rt_blob_get_bool(in, "a constant's elements")) return !in->failed;
  int count = literal->shape.dtype == HLO_TUPLE ? literal->shape.tuple_count : 0;
  literal->elements = hlo_arena_alloc(r->arena, sizeof(hlo_literal) * ((size_t)count + 1));
  if (!literal->elements) return rt_blob_fail(in, "out of memory");
  for (int i = 0; i < count; i++)
    if (!get_literal(r, &literal->elements[i], depth + 1)) return false;
  return !in->failed;
}

static void *get_struct(reader *r, size_t size) {
  void *p = hlo_arena_alloc(r->arena, size);
  if (!p) rt_blob_fail(r->in, "out of memory");
  return p;
}

static void get_window(reader *r, hlo_window *w) {
  w->rank = (int)rt_blob_get_range(r->in, 0, HLO_MAX_RANK, "a window");
  for (int d = 0; d < w->rank; d++) {
    hlo_window_dim *x = &w->dims[d];
    int64_t *fields[] = {&x->size, &x->stride, &x->pad_low, &x->pad_high, &x->lhs_dilate, &x->rhs_dilate};
    for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++) *fields[f] = rt_blob_get_int(r->in, "a window");
    x->reversal = rt_blob_get_bool(r->in, "a window");
  }
}

static void get_conv(reader *r, hlo_conv_dims *c) {
  c->spatial_count = (int)rt_blob_get_range(r->in, 0, HLO_MAX_RANK, "convolution dims");
  int64_t *fields[] = {&c->input_batch, &c->input_feature, &c->kernel_input_feature, &c->kernel_output_feature,
                       &c->output_batch, &c->output_feature};
  for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++)
    *fields[f] = rt_blob_get_range(r->in, 0, HLO_MAX_RANK - 1, "convolution dims");
  for (int s = 0; s < c->spatial_count; s++) {
    c->input_spatial[s] = rt_blob_get_range(r->in, 0, HLO_MAX_RANK - 1, "convolution dims");
    c->kernel_spatial[s] = rt_blob_get_range(r->in, 0, HLO_MAX_RANK - 1, "convolution dims");
    c->output_spatial[s] = rt_blob_get_range(r->in, 0, HLO_MAX_RANK - 1, "convolution dims");
  }
}

static void get_padding(reader *r, hlo_padding *p) {
  p->rank = (int)rt_blob_get_range(r->in, 0, HLO_MAX_RANK, "a padding");
  for (int d = 0; d < p->rank; d++) {
    p->low[d] = rt_blob_get_int(r->in, "a padding");
    p->high[d] = rt_blob_get_int(r->in, "a padding");
    p->interior[d] = rt_blob_get_int(r->in, "a padding");
  }
}

static bool get_raw_attrs(reader *r, int *count, hlo_raw_attr **attrs) {
  *count = (int)rt_blob_get_count(r->in, INT32_MAX, "raw attributes");
  *attrs = NULL;
  if (r->in->failed || *count == 0) return !r->in->failed;
  *attrs = hlo_arena_alloc(r->arena, sizeof(hlo_raw_attr) * (size_t)*count);
  if (!*attrs) return rt_blob_fail(r->in, "out of memory");
  for (int a = 0; a < *count; a++) {
    (*attrs)[a].name = rt_blob_get_str(r->in, r->arena, "a raw attribute");
    (*attrs)[a].value = rt_blob_get_str(r->in, r->arena, "a raw attribute");
    if (!r->in->failed && (!(*attrs)[a].name || !(*attrs)[a].value)) return rt_blob_fail(r->in, "a raw attribute");
  }
  return !r->in->failed;
}

enum { SCALARS = 13, LISTS = 5 }; /* put_attrs's mask: scalars, lists, then pointers */

static bool get_dot(reader *r, hlo_instr *x) {
  hlo_dot_dims *dot = x->dot = get_struct(r, sizeof *dot);
  return dot && get_ints(r, &dot->lhs_batch, "dot dims") && get_ints(r, &dot->lhs_contracting, "dot dims") &&
         get_ints(r, &dot->rhs_batch, "dot dims") && get_ints(r, &dot->rhs_contracting, "dot dims");
}

static bool get_gather(reader *r, hlo_instr *x) {
  hlo_gather_dims *g = x->gather = get_struct(r, sizeof *g);
  if (!g || !get_ints(r, &g->offset_dims, "gather dims") || !get_ints(r, &g->collapsed_slice_dims, "gather dims") ||
      !get_ints(r, &g->start_index_map, "gather dims") || !get_ints(r, &g->operand_batching_dims, "gather dims") ||
      !get_ints(r, &g->start_indices_batching_dims, "gather dims"))
    return false;
  g->index_vector_dim = rt_blob_get_int(r->in, "gather dims");
  g->indices_are_sorted = rt_blob_get_bool(r->in, "gather dims");
  return !r->in->failed;
}

static bool get_scatter(reader *r, hlo_instr *x) {
  hlo_scatter_dims *s = x->scatter = get_struct(r, sizeof *s);
  if (!s || !get_ints(r, &s->update_window_dims, "scatter dims") ||
      !get_ints(r, &s->inserted_window_dims, "scatter dims") ||
      !get_ints(r, &s->scatter_dims_to_operand_dims, "scatter dims") ||
      !get_ints(r, &s->input_batching_dims, "scatter dims") ||
      !get_ints(r, &s->scatter_indices_batching_dims, "scatter dims"))
    return false;
  s->index_vector_dim = rt_blob_get_int(r->in, "scatter dims");
  s->indices_are_sorted = rt_blob_get_bool(r->in, "scatter dims");
  s->unique_indices = rt_blob_get_bool(r->in, "scatter dims");
  return !r->in->failed;
}

/* The scalar attributes present in mask, in put_attrs's order (group counts less one,
 * epsilon by its bits). */
static void get_scalars(rt_blob_in *in, uint64_t mask, hlo_instr *x) {
  int64_t v[SCALARS] = {0};
  for (int i = 0; i < SCALARS; i++)
    if (mask & ((uint64_t)1 << i)) v[i] = rt_blob_get_int(in, "an attribute");
  x->parameter_number = v[0];
  x->index = v[1];
  x->feature_group_count = v[2] + 1;
  x->batch_group_count = v[3] + 1;
  if (v[0] < 0 || v[0] > INT32_MAX || v[4] < HLO_DIR_NONE || v[4] > HLO_DIR_GE || v[5] < HLO_CMP_DEFAULT ||
      v[5] > HLO_CMP_UNSIGNED || v[6] < 0 || v[6] > 1 || v[7] < HLO_RNG_DEFAULT || v[7] > HLO_RNG_PHILOX ||
      v[8] < HLO_RNG_UNIFORM || v[8] > HLO_RNG_NORMAL || v[11] < 0 || v[11] > 1)
    rt_blob_fail(in, "an attribute out of its range");
  x->direction = (hlo_direction)v[4];
  x->compare_type = (hlo_compare_type)v[5];
  x->is_stable = v[6];
  x->rng_algorithm = (hlo_rng_algorithm)v[7];
  x->rng_distribution = (hlo_rng_distribution)v[8];
  x->exponent_bits = v[9];
  x->mantissa_bits = v[10];
  x->is_composite = v[11];
  uint64_t bits = (uint64_t)v[12];
  memcpy(&x->epsilon, &bits, sizeof bits);
}

static bool get_attrs(reader *r, hlo_instr *x) {
  rt_blob_in *in = r->in;
  uint64_t mask = (uint64_t)rt_blob_get_range(in, 0, ((int64_t)1 << (SCALARS + LISTS + 11)) - 1, "attributes");
  get_scalars(in, mask, x);
  hlo_ints *lists[] = {&x->dimensions, &x->slice_starts, &x->slice_limits, &x->slice_strides, &x->gather_slice_sizes};
  for (int l = 0; l < LISTS; l++)
    if ((mask >> (SCALARS + l) & 1) && !get_ints(r, lists[l], "an instruction's dims")) return false;
  mask >>= SCALARS + LISTS;
  if ((mask & 1) && (x->padding = get_struct(r, sizeof *x->padding))) get_padding(r, x->padding);
  if ((mask & 2) && (x->window = get_struct(r, sizeof *x->window))) get_window(r, x->window);
  if ((mask & 4) && (x->conv = get_struct(r, sizeof *x->conv))) get_conv(r, x->conv);
  if (in->failed || ((mask & 8) && !get_dot(r, x)) || ((mask & 16) && !get_gather(r, x)) ||
      ((mask & 32) && !get_scatter(r, x)))
    return false;
  if ((mask & 64) && (x->literal = get_struct(r, sizeof *x->literal))) get_literal(r, x->literal, 0);
  if (mask & 128) x->custom_call_target = rt_blob_get_str(in, r->arena, "a custom-call target");
  if (mask & 256) x->fusion_kind = rt_blob_get_str(in, r->arena, "a fusion kind");
  if (mask & 512) x->composite_name = rt_blob_get_str(in, r->arena, "a composite name");
  if (mask & 1024) get_raw_attrs(r, &x->raw_attr_count, &x->raw_attrs);
  return !in->failed;
}

static bool get_instr(reader *r, hlo_comp *comp) {
  rt_blob_in *in = r->in;
  hlo_opcode op = (hlo_opcode)rt_blob_get_range(in, 0, HLO_OP_COUNT - 1, "an opcode");
  const char *name = rt_blob_get_str(in, r->arena, "an instruction's name");
  if (in->failed || !name) return rt_blob_fail(in, "an instruction's name");
  /* not hlo_comp_append: its copy of the name and its operand list would be thrown away */
  hlo_instr *x = get_struct(r, sizeof *x);
  if (!x || !hlo_comp_add(comp, x)) return rt_blob_fail(in, "out of memory");
  x->opcode = op;
  x->name = name;
  x->origin = (int32_t)rt_blob_get_range(in, 0, INT32_MAX, "an origin");
  if (!get_shape(r, &x->shape, 0)) return false;
  int count = (int)rt_blob_get_count(in, INT32_MAX, "operands");
  x->operands = hlo_arena_alloc(r->arena, sizeof(hlo_instr *) * ((size_t)count + 1));
  if (!x->operands) return rt_blob_fail(in, "out of memory");
  x->operand_count = count;
  for (int k = 0; k < count; k++) /* operands come before their users (a failed read gives 0, which exists) */
    x->operands[k] = comp->instrs[rt_blob_get_range(in, 0, x->id - 1, "an operand")];
  count = (int)rt_blob_get_count(in, INT32_MAX, "called computations");
  /* none: NULL, as the parser leaves it (most instructions; 9 KB of gpt2's load) */
  x->called = count ? hlo_arena_alloc(r->arena, sizeof(hlo_comp *) * (size_t)count) : NULL;
  if (count && !x->called) return rt_blob_fail(in, "out of memory");
  x->called_count = count;
  for (int k = 0; k < count; k++) /* callees come before their callers */
    x->called[k] = r->module->comps[rt_blob_get_range(in, 0, comp->id - 1, "a called computation")];
  return get_attrs(r, x);
}

static bool get_comp(reader *r) {
  rt_blob_in *in = r->in;
  const char *name = rt_blob_get_str(in, r->arena, "a computation's name");
  if (in->failed || !name) return rt_blob_fail(in, "a computation's name");
  hlo_comp *comp = hlo_module_add_comp(r->module, name);
  if (!comp) return rt_blob_fail(in, "out of memory");
  int count = (int)rt_blob_get_count(in, INT32_MAX, "instructions");
  for (int i = 0; i < count && !in->failed; i++) get_instr(r, comp);
  int root = (int)rt_blob_get_range(in, 0, comp->instr_count - 1, "a root");
  if (in->failed) return false;
  comp->root = comp->instrs[root];
  int params = (int)rt_blob_get_count(in, comp->instr_count, "parameters");
  for (int p = 0; p < params && !in->failed; p++) {
    int id = (int)rt_blob_get_range(in, -1, comp->instr_count - 1, "a parameter");
    hlo_instr *param = id >= 0 && !in->failed ? comp->instrs[id] : NULL;
    if (param && (param->opcode != HLO_OP_PARAMETER || param->parameter_number != p))
      return rt_blob_fail(in, "a parameter");
    if (param && !hlo_comp_set_param(comp, param)) return rt_blob_fail(in, "out of memory");
  }
  if (!in->failed && comp->param_count != params) { /* trailing NULL parameters */
    hlo_instr **table = hlo_realloc(comp->params, sizeof(hlo_instr *) * ((size_t)params + 1));
    if (!table) return rt_blob_fail(in, "out of memory");
    for (int p = comp->param_count; p < params; p++) table[p] = NULL;
    comp->params = table;
    comp->param_count = params;
  }
  return !in->failed;
}

hlo_module *rt_cpu_decode_module(rt_blob_in *in) {
  hlo_module *module = hlo_module_new("");
  if (!module) {
    rt_blob_fail(in, "out of memory");
    return NULL;
  }
  reader r = {.in = in, .module = module, .arena = &module->arena};
  const char *name = rt_blob_get_str(in, r.arena, "the module's name");
  if (name) module->name = name;
  module->name_counter = rt_blob_get_range(in, 0, INT64_MAX, "the module's name counter");
  get_raw_attrs(&r, &module->raw_attr_count, &module->raw_attrs);
  int comps = (int)rt_blob_get_count(in, INT32_MAX, "computations");
  for (int c = 0; c < comps && !in->failed; c++) get_comp(&r);
  int entry = (int)rt_blob_get_range(in, 0, module->comp_count - 1, "the entry");
  if (module->arena.failed) rt_blob_fail(in, "out of memory");
  if (in->failed) {
    hlo_module_free(module);
    return NULL;
  }
  module->entry = module->comps[entry];
  module->entry->is_entry = true;
  return module;
}
