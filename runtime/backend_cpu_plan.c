/* The cpu backend's execution plan: what kind of step each entry instruction is, which
 * kernel runs it, and where its result lives. Fusion (backend_cpu_fusion.c) runs between
 * classifying the steps and placing their buffers, so fused-away results take none.
 *
 * Buffer assignment: a fast step's result goes at an offset of one per-execute arena. Its
 * bytes are reused once the last step that reads it has run: liveness is counted per
 * storage, so a reshape or get-tuple-element that views its operand's bytes keeps that
 * storage alive as long as it is read itself. Offsets are chosen by first fit, largest
 * results first (place_blocks). The entry's
 * results never take a shared buffer (they are written into values of their own, handed to
 * the caller), and parameters and constants are views that nothing writes. */
#include <stdlib.h>
#include <string.h>

#include "backend_cpu.h"

enum { ALIGN = 64 };

static hlo_status unsupported(hlo_diag *diag, const hlo_instr *instr, const char *why) {
  return hlo_diag_set(diag, HLO_ERR_UNSUPPORTED, "the cpu backend cannot run %s (instruction %%%s in %s)%s",
                      hlo_opcode_name(instr->opcode), instr->name, instr->parent->name, why);
}

static bool computable_shape(const hlo_shape *shape) {
  if (shape->dtype == HLO_TUPLE) {
    for (int i = 0; i < shape->tuple_count; i++)
      if (!computable_shape(&shape->tuple[i])) return false;
    return true;
  }
  return shape->dtype == HLO_TOKEN || hlo_dtype_is_computable(shape->dtype);
}

/* Marks the computations the entry can reach: only those must run. */
static void mark_reachable(const hlo_comp *comp, bool *reached) {
  if (reached[comp->id]) return;
  reached[comp->id] = true;
  for (int i = 0; i < comp->instr_count; i++)
    for (int c = 0; c < comp->instrs[i]->called_count; c++) mark_reachable(comp->instrs[i]->called[c], reached);
}

/* Every instruction the entry can reach must have a kernel on one path or the other;
 * finding out now makes an unsupported op a compile error the minifier can shrink. */
static hlo_status check_supported(const hlo_module *module, hlo_diag *diag) {
  bool *reached = calloc((size_t)module->comp_count + 1, sizeof(bool));
  if (!reached) return hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory planning");
  mark_reachable(module->entry, reached);
  hlo_status status = HLO_OK;
  for (int c = 0; c < module->comp_count && status == HLO_OK; c++) {
    const hlo_comp *comp = module->comps[c];
    for (int i = 0; reached[c] && i < comp->instr_count && status == HLO_OK; i++) {
      const hlo_instr *instr = comp->instrs[i];
      hlo_opcode op = instr->opcode;
      bool known = op == HLO_OP_PARAMETER || op == HLO_OP_CONSTANT || rt_cpu_slow_kernel(op) != NULL;
      if (!known) {
        status = unsupported(diag, instr, "");
      } else if (!computable_shape(&instr->shape)) {
        char text[128];
        status = hlo_diag_set(diag, HLO_ERR_UNSUPPORTED,
                              "the cpu backend cannot run %s (instruction %%%s in %s): element type of %s",
                              hlo_opcode_name(op), instr->name, comp->name,
                              hlo_shape_str(&instr->shape, text, sizeof text));
      }
    }
  }
  free(reached);
  return status;
}

static bool is_dynamic(const hlo_shape *shape) {
  if (shape->dtype == HLO_TUPLE) {
    for (int i = 0; i < shape->tuple_count; i++)
      if (is_dynamic(&shape->tuple[i])) return true;
    return false;
  }
  return hlo_shape_is_dynamic(shape);
}

static rt_cpu_kernel pick_fast(const hlo_instr *instr) {
  if (!hlo_shape_is_array(&instr->shape) || !hlo_dtype_is_computable(instr->shape.dtype)) return NULL;
  rt_cpu_kernel k = rt_cpu_pick_elementwise(instr);
  if (!k) k = rt_cpu_pick_layout(instr);
  if (!k) k = rt_cpu_pick_reduce(instr);
  if (!k) k = rt_cpu_pick_dot(instr);
  if (!k) k = rt_cpu_pick_conv(instr);
  return k;
}

