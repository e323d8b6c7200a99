/* The builder fills a draft instruction on the stack, lets shape inference and the call
 * checks judge it, and only then appends it to the computation: a rejected op leaves no
 * trace but its message. */
#include "hlo.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* ---- names ---- */

/* The numeric suffix of "add.12", or 0. */
static int64_t name_suffix(const char *name) {
  const char *dot = strrchr(name, '.');
  if (!dot || !dot[1]) return 0;
  for (const char *p = dot + 1; *p; p++)
    if (!isdigit((unsigned char)*p)) return 0;
  return strtoll(dot + 1, NULL, 10);
}

/* Generated suffixes start above every suffix already in the module, so a module read from
 * text can grow without clashes; after that a counter suffices. */
static const char *fresh_name(hlo_module *module, const char *base) {
  if (module->name_counter == 0) {
    int64_t top = 0;
    for (int c = 0; c < module->comp_count; c++) {
      const hlo_comp *comp = module->comps[c];
      int64_t s = name_suffix(comp->name);
      if (s > top) top = s;
      for (int i = 0; i < comp->instr_count; i++) {
        s = name_suffix(comp->instrs[i]->name);
        if (s > top) top = s;
      }
    }
    module->name_counter = top + 1;
  }
  /* base.N, written out by hand: lowering a large graph names thousands of instructions,
   * and snprintf was a fifth of the time a symbolic trace took to instantiate */
  char name[96], digits[24];
  size_t len = strnlen(base, 80), count = 0;
  memcpy(name, base, len);
  name[len++] = '.';
  for (uint64_t n = (uint64_t)module->name_counter++; count == 0 || n > 0; n /= 10) digits[count++] = (char)('0' + n % 10);
  while (count > 0) name[len++] = digits[--count];
  name[len] = '\0';
  return hlo_arena_strdup(&module->arena, name);
}

const char *hlo_fresh_name(hlo_module *module, const char *base) { return fresh_name(module, base); }

hlo_comp *hlo_build_computation(hlo_module *module, const char *name, bool entry) {
  const char *unique = name && !hlo_module_find_comp(module, name) ? name : fresh_name(module, name ? name : "computation");
  hlo_comp *comp = unique ? hlo_module_add_comp(module, unique) : NULL;
  if (comp && entry) {
    if (module->entry) module->entry->is_entry = false;
    module->entry = comp;
    comp->is_entry = true;
  }
  return comp;
}

hlo_status hlo_comp_set_root(hlo_comp *comp, hlo_instr *root, hlo_diag *diag) {
  if (!root || root->parent != comp)
    return hlo_diag_set(diag, HLO_ERR_INPUT, "computation %s: the root must be one of its instructions",
                        comp->name);
  comp->root = root;
  return HLO_OK;
}

/* ---- drafts ---- */

static hlo_arena *arena_of(hlo_comp *comp) { return &comp->module->arena; }

static void draft_named(hlo_instr *draft, hlo_comp *comp, hlo_opcode op, int count, hlo_instr *const *operands,
                        const char *name) {
  memset(draft, 0, sizeof *draft);
  draft->opcode = op;
  draft->name = name ? name : fresh_name(comp->module, hlo_opcode_name(op));
  draft->parent = comp;
  draft->operand_count = count;
  draft->operands = (hlo_instr **)operands; /* read only until commit copies them */
  draft->feature_group_count = 1;
  draft->batch_group_count = 1;
}

static void draft_init(hlo_instr *draft, hlo_comp *comp, hlo_opcode op, int count, hlo_instr *const *operands) {
  draft_named(draft, comp, op, count, operands, NULL);
}

/* The module's arena ran out (now or before: the flag is sticky): the draft may be missing
 * its name or attributes, so nothing may look at it. */
static hlo_instr *out_of_memory(hlo_comp *comp, const hlo_instr *draft, hlo_diag *diag) {
  hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory building %s in computation %s", hlo_opcode_name(draft->opcode),
               comp->name);
  return NULL;
}

