/* The IR's containers: opcode names, modules that own computations that own instructions,
 * topological sorts of both, and small attribute helpers. Out of memory leaves the module's
 * arena failed flag set (growing a table sets it too) and returns NULL or false; the
 * caller with a status reports it through hlo_module_check_memory. */
#include "hlo.h"

#include <stdlib.h>
#include <string.h>

static const char *const opcode_names[HLO_OP_COUNT] = {
#define OP(id, text) [HLO_OP_##id] = text,
#include "opcode.def"
#undef OP
};

const char *hlo_opcode_name(hlo_opcode opcode) {
  if (opcode < 0 || opcode >= HLO_OP_COUNT) return "invalid";
  return opcode_names[opcode];
}

hlo_opcode hlo_opcode_from_name(const char *name, size_t len) {
  /* Names are sorted in opcode.def, so a binary search works. */
  int low = 0, high = HLO_OP_COUNT - 1;
  while (low <= high) {
    int mid = (low + high) / 2;
    const char *candidate = opcode_names[mid];
    size_t candidate_len = strlen(candidate);
    size_t common = candidate_len < len ? candidate_len : len;
    int order = memcmp(candidate, name, common);
    if (order == 0) order = candidate_len < len ? -1 : candidate_len > len ? 1 : 0;
    if (order == 0) return (hlo_opcode)mid;
    if (order < 0) low = mid + 1; else high = mid - 1;
  }
  return HLO_OP_COUNT;
}

bool hlo_opcode_is_elementwise_unary(hlo_opcode opcode) {
  switch (opcode) {
    case HLO_OP_ABS: case HLO_OP_ACOS: case HLO_OP_ACOSH: case HLO_OP_ASIN: case HLO_OP_ASINH:
    case HLO_OP_ATAN: case HLO_OP_ATANH: case HLO_OP_CBRT: case HLO_OP_CEIL: case HLO_OP_CLZ:
    case HLO_OP_COS: case HLO_OP_COSH: case HLO_OP_ERF: case HLO_OP_EXP: case HLO_OP_EXPM1:
    case HLO_OP_FLOOR: case HLO_OP_IMAG: case HLO_OP_IS_FINITE: case HLO_OP_LOG:
    case HLO_OP_LOG1P: case HLO_OP_LOGISTIC: case HLO_OP_NEGATE: case HLO_OP_NOT:
    case HLO_OP_POPCNT: case HLO_OP_REAL: case HLO_OP_ROUND_NEAREST_AFZ:
    case HLO_OP_ROUND_NEAREST_EVEN: case HLO_OP_RSQRT: case HLO_OP_SIGN: case HLO_OP_SIN:
    case HLO_OP_SINH: case HLO_OP_SQRT: case HLO_OP_TAN: case HLO_OP_TANH:
      return true;
    default:
      return false;
  }
}

bool hlo_opcode_is_elementwise_binary(hlo_opcode opcode) {
  switch (opcode) {
    case HLO_OP_ADD: case HLO_OP_AND: case HLO_OP_ATAN2: case HLO_OP_COMPARE:
    case HLO_OP_COMPLEX: case HLO_OP_DIVIDE: case HLO_OP_MAXIMUM: case HLO_OP_MINIMUM:
    case HLO_OP_MULTIPLY: case HLO_OP_OR: case HLO_OP_POWER: case HLO_OP_REMAINDER:
    case HLO_OP_SHIFT_LEFT: case HLO_OP_SHIFT_RIGHT_ARITHMETIC:
    case HLO_OP_SHIFT_RIGHT_LOGICAL: case HLO_OP_SUBTRACT: case HLO_OP_XOR:
      return true;
    default:
      return false;
  }
}

hlo_module *hlo_module_new(const char *name) {
  hlo_module *module = hlo_calloc(1, sizeof *module);
  if (!module) return NULL;
  hlo_arena_init(&module->arena);
  module->name = hlo_arena_strdup(&module->arena, name ? name : "module");
  return module;
}

void hlo_module_free(hlo_module *module) {
  if (!module) return;
  for (int i = 0; i < module->comp_count; i++) {
    free(module->comps[i]->instrs);
    free(module->comps[i]->params);
  }
  free(module->comps);
  hlo_arena_free(&module->arena);
  free(module);
}

