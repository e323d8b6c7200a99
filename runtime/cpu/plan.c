/* The cpu backend's execution plan: what kind of step each entry instruction is, which
 * kernel runs it, and where its result lives. Fusion (fusion_groups.c) runs between
 * classifying the steps and placing their buffers, so fused-away results take none.
 *
 * Buffer assignment: a fast step's result goes at an offset of one per-execute arena. Its
 * bytes are reused once the last step that reads it has run: liveness is counted per
 * storage, so a reshape or get-tuple-element that views its operand's bytes keeps that
 * storage alive as long as it is read itself. Offsets are chosen by first fit, largest
 * results first (place_blocks). The entry's
 * results never take a shared buffer (they are written into values of their own, handed to
 * the caller), and parameters and constants are views that nothing writes.
 *
 * Everything a step writes is planned, so an execute allocates the arena and the entry's
 * results and nothing per step: each element of a batch-norm's tuple is a buffer of its own
 * (they die at different times: the normalized values early, the statistics late), and a
 * kernel's working memory (operand copies, im2col matrices) is a block live at its step
 * only. An elementwise op whose operand's buffer dies at that op writes its result over it:
 * each element is read before the same element is written, and no later step reads the
 * operand. Entry parameters, constants and the reference path's values are never written. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "plan_internal.h"


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
  bool *reached = hlo_calloc((size_t)module->comp_count + 1, sizeof(bool));
  if (!reached) return hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory planning");
  mark_reachable(module->entry, reached);
  hlo_status status = HLO_OK;
  for (int c = 0; c < module->comp_count && status == HLO_OK; c++) {
    const hlo_comp *comp = module->comps[c];
    for (int i = 0; reached[c] && i < comp->instr_count && status == HLO_OK; i++) {
      const hlo_instr *instr = comp->instrs[i];
      hlo_opcode op = instr->opcode;
      bool known = op == HLO_OP_PARAMETER || op == HLO_OP_CONSTANT || rt_cpu_slow_kernel(op) != NULL;
      bool plain_constant = instr->literal && instr->literal->data && hlo_shape_is_array(&instr->shape);
      if (!known) {
        status = unsupported(diag, instr, "");
      } else if (op == HLO_OP_CONSTANT && comp == module->entry && !plain_constant) {
        /* the plan views an entry constant's bytes in place: a tuple or elided one has none */
        status = hlo_diag_set(diag, HLO_ERR_UNSUPPORTED,
                              "the cpu backend cannot run constant %%%s in %s: a tuple or elided constant has no array data",
                              instr->name, comp->name);
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
  if (!k) k = rt_cpu_pick_gather(instr);
  return k; /* dot and convolution: pick_scratch */
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

/* Conv and dot with their working memory planned; NULL for other instructions. */
static rt_cpu_scratch_kernel pick_scratch(const hlo_instr *instr, int64_t *bytes) {
  if (!hlo_shape_is_array(&instr->shape)) return NULL;
  rt_cpu_scratch_kernel k = rt_cpu_pick_conv_scratch(instr, bytes);
  if (!k) k = rt_cpu_pick_dot_scratch(instr, bytes);
  return k;
}

/* read_whole[i]: some user takes instruction i as a value, not through get-tuple-element
 * (or it is the root). A tuple result read only element by element can be planned per
 * element. */
static bool *find_whole_reads(const hlo_comp *entry) {
  bool *read_whole = hlo_calloc((size_t)entry->instr_count + 1, sizeof(bool));
  if (!read_whole) return NULL;
  for (int i = 0; i < entry->instr_count; i++) {
    const hlo_instr *instr = entry->instrs[i];
    for (int k = 0; instr->opcode != HLO_OP_GET_TUPLE_ELEMENT && k < instr->operand_count; k++)
      read_whole[instr->operands[k]->id] = true;
  }
  read_whole[entry->root->id] = true;
  return read_whole;
}