/* Infers and checks the draft; on success appends it to comp with the inferred shape. */
static hlo_instr *commit(hlo_comp *comp, hlo_instr *draft, hlo_diag *diag) {
  if (comp->module->arena.failed) return out_of_memory(comp, draft, diag);
  for (int i = 0; i < draft->operand_count; i++) {
    const hlo_instr *operand = draft->operands[i];
    if (!operand) {
      hlo_diag_set(diag, HLO_ERR_INPUT, "%s: operand %d is missing", hlo_opcode_name(draft->opcode), i);
      return NULL;
    }
    if (operand->parent != comp) {
      hlo_diag_set(diag, HLO_ERR_INPUT, "%s: operand %%%s belongs to computation %s, not %s",
                   hlo_opcode_name(draft->opcode), operand->name,
                   operand->parent ? operand->parent->name : "(none)", comp->name);
      return NULL;
    }
  }
  hlo_shape shape;
  if (hlo_infer_shape(draft, &shape, arena_of(comp), diag)) return NULL;
  if (hlo_verify_calls(draft, 0, diag)) return NULL;
  hlo_instr *instr = hlo_comp_append(comp, draft->opcode, draft->name, draft->operand_count, draft->operands);
  if (!instr || comp->module->arena.failed) return out_of_memory(comp, draft, diag);
  hlo_instr kept = *instr;
  *instr = *draft;
  instr->name = kept.name;
  instr->operands = kept.operands;
  instr->parent = kept.parent;
  instr->id = kept.id;
  instr->shape = shape;
  return instr;
}

static hlo_ints ints(hlo_comp *comp, int count, const int64_t *values) {
  return hlo_ints_copy(arena_of(comp), count, values);
}

static hlo_ints ints_copy(hlo_comp *comp, const hlo_ints *from) {
  return ints(comp, from->count, from->values);
}

static void set_called(hlo_comp *comp, hlo_instr *draft, int count, hlo_comp *const *called) {
  draft->called_count = count;
  draft->called = hlo_arena_alloc(arena_of(comp), sizeof(hlo_comp *) * (size_t)(count ? count : 1));
  if (!draft->called) draft->called_count = count = 0; /* commit reports the arena's failure */
  for (int i = 0; i < count; i++) draft->called[i] = called[i];
}

static int operand_rank(const hlo_instr *x) { return x ? x->shape.rank : 0; }

/* ---- leaves ---- */

hlo_instr *hlo_build_parameter(hlo_comp *comp, int64_t number, const hlo_shape *shape, const char *name,
                               hlo_diag *diag) {
  if (number < 0 || number > 1000000 || (number < comp->param_count && comp->params[number])) {
    hlo_diag_set(diag, HLO_ERR_INPUT, "parameter: number %lld is invalid or already taken in %s",
                 (long long)number, comp->name);
    return NULL;
  }
  hlo_instr draft;
  draft_named(&draft, comp, HLO_OP_PARAMETER, 0, NULL, name);
  draft.parameter_number = number;
  draft.shape = hlo_shape_clone(arena_of(comp), shape);
  hlo_instr *param = commit(comp, &draft, diag);
  if (param && !hlo_comp_set_param(comp, param)) return out_of_memory(comp, &draft, diag);
  return param;
}

static hlo_literal copy_literal(hlo_arena *arena, const hlo_literal *from) {
  hlo_literal copy = *from;
  copy.shape = hlo_shape_clone(arena, &from->shape);
  if (from->data) copy.data = hlo_arena_memdup(arena, from->data, (size_t)hlo_shape_bytes(&from->shape));
  if (from->raw_text) copy.raw_text = hlo_arena_strdup(arena, from->raw_text);
  if (from->elements) {
    int n = from->shape.tuple_count;
    copy.elements = hlo_arena_alloc(arena, sizeof(hlo_literal) * (size_t)(n ? n : 1));
    if (!copy.elements) n = 0; /* arena->failed says why */
    for (int i = 0; i < n; i++) copy.elements[i] = copy_literal(arena, &from->elements[i]);
  }
  return copy;
}

static bool literal_complete(const hlo_literal *literal) {
  if (literal->shape.dtype == HLO_TUPLE) {
    if (!literal->elements && literal->shape.tuple_count) return false;
    for (int i = 0; i < literal->shape.tuple_count; i++)
      if (!literal_complete(&literal->elements[i])) return false;
    return true;
  }
  return literal->raw_text || literal->data || hlo_shape_bytes(&literal->shape) == 0;
}