bool hlo_module_set_attr(hlo_module *module, const char *name, const char *value) {
  for (int i = 0; i < module->raw_attr_count; i++)
    if (strcmp(module->raw_attrs[i].name, name) == 0) {
      const char *copy = hlo_arena_strdup(&module->arena, value);
      if (copy) module->raw_attrs[i].value = copy;
      return copy != NULL;
    }
  int n = module->raw_attr_count;
  hlo_raw_attr *attrs = hlo_arena_alloc(&module->arena, sizeof *attrs * (size_t)(n + 1));
  const char *key = hlo_arena_strdup(&module->arena, name), *copy = hlo_arena_strdup(&module->arena, value);
  if (!attrs || !key || !copy) return false;
  if (n) memcpy(attrs, module->raw_attrs, sizeof *attrs * (size_t)n);
  attrs[n] = (hlo_raw_attr){key, copy};
  module->raw_attrs = attrs;
  module->raw_attr_count = n + 1;
  return true;
}

hlo_status hlo_module_check_memory(const hlo_module *module, const char *what, hlo_diag *diag) {
  if (!module || !module->arena.failed) return HLO_OK;
  return hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory %s", what);
}

/* Grows the table *items_ptr (a T **, passed as void *) of *capacity items to hold needed;
 * false, with the module's failed flag set and the table as it was, when memory runs out. */
static bool grow(hlo_module *module, void *items_ptr, int *capacity, int needed, size_t item_size) {
  if (needed <= *capacity) return true;
  int cap = *capacity ? *capacity : 8;
  while (cap < needed) cap *= 2;
  void *items;
  memcpy(&items, items_ptr, sizeof items);
  void *grown = hlo_realloc(items, (size_t)cap * item_size);
  if (!grown) {
    module->arena.failed = true;
    return false;
  }
  memcpy(items_ptr, &grown, sizeof grown);
  *capacity = cap;
  return true;
}

hlo_comp *hlo_module_add_comp(hlo_module *module, const char *name) {
  hlo_comp *comp = hlo_arena_alloc(&module->arena, sizeof *comp);
  if (!comp) return NULL;
  comp->name = hlo_arena_strdup(&module->arena, name);
  comp->module = module;
  if (!comp->name || !grow(module, &module->comps, &module->comp_capacity, module->comp_count + 1,
                           sizeof(hlo_comp *)))
    return NULL;
  comp->id = module->comp_count;
  module->comps[module->comp_count++] = comp;
  return comp;
}

hlo_comp *hlo_module_find_comp(const hlo_module *module, const char *name) {
  for (int i = 0; i < module->comp_count; i++)
    if (strcmp(module->comps[i]->name, name) == 0) return module->comps[i];
  return NULL;
}

hlo_instr *hlo_comp_append(hlo_comp *comp, hlo_opcode opcode, const char *name,
                           int operand_count, hlo_instr *const *operands) {
  hlo_arena *arena = &comp->module->arena;
  if (!name) return NULL; /* a generated name that ran out of memory: arena->failed is set */
  hlo_instr *instr = hlo_arena_alloc(arena, sizeof *instr);
  if (!instr) return NULL;
  instr->opcode = opcode;
  instr->name = hlo_arena_strdup(arena, name);
  instr->operand_count = operand_count;
  instr->operands = hlo_arena_alloc(arena, sizeof(hlo_instr *) * (size_t)(operand_count + 1));
  if (!instr->name || !instr->operands) return NULL;
  for (int i = 0; i < operand_count; i++) instr->operands[i] = operands ? operands[i] : NULL;
  instr->feature_group_count = 1;
  instr->batch_group_count = 1;
  return hlo_comp_add(comp, instr) ? instr : NULL;
}

bool hlo_comp_add(hlo_comp *comp, hlo_instr *instr) {
  if (!grow(comp->module, &comp->instrs, &comp->instr_capacity, comp->instr_count + 1, sizeof(hlo_instr *)))
    return false;
  instr->parent = comp;
  instr->id = comp->instr_count;
  comp->instrs[comp->instr_count++] = instr;
  return true;
}

bool hlo_comp_set_param(hlo_comp *comp, hlo_instr *param) {
  int number = (int)param->parameter_number;
  if (number >= comp->param_count) {
    hlo_instr **params = hlo_realloc(comp->params, sizeof(hlo_instr *) * (size_t)(number + 1));
    if (!params) {
      comp->module->arena.failed = true;
      return false;
    }
    for (int i = comp->param_count; i <= number; i++) params[i] = NULL;
    comp->params = params;
    comp->param_count = number + 1;
  }
  comp->params[number] = param;
  return true;
}

