/* Binding a compiled cpu graph to other sizes (rt_backend.bind): the optimized entry is
 * copied with every instruction's shape, and its slices' starts and limits, taken from the
 * instruction it came from (hlo_instr.origin) in the binding's module. What the passes
 * decided is kept, so each decision that depended on sizes is checked again here:
 *   - the binding is the compiled graph at other sizes: same computations, instruction
 *     counts, opcodes, operands and attributes other than sizes (check_same_graph);
 *   - an operand the passes swapped for another instruction of the same shape (a no-op
 *     reshape or slice removed, two instructions merged) still has the replaced one's shape
 *     (check_replacements);
 *   - computations the entry still calls (reducers) keep their shapes (check_callees);
 *   - a transpose the passes made a reshape (it moved only size-1 dims) still moves only
 *     size-1 dims (check_bitcasts);
 *   - every shape is what inference gives from its operands (hlo_verify_some_shapes: those
 *     of instructions whose shape, operand shapes or slice bounds moved; the rest infer as
 *     they did when the compiled module was verified).
 * Called computations, literals and attribute structs are shared with the compiled module,
 * which must outlive the bound one. */
#include <stdlib.h>
#include <string.h>

#include "exec_internal.h"
#include "hlo/hlo.h"

/* Every instruction of module by position (origin - 1). */
static const hlo_instr **flatten(const hlo_module *module, int32_t *count) {
  int32_t n = 0;
  for (int c = 0; c < module->comp_count; c++) n += module->comps[c]->instr_count;
  const hlo_instr **all = hlo_malloc(sizeof *all * ((size_t)n + 1));
  if (!all) return NULL;
  n = 0;
  for (int c = 0; c < module->comp_count; c++)
    for (int i = 0; i < module->comps[c]->instr_count; i++) all[n++] = module->comps[c]->instrs[i];
  *count = n;
  return all;
}

/* A pass-made instruction has no counterpart in the binding: it keeps its shape, but a pad
 * or transpose of a value whose shape moved takes what inference gives, and a reshape
 * whose leading dim was its operand's (the batch, as space-to-depth's reshapes keep it)
 * takes the operand's new one. The checks after (hlo_verify_some_shapes) refuse whatever
 * this leaves inconsistent. */
static void follow_operand(hlo_arena *arena, const hlo_instr *src, hlo_instr *copy) {
  if (src->operand_count < 1 || hlo_shape_equal(&src->operands[0]->shape, &copy->operands[0]->shape)) return;
  const hlo_shape *from = &src->operands[0]->shape, *to = &copy->operands[0]->shape;
  if (src->opcode == HLO_OP_RESHAPE && from->rank >= 1 && to->rank == from->rank && src->shape.rank >= 1 &&
      src->shape.dims[0] == from->dims[0]) {
    copy->shape = hlo_shape_clone(arena, &src->shape);
    copy->shape.dims[0] = to->dims[0];
    return;
  }
  if (src->opcode != HLO_OP_PAD && src->opcode != HLO_OP_TRANSPOSE) return;
  hlo_diag diag;
  hlo_shape inferred;
  if (hlo_infer_shape(copy, &inferred, arena, &diag) == HLO_OK) copy->shape = inferred;
}

/* Every refusal is HLO_ERR_UNSUPPORTED: the caller compiles the binding instead. */
#define REFUSE(diag, ...) hlo_diag_set((diag), HLO_ERR_UNSUPPORTED, "cannot bind: " __VA_ARGS__)

static bool same_operands(const hlo_instr *a, const hlo_instr *b) {
  for (int k = 0; k < a->operand_count; k++)
    if (a->operands[k]->id != b->operands[k]->id || a->operands[k]->parent->id != b->operands[k]->parent->id)
      return false;
  return true;
}