hlo_instr *hlo_build_constant(hlo_comp *comp, const hlo_literal *literal, hlo_diag *diag) {
  if (!literal || !literal_complete(literal)) {
    hlo_diag_set(diag, HLO_ERR_INPUT, "constant: the literal has no values");
    return NULL;
  }
  hlo_instr draft;
  draft_init(&draft, comp, HLO_OP_CONSTANT, 0, NULL);
  draft.literal = hlo_arena_alloc(arena_of(comp), sizeof(hlo_literal));
  if (!draft.literal) return out_of_memory(comp, &draft, diag);
  *draft.literal = copy_literal(arena_of(comp), literal);
  draft.shape = draft.literal->shape;
  return commit(comp, &draft, diag);
}

/* Stores value as one element of dtype; false for types latch does not compute with. */
static bool store_scalar(void *out, hlo_dtype dtype, double value) {
  switch (dtype) {
    case HLO_PRED: *(uint8_t *)out = value != 0; return true;
    case HLO_S8: *(int8_t *)out = (int8_t)value; return true;
    case HLO_S16: *(int16_t *)out = (int16_t)value; return true;
    case HLO_S32: *(int32_t *)out = (int32_t)value; return true;
    case HLO_S64: *(int64_t *)out = (int64_t)value; return true;
    case HLO_U8: *(uint8_t *)out = (uint8_t)value; return true;
    case HLO_U16: *(uint16_t *)out = (uint16_t)value; return true;
    case HLO_U32: *(uint32_t *)out = (uint32_t)value; return true;
    case HLO_U64: *(uint64_t *)out = (uint64_t)value; return true;
    case HLO_F16: *(uint16_t *)out = hlo_f64_to_f16(value); return true;
    case HLO_BF16: *(uint16_t *)out = hlo_f64_to_bf16(value); return true;
    case HLO_F32: *(float *)out = (float)value; return true;
    case HLO_F64: *(double *)out = value; return true;
    default: return false;
  }
}

hlo_instr *hlo_build_constant_scalar(hlo_comp *comp, hlo_dtype dtype, double value, hlo_diag *diag) {
  unsigned char bytes[8];
  if (!store_scalar(bytes, dtype, value)) {
    hlo_diag_set(diag, HLO_ERR_UNSUPPORTED, "constant: cannot make a scalar of type %s", hlo_dtype_name(dtype));
    return NULL;
  }
  hlo_literal literal;
  memset(&literal, 0, sizeof literal);
  literal.shape = hlo_shape_scalar(dtype);
  literal.data = bytes;
  return hlo_build_constant(comp, &literal, diag);
}

hlo_instr *hlo_build_iota(hlo_comp *comp, hlo_dtype dtype, int rank, const int64_t *dims,
                          int64_t iota_dimension, hlo_diag *diag) {
  if (rank < 0 || rank > HLO_MAX_RANK) {
    hlo_diag_set(diag, HLO_ERR_INPUT, "iota: rank %d is out of range", rank);
    return NULL;
  }
  hlo_instr draft;
  draft_init(&draft, comp, HLO_OP_IOTA, 0, NULL);
  draft.shape = hlo_shape_make(dtype, rank, dims);
  draft.index = iota_dimension;
  return commit(comp, &draft, diag);
}

/* ---- elementwise ---- */

hlo_instr *hlo_build_unary(hlo_comp *comp, hlo_opcode op, hlo_instr *x, hlo_diag *diag) {
  if (!hlo_opcode_is_elementwise_unary(op) && op != HLO_OP_COPY) {
    hlo_diag_set(diag, HLO_ERR_INPUT, "%s is not a unary elementwise op", hlo_opcode_name(op));
    return NULL;
  }
  hlo_instr draft;
  draft_init(&draft, comp, op, 1, &x);
  return commit(comp, &draft, diag);
}

hlo_instr *hlo_build_binary(hlo_comp *comp, hlo_opcode op, hlo_instr *a, hlo_instr *b, hlo_diag *diag) {
  if (!hlo_opcode_is_elementwise_binary(op) || op == HLO_OP_COMPARE) {
    hlo_diag_set(diag, HLO_ERR_INPUT, "%s is not a binary elementwise op%s", hlo_opcode_name(op),
                 op == HLO_OP_COMPARE ? " (use hlo_build_compare)" : "");
    return NULL;
  }
  hlo_instr *operands[2] = {a, b};
  hlo_instr draft;
  draft_init(&draft, comp, op, 2, operands);
  return commit(comp, &draft, diag);
}

