/* Building candidates from plans (candidate.h). The module is cloned and edited in place:
 * an instruction turned into a parameter or constant keeps its name and shape, so its users
 * need no rewiring, and the instruction order (operands first) stays valid. */
#include "minify_internal.h"

#include <stdlib.h>
#include <string.h>

#include "hlo/hlo.h"

void min_plan_live(const hlo_module *module, const min_plan *plan, bool *live) {
  const hlo_comp *entry = module->entry;
  int n = entry->instr_count;
  memset(live, 0, (size_t)n * sizeof *live);
  if (plan->outputs)
    for (int i = 0; i < plan->output_count; i++) live[plan->outputs[i]] = true;
  else
    live[entry->root->id] = true;
  /* Users come after their operands, so one backward sweep finds everything reachable. */
  for (int i = n - 1; i >= 0; i--) {
    if (!live[i] || plan->disp[i] != MIN_KEEP) continue;
    const hlo_instr *instr = entry->instrs[i];
    for (int k = 0; k < instr->operand_count; k++) live[instr->operands[k]->id] = true;
  }
}

bool min_is_leaf(const hlo_instr *instr) {
  return instr->opcode == HLO_OP_PARAMETER || instr->opcode == HLO_OP_CONSTANT;
}

int min_count_ops(const hlo_module *module) {
  int ops = 0;
  for (int i = 0; i < module->entry->instr_count; i++) {
    hlo_opcode op = module->entry->instrs[i]->opcode;
    ops += op != HLO_OP_PARAMETER && op != HLO_OP_CONSTANT;
  }
  return ops;
}

/* Turns instr into a bare leaf of the same name and shape. */
static void make_leaf(hlo_instr *instr, hlo_opcode opcode) {
  hlo_instr leaf = {0};
  leaf.opcode = opcode;
  leaf.name = instr->name;
  leaf.shape = instr->shape;
  leaf.parent = instr->parent;
  leaf.id = instr->id;
  leaf.feature_group_count = 1;
  leaf.batch_group_count = 1;
  *instr = leaf;
}

static bool make_constant(hlo_module *module, hlo_instr *instr, const rt_value *value) {
  if (!value || value->shape.dtype != instr->shape.dtype || hlo_shape_is_dynamic(&instr->shape) ||
      value->count != hlo_shape_elements(&instr->shape))
    return false;
  hlo_literal *literal = hlo_arena_alloc(&module->arena, sizeof *literal);
  void *data = hlo_arena_memdup(&module->arena, value->data, (size_t)hlo_shape_bytes(&value->shape));
  if (!literal || !data) return false; /* module->arena.failed says why */
  literal->shape = instr->shape;
  literal->data = data;
  make_leaf(instr, HLO_OP_CONSTANT);
  instr->literal = literal;
  return true;
}

/* Marks the computations reachable from comp. */
static void mark_called(const hlo_comp *comp, bool *reached) {
  if (reached[comp->id]) return;
  reached[comp->id] = true;
  for (int i = 0; i < comp->instr_count; i++)
    for (int k = 0; k < comp->instrs[i]->called_count; k++) mark_called(comp->instrs[i]->called[k], reached);
}

static void drop_unused_comps(hlo_module *module) {
  bool *reached = hlo_calloc((size_t)module->comp_count + 1, sizeof *reached);
  if (!reached) return; /* keeping them is harmless */
  mark_called(module->entry, reached);
  int kept = 0;
  for (int c = 0; c < module->comp_count; c++) {
    hlo_comp *comp = module->comps[c];
    if (!reached[c]) {
      free(comp->instrs); /* the module frees these arrays only for computations it lists */
      free(comp->params);
      continue;
    }
    comp->id = kept;
    module->comps[kept++] = comp;
  }
  module->comp_count = kept;
  free(reached);
}

/* Header attributes that name parameters by number would be wrong once they are renumbered. */
static void drop_param_attrs(hlo_module *module) {
  int kept = 0;
  for (int i = 0; i < module->raw_attr_count; i++) {
    const char *name = module->raw_attrs[i].name;
    if (strcmp(name, "input_output_alias") == 0 || strcmp(name, "buffer_donor") == 0) continue;
    module->raw_attrs[kept++] = module->raw_attrs[i];
  }
  module->raw_attr_count = kept;
}