static void classify(rt_cpu_plan *plan, rt_cpu_step *step, const bool *read_whole) {
  const hlo_instr *instr = step->instr;
  const rt_cpu_step *first_operand = instr->operand_count > 0 ? &plan->steps[instr->operands[0]->id] : NULL;
  if (instr->opcode == HLO_OP_PARAMETER) {
    step->kind = RT_STEP_PARAM;
  } else if (instr->opcode == HLO_OP_CONSTANT && instr->literal && instr->literal->data &&
             hlo_shape_is_array(&instr->shape)) {
    step->kind = RT_STEP_CONST;
  } else if (instr->opcode == HLO_OP_GET_TUPLE_ELEMENT && first_operand && first_operand->part_count > 0) {
    step->kind = RT_STEP_PART;
  } else if (aliases_operand(instr)) {
    step->kind = RT_STEP_ALIAS;
  } else if (instr->opcode == HLO_OP_TUPLE) {
    step->kind = RT_STEP_TUPLE;
  } else if ((step->fast_scratch = pick_scratch(instr, &step->scratch_bytes)) != NULL) {
    step->kind = RT_STEP_FAST;
  } else if ((step->fast = pick_fast(instr)) != NULL) {
    step->kind = RT_STEP_FAST;
  } else if (!read_whole[instr->id] && (step->fast = rt_cpu_pick_batch_norm_parts(instr)) != NULL) {
    step->kind = RT_STEP_FAST;
    step->part_count = instr->shape.tuple_count;
  } else {
    step->kind = RT_STEP_SLOW;
    step->slow = rt_cpu_pick_batch_norm(instr);
    if (!step->slow) step->slow = rt_cpu_slow_kernel(instr->opcode);
  }
}

/* One arena block: a buffer written at step `first` and read up to step `last` (inclusive),
 * or a kernel's scratch (first == last); two blocks may share bytes only when one's last
 * reader ran before the other was written. */
typedef struct block {
  int storage; /* the storage it holds, or -1 - step for a step's scratch */
  int first, last;
  int64_t size, offset;
} block;

static int by_size_descending(const void *a, const void *b) {
  const block *x = a, *y = b;
  if (x->size != y->size) return x->size > y->size ? -1 : 1;
  if (x->first != y->first) return x->first - y->first;
  return x->storage - y->storage; /* a total order, so plans are the same on every machine */
}

/* Offsets by first fit, largest blocks first: each block goes at the lowest offset where it
 * overlaps no placed block live at the same time. Close to the peak of live bytes in
 * practice, where reusing whole buffers wastes the difference between their occupants.
 * Placed blocks are kept sorted by offset (an insertion per block), so finding the gap is
 * one scan: quadratic in blocks with small constants, about a millisecond for a few
 * thousand, where sorting each block's conflicts afresh cost ten. */
static bool place_blocks(block *blocks, int count, int64_t *arena_bytes, int64_t *distinct) {
  qsort(blocks, (size_t)count, sizeof *blocks, by_size_descending);
  block **placed = hlo_malloc(sizeof(block *) * (size_t)(count + 1));
  if (!placed) return false;
  *arena_bytes = 0;
  for (int i = 0; i < count; i++) {
    block *b = &blocks[i];
    int64_t at = 0;
    int insert_at = i;
    for (int k = 0; k < i; k++) {
      const block *p = placed[k];
      if (p->first > b->last || b->first > p->last) continue; /* never live together */
      if (p->offset >= at + b->size) break;                   /* the gap before it fits */
      if (p->offset + p->size > at) at = p->offset + p->size;
    }
    b->offset = at;
    for (int k = 0; k < i; k++)
      if (placed[k]->offset > at) {
        insert_at = k;
        break;
      }
    memmove(&placed[insert_at + 1], &placed[insert_at], sizeof(block *) * (size_t)(i - insert_at));
    placed[insert_at] = b;
    if (at + b->size > *arena_bytes) *arena_bytes = at + b->size;
  }
  /* distinct offsets of buffers (not scratch), for reports and tests */
  *distinct = 0;
  int64_t previous = -1;
  for (int k = 0; k < count; k++) {
    if (placed[k]->storage < 0 || placed[k]->offset == previous) continue;
    previous = placed[k]->offset;
    ++*distinct;
  }
  free(placed);
  return true;
}

static int64_t aligned(int64_t bytes) { return bytes ? rt_cpu_aligned(bytes) : RT_CPU_ALIGN; }

/* Liveness and placement, worked on together by assign. Storages are the steps (0..n-1)
 * and the elements of FAST tuples (n..); owner[s] is the step that writes storage s. */
