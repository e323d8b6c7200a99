/* Writing a cpu executable as bytes: what the disk cache keeps, so that a later process loads
 * it without running the passes or planning (deserialize.c reads it back).
 *
 * Format (every integer a varint, blob_internal.h):
 *
 *   "LATCHCPU" (8 bytes), format version (1 byte), XXH3 checksum of the rest (8 bytes, LE)
 *   source    the module before the passes, origins numbered, encoded as the module
 *             below (rt_cpu_encode_module, every computation) but kept as bytes: a load
 *             decodes it only when it binds (NULL when there is none)
 *   module    the module after the passes, origins included, the computations it no longer
 *             calls left out (rt_cpu_encode_module)
 *   plan      its numbers, then each step: kind, kernel family, buffers, frees, kept
 *             stamps and weights, and a FUSED step's program or a DNNL step's description
 *             (a convolution's post-ops, terms, the memory layouts oneDNN chose and scratch
 *             offsets; a blocked pool's or concatenation's block and operand layouts)
 *
 * Instructions are named by their index in the entry, computations by theirs in the module.
 * The format version goes up with any change here; the disk cache's key holds the build
 * identity too, so a format change never meets an old entry there, and the version byte
 * guards blobs that come from elsewhere. */
#include <stdlib.h>
#include <string.h>

#include "blob_internal.h"
#include "dnnl_internal.h"
#include "exec_internal.h"
#include "fusion_internal.h"

/* ---- the module ---- */

static void put_ints(hlo_strbuf *out, const hlo_ints *ints) {
  rt_blob_put_int(out, ints->count);
  for (int i = 0; i < ints->count; i++) rt_blob_put_int(out, ints->values[i]);
}

/* Shape flags: what follows the dims (most shapes are static arrays in the default layout). */
enum { SHAPE_HAS_LAYOUT = 1, SHAPE_DIM_KINDS = 2, SHAPE_LAYOUT = 4, SHAPE_LAYOUT_EXTRA = 8, SHAPE_TUPLE = 16 };

static void put_shape(hlo_strbuf *out, const hlo_shape *shape) {
  bool dynamic = false;
  for (int d = 0; d < shape->rank; d++) dynamic = dynamic || shape->dim_kind[d] != HLO_DIM_STATIC;
  bool tuple = shape->dtype == HLO_TUPLE;
  int flags = (shape->has_layout ? SHAPE_HAS_LAYOUT : 0) | (dynamic ? SHAPE_DIM_KINDS : 0) |
              (!tuple && !hlo_shape_is_default_layout(shape) ? SHAPE_LAYOUT : 0) |
              (shape->layout_extra ? SHAPE_LAYOUT_EXTRA : 0) | (tuple ? SHAPE_TUPLE : 0);
  rt_blob_put_int(out, shape->dtype);
  rt_blob_put_int(out, shape->rank);
  rt_blob_put_int(out, flags);
  for (int d = 0; d < shape->rank; d++) rt_blob_put_int(out, shape->dims[d]);
  for (int d = 0; (flags & SHAPE_DIM_KINDS) && d < shape->rank; d++) rt_blob_put_int(out, shape->dim_kind[d]);
  for (int d = 0; (flags & SHAPE_LAYOUT) && d < shape->rank; d++) rt_blob_put_int(out, shape->minor_to_major[d]);
  if (flags & SHAPE_LAYOUT_EXTRA) rt_blob_put_str(out, shape->layout_extra);
  if (!tuple) return;
  rt_blob_put_int(out, shape->tuple_count);
  for (int i = 0; i < shape->tuple_count; i++) put_shape(out, &shape->tuple[i]);
}

static void put_literal(hlo_strbuf *out, const hlo_literal *literal) {
  put_shape(out, &literal->shape);
  rt_blob_put_bytes(out, literal->data, literal->data ? (size_t)hlo_shape_bytes(&literal->shape) : 0);
  rt_blob_put_int(out, literal->elided);
  rt_blob_put_str(out, literal->raw_text);
  rt_blob_put_int(out, literal->elements != NULL);
  for (int i = 0; literal->elements && i < literal->shape.tuple_count; i++) put_literal(out, &literal->elements[i]);
}