hlo_instr *hlo_build_compare(hlo_comp *comp, hlo_direction direction, hlo_instr *a, hlo_instr *b,
                             hlo_diag *diag) {
  if (direction <= HLO_DIR_NONE || direction > HLO_DIR_GE) {
    hlo_diag_set(diag, HLO_ERR_INPUT, "compare: invalid direction %d", (int)direction);
    return NULL;
  }
  hlo_instr *operands[2] = {a, b};
  hlo_instr draft;
  draft_init(&draft, comp, HLO_OP_COMPARE, 2, operands);
  draft.direction = direction;
  return commit(comp, &draft, diag);
}

static hlo_instr *build_ternary(hlo_comp *comp, hlo_opcode op, hlo_instr *a, hlo_instr *b, hlo_instr *c,
                                hlo_diag *diag) {
  hlo_instr *operands[3] = {a, b, c};
  hlo_instr draft;
  draft_init(&draft, comp, op, 3, operands);
  return commit(comp, &draft, diag);
}

hlo_instr *hlo_build_select(hlo_comp *comp, hlo_instr *pred, hlo_instr *on_true, hlo_instr *on_false,
                            hlo_diag *diag) {
  return build_ternary(comp, HLO_OP_SELECT, pred, on_true, on_false, diag);
}

hlo_instr *hlo_build_clamp(hlo_comp *comp, hlo_instr *min, hlo_instr *x, hlo_instr *max, hlo_diag *diag) {
  return build_ternary(comp, HLO_OP_CLAMP, min, x, max, diag);
}

hlo_instr *hlo_build_convert(hlo_comp *comp, hlo_instr *x, hlo_dtype dtype, hlo_diag *diag) {
  hlo_instr draft;
  draft_init(&draft, comp, HLO_OP_CONVERT, 1, &x);
  draft.shape = hlo_shape_scalar(dtype);
  return commit(comp, &draft, diag);
}

/* ---- shape manipulation ---- */

static bool rank_ok(const char *op, int rank, hlo_diag *diag) {
  if (rank >= 0 && rank <= HLO_MAX_RANK) return true;
  hlo_diag_set(diag, HLO_ERR_INPUT, "%s: rank %d is out of range", op, rank);
  return false;
}

hlo_instr *hlo_build_broadcast(hlo_comp *comp, hlo_instr *x, int rank, const int64_t *dims,
                               const int64_t *dimensions, hlo_diag *diag) {
  if (!rank_ok("broadcast", rank, diag)) return NULL;
  hlo_instr draft;
  draft_init(&draft, comp, HLO_OP_BROADCAST, 1, &x);
  draft.shape = hlo_shape_make(x ? x->shape.dtype : HLO_INVALID, rank, dims);
  draft.dimensions = ints(comp, operand_rank(x), dimensions);
  return commit(comp, &draft, diag);
}

hlo_instr *hlo_build_reshape(hlo_comp *comp, hlo_instr *x, int rank, const int64_t *dims, hlo_diag *diag) {
  if (!rank_ok("reshape", rank, diag)) return NULL;
  hlo_instr draft;
  draft_init(&draft, comp, HLO_OP_RESHAPE, 1, &x);
  draft.shape = hlo_shape_make(x ? x->shape.dtype : HLO_INVALID, rank, dims);
  return commit(comp, &draft, diag);
}

hlo_instr *hlo_build_transpose(hlo_comp *comp, hlo_instr *x, const int64_t *permutation, hlo_diag *diag) {
  hlo_instr draft;
  draft_init(&draft, comp, HLO_OP_TRANSPOSE, 1, &x);
  draft.dimensions = ints(comp, operand_rank(x), permutation);
  return commit(comp, &draft, diag);
}

hlo_instr *hlo_build_reverse(hlo_comp *comp, hlo_instr *x, int count, const int64_t *dims, hlo_diag *diag) {
  hlo_instr draft;
  draft_init(&draft, comp, HLO_OP_REVERSE, 1, &x);
  draft.dimensions = ints(comp, count, dims);
  return commit(comp, &draft, diag);
}

hlo_instr *hlo_build_slice(hlo_comp *comp, hlo_instr *x, const int64_t *starts, const int64_t *limits,
                           const int64_t *strides, hlo_diag *diag) {
  int rank = operand_rank(x);
  int64_t ones[HLO_MAX_RANK];
  for (int i = 0; i < HLO_MAX_RANK; i++) ones[i] = 1;
  hlo_instr draft;
  draft_init(&draft, comp, HLO_OP_SLICE, 1, &x);
  draft.slice_starts = ints(comp, rank, starts);
  draft.slice_limits = ints(comp, rank, limits);
  draft.slice_strides = ints(comp, rank, strides ? strides : ones);
  return commit(comp, &draft, diag);
}