typedef struct liveness {
  int n, storage_count;
  int *last;        /* [storage]: the last step reading it; n for the entry's results */
  int *owner;       /* [storage] */
  int *part_first;  /* [step]: a FAST tuple's first element storage */
  int64_t *size;    /* [storage]: bytes of an arena buffer, 0 when it is not one */
} liveness;

static void liveness_free(liveness *l) {
  free(l->last);
  free(l->owner);
  free(l->part_first);
  free(l->size);
}

static bool liveness_init(liveness *l, const rt_cpu_plan *plan) {
  int n = plan->step_count, parts = 0;
  for (int i = 0; i < n; i++) parts += plan->steps[i].part_count;
  *l = (liveness){.n = n, .storage_count = n + parts};
  size_t count = (size_t)l->storage_count + 1;
  l->last = hlo_malloc(sizeof(int) * count);
  l->owner = hlo_malloc(sizeof(int) * count);
  l->part_first = hlo_malloc(sizeof(int) * count);
  l->size = hlo_calloc(count, sizeof(int64_t));
  if (!l->last || !l->owner || !l->part_first || !l->size) return false;
  int next_part = n;
  for (int i = 0; i < n; i++) {
    const rt_cpu_step *step = &plan->steps[i];
    l->owner[i] = i;
    l->part_first[i] = next_part;
    for (int p = 0; p < step->part_count; p++) {
      l->owner[next_part] = i;
      l->size[next_part++] = aligned(hlo_shape_bytes(&step->instr->shape.tuple[p]));
    }
  }
  return true;
}

/* The storage each step's result lives in, ignoring in-place writes, and who reads each
 * storage last. */
static void find_storages(rt_cpu_plan *plan, liveness *l) {
  for (int i = 0; i < l->n; i++) {
    rt_cpu_step *step = &plan->steps[i];
    const hlo_instr *instr = step->instr;
    if (step->kind == RT_STEP_ALIAS) step->storage = plan->steps[instr->operands[0]->id].storage;
    else if (step->kind == RT_STEP_PART) step->storage = l->part_first[instr->operands[0]->id] + (int)instr->index;
    else step->storage = i;
    l->last[i] = i;
    for (int p = 0; p < step->part_count; p++) l->last[l->part_first[i] + p] = i;
    for (int k = 0; k < rt_cpu_step_input_count(step); k++) {
      int s = plan->steps[rt_cpu_step_input(step, k)].storage;
      if (l->last[s] < i) l->last[s] = i;
    }
    if (rt_cpu_step_writes_buffer(step) && step->part_count == 0)
      l->size[i] = aligned(step->kind == RT_STEP_DNNL ? rt_cpu_dnnl_out_bytes(step->dnnl) : hlo_shape_bytes(&instr->shape));
  }
}

/* The entry's results live to the end, and fast ones are written into values of their own. */
static void mark_outputs(rt_cpu_plan *plan, liveness *l, const hlo_instr *root) {
  const hlo_instr *const *results = root->opcode == HLO_OP_TUPLE ? (const hlo_instr *const *)root->operands : &root;
  int count = root->opcode == HLO_OP_TUPLE ? root->operand_count : 1;
  l->last[plan->steps[root->id].storage] = l->n;
  for (int k = 0; k < count; k++) {
    rt_cpu_step *result = &plan->steps[results[k]->id];
    l->last[result->storage] = l->n;
    if (rt_cpu_step_writes_buffer(result) && result->part_count == 0) {
      result->output = true;
      l->size[result->storage] = 0;
    }
  }
}

/* The step whose storage a value is (through views of reshapes, bitcasts and copies). */
static const rt_cpu_step *storage_step(const rt_cpu_plan *plan, int id) {
  const rt_cpu_step *s = &plan->steps[id];
  while (s->kind == RT_STEP_ALIAS && s->instr->opcode != HLO_OP_GET_TUPLE_ELEMENT)
    s = &plan->steps[s->instr->operands[0]->id];
  return s;
}

const hlo_instr *rt_cpu_step_packed_dot(const rt_cpu_step *step) {
  if (step->kind == RT_STEP_FAST && step->fast_scratch && rt_cpu_is_dot_kernel(step->fast_scratch)) return step->instr;
  if (step->kind == RT_STEP_FUSED) return rt_cpu_fusion_dot_head(step->fusion);
  return NULL;
}

