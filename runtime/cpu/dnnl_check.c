/* A loaded plan's oneDNN layouts checked against each other and against the values they
 * touch (deserialize.c calls it once every extent holds). The kernels take a DNNL step's
 * layouts from its description and nothing else: the block a pool reads its source in
 * (pooling.c), which operands of a concatenation arrive blocked and whether its result
 * leaves blocked (dnnl_concat.c), the layouts a convolution's source and residuals arrive
 * in and its result leaves in (dnnl_conv.c). The planner (dnnl_plan.c) makes them agree:
 * what a step writes is what each of its readers takes, a blocked result is read only by
 * DNNL steps that take it blocked, and none is handed to the caller. A blob whose checksums
 * were recomputed after an edit may say otherwise, and its run would then read past a value
 * (a block of 16 over 8 channels pads every pixel to twice its floats), write past a
 * result, or hand on values in another order than their readers take them. Each is refused
 * here, naming the step. */
#include <stdint.h>

#include "dnnl_internal.h"

int64_t rt_cpu_md_bytes(const dnnl_memory_desc_t *md) {
  size_t bytes = dnnl_memory_desc_get_size(md);
  return bytes > (size_t)INT64_MAX ? INT64_MAX : (int64_t)bytes;
}

int64_t rt_cpu_value_room(const rt_cpu_plan *plan, int id) {
  const rt_cpu_step *s = &plan->steps[id];
  while (s->kind == RT_STEP_ALIAS && s->instr->opcode != HLO_OP_GET_TUPLE_ELEMENT)
    s = &plan->steps[s->instr->operands[0]->id];
  int64_t bytes = hlo_shape_is_array(&s->instr->shape) ? hlo_shape_bytes(&s->instr->shape) : 0;
  if (s->kind == RT_STEP_DNNL && !s->output && s->dnnl->out_bytes > bytes) bytes = s->dnnl->out_bytes;
  return bytes;
}

/* The DNNL step that keeps value id blocked (its out_md), or NULL: the value is row-major. */
static const rt_cpu_dnnl *kept_blocked(const rt_cpu_plan *plan, int id) {
  const rt_cpu_step *s = &plan->steps[id];
  return s->kind == RT_STEP_DNNL && s->dnnl->blocked_out ? s->dnnl : NULL;
}

/* Whether value id arrives in md: its producer's out_md when that keeps it blocked, else
 * plain (its row-major layout as the reader describes it). */
static bool arrives_as(const rt_cpu_plan *plan, int id, const dnnl_memory_desc_t *md,
                       const dnnl_memory_desc_t *plain) {
  const rt_cpu_dnnl *p = kept_blocked(plan, id);
  return dnnl_memory_desc_equal(md, p ? &p->out_md : plain);
}

/* shape's [N, C, H, W] in the single-block layout of block (0: row-major); false for none. */
static bool block_md(dnnl_memory_desc_t *md, const hlo_shape *shape, int block) {
  return hlo_shape_is_array(shape) && shape->rank == 4 && rt_cpu_dnnl_block_md(md, shape, block);
}

/* A pool's source, read in d->block's layout: a DNNL step's result kept so, as large. */
static const char *pool_reads(const rt_cpu_plan *plan, const rt_cpu_dnnl *d) {
  const hlo_instr *src = d->pool->operands[0];
  dnnl_memory_desc_t want;
  const rt_cpu_dnnl *p = kept_blocked(plan, src->id);
  if (!block_md(&want, &src->shape, d->block) || !p || !dnnl_memory_desc_equal(&want, &p->out_md))
    return "a pool's source read in another layout than it arrives in";
  if (rt_cpu_md_bytes(&want) > rt_cpu_value_room(plan, src->id)) return "a pool's source larger than its value";
  return NULL;
}

/* A concatenation's operands, each read blocked or row-major as the step says: in the
 * layout it arrives in, as large. */
static const char *concat_reads(const rt_cpu_plan *plan, const rt_cpu_dnnl *d) {
  for (int k = 0; k < d->concat->operand_count; k++) {
    const hlo_instr *x = d->concat->operands[k];
    dnnl_memory_desc_t want, plain;
    if (!block_md(&want, &x->shape, d->operand_blocked[k] ? d->block : 0) || !block_md(&plain, &x->shape, 0) ||
        !arrives_as(plan, x->id, &want, &plain))
      return "a concatenation's operand read in another layout than it arrives in";
    if (rt_cpu_md_bytes(&want) > rt_cpu_value_room(plan, x->id))
      return "a concatenation's operand larger than its value";
  }
  return NULL;
}