/* Depth-first post-order with an explicit stack: graphs can be thousands deep. */
bool hlo_comp_sort(hlo_comp *comp, hlo_diag *diag) {
  int count = comp->instr_count;
  hlo_instr **order = hlo_malloc(sizeof(hlo_instr *) * (size_t)(count + 1));
  unsigned char *state = hlo_calloc((size_t)count + 1, 1); /* 0 new, 1 on stack, 2 done */
  int *stack_node = hlo_malloc(sizeof(int) * (size_t)(count + 1));
  int *stack_next = hlo_malloc(sizeof(int) * (size_t)(count + 1));
  int placed = 0;
  bool ok = true;
  if (!order || !state || !stack_node || !stack_next) {
    hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory sorting computation %s", comp->name);
    comp->module->arena.failed = true; /* the caller may have left it unsorted */
    ok = false;
    count = 0;
  }
  for (int start = 0; start < count && ok; start++) {
    if (state[start]) continue;
    int depth = 0;
    stack_node[0] = start;
    stack_next[0] = 0;
    state[start] = 1;
    while (depth >= 0 && ok) {
      hlo_instr *node = comp->instrs[stack_node[depth]];
      if (stack_next[depth] < node->operand_count) {
        hlo_instr *operand = node->operands[stack_next[depth]++];
        if (!operand || operand->parent != comp) continue;
        if (state[operand->id] == 1) {
          hlo_diag_set(diag, HLO_ERR_INPUT, "computation %s: cycle through instruction %s",
                       comp->name, operand->name);
          ok = false;
        } else if (state[operand->id] == 0) {
          state[operand->id] = 1;
          depth++;
          stack_node[depth] = operand->id;
          stack_next[depth] = 0;
        }
      } else {
        state[node->id] = 2;
        order[placed++] = node;
        depth--;
      }
    }
  }
  if (ok) {
    for (int i = 0; i < count; i++) {
      comp->instrs[i] = order[i];
      order[i]->id = i;
    }
  }
  free(order);
  free(state);
  free(stack_node);
  free(stack_next);
  return ok;
}

static bool visit_comp(hlo_module *module, hlo_comp *comp, unsigned char *state, hlo_comp **order,
                       int *placed, hlo_diag *diag) {
  if (state[comp->id] == 2) return true;
  if (state[comp->id] == 1) {
    hlo_diag_set(diag, HLO_ERR_INPUT, "computation %s calls itself", comp->name);
    return false;
  }
  state[comp->id] = 1;
  for (int i = 0; i < comp->instr_count; i++) {
    hlo_instr *instr = comp->instrs[i];
    for (int c = 0; c < instr->called_count; c++)
      if (!visit_comp(module, instr->called[c], state, order, placed, diag)) return false;
  }
  state[comp->id] = 2;
  order[(*placed)++] = comp;
  return true;
}

bool hlo_module_sort(hlo_module *module, hlo_diag *diag) {
  int count = module->comp_count;
  unsigned char *state = hlo_calloc((size_t)count + 1, 1);
  hlo_comp **order = hlo_malloc(sizeof(hlo_comp *) * (size_t)(count + 1));
  int placed = 0;
  bool ok = true;
  if (!state || !order) {
    hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory sorting the computations of %s", module->name);
    module->arena.failed = true; /* the caller may have left them unsorted */
    ok = false;
    count = 0;
  }
  for (int i = 0; i < count && ok; i++)
    ok = visit_comp(module, module->comps[i], state, order, &placed, diag);
  if (ok) {
    for (int i = 0; i < count; i++) {
      module->comps[i] = order[i];
      order[i]->id = i;
    }
  }
  free(state);
  free(order);
  return ok;
}

const hlo_instr *hlo_under_views(const hlo_instr *instr) {
  while ((instr->opcode == HLO_OP_RESHAPE || instr->opcode == HLO_OP_BITCAST || instr->opcode == HLO_OP_COPY) &&
         instr->operand_count == 1)
    instr = instr->operands[0];
  return instr;
}

hlo_ints hlo_ints_copy(hlo_arena *arena, int count, const int64_t *values) {
  hlo_ints ints;
  ints.count = count;
  ints.values = hlo_arena_alloc(arena, sizeof(int64_t) * (size_t)(count ? count : 1));
  if (!ints.values) ints.count = count = 0; /* arena->failed says why */
  for (int i = 0; i < count; i++) ints.values[i] = values[i];
  return ints;
}

bool hlo_ints_equal(const hlo_ints *a, const hlo_ints *b) {
  return a->count == b->count && (a->count == 0 || !memcmp(a->values, b->values, sizeof(int64_t) * (size_t)a->count));
}

void hlo_replace_uses(hlo_comp *comp, hlo_instr *from, hlo_instr *to) {
  for (int i = 0; i < comp->instr_count; i++) {
    hlo_instr *instr = comp->instrs[i];
    for (int k = 0; k < instr->operand_count; k++)
      if (instr->operands[k] == from) instr->operands[k] = to;
  }
  if (comp->root == from) comp->root = to;
}

const char *hlo_instr_raw_attr(const hlo_instr *instr, const char *name) {
  for (int i = 0; i < instr->raw_attr_count; i++)
    if (strcmp(instr->raw_attrs[i].name, name) == 0) return instr->raw_attrs[i].value;
  return NULL;
}