/* Applies the plan to copy, whose entry instructions match the original's by index. */
static bool apply(hlo_module *copy, const hlo_module *module, rt_value *const *inputs, rt_value *const *values,
                  const min_plan *plan, const bool *live, rt_value **new_inputs, int *new_count, hlo_diag *diag) {
  hlo_comp *entry = copy->entry;
  int n = entry->instr_count;
  hlo_instr **instrs = hlo_malloc(sizeof(hlo_instr *) * (size_t)(n + 1));
  hlo_instr **old_params = hlo_calloc((size_t)entry->param_count + 1, sizeof(hlo_instr *));
  if (!instrs || !old_params) {
    free(instrs);
    free(old_params);
    hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory");
    return false;
  }
  memcpy(instrs, entry->instrs, sizeof(hlo_instr *) * (size_t)n);
  int count = 0, params = 0;
  bool ok = true;
  /* Kept parameters first, in their old order, so their inputs keep their places. */
  for (int i = 0; i < n; i++)
    if (live[i] && plan->disp[i] == MIN_KEEP && instrs[i]->opcode == HLO_OP_PARAMETER)
      old_params[instrs[i]->parameter_number] = instrs[i];
  entry->param_count = 0;
  for (int p = 0; p < module->entry->param_count; p++) {
    if (!old_params[p]) continue;
    new_inputs[params] = inputs ? rt_value_retain(inputs[p]) : NULL;
    old_params[p]->parameter_number = params++;
    ok = hlo_comp_set_param(entry, old_params[p]) && ok;
  }
  for (int i = 0; i < n && ok; i++) {
    if (!live[i]) continue;
    hlo_instr *instr = instrs[i];
    if (plan->disp[i] == MIN_TO_PARAM && instr->opcode != HLO_OP_PARAMETER) {
      ok = !values || values[i] != NULL;
      if (!ok) break;
      make_leaf(instr, HLO_OP_PARAMETER);
      instr->parameter_number = params;
      new_inputs[params++] = values ? rt_value_retain(values[i]) : NULL;
      ok = hlo_comp_set_param(entry, instr);
    } else if (plan->disp[i] == MIN_TO_CONST && instr->opcode != HLO_OP_CONSTANT) {
      ok = values && make_constant(copy, instr, values[i]);
    }
    instr->id = count;
    entry->instrs[count++] = instr;
  }
  *new_count = params;
  free(instrs);
  free(old_params);
  if (!ok) {
    if (copy->arena.failed) hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory building a candidate");
    else hlo_diag_set(diag, HLO_ERR_INTERNAL, "a promoted instruction has no usable reference value");
    return false;
  }
  entry->instr_count = count;
  return true;
}

hlo_module *min_build(const hlo_module *module, rt_value *const *inputs, rt_value *const *values,
                      const min_plan *plan, rt_value ***new_inputs, int *new_input_count, hlo_diag *diag) {
  int n = module->entry->instr_count;
  *new_inputs = NULL;
  *new_input_count = 0;
  hlo_module *copy = hlo_module_clone(module, diag);
  if (!copy) return NULL;
  bool *live = hlo_calloc((size_t)n + 1, sizeof *live);
  hlo_instr **by_id = hlo_malloc(sizeof(hlo_instr *) * (size_t)(n + 1));
  rt_value **in = hlo_calloc((size_t)n + 1, sizeof *in);
  bool ok = live && by_id && in && copy->entry->instr_count == n;
  for (int i = 0; ok && i < n; i++) {
    by_id[i] = copy->entry->instrs[i];
    ok = strcmp(by_id[i]->name, module->entry->instrs[i]->name) == 0;
  }
  if (!ok) hlo_diag_set(diag, HLO_ERR_INTERNAL, "a clone of module %s does not match it", module->name);
  int in_count = 0;
  if (ok) {
    min_plan_live(module, plan, live);
    ok = apply(copy, module, inputs, values, plan, live, in, &in_count, diag);
  }
  if (ok) {
    hlo_comp *entry = copy->entry;
    if (!plan->outputs) {
      entry->root = by_id[module->entry->root->id];
    } else if (plan->output_count == 1) {
      entry->root = by_id[plan->outputs[0]];
    } else {
      hlo_instr **elements = hlo_malloc(sizeof(hlo_instr *) * (size_t)(plan->output_count + 1));
      ok = elements != NULL;
      for (int i = 0; ok && i < plan->output_count; i++) elements[i] = by_id[plan->outputs[i]];
      hlo_instr *tuple = ok ? hlo_build_tuple(entry, plan->output_count, elements, diag) : NULL;
      free(elements);
      ok = tuple != NULL;
      if (ok) entry->root = tuple;
    }
  }
  if (ok) {
    drop_unused_comps(copy);
    drop_param_attrs(copy);
    ok = hlo_verify_module(copy, diag) == HLO_OK;
  }
  hlo_module *result = NULL;
  if (ok) result = hlo_module_clone(copy, diag); /* a clean arena, without the cut instructions */
  hlo_module_free(copy);
  free(live);
  free(by_id);
  if (!result) {
    for (int i = 0; i < in_count; i++) rt_value_release(in[i]);
    free(in);
    return NULL;
  }
  *new_inputs = in;
  *new_input_count = in_count;
  return result;
}