static void put_window(hlo_strbuf *out, const hlo_window *w) {
  rt_blob_put_int(out, w->rank);
  for (int d = 0; d < w->rank; d++) {
    const hlo_window_dim *x = &w->dims[d];
    int64_t fields[] = {x->size, x->stride, x->pad_low, x->pad_high, x->lhs_dilate, x->rhs_dilate, x->reversal};
    for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++) rt_blob_put_int(out, fields[f]);
  }
}

static void put_conv(hlo_strbuf *out, const hlo_conv_dims *c) {
  rt_blob_put_int(out, c->spatial_count);
  int64_t fields[] = {c->input_batch, c->input_feature, c->kernel_input_feature, c->kernel_output_feature,
                      c->output_batch, c->output_feature};
  for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++) rt_blob_put_int(out, fields[f]);
  for (int s = 0; s < c->spatial_count; s++) {
    rt_blob_put_int(out, c->input_spatial[s]);
    rt_blob_put_int(out, c->kernel_spatial[s]);
    rt_blob_put_int(out, c->output_spatial[s]);
  }
}

static void put_padding(hlo_strbuf *out, const hlo_padding *p) {
  rt_blob_put_int(out, p->rank);
  for (int d = 0; d < p->rank; d++) {
    rt_blob_put_int(out, p->low[d]);
    rt_blob_put_int(out, p->high[d]);
    rt_blob_put_int(out, p->interior[d]);
  }
}

static void put_dot(hlo_strbuf *out, const hlo_dot_dims *d) {
  put_ints(out, &d->lhs_batch);
  put_ints(out, &d->lhs_contracting);
  put_ints(out, &d->rhs_batch);
  put_ints(out, &d->rhs_contracting);
}

static void put_gather(hlo_strbuf *out, const hlo_gather_dims *g) {
  put_ints(out, &g->offset_dims);
  put_ints(out, &g->collapsed_slice_dims);
  put_ints(out, &g->start_index_map);
  put_ints(out, &g->operand_batching_dims);
  put_ints(out, &g->start_indices_batching_dims);
  rt_blob_put_int(out, g->index_vector_dim);
  rt_blob_put_int(out, g->indices_are_sorted);
}

static void put_scatter(hlo_strbuf *out, const hlo_scatter_dims *s) {
  put_ints(out, &s->update_window_dims);
  put_ints(out, &s->inserted_window_dims);
  put_ints(out, &s->scatter_dims_to_operand_dims);
  put_ints(out, &s->input_batching_dims);
  put_ints(out, &s->scatter_indices_batching_dims);
  rt_blob_put_int(out, s->index_vector_dim);
  rt_blob_put_int(out, s->indices_are_sorted);
  rt_blob_put_int(out, s->unique_indices);
}

/* An instruction's attributes, most of them absent or at their default: a mask of those
 * present, then each, in this order (deserialize_module.c's get_attrs reads them so). */