/* A view of operand 0's bytes serves: the row-major bytes are the same. */
static bool aliases_operand(const hlo_instr *instr) {
  switch (instr->opcode) {
    case HLO_OP_GET_TUPLE_ELEMENT:
      return instr->operand_count == 1;
    case HLO_OP_RESHAPE: case HLO_OP_BITCAST: case HLO_OP_COPY: {
      if (instr->operand_count != 1) return false;
      const hlo_shape *in = &instr->operands[0]->shape;
      return hlo_shape_is_array(&instr->shape) && hlo_shape_is_array(in) && in->dtype == instr->shape.dtype &&
             hlo_shape_elements(in) == hlo_shape_elements(&instr->shape) &&
             hlo_shape_is_default_layout(in) && hlo_shape_is_default_layout(&instr->shape);
    }
    default:
      return false;
  }
}

static void classify(rt_cpu_step *step) {
  const hlo_instr *instr = step->instr;
  if (instr->opcode == HLO_OP_PARAMETER) {
    step->kind = RT_STEP_PARAM;
  } else if (instr->opcode == HLO_OP_CONSTANT && instr->literal && instr->literal->data &&
             hlo_shape_is_array(&instr->shape)) {
    step->kind = RT_STEP_CONST;
  } else if (aliases_operand(instr)) {
    step->kind = RT_STEP_ALIAS;
  } else if (instr->opcode == HLO_OP_TUPLE) {
    step->kind = RT_STEP_TUPLE;
  } else if ((step->fast = pick_fast(instr)) != NULL) {
    step->kind = RT_STEP_FAST;
  } else {
    step->kind = RT_STEP_SLOW;
    step->slow = rt_cpu_pick_batch_norm(instr);
    if (!step->slow) step->slow = rt_cpu_slow_kernel(instr->opcode);
  }
}

/* One fast result to place in the arena: it is written at step `first` and read up to step
 * `last` (inclusive); two results may share bytes only when one's last reader ran before
 * the other was written. */
typedef struct block {
  int step, first, last;
  int64_t size, offset;
} block;

static int by_size_descending(const void *a, const void *b) {
  const block *x = a, *y = b;
  if (x->size != y->size) return x->size > y->size ? -1 : 1;
  return x->step - y->step; /* stable, so plans are the same on every machine */
}