hlo_instr *hlo_build_concatenate(hlo_comp *comp, int count, hlo_instr *const *operands, int64_t dimension,
                                 hlo_diag *diag) {
  hlo_instr draft;
  draft_init(&draft, comp, HLO_OP_CONCATENATE, count, operands);
  draft.dimensions = ints(comp, 1, &dimension);
  return commit(comp, &draft, diag);
}

hlo_instr *hlo_build_pad(hlo_comp *comp, hlo_instr *x, hlo_instr *value, const hlo_padding *padding,
                         hlo_diag *diag) {
  hlo_instr *operands[2] = {x, value};
  hlo_instr draft;
  draft_init(&draft, comp, HLO_OP_PAD, 2, operands);
  draft.padding = hlo_arena_memdup(arena_of(comp), padding, sizeof *padding);
  return commit(comp, &draft, diag);
}

/* ---- contractions and reductions ---- */

hlo_instr *hlo_build_dot_to(hlo_comp *comp, hlo_instr *lhs, hlo_instr *rhs, const hlo_dot_dims *dims,
                            hlo_dtype result, hlo_diag *diag) {
  hlo_instr *operands[2] = {lhs, rhs};
  hlo_instr draft;
  draft_init(&draft, comp, HLO_OP_DOT, 2, operands);
  draft.shape.dtype = result; /* HLO_INVALID: lhs's, as inference takes it */
  draft.dot = hlo_arena_alloc(arena_of(comp), sizeof(hlo_dot_dims));
  if (!draft.dot) return out_of_memory(comp, &draft, diag);
  draft.dot->lhs_batch = ints_copy(comp, &dims->lhs_batch);
  draft.dot->lhs_contracting = ints_copy(comp, &dims->lhs_contracting);
  draft.dot->rhs_batch = ints_copy(comp, &dims->rhs_batch);
  draft.dot->rhs_contracting = ints_copy(comp, &dims->rhs_contracting);
  return commit(comp, &draft, diag);
}

hlo_instr *hlo_build_dot(hlo_comp *comp, hlo_instr *lhs, hlo_instr *rhs, const hlo_dot_dims *dims,
                         hlo_diag *diag) {
  return hlo_build_dot_to(comp, lhs, rhs, dims, HLO_INVALID, diag);
}

hlo_instr *hlo_build_convolution_to(hlo_comp *comp, hlo_instr *lhs, hlo_instr *rhs, const hlo_window *window,
                                    const hlo_conv_dims *dims, int64_t feature_group_count,
                                    int64_t batch_group_count, hlo_dtype result, hlo_diag *diag) {
  hlo_instr *operands[2] = {lhs, rhs};
  hlo_instr draft;
  draft_init(&draft, comp, HLO_OP_CONVOLUTION, 2, operands);
  draft.shape.dtype = result;
  draft.window = hlo_arena_memdup(arena_of(comp), window, sizeof *window);
  draft.conv = hlo_arena_memdup(arena_of(comp), dims, sizeof *dims);
  draft.feature_group_count = feature_group_count;
  draft.batch_group_count = batch_group_count;
  return commit(comp, &draft, diag);
}

hlo_instr *hlo_build_convolution(hlo_comp *comp, hlo_instr *lhs, hlo_instr *rhs, const hlo_window *window,
                                 const hlo_conv_dims *dims, int64_t feature_group_count,
                                 int64_t batch_group_count, hlo_diag *diag) {
  return hlo_build_convolution_to(comp, lhs, rhs, window, dims, feature_group_count, batch_group_count, HLO_INVALID,
                                  diag);
}

hlo_instr *hlo_build_reduce(hlo_comp *comp, hlo_instr *x, hlo_instr *init, int dim_count, const int64_t *dims,
                            hlo_comp *reducer, hlo_diag *diag) {
  hlo_instr *operands[2] = {x, init};
  hlo_instr draft;
  draft_init(&draft, comp, HLO_OP_REDUCE, 2, operands);
  draft.dimensions = ints(comp, dim_count, dims);
  set_called(comp, &draft, 1, &reducer);
  return commit(comp, &draft, diag);
}