static void put_attrs(hlo_strbuf *out, const hlo_instr *x) {
  uint64_t epsilon;
  memcpy(&epsilon, &x->epsilon, sizeof epsilon);
  int64_t scalars[] = {x->parameter_number, x->index, x->feature_group_count - 1, x->batch_group_count - 1,
                       x->direction, x->compare_type, x->is_stable, x->rng_algorithm, x->rng_distribution,
                       x->exponent_bits, x->mantissa_bits, x->is_composite, (int64_t)epsilon};
  const hlo_ints *lists[] = {&x->dimensions, &x->slice_starts, &x->slice_limits, &x->slice_strides,
                             &x->gather_slice_sizes};
  const void *structs[] = {x->padding, x->window, x->conv, x->dot, x->gather, x->scatter, x->literal,
                           x->custom_call_target, x->fusion_kind, x->composite_name, x->raw_attr_count ? x : NULL};
  enum { SCALARS = sizeof scalars / sizeof scalars[0], LISTS = sizeof lists / sizeof lists[0] };
  uint64_t mask = 0;
  for (int i = 0; i < SCALARS; i++) mask |= (uint64_t)(scalars[i] != 0) << i;
  for (int i = 0; i < LISTS; i++) mask |= (uint64_t)(lists[i]->count != 0) << (SCALARS + i);
  for (size_t i = 0; i < sizeof structs / sizeof structs[0]; i++) mask |= (uint64_t)(structs[i] != NULL) << (SCALARS + LISTS + i);
  rt_blob_put_int(out, (int64_t)mask);
  for (int i = 0; i < SCALARS; i++)
    if (scalars[i]) rt_blob_put_int(out, scalars[i]);
  for (int i = 0; i < LISTS; i++)
    if (lists[i]->count) put_ints(out, lists[i]);
  if (x->padding) put_padding(out, x->padding);
  if (x->window) put_window(out, x->window);
  if (x->conv) put_conv(out, x->conv);
  if (x->dot) put_dot(out, x->dot);
  if (x->gather) put_gather(out, x->gather);
  if (x->scatter) put_scatter(out, x->scatter);
  if (x->literal) put_literal(out, x->literal);
  if (x->custom_call_target) rt_blob_put_str(out, x->custom_call_target);
  if (x->fusion_kind) rt_blob_put_str(out, x->fusion_kind);
  if (x->composite_name) rt_blob_put_str(out, x->composite_name);
  if (!x->raw_attr_count) return;
  rt_blob_put_int(out, x->raw_attr_count);
  for (int a = 0; a < x->raw_attr_count; a++) {
    rt_blob_put_str(out, x->raw_attrs[a].name);
    rt_blob_put_str(out, x->raw_attrs[a].value);
  }
}

static void put_instr(hlo_strbuf *out, const hlo_instr *x, const int *number) {
  rt_blob_put_int(out, x->opcode);
  rt_blob_put_str(out, x->name);
  rt_blob_put_int(out, x->origin);
  put_shape(out, &x->shape);
  rt_blob_put_int(out, x->operand_count);
  for (int k = 0; k < x->operand_count; k++) rt_blob_put_int(out, x->operands[k]->id);
  rt_blob_put_int(out, x->called_count);
  for (int k = 0; k < x->called_count; k++) rt_blob_put_int(out, number[x->called[k]->id]);
  put_attrs(out, x);
}

/* Marks the computations comp calls, directly or not. */
static void mark_called(const hlo_comp *comp, int *number) {
  for (int i = 0; i < comp->instr_count; i++)
    for (int k = 0; k < comp->instrs[i]->called_count; k++) {
      const hlo_comp *callee = comp->instrs[i]->called[k];
      if (number[callee->id] < 0) number[callee->id] = 0, mark_called(callee, number);
    }
}

void rt_cpu_encode_module(hlo_strbuf *out, const hlo_module *module, bool live_only) {
  int *number = hlo_malloc(sizeof(int) * ((size_t)module->comp_count + 1)); /* [comp]: its index written, or -1 */
  if (!number) {
    out->failed = true;
    return;
  }
  for (int c = 0; c < module->comp_count; c++) number[c] = live_only ? -1 : 0;
  if (live_only && module->entry) number[module->entry->id] = 0, mark_called(module->entry, number);
  int count = 0;
  for (int c = 0; c < module->comp_count; c++)
    if (number[c] >= 0) number[c] = count++; /* callees still come before their callers */
  rt_blob_put_str(out, module->name);
  rt_blob_put_int(out, module->name_counter);
  rt_blob_put_int(out, module->raw_attr_count);
  for (int a = 0; a < module->raw_attr_count; a++) {
    rt_blob_put_str(out, module->raw_attrs[a].name);
    rt_blob_put_str(out, module->raw_attrs[a].value);
  }
  rt_blob_put_int(out, count);
  for (int c = 0; c < module->comp_count; c++) {
    const hlo_comp *comp = module->comps[c];
    if (number[c] < 0) continue;
    rt_blob_put_str(out, comp->name);
    rt_blob_put_int(out, comp->instr_count);
    for (int i = 0; i < comp->instr_count; i++) put_instr(out, comp->instrs[i], number);
    rt_blob_put_int(out, comp->root ? comp->root->id : -1);
    rt_blob_put_int(out, comp->param_count);
    for (int p = 0; p < comp->param_count; p++) rt_blob_put_int(out, comp->params[p] ? comp->params[p]->id : -1);
  }
  rt_blob_put_int(out, module->entry ? number[module->entry->id] : -1);
  free(number);
}