static int by_offset(const void *a, const void *b) {
  const block *x = *(const block *const *)a, *y = *(const block *const *)b;
  return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Offsets by first fit, largest blocks first: each block goes at the lowest offset where it
 * overlaps no placed block live at the same time. Close to the peak of live bytes in
 * practice, where reusing whole buffers wastes the difference between their occupants. */
static bool place_blocks(block *blocks, int count, int64_t *arena_bytes, int64_t *distinct) {
  qsort(blocks, (size_t)count, sizeof *blocks, by_size_descending);
  block **conflicts = malloc(sizeof(block *) * (size_t)(count + 1));
  if (!conflicts) return false;
  *arena_bytes = 0;
  for (int i = 0; i < count; i++) {
    block *b = &blocks[i];
    int n = 0;
    for (int j = 0; j < i; j++)
      if (blocks[j].first <= b->last && b->first <= blocks[j].last) conflicts[n++] = &blocks[j];
    qsort(conflicts, (size_t)n, sizeof *conflicts, by_offset);
    int64_t at = 0;
    for (int k = 0; k < n; k++) {
      if (conflicts[k]->offset >= at + b->size) break; /* the gap before it fits */
      int64_t end = conflicts[k]->offset + conflicts[k]->size;
      if (end > at) at = end;
    }
    b->offset = at;
    if (at + b->size > *arena_bytes) *arena_bytes = at + b->size;
  }
  /* distinct offsets, for reports and tests */
  for (int i = 0; i < count; i++) conflicts[i] = &blocks[i];
  qsort(conflicts, (size_t)count, sizeof *conflicts, by_offset);
  *distinct = 0;
  for (int i = 0; i < count; i++) *distinct += i == 0 || conflicts[i]->offset != conflicts[i - 1]->offset;
  free(conflicts);
  return true;
}

static hlo_status assign(rt_cpu_plan *plan, const hlo_comp *entry, hlo_diag *diag) {
  int n = plan->step_count;
  int *last = malloc(sizeof(int) * (size_t)(n + 1));
  int *free_counts = calloc((size_t)n + 1, sizeof(int));
  hlo_status status = HLO_OK;
  if (!last || !free_counts) status = hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory planning");
  /* last reader of each storage; the results of the entry live to the end (n) */
  for (int i = 0; status == HLO_OK && i < n; i++) {
    rt_cpu_step *step = &plan->steps[i];
    const hlo_instr *instr = step->instr;
    step->storage = step->kind == RT_STEP_ALIAS ? plan->steps[instr->operands[0]->id].storage : i;
    last[i] = i;
    for (int k = 0; k < rt_cpu_step_input_count(step); k++) {
      int s = plan->steps[rt_cpu_step_input(step, k)].storage;
      if (last[s] < i) last[s] = i;
    }
  }
  const hlo_instr *root = entry->root;
  if (status == HLO_OK) {
    last[plan->steps[root->id].storage] = n;
    if (rt_cpu_step_writes_buffer(&plan->steps[root->id])) plan->steps[root->id].output = true;
    if (root->opcode == HLO_OP_TUPLE)
      for (int k = 0; k < root->operand_count; k++) {
        rt_cpu_step *element = &plan->steps[root->operands[k]->id];
        last[element->storage] = n;
        if (rt_cpu_step_writes_buffer(element)) element->output = true;
      }
    /* an alias's own index is no storage: only storages are freed */
    for (int i = 0; i < n; i++)
      if (last[i] < n && plan->steps[i].storage == i) free_counts[last[i]]++;
    for (int i = 0; i < n && status == HLO_OK; i++) {
      plan->steps[i].frees = malloc(sizeof(int) * (size_t)(free_counts[i] + 1));
      if (!plan->steps[i].frees) status = hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory planning");
    }
    for (int s = 0; s < n && status == HLO_OK; s++)
      if (last[s] < n && plan->steps[s].storage == s) {
        rt_cpu_step *at = &plan->steps[last[s]];
        at->frees[at->free_count++] = s;
      }
  }
  /* offsets for the fast results that are not entry results */
  block *blocks = status == HLO_OK ? malloc(sizeof(block) * (size_t)(n + 1)) : NULL;
  if (status == HLO_OK && !blocks) status = hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory planning");
  int block_count = 0;
  for (int i = 0; status == HLO_OK && i < n; i++) {
    rt_cpu_step *step = &plan->steps[i];
    step->offset = -1;
    if (!rt_cpu_step_writes_buffer(step) || step->output) continue;
    int64_t bytes = hlo_shape_bytes(&step->instr->shape);
    bytes = bytes ? (bytes + ALIGN - 1) / ALIGN * ALIGN : ALIGN;
    blocks[block_count++] = (block){.step = i, .first = i, .last = last[i], .size = bytes};
  }
  if (status == HLO_OK && !place_blocks(blocks, block_count, &plan->arena_bytes, &plan->buffer_count))
    status = hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory planning");
  for (int b = 0; status == HLO_OK && b < block_count; b++) plan->steps[blocks[b].step].offset = blocks[b].offset;
  free(blocks);
  free(last);
  free(free_counts);
  return status;
}

rt_cpu_plan *rt_cpu_plan_build(const hlo_module *module, hlo_diag *diag) {
  const hlo_comp *entry = module->entry;
  if (!entry || !entry->root) {
    hlo_diag_set(diag, HLO_ERR_INPUT, "module %s has no entry computation with a root", module->name);
    return NULL;
  }
  if (check_supported(module, diag) != HLO_OK) return NULL;
  rt_cpu_plan *plan = calloc(1, sizeof *plan);
  if (!plan) {
    hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory planning");
    return NULL;
  }
  for (int i = 0; i < entry->instr_count; i++)
    if (is_dynamic(&entry->instrs[i]->shape)) plan->dynamic = true;
  if (plan->dynamic) return plan; /* the whole entry runs on the reference evaluator */
  int n = entry->instr_count;
  plan->step_count = n;
  plan->steps = calloc((size_t)n + 1, sizeof(rt_cpu_step));
  if (!plan->steps) {
    rt_cpu_plan_free(plan);
    hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory planning");
    return NULL;
  }
  plan->max_operands = 1;
  for (int i = 0; i < n; i++) {
    rt_cpu_step *step = &plan->steps[i];
    step->instr = entry->instrs[i];
    classify(step);
    if (step->instr->operand_count > plan->max_operands) plan->max_operands = step->instr->operand_count;
  }
  if (rt_cpu_fuse(plan, entry, diag) != HLO_OK || assign(plan, entry, diag) != HLO_OK) {
    rt_cpu_plan_free(plan);
    return NULL;
  }
  return plan;
}

void rt_cpu_plan_free(rt_cpu_plan *plan) {
  if (!plan) return;
  for (int i = 0; plan->steps && i < plan->step_count; i++) {
    free(plan->steps[i].frees);
    rt_cpu_fusion_free(plan->steps[i].fusion);
  }
  free(plan->steps);
  free(plan);
}