hlo_instr *hlo_build_reduce_window(hlo_comp *comp, hlo_instr *x, hlo_instr *init, const hlo_window *window,
                                   hlo_comp *reducer, hlo_diag *diag) {
  hlo_instr *operands[2] = {x, init};
  hlo_instr draft;
  draft_init(&draft, comp, HLO_OP_REDUCE_WINDOW, 2, operands);
  draft.window = hlo_arena_memdup(arena_of(comp), window, sizeof *window);
  set_called(comp, &draft, 1, &reducer);
  return commit(comp, &draft, diag);
}

hlo_instr *hlo_build_select_and_scatter(hlo_comp *comp, hlo_instr *operand, hlo_instr *source, hlo_instr *init,
                                       const hlo_window *window, hlo_comp *select, hlo_comp *scatter, hlo_diag *diag) {
  hlo_instr *operands[3] = {operand, source, init};
  hlo_comp *called[2] = {select, scatter};
  hlo_instr draft;
  draft_init(&draft, comp, HLO_OP_SELECT_AND_SCATTER, 3, operands);
  draft.window = hlo_arena_memdup(arena_of(comp), window, sizeof *window);
  set_called(comp, &draft, 2, called);
  return commit(comp, &draft, diag);
}

hlo_instr *hlo_build_gather(hlo_comp *comp, hlo_instr *operand, hlo_instr *indices, const hlo_gather_dims *dims,
                            const int64_t *slice_sizes, hlo_diag *diag) {
  hlo_instr *operands[2] = {operand, indices};
  hlo_instr draft;
  draft_init(&draft, comp, HLO_OP_GATHER, 2, operands);
  hlo_gather_dims *g = hlo_arena_alloc(arena_of(comp), sizeof *g);
  if (!g) return out_of_memory(comp, &draft, diag);
  *g = *dims;
  g->offset_dims = ints_copy(comp, &dims->offset_dims);
  g->collapsed_slice_dims = ints_copy(comp, &dims->collapsed_slice_dims);
  g->start_index_map = ints_copy(comp, &dims->start_index_map);
  g->operand_batching_dims = ints_copy(comp, &dims->operand_batching_dims);
  g->start_indices_batching_dims = ints_copy(comp, &dims->start_indices_batching_dims);
  draft.gather = g;
  draft.gather_slice_sizes = ints(comp, operand_rank(operand), slice_sizes);
  return commit(comp, &draft, diag);
}

hlo_instr *hlo_build_scatter(hlo_comp *comp, hlo_instr *operand, hlo_instr *indices, hlo_instr *updates,
                             const hlo_scatter_dims *dims, hlo_comp *combiner, hlo_diag *diag) {
  hlo_instr *operands[3] = {operand, indices, updates};
  hlo_instr draft;
  draft_init(&draft, comp, HLO_OP_SCATTER, 3, operands);
  hlo_scatter_dims *s = hlo_arena_alloc(arena_of(comp), sizeof *s);
  if (!s) return out_of_memory(comp, &draft, diag);
  *s = *dims;
  s->update_window_dims = ints_copy(comp, &dims->update_window_dims);
  s->inserted_window_dims = ints_copy(comp, &dims->inserted_window_dims);
  s->scatter_dims_to_operand_dims = ints_copy(comp, &dims->scatter_dims_to_operand_dims);
  s->input_batching_dims = ints_copy(comp, &dims->input_batching_dims);
  s->scatter_indices_batching_dims = ints_copy(comp, &dims->scatter_indices_batching_dims);
  draft.scatter = s;
  set_called(comp, &draft, 1, &combiner);
  return commit(comp, &draft, diag);
}

/* ---- tuples and calls ---- */

hlo_instr *hlo_build_tuple(hlo_comp *comp, int count, hlo_instr *const *elements, hlo_diag *diag) {
  hlo_instr draft;
  draft_init(&draft, comp, HLO_OP_TUPLE, count, elements);
  return commit(comp, &draft, diag);
}

hlo_instr *hlo_build_get_dimension_size(hlo_comp *comp, hlo_instr *x, int64_t dimension, hlo_diag *diag) {
  hlo_instr draft;
  draft_init(&draft, comp, HLO_OP_GET_DIMENSION_SIZE, 1, &x);
  draft.index = dimension; /* in both, as the parser keeps it (ir.h) */
  draft.dimensions = ints(comp, 1, &dimension);
  return commit(comp, &draft, diag);
}