/* ---- the plan ---- */

/* The picker that chose a step's kernel, asked again as classify asked (plan.c). */
static rt_cpu_kernel_family kernel_family(const rt_cpu_step *step) {
  const hlo_instr *x = step->instr;
  int64_t bytes;
  if (step->kind == RT_STEP_SLOW)
    return step->slow == rt_cpu_pick_batch_norm(x) ? RT_KERNEL_BATCH_NORM : RT_KERNEL_SLOW;
  if (step->kind != RT_STEP_FAST) return RT_KERNEL_NONE;
  if (step->fast_scratch)
    return step->fast_scratch == rt_cpu_pick_conv_scratch(x, &bytes) ? RT_KERNEL_CONV : RT_KERNEL_DOT;
  if (step->part_count) return RT_KERNEL_BATCH_NORM_PARTS;
  rt_cpu_kernel_family families[] = {RT_KERNEL_ELEMENTWISE, RT_KERNEL_LAYOUT, RT_KERNEL_REDUCE, RT_KERNEL_GATHER};
  rt_cpu_kernel (*pickers[])(const hlo_instr *) = {rt_cpu_pick_elementwise, rt_cpu_pick_layout, rt_cpu_pick_reduce,
                                                   rt_cpu_pick_gather};
  for (int f = 0; f < 4; f++)
    if (step->fast == pickers[f](x)) return families[f];
  return RT_KERNEL_NONE; /* none: refused by the caller */
}

static void put_fusion(hlo_strbuf *out, const rt_cpu_fusion *f) {
  rt_blob_put_int(out, f->input_count);
  for (int k = 0; k < f->input_count; k++) rt_blob_put_int(out, f->inputs[k]);
  rt_blob_put_int(out, f->instr_count);
  for (int k = 0; k < f->instr_count; k++) {
    const fusion_instr *x = &f->instrs[k];
    int64_t fields[] = {x->code, x->op, x->dir, x->dst, x->a, x->b, x->c, x->tile, x->input, x->dtype, x->linear,
                        x->inner, x->period};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) rt_blob_put_int(out, fields[i]);
    rt_blob_put_f32(out, x->imm);
  }
  int64_t fields[] = {f->reg_count, f->result, f->tiles, f->count, f->out_dtype, f->members,
                      f->head ? f->head->id : -1, f->head_scratch_bytes, f->head_args[0], f->head_args[1],
                      f->flat, f->tail ? f->tail->id : -1, f->reducer, f->inner, f->tail_init};
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) rt_blob_put_int(out, fields[i]);
}

/* A memory descriptor by its fields (oneDNN 2.6's plain struct; blocked, undefined and
 * Winograd's weights formats occur in a plan). */
static void put_md(hlo_strbuf *out, const dnnl_memory_desc_t *md) {
  rt_blob_put_int(out, md->ndims);
  rt_blob_put_int(out, md->data_type);
  rt_blob_put_int(out, md->offset0);
  rt_blob_put_int(out, md->format_kind);
  for (int d = 0; d < md->ndims; d++) {
    rt_blob_put_int(out, md->dims[d]);
    rt_blob_put_int(out, md->padded_dims[d]);
    rt_blob_put_int(out, md->padded_offsets[d]);
  }
  const dnnl_blocking_desc_t *b = &md->format_desc.blocking;
  if (md->format_kind == dnnl_format_kind_wino) { /* Winograd's transformed weights */
    const dnnl_wino_desc_t *w = &md->format_desc.wino_desc;
    int64_t fields[] = {w->wino_format, w->r, w->alpha, w->ic, w->oc, w->ic_block, w->oc_block, w->ic2_block,
                        w->oc2_block, (int64_t)w->size};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) rt_blob_put_int(out, fields[i]);
    rt_blob_put_f32(out, w->adj_scale);
  }
  if (md->format_kind == dnnl_blocked) {
    for (int d = 0; d < md->ndims; d++) rt_blob_put_int(out, b->strides[d]);
    rt_blob_put_int(out, b->inner_nblks);
    for (int k = 0; k < b->inner_nblks; k++) {
      rt_blob_put_int(out, b->inner_blks[k]);
      rt_blob_put_int(out, b->inner_idxs[k]);
    }
  }
  rt_blob_put_int(out, (int64_t)md->extra.flags);
  rt_blob_put_int(out, md->extra.compensation_mask);
  rt_blob_put_f32(out, md->extra.scale_adjust);
  rt_blob_put_int(out, md->extra.asymm_compensation_mask);
}