static hlo_status check_same_graph(const hlo_module *source, const hlo_module *binding, hlo_diag *diag) {
  if (!source->entry || !binding->entry) return REFUSE(diag, "a module without an entry");
  if (source->comp_count != binding->comp_count || source->entry->id != binding->entry->id)
    return REFUSE(diag, "%s has other computations than the compiled %s", binding->name, source->name);
  for (int c = 0; c < source->comp_count; c++) {
    const hlo_comp *s = source->comps[c], *b = binding->comps[c];
    if (s->instr_count != b->instr_count || s->param_count != b->param_count || !s->root || !b->root ||
        s->root->id != b->root->id)
      return REFUSE(diag, "computation %s is not the compiled one's structure", b->name);
    for (int i = 0; i < s->instr_count; i++) {
      const hlo_instr *x = s->instrs[i], *y = b->instrs[i];
      const char *which = NULL;
      if (!hlo_instr_same_attrs(x, y, false, &which))
        return REFUSE(diag, "instruction %%%s differs from the compiled graph in its %s", y->name, which);
      if (!same_operands(x, y))
        return REFUSE(diag, "instruction %%%s has other operands than in the compiled graph", y->name);
    }
  }
  return HLO_OK;
}

bool rt_cpu_same_graph(const hlo_module *a, const hlo_module *b) {
  hlo_diag diag;
  return check_same_graph(a, b, &diag) == HLO_OK;
}

/* The entry of optimized, rebuilt in bound's arena at the binding's sizes; NULL when memory
 * runs out. */
static hlo_comp *copy_entry(hlo_module *bound, const hlo_comp *entry, const hlo_instr **at_binding,
                            int32_t binding_count) {
  hlo_arena *arena = &bound->arena;
  hlo_comp *comp = hlo_arena_alloc(arena, sizeof *comp);
  hlo_instr **copies = hlo_malloc(sizeof *copies * ((size_t)entry->instr_count + 1));
  hlo_instr **params = hlo_malloc(sizeof *params * ((size_t)entry->param_count + 1));
  if (!comp || !copies || !params) {
    free(copies);
    free(params);
    return NULL;
  }
  *comp = *entry;
  comp->module = bound;
  comp->instrs = copies;
  comp->instr_capacity = entry->instr_count;
  comp->params = params;
  for (int i = 0; i < entry->instr_count; i++) {
    const hlo_instr *src = entry->instrs[i];
    hlo_instr *copy = copies[i] = hlo_arena_alloc_unzeroed(arena, sizeof *copy); /* written whole below */
    hlo_instr **operands = hlo_arena_alloc(arena, sizeof(hlo_instr *) * ((size_t)src->operand_count + 1));
    if (!copy || !operands) break; /* arena->failed: reported below */
    *copy = *src;
    copy->parent = comp;
    copy->operands = operands;
    for (int k = 0; k < src->operand_count; k++) copy->operands[k] = copies[src->operands[k]->id];
    if (src->origin < 1 || src->origin > binding_count) { /* made by a pass */
      follow_operand(arena, src, copy);
      continue;
    }
    const hlo_instr *origin = at_binding[src->origin - 1];
    copy->shape = hlo_shape_clone(arena, &origin->shape);
    if (src->opcode == HLO_OP_SLICE && origin->opcode == HLO_OP_SLICE) {
      copy->slice_starts = hlo_ints_copy(arena, origin->slice_starts.count, origin->slice_starts.values);
      copy->slice_limits = hlo_ints_copy(arena, origin->slice_limits.count, origin->slice_limits.values);
    }
  }
  if (arena->failed) { /* a copy, shape or slice bound is missing */
    free(copies);
    free(params);
    return NULL;
  }
  for (int p = 0; p < entry->param_count; p++) params[p] = entry->params[p] ? copies[entry->params[p]->id] : NULL;
  comp->root = copies[entry->root->id];
  return comp;
}

/* A pass that pointed a user at another instruction of the same shape (simplify's no-op
 * removals, CSE) decided so at the compiled sizes: at the binding's, the replacement must
 * still have the shape of what it replaced, or the user reads something else. Rewrites
 * that changed the operand's shape on purpose (reshape of reshape, transposes folded) hold
 * at every size and are told apart by that: the shapes differed at compile time too. */