/* Whether input k of d is one of its residuals (read in post_in_md). */
static bool residual_input(const rt_cpu_dnnl *d, int k) {
  for (int p = 0; p < d->post_count; p++)
    if (d->posts[p].kind == RT_DNNL_ADD_FULL && d->posts[p].input == k) return true;
  return false;
}

/* A convolution's source and residuals in the layouts they arrive in (row-major: by the
 * convolution's dim labels); its weights and per-feature values never a blocked result. */
static const char *conv_reads(const rt_cpu_plan *plan, const rt_cpu_dnnl *d) {
  const hlo_instr *conv = d->conv;
  dnnl_memory_desc_t x_plain, y_plain;
  if (!rt_cpu_dnnl_plain_md(&x_plain, conv, true) || !rt_cpu_dnnl_plain_md(&y_plain, conv, false))
    return "a convolution oneDNN cannot describe";
  if (!arrives_as(plan, conv->operands[0]->id, &d->src_in_md, &x_plain))
    return "a convolution's source read in another layout than it arrives in";
  if (kept_blocked(plan, conv->operands[1]->id)) return "a convolution's weights read from a blocked result";
  for (int k = 0; k < d->post_count; k++) {
    const rt_dnnl_post *p = &d->posts[k];
    if (p->kind == RT_DNNL_ADD_FULL && p->input >= 0 &&
        !arrives_as(plan, d->inputs[p->input]->id, &d->post_in_md[k], &y_plain))
      return "a residual read in another layout than it arrives in";
  }
  for (int k = 0; k < d->input_count; k++)
    if (!residual_input(d, k) && kept_blocked(plan, d->inputs[k]->id))
      return "a per-feature value read from a blocked result";
  return NULL;
}

/* The layout the step's kernel writes its result in is the one its description gives
 * (out_md, which its readers were checked against): a pool's or concatenation's own block,
 * or row-major; a convolution's oneDNN result reordered into out_md, or written there
 * directly only when the two are the same, and row-major by its dim labels unless kept
 * blocked. A blocked result never goes to the caller. */
static const char *writes(const rt_cpu_step *s, const hlo_comp *entry) {
  const rt_cpu_dnnl *d = s->dnnl;
  if (d->root != s->instr) return "a oneDNN step whose result is another instruction's";
  if (d->blocked_out && (s->output || s->instr == entry->root)) return "a blocked result handed to the caller";
  dnnl_memory_desc_t want;
  if (!d->conv) {
    if (!block_md(&want, &s->instr->shape, d->blocked_out ? d->block : 0) ||
        !dnnl_memory_desc_equal(&want, &d->out_md) || rt_cpu_md_bytes(&want) != d->out_bytes)
      return "a result described in another layout than its kernel writes";
    return NULL;
  }
  if (!(d->prims & RT_DNNL_HAS_DST_REORDER) && !dnnl_memory_desc_equal(&d->dst_md, &d->out_md))
    return "a result written in another layout than its description";
  if (!d->blocked_out && !(rt_cpu_dnnl_plain_md(&want, d->conv, false) && dnnl_memory_desc_equal(&want, &d->out_md)))
    return "a row-major result described in another layout";
  return NULL;
}

/* Whether s reads its inputs' values itself (INSIDE steps are read by their group's step,
 * PART steps view the arena where their tuple step wrote). */
static bool reads_values(const rt_cpu_step *s) {
  return s->kind != RT_STEP_PARAM && s->kind != RT_STEP_CONST && s->kind != RT_STEP_INSIDE && s->kind != RT_STEP_PART;
}

static const char *step_layouts(const rt_cpu_plan *plan, const rt_cpu_step *s, const hlo_comp *entry) {
  if (s->kind != RT_STEP_DNNL) { /* latch's other kernels read row-major values only */
    for (int k = 0; reads_values(s) && k < rt_cpu_step_input_count(s); k++)
      if (kept_blocked(plan, rt_cpu_step_input(s, k)))
        return "a blocked result read by a step that reads it row-major";
    return NULL;
  }
  const rt_cpu_dnnl *d = s->dnnl;
  const char *what = writes(s, entry);
  if (!what) what = d->pool ? pool_reads(plan, d) : d->concat ? concat_reads(plan, d) : conv_reads(plan, d);
  return what;
}

const char *rt_cpu_dnnl_layouts_check(const rt_cpu_plan *plan, const hlo_comp *entry, int *bad) {
  for (int i = 0; i < plan->step_count; i++) {
    const char *what = step_layouts(plan, &plan->steps[i], entry);
    if (what) return *bad = i, what;
  }
  return NULL;
}