static bool md_writable(const dnnl_memory_desc_t *md) {
  return md->format_kind == dnnl_blocked || md->format_kind == dnnl_format_kind_undef ||
         md->format_kind == dnnl_format_kind_wino;
}

static void put_dnnl(hlo_strbuf *out, const rt_cpu_dnnl *d) {
  rt_blob_put_int(out, d->conv ? d->conv->id : -1);
  rt_blob_put_int(out, d->root->id);
  rt_blob_put_int(out, d->pool ? d->pool->id : -1);
  rt_blob_put_int(out, d->concat ? d->concat->id : -1);
  rt_blob_put_int(out, d->block);
  for (int k = 0; d->concat && k < d->concat->operand_count; k++) rt_blob_put_int(out, d->operand_blocked[k]);
  rt_blob_put_int(out, d->post_count);
  for (int k = 0; k < d->post_count; k++) {
    const rt_dnnl_post *p = &d->posts[k];
    int64_t fields[] = {p->kind, p->instr->id, p->term, p->input, p->values_offset, d->post_reorder[k].offset};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) rt_blob_put_int(out, fields[i]);
    rt_blob_put_f32(out, p->lo);
    rt_blob_put_f32(out, p->hi);
    put_md(out, &d->post_md[k]);
    put_md(out, &d->post_in_md[k]);
  }
  rt_blob_put_int(out, d->term_count);
  for (int k = 0; k < d->term_count; k++) {
    const rt_dnnl_term *t = &d->terms[k];
    int64_t fields[] = {t->op, t->a, t->b, t->input};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) rt_blob_put_int(out, fields[i]);
    rt_blob_put_f32(out, t->value);
  }
  rt_blob_put_int(out, d->input_count);
  for (int k = 0; k < d->input_count; k++) rt_blob_put_int(out, d->inputs[k]->id);
  rt_blob_put_int(out, d->member_count);
  for (int k = 0; k < d->member_count; k++) rt_blob_put_int(out, d->members[k]->id);
  const dnnl_memory_desc_t *mds[] = {&d->src_in_md, &d->src_md, &d->weights_in_md, &d->weights_md, &d->bias_md,
                                     &d->dst_md, &d->out_md, &d->scratchpad_md, &d->safe_scratchpad_md,
                                     &d->safe_weights_md};
  for (size_t i = 0; i < sizeof mds / sizeof mds[0]; i++) put_md(out, mds[i]);
  int64_t fields[] = {d->blocked_out, d->prims, d->weights_bytes, d->out_bytes, d->scratch_bytes,
                      d->scratchpad_offset, d->dst_offset, d->weights_scratch_offset, d->src_reorder.offset,
                      d->weights_reorder.offset, d->dst_reorder.offset, d->weight_param, d->alg,
                      d->safe_weights_reorder.offset, d->wino, d->wino_workers, d->wino_offset};
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) rt_blob_put_int(out, fields[i]);
}

/* Whether every memory descriptor of d can be written (a format other than blocked, which
 * no plan has chosen so far, is refused rather than written wrong). */