hlo_instr *hlo_build_gte(hlo_comp *comp, hlo_instr *tuple, int64_t index, hlo_diag *diag) {
  hlo_instr draft;
  draft_init(&draft, comp, HLO_OP_GET_TUPLE_ELEMENT, 1, &tuple);
  draft.index = index;
  return commit(comp, &draft, diag);
}

hlo_instr *hlo_build_call(hlo_comp *comp, hlo_comp *callee, int count, hlo_instr *const *operands,
                          hlo_diag *diag) {
  if (!callee || callee == comp || callee->module != comp->module) {
    hlo_diag_set(diag, HLO_ERR_INPUT, "call: the callee must be another computation of the module");
    return NULL;
  }
  hlo_instr draft;
  draft_init(&draft, comp, HLO_OP_CALL, count, operands);
  set_called(comp, &draft, 1, &callee);
  return commit(comp, &draft, diag);
}

/* The sum (or other reduction, by reducer) of x over every replica: replica_groups={}, no
 * channel; the module says how many replicas there are (hlo_module_set_attr). */
hlo_instr *hlo_build_all_reduce(hlo_comp *comp, hlo_instr *x, hlo_comp *reducer, hlo_diag *diag) {
  hlo_instr draft;
  draft_init(&draft, comp, HLO_OP_ALL_REDUCE, 1, &x);
  set_called(comp, &draft, 1, &reducer);
  draft.raw_attrs = hlo_arena_alloc(arena_of(comp), sizeof *draft.raw_attrs);
  if (draft.raw_attrs) {
    draft.raw_attrs[0] = (hlo_raw_attr){hlo_arena_strdup(arena_of(comp), "replica_groups"),
                                        hlo_arena_strdup(arena_of(comp), "{}")};
    draft.raw_attr_count = 1;
  }
  return commit(comp, &draft, diag);
}

/* ---- reducers ---- */

/* Moves comp to the front of the module: it calls nothing, so it may precede anything. */
static void move_first(hlo_module *module, hlo_comp *comp) {
  for (int i = comp->id; i > 0; i--) {
    module->comps[i] = module->comps[i - 1];
    module->comps[i]->id = i;
  }
  module->comps[0] = comp;
  comp->id = 0;
}

hlo_opcode hlo_simple_reducer(const hlo_comp *comp) {
  if (!comp || comp->param_count != 2 || !comp->root) return HLO_OP_COUNT;
  const hlo_instr *root = comp->root, *p0 = comp->params[0], *p1 = comp->params[1];
  switch (root->opcode) {
    case HLO_OP_ADD: case HLO_OP_MULTIPLY: case HLO_OP_MAXIMUM: case HLO_OP_MINIMUM:
    case HLO_OP_AND: case HLO_OP_OR:
      break;
    default:
      return HLO_OP_COUNT;
  }
  if (root->operand_count != 2 || !p0 || !p1) return HLO_OP_COUNT;
  const hlo_instr *a = root->operands[0], *b = root->operands[1];
  if (!((a == p0 && b == p1) || (a == p1 && b == p0))) return HLO_OP_COUNT;
  if (p0->shape.rank != 0 || p1->shape.rank != 0 || root->shape.rank != 0) return HLO_OP_COUNT;
  if (p0->shape.dtype != p1->shape.dtype || root->shape.dtype != p0->shape.dtype) return HLO_OP_COUNT;
  if (!hlo_dtype_is_computable(root->shape.dtype)) return HLO_OP_COUNT;
  /* and/or are bitwise: not defined on floats */
  if ((root->opcode == HLO_OP_AND || root->opcode == HLO_OP_OR) && hlo_dtype_is_float(root->shape.dtype))
    return HLO_OP_COUNT;
  return root->opcode;
}

/* A new computation named after base with two scalar parameters of dtype, (lhs, rhs) in *x
 * and *y (NULL where one could not be made); NULL when the computation could not be
 * (module->arena.failed says why). */
static hlo_comp *scalar_params(hlo_module *module, const char *base, hlo_dtype dtype, hlo_instr **x,
                               hlo_instr **y, hlo_diag *diag) {
  const char *name = fresh_name(module, base);
  hlo_comp *comp = name ? hlo_module_add_comp(module, name) : NULL;
  if (!comp) return NULL;
  hlo_shape scalar = hlo_shape_scalar(dtype);
  *x = hlo_build_parameter(comp, 0, &scalar, fresh_name(module, "lhs"), diag);
  *y = hlo_build_parameter(comp, 1, &scalar, fresh_name(module, "rhs"), diag);
  return comp;
}