static hlo_status check_replacements(const hlo_comp *bound_entry, const hlo_comp *optimized_entry,
                                     const hlo_instr **at_source, const hlo_instr **at_binding, int32_t count,
                                     hlo_diag *diag) {
  for (int i = 0; i < optimized_entry->instr_count; i++) {
    const hlo_instr *compiled = optimized_entry->instrs[i], *bound = bound_entry->instrs[i];
    if (compiled->origin < 1 || compiled->origin > count) continue;
    const hlo_instr *source = at_source[compiled->origin - 1], *binding = at_binding[compiled->origin - 1];
    if (compiled->opcode != source->opcode || compiled->operand_count != source->operand_count) continue;
    for (int k = 0; k < compiled->operand_count; k++) {
      if (compiled->operands[k]->origin == source->operands[k]->origin) continue; /* not replaced */
      if (!hlo_shape_equal(&compiled->operands[k]->shape, &source->operands[k]->shape)) continue;
      if (hlo_shape_equal(&bound->operands[k]->shape, &binding->operands[k]->shape)) continue;
      return REFUSE(diag,
                          "the passes gave %%%s the operand %%%s in place of %%%s, which is the same "
                          "only at the compiled sizes (%s here, against %s)",
                          bound->name, bound->operands[k]->name, binding->operands[k]->name,
                          hlo_shape_text(&bound->operands[k]->shape).s, hlo_shape_text(&binding->operands[k]->shape).s);
    }
  }
  return HLO_OK;
}

static hlo_status check_bitcasts(const hlo_instr **at_source, const hlo_instr **at_binding, int32_t count,
                                 hlo_diag *diag) {
  for (int32_t i = 0; i < count; i++)
    if (at_source[i]->opcode == HLO_OP_TRANSPOSE && hlo_transpose_is_bitcast(at_source[i]) &&
        !hlo_transpose_is_bitcast(at_binding[i]))
      return REFUSE(diag, "the transpose %%%s moves only size-1 dims at the compiled sizes, not at these",
                    at_binding[i]->name);
  return HLO_OK;
}

/* moved[i]: bound instruction i has a shape, an operand shape or slice bounds other than the
 * compiled one's, so its shape must be inferred again. */
static bool *moved_instructions(const hlo_comp *bound, const hlo_comp *compiled) {
  bool *moved = hlo_calloc((size_t)bound->instr_count + 1, sizeof(bool));
  for (int i = 0; moved && i < bound->instr_count; i++) {
    const hlo_instr *b = bound->instrs[i], *c = compiled->instrs[i];
    bool m = !hlo_shape_equal(&b->shape, &c->shape);
    for (int k = 0; !m && k < b->operand_count; k++) m = !hlo_shape_equal(&b->operands[k]->shape, &c->operands[k]->shape);
    if (!m && b->opcode == HLO_OP_SLICE)
      m = !hlo_ints_equal(&b->slice_starts, &c->slice_starts) || !hlo_ints_equal(&b->slice_limits, &c->slice_limits);
    moved[i] = m;
  }
  return moved;
}

static void mark_called(const hlo_comp *comp, bool *called) {
  for (int i = 0; i < comp->instr_count; i++)
    for (int c = 0; c < comp->instrs[i]->called_count; c++) {
      const hlo_comp *callee = comp->instrs[i]->called[c];
      if (called[callee->id]) continue;
      called[callee->id] = true;
      mark_called(callee, called);
    }
}

/* Computations the entry still calls run as compiled: their shapes must not move. (Those
 * the passes inlined may: their copies in the entry were rebound.) */