/* A DNNL step whose weights oneDNN wants in another layout keeps them reordered when they
 * are a parameter's (weight_param) or a kept step's result (weight_kept: the weights the
 * affine fold scaled, a weight converted to bf16), and reorders again only when their stamp
 * or version changes; so does a bf16 product on oneDNN its rhs packed. */
static void mark_kept_weights(rt_cpu_plan *plan) {
  for (int i = 0; i < plan->step_count; i++) {
    rt_cpu_step *step = &plan->steps[i];
    step->weight_param = step->weight_kept = -1;
    step->weight_bytes = 0;
    const hlo_instr *dot = rt_cpu_step_packed_dot(step);
    int64_t bytes = step->kind == RT_STEP_DNNL ? rt_cpu_dnnl_weights_bytes(step->dnnl)
                    : dot                      ? rt_cpu_dot_packed_bytes(dot)
                                               : 0;
    if (bytes <= 0) continue;
    int operand = step->kind == RT_STEP_DNNL ? rt_cpu_dnnl_weights_operand(step->dnnl) : dot->operands[1]->id;
    const rt_cpu_step *w = storage_step(plan, operand);
    if (w->kind == RT_STEP_PARAM && hlo_shape_is_array(&w->instr->shape))
      step->weight_param = (int)w->instr->parameter_number;
    else if (w->kept)
      step->weight_kept = w->instr->id;
    if (step->weight_param < 0 && step->weight_kept < 0) continue;
    step->weight_bytes = bytes;
    plan->kept_count++;
    plan->kept_slots++;
  }
}

/* Kept steps (rt_cpu_find_kept) are taken out of liveness (no reuse, no in-place writes
 * over them) and placed before the others (place_kept). */
static bool mark_kept(rt_cpu_plan *plan, liveness *l, const hlo_comp *entry) {
  if (!rt_cpu_find_kept(plan, entry)) return false;
  for (int i = 0; i < l->n; i++)
    if (plan->steps[i].kept) l->last[plan->steps[i].storage] = l->n; /* alive to the end: no one writes over it */
  mark_kept_weights(plan);
  return true;
}

/* Whether step i's fast kernel may write over operand k: an elementwise kernel (same index
 * in and out) and an operand of the result's size whose buffer dies at this step. */
static bool may_overwrite(const rt_cpu_plan *plan, const liveness *l, int i, int k) {
  const rt_cpu_step *step = &plan->steps[i];
  const hlo_instr *instr = step->instr, *operand = instr->operands[k];
  hlo_opcode op = instr->opcode;
  bool elementwise = hlo_opcode_is_elementwise_unary(op) || hlo_opcode_is_elementwise_binary(op) ||
                     op == HLO_OP_SELECT || op == HLO_OP_CLAMP;
  if (step->kind != RT_STEP_FAST || step->output || step->part_count || step->kept || !elementwise ||
      step->fast != rt_cpu_pick_elementwise(instr))
    return false;
  if (op == HLO_OP_CONVERT || op == HLO_OP_COMPARE || operand->shape.dtype != instr->shape.dtype ||
      hlo_shape_elements(&operand->shape) != hlo_shape_elements(&instr->shape))
    return false;
  int s = plan->steps[operand->id].storage;
  return l->size[s] == aligned(hlo_shape_bytes(&instr->shape)) && l->last[s] == i;
}

/* In step order, an eligible step takes over an operand's dying buffer: its own storage is
 * folded into that one, which then lives as long as the result's readers. */
static void write_in_place(rt_cpu_plan *plan, liveness *l) {
  for (int i = 0; i < l->n; i++) {
    rt_cpu_step *step = &plan->steps[i];
    const hlo_instr *instr = step->instr;
    if (step->kind == RT_STEP_ALIAS) step->storage = plan->steps[instr->operands[0]->id].storage;
    for (int k = 0; k < instr->operand_count && !step->in_place; k++) {
      if (!may_overwrite(plan, l, i, k)) continue;
      int s = plan->steps[instr->operands[k]->id].storage;
      step->in_place = true;
      step->storage = s;
      l->last[s] = l->last[i];
      l->size[i] = 0;
    }
  }
}

/* Which steps release which storages' values: the reference path's results and tuples are
 * owned values, freed after their last reader. */