/* comp, just made by scalar_params, finished with result as its root and moved to the
 * front; without a result (e.g. and on f32) the half-built computation is taken back out. */
static hlo_comp *scalar_root(hlo_module *module, hlo_comp *comp, hlo_instr *result) {
  if (!result) {
    free(comp->instrs);
    free(comp->params);
    module->comp_count--;
    return NULL;
  }
  comp->root = result;
  move_first(module, comp);
  return comp;
}

hlo_comp *hlo_build_scalar_reducer(hlo_module *module, hlo_opcode op, hlo_dtype dtype) {
  if (!hlo_opcode_is_elementwise_binary(op) || op == HLO_OP_COMPARE || !hlo_dtype_is_array(dtype)) return NULL;
  char base[64];
  snprintf(base, sizeof base, "%s_%s", hlo_opcode_name(op), hlo_dtype_name(dtype));
  hlo_instr *x, *y;
  hlo_diag diag = {HLO_OK, ""};
  hlo_comp *comp = scalar_params(module, base, dtype, &x, &y, &diag);
  return comp ? scalar_root(module, comp, x && y ? hlo_build_binary(comp, op, x, y, &diag) : NULL) : NULL;
}

/* comp is (x, y) -> compare(x, y), direction dir, over scalars of dtype. */
static bool is_scalar_compare(const hlo_comp *comp, hlo_direction dir, hlo_dtype dtype) {
  const hlo_instr *root = comp->root;
  return !comp->is_entry && comp->instr_count == 3 && comp->param_count == 2 && root &&
         root->opcode == HLO_OP_COMPARE && root->direction == dir && root->compare_type == HLO_CMP_DEFAULT &&
         root->operand_count == 2 && root->operands[0] == comp->params[0] && root->operands[1] == comp->params[1] &&
         comp->params[0]->shape.dtype == dtype && comp->params[0]->shape.rank == 0 &&
         comp->params[1]->shape.dtype == dtype && comp->params[1]->shape.rank == 0;
}

hlo_comp *hlo_shared_scalar_compare(hlo_module *module, hlo_direction dir, hlo_dtype dtype) {
  for (int c = 0; c < module->comp_count; c++) {
    const hlo_comp *comp = module->comps[c];
    if (comp->instr_count != 3) break; /* made ones are moved to the front */
    if (is_scalar_compare(comp, dir, dtype)) return module->comps[c];
  }
  if (!hlo_dtype_is_array(dtype) || dtype == HLO_PRED) return NULL;
  char base[64];
  static const char *const names[] = {"", "eq", "ne", "lt", "le", "gt", "ge"};
  snprintf(base, sizeof base, "%s_%s", dir >= 1 && dir <= 6 ? names[dir] : "compare", hlo_dtype_name(dtype));
  hlo_instr *x, *y;
  hlo_diag diag = {HLO_OK, ""};
  hlo_comp *comp = scalar_params(module, base, dtype, &x, &y, &diag);
  return comp ? scalar_root(module, comp, x && y ? hlo_build_compare(comp, dir, x, y, &diag) : NULL) : NULL;
}

/* comp is (x, y) -> op(x, y) over scalars of dtype, as hlo_build_scalar_reducer makes it. */
static bool is_scalar_reducer(const hlo_comp *comp, hlo_opcode op, hlo_dtype dtype) {
  const hlo_instr *root = comp->root;
  return !comp->is_entry && comp->instr_count == 3 && comp->param_count == 2 && root && root->opcode == op &&
         root->operand_count == 2 && root->operands[0] == comp->params[0] && root->operands[1] == comp->params[1] &&
         root->shape.dtype == dtype && root->shape.rank == 0 && comp->params[0]->shape.dtype == dtype &&
         comp->params[0]->shape.rank == 0 && comp->params[1]->shape.dtype == dtype && comp->params[1]->shape.rank == 0;
}

hlo_comp *hlo_shared_scalar_reducer(hlo_module *module, hlo_opcode op, hlo_dtype dtype) {
  /* reducers are moved to the front as they are made */
  for (int c = 0; c < module->comp_count; c++) {
    const hlo_comp *comp = module->comps[c];
    if (comp->instr_count != 3) break;
    if (is_scalar_reducer(comp, op, dtype)) return module->comps[c];
  }
  return hlo_build_scalar_reducer(module, op, dtype);
}