static hlo_status check_callees(const hlo_module *bound, const hlo_instr **at_binding, int32_t count,
                                hlo_diag *diag) {
  bool *called = hlo_calloc((size_t)bound->comp_count + 1, sizeof(bool));
  if (!called) return hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory binding");
  mark_called(bound->entry, called);
  hlo_status status = HLO_OK;
  for (int c = 0; c < bound->comp_count && status == HLO_OK; c++) {
    const hlo_comp *comp = bound->comps[c];
    for (int i = 0; called[c] && i < comp->instr_count && status == HLO_OK; i++) {
      const hlo_instr *instr = comp->instrs[i];
      if (instr->origin >= 1 && instr->origin <= count && !hlo_shape_equal(&instr->shape, &at_binding[instr->origin - 1]->shape))
        status = REFUSE(diag, "computation %s, called by the graph, has other shapes at these sizes", comp->name);
    }
  }
  free(called);
  return status;
}

static hlo_status check_signature(const hlo_comp *bound_entry, const hlo_comp *binding_entry, hlo_diag *diag) {
  if (!hlo_shape_equal(&bound_entry->root->shape, &binding_entry->root->shape))
    return REFUSE(diag, "the result of %s would be %s", binding_entry->name, hlo_shape_text(&bound_entry->root->shape).s);
  for (int p = 0; p < binding_entry->param_count; p++)
    if (!bound_entry->params[p] || !hlo_shape_equal(&bound_entry->params[p]->shape, &binding_entry->params[p]->shape))
      return REFUSE(diag, "parameter %s of %s changed", binding_entry->params[p]->name, binding_entry->name);
  return HLO_OK;
}

void rt_cpu_bound_module_free(hlo_module *bound) {
  if (!bound) return;
  if (bound->entry) {
    free(bound->entry->instrs);
    free(bound->entry->params);
  }
  free(bound->comps);
  hlo_arena_free(&bound->arena);
  free(bound);
}

hlo_module *rt_cpu_bind_module(const hlo_module *source, const hlo_module *optimized, const hlo_module *binding,
                               hlo_diag *diag) {
  if (!source || !optimized || !binding || !binding->entry || !source->entry) {
    REFUSE(diag, "this executable keeps no graph to bind");
    return NULL;
  }
  if (check_same_graph(source, binding, diag) != HLO_OK) return NULL;
  int32_t count = 0, source_count = 0;
  const hlo_instr **at_binding = flatten(binding, &count), **at_source = flatten(source, &source_count);
  hlo_module *bound = hlo_module_new(optimized->name);
  hlo_comp **comps = bound ? hlo_malloc(sizeof *comps * ((size_t)optimized->comp_count + 1)) : NULL;
  hlo_status status = at_binding && at_source && comps ? HLO_OK : hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory binding");
  if (status == HLO_OK) {
    bound->comps = comps;
    bound->comp_count = bound->comp_capacity = optimized->comp_count;
    bound->raw_attr_count = optimized->raw_attr_count;
    bound->raw_attrs = optimized->raw_attrs;
    memcpy(comps, optimized->comps, sizeof *comps * (size_t)optimized->comp_count);
    bound->entry = copy_entry(bound, optimized->entry, at_binding, count);
    if (!bound->entry) status = hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory binding");
    else comps[bound->entry->id] = bound->entry;
  } else {
    free(comps);
    comps = NULL;
  }
  if (status == HLO_OK) status = check_signature(bound->entry, binding->entry, diag);
  if (status == HLO_OK) status = check_callees(bound, at_binding, count, diag);
  if (status == HLO_OK) status = check_bitcasts(at_source, at_binding, count, diag);
  if (status == HLO_OK)
    status = check_replacements(bound->entry, optimized->entry, at_source, at_binding, count, diag);
  bool *moved = status == HLO_OK ? moved_instructions(bound->entry, optimized->entry) : NULL;
  if (status == HLO_OK && !moved) status = hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory binding");
  if (status == HLO_OK && hlo_verify_some_shapes(bound->entry, moved, diag) != HLO_OK) {
    char why[sizeof diag->message];
    memcpy(why, diag->message, sizeof why);
    status = REFUSE(diag, "%s", why);
  }
  free(moved);
  free(at_binding);
  free(at_source);
  if (status != HLO_OK) {
    rt_cpu_bound_module_free(bound);
    return NULL;
  }
  return bound;
}