static bool dnnl_writable(const rt_cpu_dnnl *d) {
  const dnnl_memory_desc_t *mds[] = {&d->src_in_md, &d->src_md, &d->weights_in_md, &d->weights_md, &d->bias_md,
                                     &d->dst_md, &d->out_md, &d->scratchpad_md, &d->safe_scratchpad_md,
                                     &d->safe_weights_md};
  for (size_t i = 0; i < sizeof mds / sizeof mds[0]; i++)
    if (!md_writable(mds[i])) return false;
  for (int k = 0; k < d->post_count; k++)
    if (!md_writable(&d->post_md[k]) || !md_writable(&d->post_in_md[k])) return false;
  return true;
}

static void put_step(hlo_strbuf *out, const rt_cpu_step *s) {
  rt_blob_put_int(out, s->kind);
  rt_blob_put_int(out, kernel_family(s));
  int64_t fields[] = {s->storage, s->output, s->in_place, s->offset, s->scratch_bytes, s->scratch_offset,
                      s->kept, s->stamp_offset, s->weight_param, s->weight_kept, s->weight_offset, s->weight_bytes};
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) rt_blob_put_int(out, fields[i]);
  rt_blob_put_int(out, s->part_count);
  for (int p = 0; p < s->part_count; p++) rt_blob_put_int(out, s->part_offsets[p]);
  rt_blob_put_int(out, s->free_count);
  for (int k = 0; k < s->free_count; k++) rt_blob_put_int(out, s->frees[k]);
  rt_blob_put_int(out, s->kept ? s->kept_param_count : 0);
  for (int k = 0; s->kept && k < s->kept_param_count; k++) rt_blob_put_int(out, s->kept_params[k]);
  if (s->kind == RT_STEP_FUSED) put_fusion(out, s->fusion);
  if (s->kind == RT_STEP_DNNL) put_dnnl(out, s->dnnl);
}

static hlo_status check_writable(const rt_cpu_plan *plan, hlo_diag *diag) {
  for (int i = 0; i < plan->step_count; i++) {
    const rt_cpu_step *s = &plan->steps[i];
    bool picked = (s->kind != RT_STEP_FAST && s->kind != RT_STEP_SLOW) || kernel_family(s) != RT_KERNEL_NONE;
    if (!picked || (s->kind == RT_STEP_DNNL && !dnnl_writable(s->dnnl)))
      return hlo_diag_set(diag, HLO_ERR_UNSUPPORTED, "cannot serialize the step of %%%s (%s)", s->instr->name,
                          picked ? "a oneDNN layout that is not blocked" : "a kernel no picker gives");
  }
  return HLO_OK;
}

static void put_plan(hlo_strbuf *out, const rt_cpu_plan *plan) {
  int64_t fields[] = {plan->step_count, plan->arena_bytes, plan->buffer_count, plan->buffer_bytes,
                      plan->peak_live_bytes, plan->max_operands, plan->dynamic, plan->kept_count, plan->kept_slots};
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) rt_blob_put_int(out, fields[i]);
  for (int i = 0; i < plan->step_count; i++) put_step(out, &plan->steps[i]);
}

hlo_status rt_cpu_serialize(const hlo_module *module, const rt_cpu_plan *plan, const char *source, size_t source_len,
                            void **bytes, size_t *len, hlo_diag *diag) {
  if (check_writable(plan, diag) != HLO_OK) return diag->status;
  hlo_strbuf out;
  hlo_sb_init(&out);
  hlo_sb_append(&out, RT_CPU_BLOB_MAGIC, 8);
  unsigned char version = RT_CPU_BLOB_VERSION;
  hlo_sb_append(&out, (const char *)&version, 1);
  hlo_sb_append(&out, "\0\0\0\0\0\0\0\0", 8); /* the checksum, filled last */
  rt_blob_put_bytes(&out, source, source_len);
  rt_cpu_encode_module(&out, module, true); /* what the passes left uncalled (inlined bodies) never runs */
  put_plan(&out, plan);
  size_t total = out.len;
  char *data = hlo_sb_take(&out);
  if (!data) return hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory serializing module %s", module->name);
  uint64_t sum = rt_blob_checksum(data + RT_CPU_BLOB_HEADER, total - RT_CPU_BLOB_HEADER);
  for (int i = 0; i < 8; i++) data[9 + i] = (char)(sum >> (8 * i));
  *bytes = data;
  *len = total;
  return HLO_OK;
}