static bool list_frees(rt_cpu_plan *plan, const liveness *l) {
  int n = l->n;
  int *free_counts = hlo_calloc((size_t)n + 1, sizeof(int));
  if (!free_counts) return false;
  /* an alias's own index is no storage: only storages are freed */
  for (int s = 0; s < n; s++)
    if (l->last[s] < n && plan->steps[s].storage == s) free_counts[l->last[s]]++;
  bool ok = true;
  for (int i = 0; i < n && ok; i++) {
    plan->steps[i].frees = hlo_malloc(sizeof(int) * (size_t)(free_counts[i] + 1));
    ok = plan->steps[i].frees != NULL;
  }
  for (int s = 0; s < n && ok; s++)
    if (l->last[s] < n && plan->steps[s].storage == s) {
      rt_cpu_step *at = &plan->steps[l->last[s]];
      at->frees[at->free_count++] = s;
    }
  free(free_counts);
  return ok;
}

/* The most bytes live at one step: no placement can use a smaller arena, so it says how
 * close first fit came. */
static bool peak_live_bytes(const block *blocks, int count, int n, int64_t *peak) {
  int64_t *change = hlo_calloc((size_t)n + 2, sizeof(int64_t));
  if (!change) return false;
  for (int b = 0; b < count; b++) {
    change[blocks[b].first] += blocks[b].size;
    change[blocks[b].last + 1] -= blocks[b].size;
  }
  int64_t live = 0;
  *peak = 0;
  for (int i = 0; i <= n; i++) {
    live += change[i];
    if (live > *peak) *peak = live;
  }
  free(change);
  return true;
}

/* The kept stamps and buffers, from offset 0 of the arena: there they lie where they lie in
 * every binding of the graph whose kept values are the same size, and such bindings can hand
 * them on (rt_cpu_kept_places_matches). Returns where the other buffers may start. */
static int64_t place_kept(rt_cpu_plan *plan, const liveness *l, int64_t *offsets) {
  if (!plan->kept_count) return 0;
  int64_t at = aligned((int64_t)sizeof(uint64_t) * plan->kept_slots);
  for (int i = 0, k = 0; i < l->n; i++) {
    rt_cpu_step *step = &plan->steps[i];
    if (rt_cpu_step_keeps_weights(step)) { /* reordered or packed weights */
      step->stamp_offset = (int64_t)sizeof(uint64_t) * k++;
      step->weight_offset = at;
      at += aligned(step->weight_bytes);
      continue;
    }
    if (!step->kept) continue;
    step->stamp_offset = (int64_t)sizeof(uint64_t) * k;
    k += 1 + step->kept_param_count;
    offsets[i] = at;
    at += l->size[i];
  }
  return at;
}

/* Arena offsets for every buffer and scratch block: the kept ones first, then the rest by
 * first fit. */
static bool place(rt_cpu_plan *plan, const liveness *l) {
  block *blocks = hlo_malloc(sizeof(block) * (size_t)(l->storage_count + l->n + 1));
  int64_t *offsets = hlo_malloc(sizeof(int64_t) * ((size_t)l->storage_count + 1));
  if (!blocks || !offsets) {
    free(blocks);
    free(offsets);
    return false;
  }
  int64_t base = place_kept(plan, l, offsets);
  int count = 0;
  plan->buffer_bytes = 0;
  for (int s = 0; s < l->storage_count; s++)
    if (l->size[s] && !(s < l->n && plan->steps[s].kept))
      blocks[count++] = (block){.storage = s, .first = l->owner[s], .last = l->last[s], .size = l->size[s]};
  for (int i = 0; i < l->n; i++)
    if (rt_cpu_step_writes_buffer(&plan->steps[i]) && plan->steps[i].scratch_bytes)
      blocks[count++] = (block){.storage = -1 - i, .first = i, .last = i, .size = aligned(plan->steps[i].scratch_bytes)};
  for (int b = 0; b < count; b++) plan->buffer_bytes += blocks[b].size;
  bool ok = peak_live_bytes(blocks, count, l->n, &plan->peak_live_bytes) &&
            place_blocks(blocks, count, &plan->arena_bytes, &plan->buffer_count);
  for (int b = 0; ok && b < count; b++) {
    if (blocks[b].storage >= 0) offsets[blocks[b].storage] = base + blocks[b].offset;
    else plan->steps[-1 - blocks[b].storage].scratch_offset = base + blocks[b].offset;
  }
  if (ok && base) plan->arena_bytes += base;
  for (int i = 0; ok && i < l->n; i++) {
    rt_cpu_step *step = &plan->steps[i];
    step->offset = -1;
    bool in_arena = (rt_cpu_step_writes_buffer(step) && !step->output && !step->part_count) || step->kind == RT_STEP_PART;
    if (in_arena) step->offset = offsets[step->storage];
    if (step->part_count) {
      step->part_offsets = hlo_malloc(sizeof(int64_t) * (size_t)step->part_count);
      ok = step->part_offsets != NULL;
      for (int p = 0; ok && p < step->part_count; p++) step->part_offsets[p] = offsets[l->part_first[i] + p];
    }
  }
  free(offsets);
  free(blocks);
  return ok;
}

static hlo_status assign(rt_cpu_plan *plan, const hlo_comp *entry, hlo_diag *diag) {
  liveness l;
  bool ok = liveness_init(&l, plan);
  if (ok) {
    find_storages(plan, &l);
    mark_outputs(plan, &l, entry->root);
    ok = mark_kept(plan, &l, entry);
    if (ok) write_in_place(plan, &l);
    ok = ok && list_frees(plan, &l) && place(plan, &l);
  }
  liveness_free(&l);
  return ok ? HLO_OK : hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory planning");
}

static _Atomic int64_t plans_built;

int64_t rt_cpu_plans_built(void) { return atomic_load(&plans_built); }

rt_cpu_plan *rt_cpu_plan_build(const hlo_module *module, const rt_compile_options *options, hlo_diag *diag) {
  const hlo_comp *entry = module->entry;
  if (!entry || !entry->root) {
    hlo_diag_set(diag, HLO_ERR_INPUT, "module %s has no entry computation with a root", module->name);
    return NULL;
  }
  if (check_supported(module, diag) != HLO_OK) return NULL;
  rt_cpu_plan *plan = hlo_calloc(1, sizeof *plan);
  if (!plan) {
    hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory planning");
    return NULL;
  }
  atomic_fetch_add(&plans_built, 1);
  for (int i = 0; i < entry->instr_count; i++)
    if (is_dynamic(&entry->instrs[i]->shape)) plan->dynamic = true;
  if (plan->dynamic) return plan; /* the whole entry runs on the reference evaluator */
  int n = entry->instr_count;
  plan->step_count = n;
  plan->steps = hlo_calloc((size_t)n + 1, sizeof(rt_cpu_step));
  if (!plan->steps) {
    rt_cpu_plan_free(plan);
    hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory planning");
    return NULL;
  }
  bool *read_whole = find_whole_reads(entry);
  if (!read_whole) {
    rt_cpu_plan_free(plan);
    hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory planning");
    return NULL;
  }
  plan->max_operands = 1;
  for (int i = 0; i < n; i++) {
    rt_cpu_step *step = &plan->steps[i];
    step->instr = entry->instrs[i];
    classify(plan, step, read_whole);
    if (step->instr->operand_count > plan->max_operands) plan->max_operands = step->instr->operand_count;
  }
  free(read_whole);
  bool fuse = !(options && options->no_fusion);
  if (rt_cpu_attention_plan(plan, entry, diag) != HLO_OK || rt_cpu_dnnl_plan(plan, entry, diag) != HLO_OK ||
      (fuse && rt_cpu_fuse(plan, entry, diag) != HLO_OK) || assign(plan, entry, diag) != HLO_OK) {
    rt_cpu_plan_free(plan);
    return NULL;
  }
  return plan;
}

void rt_cpu_plan_free(rt_cpu_plan *plan) {
  if (!plan) return;
  for (int i = 0; plan->steps && i < plan->step_count; i++) {
    if (!plan->pieces_in_module) {
      free(plan->steps[i].frees);
      free(plan->steps[i].part_offsets);
      free(plan->steps[i].kept_params);
      rt_cpu_fusion_free(plan->steps[i].fusion);
    }
    rt_cpu_dnnl_free(plan->steps[i].dnnl);
    free(plan->steps[i].attention);
  }
  free(plan->steps);
  free(plan);
}
