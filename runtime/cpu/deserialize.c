/* Reading a serialized cpu executable (format in serialize.c): the header is checked (magic,
 * version, checksum), then the source module's encoding is found (decoded only at a bind),
 * and the optimized module (deserialize_module.c) and the plan are read back, every count and
 * index checked against its range, so a truncated or damaged blob is a clear error and never
 * a pointer out of bounds.
 *
 * No pass runs and nothing is planned: each step's kernel is asked of the picker recorded
 * for it (a lookup, checked to give the same scratch sizes), fused programs and oneDNN
 * descriptions are read as they were decided, and oneDNN's primitives, which oneDNN 2.6
 * cannot serialize, are made from those descriptions at the first execute
 * (rt_cpu_plan_make_primitives: oneDNN generates their code then, as it did at compile). */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blob_internal.h"
#include "dnnl_internal.h"
#include "exec_internal.h"
#include "fusion_internal.h"

typedef struct reader {
  rt_blob_in *in;
  const hlo_comp *entry;
  int n; /* entry instructions: steps */
  /* the module's arena, which also holds the plan's small pieces (the steps' lists, fused
   * programs): packed after the instructions, not in hundreds of allocations of their own
   * (plan->pieces_in_module) */
  hlo_arena *arena;
  /* for ATTENTION steps, found again: the entry's use counts and results, and room for the
   * matcher's marks (made at the first such step) */
  int *use_count;
  bool *result, *inside;
} reader;

/* count items of size bytes from the arena (zeroed); NULL with the failure set when memory
 * runs out. */
static void *get_room(reader *r, int64_t count, size_t size) {
  void *p = hlo_arena_alloc(r->arena, size * (size_t)count);
  if (!p) rt_blob_fail(r->in, "out of memory");
  return p;
}

static const hlo_instr *get_instr_ref(reader *r, const char *what) {
  return r->entry->instrs[rt_blob_get_range(r->in, 0, r->n - 1, what)];
}

/* ---- kernels ---- */

/* The kernel the recorded picker gives step now; false when it gives none, or another
 * scratch size than the plan has room for. */
static bool repick(rt_cpu_step *s, rt_cpu_kernel_family family) {
  const hlo_instr *x = s->instr;
  int64_t bytes = 0;
  bool fast = s->kind == RT_STEP_FAST, slow = s->kind == RT_STEP_SLOW;
  switch (family) {
    case RT_KERNEL_NONE: return !fast && !slow;
    case RT_KERNEL_ELEMENTWISE: return fast && (s->fast = rt_cpu_pick_elementwise(x)) != NULL;
    case RT_KERNEL_LAYOUT: return fast && (s->fast = rt_cpu_pick_layout(x)) != NULL;
    case RT_KERNEL_REDUCE: return fast && (s->fast = rt_cpu_pick_reduce(x)) != NULL;
    case RT_KERNEL_GATHER: return fast && (s->fast = rt_cpu_pick_gather(x)) != NULL;
    case RT_KERNEL_BATCH_NORM_PARTS:
      return fast && s->part_count == x->shape.tuple_count && (s->fast = rt_cpu_pick_batch_norm_parts(x)) != NULL;
    case RT_KERNEL_CONV:
      return fast && (s->fast_scratch = rt_cpu_pick_conv_scratch(x, &bytes)) != NULL && bytes == s->scratch_bytes;
    case RT_KERNEL_DOT:
      return fast && (s->fast_scratch = rt_cpu_pick_dot_scratch(x, &bytes)) != NULL && bytes == s->scratch_bytes;
    case RT_KERNEL_BATCH_NORM: return slow && (s->slow = rt_cpu_pick_batch_norm(x)) != NULL;
    case RT_KERNEL_SLOW: return slow && (s->slow = rt_cpu_slow_kernel(x->opcode)) != NULL;
    default: return false;
  }
}

/* ---- fused programs ---- */

static void get_fusion_instr(rt_blob_in *in, fusion_instr *x, int input_count) {
  enum { REGS = FUSION_MAX_REGS - 1 };
  x->code = (fusion_code)rt_blob_get_range(in, FU_LOAD, FU_CLAMP, "a fused instruction");
  x->op = (hlo_opcode)rt_blob_get_range(in, 0, HLO_OP_COUNT - 1, "a fused instruction's op");
  x->dir = (hlo_direction)rt_blob_get_range(in, HLO_DIR_NONE, HLO_DIR_GE, "a fused comparison");
  x->dst = (int)rt_blob_get_range(in, 0, REGS, "a register");
  x->a = (int)rt_blob_get_range(in, 0, REGS, "a register");
  x->b = (int)rt_blob_get_range(in, 0, REGS, "a register");
  x->c = (int)rt_blob_get_range(in, 0, REGS, "a register");
  x->tile = (int)rt_blob_get_range(in, -1, FUSION_MAX_TILES - 1, "a tile");
  x->input = (int)rt_blob_get_range(in, -1, input_count - 1, "a fused load");
  x->dtype = (hlo_dtype)rt_blob_get_range(in, 0, HLO_DTYPE_COUNT - 1, "a fused load's type");
  x->linear = rt_blob_get_bool(in, "a fused load");
  x->inner = rt_blob_get_range(in, 0, INT64_MAX, "a fused load's broadcast");
  x->period = rt_blob_get_range(in, 0, INT64_MAX, "a fused load's broadcast");
  x->imm = rt_blob_get_f32(in, "a fused constant");
  if (x->code == FU_LOAD && !x->linear && (x->inner < 1 || x->period < 1)) /* divisors */
    rt_blob_fail(in, "a fused load's broadcast");
}

/* The head's kernel, picked again as classify picked it (convolution first), and for a flat
 * dot head its flat instruction; false when either differs from what was planned. */
static bool restore_head(reader *r, rt_cpu_fusion *f) {
  int64_t bytes = 0;
  f->head_kernel = rt_cpu_pick_conv_scratch(f->head, &bytes);
  if (!f->head_kernel) f->head_kernel = rt_cpu_pick_dot_scratch(f->head, &bytes);
  if (!f->head_kernel) return false;
  if (!f->flat) return bytes == f->head_scratch_bytes;
  const hlo_instr *dot = f->head;
  int nb = dot->dot ? dot->dot->lhs_batch.count : 0;
  if (dot->opcode != HLO_OP_DOT || !dot->dot || dot->operand_count != 2 || nb < 1 ||
      dot->operands[0]->shape.rank != nb + 2 || dot->operands[0]->shape.dims[nb + 1] <= 0 ||
      dot->dot->rhs_contracting.count != 1 || dot->shape.rank < 1)
    return false;
  rt_cpu_fusion_flat_head(f, r->entry->instrs[f->inputs[f->head_args[1]]]);
  return rt_cpu_pick_dot_scratch(&f->flat_instr, &bytes) && bytes == f->head_scratch_bytes;
}

/* What a group needs allocated: its flat_* fields (a copy of the head instruction, 1.6 KB)
 * only when it has a flat head. A fresh process faults in every page a load touches, and
 * full-size groups spread over more of them (gpt2: 39 of the load's 147 page faults). */
static size_t fusion_bytes(bool flat) { return flat ? sizeof(rt_cpu_fusion) : offsetof(rt_cpu_fusion, flat_rows); }

/* The program is read into read, then moved into an allocation of its size. */
static rt_cpu_fusion *get_fusion(reader *r) {
  rt_blob_in *in = r->in;
  rt_cpu_fusion read, *f = &read;
  memset(f, 0, fusion_bytes(false));
  f->input_count = (int)rt_blob_get_count(in, FUSION_MAX_REGS, "a fused program's inputs");
  f->inputs = in->failed ? NULL : get_room(r, f->input_count, sizeof(int));
  for (int k = 0; f->inputs && k < f->input_count; k++) f->inputs[k] = get_instr_ref(r, "a fused input")->id;
  f->instr_count = (int)rt_blob_get_count(in, FUSION_MAX_REGS, "a fused program");
  f->instrs = in->failed ? NULL : get_room(r, f->instr_count, sizeof(fusion_instr));
  for (int k = 0; f->instrs && k < f->instr_count; k++) get_fusion_instr(in, &f->instrs[k], f->input_count);
  int last_input = f->input_count > 0 ? f->input_count - 1 : 0;
  f->reg_count = (int)rt_blob_get_range(in, 0, FUSION_MAX_REGS, "a fused program's registers");
  f->result = (int)rt_blob_get_range(in, 0, f->reg_count - 1, "a fused program's result");
  f->tiles = (int)rt_blob_get_range(in, 0, FUSION_MAX_TILES, "a fused program's tiles");
  f->count = rt_blob_get_range(in, 0, HLO_MAX_ELEMENTS, "a fused program's size");
  f->out_dtype = (hlo_dtype)rt_blob_get_range(in, 0, HLO_DTYPE_COUNT - 1, "a fused program's type");
  f->members = (int)rt_blob_get_range(in, 0, INT32_MAX, "a fused program's members");
  int head = (int)rt_blob_get_range(in, -1, r->n - 1, "a fused head");
  f->head_scratch_bytes = rt_blob_get_range(in, 0, INT64_MAX, "a fused head's scratch");
  f->head_args[0] = (int)rt_blob_get_range(in, 0, last_input, "a fused head's operand");
  f->head_args[1] = (int)rt_blob_get_range(in, 0, last_input, "a fused head's operand");
  f->flat = rt_blob_get_bool(in, "a fused head");
  int tail = (int)rt_blob_get_range(in, -1, r->n - 1, "a fused reduce");
  f->reducer = (hlo_opcode)rt_blob_get_range(in, 0, HLO_OP_COUNT - 1, "a fused reduce");
  f->inner = rt_blob_get_range(in, 0, HLO_MAX_ELEMENTS, "a fused reduce");
  f->tail_init = (int)rt_blob_get_range(in, 0, last_input, "a fused reduce's init");
  for (int k = 0; !in->failed && k < f->instr_count; k++)
    if (f->instrs[k].code == FU_LOAD && f->instrs[k].input < 0 && head < 0) rt_blob_fail(in, "a fused load of no head");
  f = in->failed ? NULL : get_room(r, 1, fusion_bytes(read.flat));
  if (!f) return NULL; /* what was read stays in the arena, freed with the module */
  memcpy(f, &read, fusion_bytes(false));
  if (!in->failed && head >= 0 && f->input_count > 0) {
    f->head = r->entry->instrs[head];
    if (!restore_head(r, f)) rt_blob_fail(in, "a fused head whose kernel is not the one planned");
  }
  if (!in->failed && tail >= 0) f->tail = r->entry->instrs[tail];
  if (in->failed || (head >= 0 && !f->head)) {
    rt_blob_fail(in, "a fused program");
    return NULL;
  }
  return f;
}

/* ---- oneDNN descriptions ---- */

static void get_md(rt_blob_in *in, dnnl_memory_desc_t *md) {
  *md = (dnnl_memory_desc_t){0};
  md->ndims = (int)rt_blob_get_range(in, 0, DNNL_MAX_NDIMS, "a oneDNN layout");
  md->data_type = (dnnl_data_type_t)rt_blob_get_range(in, dnnl_data_type_undef, dnnl_u8, "a oneDNN type");
  md->offset0 = rt_blob_get_int(in, "a oneDNN layout");
  md->format_kind =
      (dnnl_format_kind_t)rt_blob_get_range(in, dnnl_format_kind_undef, dnnl_format_kind_wino, "a oneDNN format");
  for (int d = 0; d < md->ndims; d++) {
    md->dims[d] = rt_blob_get_int(in, "a oneDNN layout");
    md->padded_dims[d] = rt_blob_get_int(in, "a oneDNN layout");
    md->padded_offsets[d] = rt_blob_get_int(in, "a oneDNN layout");
  }
  dnnl_blocking_desc_t *b = &md->format_desc.blocking;
  if (md->format_kind == dnnl_format_kind_wino) { /* oneDNN compares it with its own when the primitive is made */
    dnnl_wino_desc_t *w = &md->format_desc.wino_desc;
    w->wino_format = (dnnl_wino_memory_format_t)rt_blob_get_range(in, dnnl_wino_undef, dnnl_wino_wei_OBaaIBOIio, "a Winograd layout");
    int *ints[] = {&w->r, &w->alpha, &w->ic, &w->oc, &w->ic_block, &w->oc_block, &w->ic2_block, &w->oc2_block};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) *ints[i] = (int)rt_blob_get_range(in, 0, INT32_MAX, "a Winograd layout");
    w->size = (size_t)rt_blob_get_range(in, 0, INT64_MAX, "a Winograd layout");
    w->adj_scale = rt_blob_get_f32(in, "a Winograd layout");
  }
  if (md->format_kind == dnnl_blocked) {
    for (int d = 0; d < md->ndims; d++) b->strides[d] = rt_blob_get_int(in, "a oneDNN layout");
    b->inner_nblks = (int)rt_blob_get_range(in, 0, DNNL_MAX_NDIMS, "a oneDNN layout");
    for (int k = 0; k < b->inner_nblks; k++) {
      b->inner_blks[k] = rt_blob_get_int(in, "a oneDNN layout");
      b->inner_idxs[k] = rt_blob_get_range(in, 0, DNNL_MAX_NDIMS - 1, "a oneDNN layout");
    }
  }
  md->extra.flags = (uint64_t)rt_blob_get_int(in, "a oneDNN layout");
  md->extra.compensation_mask = (int)rt_blob_get_int(in, "a oneDNN layout");
  md->extra.scale_adjust = rt_blob_get_f32(in, "a oneDNN layout");
  md->extra.asymm_compensation_mask = (int)rt_blob_get_int(in, "a oneDNN layout");
}

static void get_post(reader *r, rt_cpu_dnnl *d, int k) {
  rt_blob_in *in = r->in;
  rt_dnnl_post *p = &d->posts[k];
  p->kind = (rt_dnnl_post_kind)rt_blob_get_range(in, RT_DNNL_BIAS, RT_DNNL_CLIP, "a post-op");
  p->instr = get_instr_ref(r, "a post-op");
  p->term = (int)rt_blob_get_range(in, -1, RT_DNNL_MAX_TERMS - 1, "a post-op's term");
  p->input = (int)rt_blob_get_range(in, -1, RT_DNNL_MAX_INPUTS - 1, "a post-op's input");
  p->values_offset = rt_blob_get_range(in, 0, INT64_MAX, "a post-op's values");
  d->post_reorder[k].offset = rt_blob_get_range(in, 0, INT64_MAX, "a residual's reorder");
  p->lo = rt_blob_get_f32(in, "a clip");
  p->hi = rt_blob_get_f32(in, "a clip");
  get_md(in, &d->post_md[k]);
  get_md(in, &d->post_in_md[k]);
}

/* Terms name earlier terms only (term_at recurses), posts and terms existing inputs. */
static bool dnnl_indices_hold(const rt_cpu_dnnl *d) {
  for (int k = 0; k < d->term_count; k++) {
    const rt_dnnl_term *t = &d->terms[k];
    if (t->a >= k || t->b >= k || t->input >= d->input_count) return false;
    if (t->op == HLO_OP_PARAMETER && t->input < 0) return false;
    if (t->op != HLO_OP_PARAMETER && t->op != HLO_OP_CONSTANT && t->a < 0) return false;
  }
  for (int k = 0; k < d->post_count; k++)
    if (d->posts[k].term >= d->term_count || d->posts[k].input >= d->input_count) return false;
  /* a pool or a concatenation: no convolution, itself the root, a block the kernel has */
  bool blocked = (d->block == 8 || d->block == 16) && d->post_count == 0 && !d->conv;
  if (d->pool) return blocked && !d->concat && d->root == d->pool && rt_cpu_dnnl_pool_supported(d->pool);
  if (d->concat) return blocked && d->root == d->concat && rt_cpu_dnnl_concat_supported(d->concat);
  const hlo_instr *conv = d->conv;
  return conv && conv->opcode == HLO_OP_CONVOLUTION && conv->operand_count == 2 && conv->conv && conv->window;
}

/* An instruction's index or -1 (none). */
static const hlo_instr *get_optional_ref(reader *r, const char *what) {
  int id = (int)rt_blob_get_range(r->in, -1, r->n - 1, what);
  return id >= 0 ? r->entry->instrs[id] : NULL;
}

static rt_cpu_dnnl *get_dnnl(reader *r) {
  rt_blob_in *in = r->in;
  rt_cpu_dnnl *d = hlo_malloc(sizeof *d); /* post_md past post_count stays untouched: no page faults */
  if (!d) return rt_blob_fail(in, "out of memory"), NULL;
  memset(d, 0, offsetof(rt_cpu_dnnl, post_md));
  d->conv = get_optional_ref(r, "a convolution");
  d->root = get_instr_ref(r, "a convolution's epilogue");
  d->pool = get_optional_ref(r, "a pool");
  d->concat = get_optional_ref(r, "a concatenation");
  d->block = (int)rt_blob_get_range(in, 0, 16, "a channel block");
  if (d->concat && d->concat->operand_count > RT_DNNL_MAX_INPUTS) rt_blob_fail(in, "a concatenation");
  for (int k = 0; d->concat && !in->failed && k < d->concat->operand_count; k++)
    d->operand_blocked[k] = rt_blob_get_bool(in, "a concatenation's layouts");
  d->post_count = (int)rt_blob_get_range(in, 0, RT_DNNL_MAX_POSTS, "post-ops");
  for (int k = 0; k < d->post_count; k++) get_post(r, d, k);
  d->term_count = (int)rt_blob_get_range(in, 0, RT_DNNL_MAX_TERMS, "per-feature terms");
  for (int k = 0; k < d->term_count; k++) {
    rt_dnnl_term *t = &d->terms[k];
    t->op = (hlo_opcode)rt_blob_get_range(in, 0, HLO_OP_COUNT - 1, "a term");
    t->a = (int)rt_blob_get_range(in, -1, RT_DNNL_MAX_TERMS - 1, "a term");
    t->b = (int)rt_blob_get_range(in, -1, RT_DNNL_MAX_TERMS - 1, "a term");
    t->input = (int)rt_blob_get_range(in, -1, RT_DNNL_MAX_INPUTS - 1, "a term");
    t->value = rt_blob_get_f32(in, "a term");
  }
  d->input_count = (int)rt_blob_get_range(in, 0, RT_DNNL_MAX_INPUTS, "a convolution's inputs");
  for (int k = 0; k < d->input_count; k++) d->inputs[k] = get_instr_ref(r, "a convolution's input");
  d->member_count = (int)rt_blob_get_range(in, 0, RT_DNNL_MAX_MEMBERS, "per-feature members");
  for (int k = 0; k < d->member_count; k++) d->members[k] = get_instr_ref(r, "a per-feature member");
  dnnl_memory_desc_t *mds[] = {&d->src_in_md, &d->src_md, &d->weights_in_md, &d->weights_md, &d->bias_md,
                               &d->dst_md, &d->out_md, &d->scratchpad_md, &d->safe_scratchpad_md,
                               &d->safe_weights_md};
  for (size_t i = 0; i < sizeof mds / sizeof mds[0]; i++) get_md(in, mds[i]);
  d->blocked_out = rt_blob_get_bool(in, "a convolution's layout");
  d->prims = (unsigned)rt_blob_get_range(in, 0, RT_DNNL_HAS_SAFE_WEIGHTS_REORDER * 2 - 1, "a convolution's primitives");
  int64_t *sizes[] = {&d->weights_bytes, &d->out_bytes, &d->scratch_bytes, &d->scratchpad_offset, &d->dst_offset,
                      &d->weights_scratch_offset, &d->src_reorder.offset, &d->weights_reorder.offset,
                      &d->dst_reorder.offset};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) *sizes[i] = rt_blob_get_range(in, 0, INT64_MAX, "a size");
  d->weight_param = (int)rt_blob_get_range(in, -1, INT32_MAX, "a convolution's weights");
  d->alg = rt_blob_get_range(in, 0, INT32_MAX, "a convolution's algorithm") == dnnl_convolution_winograd
               ? dnnl_convolution_winograd
               : dnnl_convolution_direct;
  d->safe_weights_reorder.offset = rt_blob_get_range(in, 0, INT64_MAX, "a convolution's weights");
  d->wino = rt_blob_get_bool(in, "a convolution's algorithm");
  d->wino_workers = (int)rt_blob_get_range(in, 0, INT32_MAX, "a convolution's workers");
  d->wino_offset = rt_blob_get_range(in, 0, INT64_MAX, "a convolution's tiles");
  if (!in->failed && !dnnl_indices_hold(d)) rt_blob_fail(in, "a convolution's description");
  if (in->failed) {
    free(d);
    return NULL;
  }
  return d;
}

/* ---- steps and the plan ---- */

/* An empty list is NULL (every reader goes by its count): most steps free nothing and keep
 * nothing. */
static int *get_int_list(reader *r, int *count, int64_t hi, const char *what) {
  *count = (int)rt_blob_get_count(r->in, INT32_MAX, what);
  int *list = *count && !r->in->failed ? get_room(r, *count, sizeof(int)) : NULL;
  for (int k = 0; list && k < *count; k++) list[k] = (int)rt_blob_get_range(r->in, 0, hi, what);
  return list;
}

/* An ATTENTION step's description, found again at its instruction as the plan found it
 * (attention_plan.c); its inputs must be steps that hold values. */
static void get_attention(reader *r, const rt_cpu_plan *plan, rt_cpu_step *s) {
  if (!r->use_count) {
    r->inside = hlo_calloc((size_t)r->n + 1, sizeof(bool));
    if (!r->inside || !rt_cpu_attention_uses(r->entry, &r->use_count, &r->result)) {
      rt_blob_fail(r->in, "out of memory");
      return;
    }
  }
  bool oom;
  s->attention = rt_cpu_attention_match(r->entry, s->instr, r->use_count, r->result, r->inside, &oom);
  if (oom) rt_blob_fail(r->in, "out of memory");
  else if (!s->attention) rt_blob_fail(r->in, "an attention step that is none");
  for (int k = 0; s->attention && k < s->attention->input_count && !r->in->failed; k++)
    if (s->attention->inputs[k] >= s->instr->id || plan->steps[s->attention->inputs[k]].kind == RT_STEP_INSIDE)
      rt_blob_fail(r->in, "an attention step's inputs");
}

static void get_step(reader *r, rt_cpu_plan *plan, rt_cpu_step *s) {
  rt_blob_in *in = r->in;
  int64_t arena = plan->arena_bytes;
  s->kind = (rt_cpu_step_kind)rt_blob_get_range(in, RT_STEP_PARAM, RT_STEP_ATTENTION, "a step's kind");
  rt_cpu_kernel_family family = rt_blob_get_range(in, 0, RT_KERNEL_FAMILY_COUNT - 1, "a step's kernel");
  s->storage = (int)rt_blob_get_range(in, 0, INT32_MAX, "a step's storage");
  s->output = rt_blob_get_bool(in, "a step");
  s->in_place = rt_blob_get_bool(in, "a step");
  s->offset = rt_blob_get_range(in, -1, arena, "a buffer's offset");
  s->scratch_bytes = rt_blob_get_range(in, 0, INT64_MAX, "a step's scratch");
  s->scratch_offset = rt_blob_get_range(in, 0, arena, "a step's scratch");
  s->kept = rt_blob_get_bool(in, "a step");
  s->stamp_offset = rt_blob_get_range(in, 0, arena, "a stamp's offset");
  s->weight_param = (int)rt_blob_get_range(in, -1, r->entry->param_count - 1, "kept weights");
  s->weight_kept = (int)rt_blob_get_range(in, -1, r->n - 1, "kept weights");
  s->weight_offset = rt_blob_get_range(in, 0, arena, "kept weights");
  s->weight_bytes = rt_blob_get_range(in, 0, arena, "kept weights");
  s->part_count = (int)rt_blob_get_range(in, 0, s->instr->shape.tuple_count, "a step's parts");
  s->part_offsets = s->part_count && !in->failed ? get_room(r, s->part_count, sizeof(int64_t)) : NULL;
  for (int p = 0; s->part_offsets && p < s->part_count; p++) s->part_offsets[p] = rt_blob_get_range(in, 0, arena, "a part");
  s->frees = get_int_list(r, &s->free_count, r->n - 1, "a step's frees");
  s->kept_params = get_int_list(r, &s->kept_param_count, r->entry->param_count - 1, "a kept step's parameters");
  if (rt_cpu_step_writes_buffer(s) && s->scratch_bytes > arena - s->scratch_offset) /* only those have any placed */
    rt_blob_fail(in, "a step's scratch");
  if (s->kind == RT_STEP_FUSED && !in->failed) s->fusion = get_fusion(r);
  if (s->kind == RT_STEP_DNNL && !in->failed) s->dnnl = get_dnnl(r);
  if (s->kind == RT_STEP_ATTENTION && !in->failed) get_attention(r, plan, s);
  if (!in->failed && !repick(s, family)) rt_blob_fail(in, "a step whose kernel is not the one planned");
  /* weights are kept by a DNNL step, or packed for a product whose packing takes no more
   * room than the plan made (another processor's oneDNN may want more) */
  const hlo_instr *dot = in->failed || s->dnnl ? NULL : rt_cpu_step_packed_dot(s);
  if (!in->failed && rt_cpu_step_keeps_weights(s) && !s->dnnl &&
      !(dot && rt_cpu_dot_packed_bytes(dot) > 0 && rt_cpu_dot_packed_bytes(dot) <= s->weight_bytes))
    rt_blob_fail(in, "kept weights");
}

/* Whatever a step reads is an earlier step, and the operand table of an execute holds them. */
static bool inputs_hold(const rt_cpu_plan *plan) {
  for (int i = 0; i < plan->step_count; i++) {
    const rt_cpu_step *s = &plan->steps[i];
    int count = rt_cpu_step_input_count(s);
    if (count > plan->max_operands) return false;
    for (int k = 0; k < count; k++)
      if (rt_cpu_step_input(s, k) < 0 || rt_cpu_step_input(s, k) >= i) return false;
  }
  return true;
}

/* Each step's kind fits its instruction and every value read is there (step_check.c). */
static void check_values(rt_blob_in *in, const rt_cpu_plan *plan, const hlo_comp *entry) {
  int bad;
  bool oom;
  const char *what = rt_cpu_steps_check(plan, entry, &bad, &oom);
  if (!what) return;
  char why[sizeof in->why];
  if (!oom) snprintf(why, sizeof why, "step %%%s: %s", entry->instrs[bad]->name, what);
  rt_blob_fail(in, oom ? "out of memory" : why);
}

/* ---- extents: every byte a step will touch lies inside its buffer ----
 * The decoder bounds each offset alone; a blob whose checksums were recomputed after an edit
 * (a smaller arena, a larger fused count) must still not reach outside the arena or a
 * step's scratch, so each offset plus what is written or read there is checked too. */

/* [offset, offset + bytes) inside [0, limit), computed without overflow. */
static bool inside(int64_t offset, int64_t bytes, int64_t limit) {
  bool overflow = false;
  int64_t end = hlo_ck_add(&overflow, offset, bytes);
  return !overflow && offset >= 0 && bytes >= 0 && end <= limit;
}

/* The pieces of a DNNL step's scratch (rt_cpu_dnnl_build's layout), each inside it, and
 * its result and kept weights as big as the layouts written there; NULL, or what is not. */
static const char *dnnl_extents(const rt_cpu_dnnl *d, const rt_cpu_step *s) {
  int64_t room = s->scratch_bytes;
  if (!d->conv) return NULL; /* a pool or a concatenation: latch's own kernels, no scratch layout */
  if (rt_cpu_md_bytes(&d->out_md) != d->out_bytes) return "a convolution's result size";
  if (!inside(d->scratchpad_offset, rt_cpu_md_bytes(&d->scratchpad_md), room)) return "oneDNN's scratchpad";
  if ((d->prims & RT_DNNL_HAS_SAFE) && !inside(d->scratchpad_offset, rt_cpu_md_bytes(&d->safe_scratchpad_md), room))
    return "oneDNN's scratchpad";
  if ((d->prims & RT_DNNL_HAS_SRC_REORDER) && !inside(d->src_reorder.offset, rt_cpu_md_bytes(&d->src_md), room))
    return "a source reorder";
  if ((d->prims & RT_DNNL_HAS_DST_REORDER) && !inside(d->dst_offset, rt_cpu_md_bytes(&d->dst_md), room))
    return "a result reorder";
  if ((d->prims & RT_DNNL_HAS_WEIGHTS_REORDER) && !rt_cpu_step_keeps_weights(s) &&
      !inside(d->weights_scratch_offset, rt_cpu_md_bytes(&d->weights_md), room))
    return "a weights reorder";
  if ((d->prims & RT_DNNL_HAS_SAFE_WEIGHTS_REORDER) &&
      !inside(d->safe_weights_reorder.offset, rt_cpu_md_bytes(&d->safe_weights_md), room))
    return "a weights reorder";
  for (int k = 0; k < d->post_count; k++) {
    if ((d->prims & RT_DNNL_HAS_POST_REORDER(k)) && !inside(d->post_reorder[k].offset, rt_cpu_md_bytes(&d->post_md[k]), room))
      return "a residual's reorder";
    if (d->posts[k].term >= 0 && d->posts[k].input < 0 && d->dst_md.ndims >= 2 &&
        !inside(d->posts[k].values_offset, (int64_t)sizeof(float) * d->dst_md.dims[1], room))
      return "a post-op's values";
  }
  if (d->wino && !(rt_cpu_wino_valid(d) && inside(d->wino_offset, rt_cpu_wino_scratch_bytes(d), room)))
    return "Winograd tiles";
  /* kept weights: latch's Winograd filters, or oneDNN's reordered weights */
  int64_t kept = d->wino ? rt_cpu_wino_weights_bytes(d) : d->prims & RT_DNNL_HAS_WEIGHTS_REORDER ? rt_cpu_md_bytes(&d->weights_md) : 0;
  if (rt_cpu_step_keeps_weights(s) && d->weights_bytes < kept) return "kept weights";
  return NULL;
}

/* What a convolution's run reads from its inputs and writes into its result, each as large
 * as the layout it is read or written in: the source and weights as they arrive (and as the
 * primitive reads them when not reordered), each post-op's operand (and per-feature values,
 * one float per feature), the result. NULL, or what is not. */
static const char *dnnl_inputs(const rt_cpu_plan *plan, const rt_cpu_step *s) {
  const rt_cpu_dnnl *d = s->dnnl;
  if (!d->conv) return NULL;
  int64_t src = rt_cpu_value_room(plan, rt_cpu_dnnl_input(d, 0)), w = rt_cpu_value_room(plan, rt_cpu_dnnl_input(d, 1));
  if (rt_cpu_md_bytes(&d->src_in_md) > src || (!(d->prims & RT_DNNL_HAS_SRC_REORDER) && rt_cpu_md_bytes(&d->src_md) > src))
    return "a source larger than its value";
  if (rt_cpu_md_bytes(&d->weights_in_md) > w || (!(d->prims & RT_DNNL_HAS_WEIGHTS_REORDER) && rt_cpu_md_bytes(&d->weights_md) > w))
    return "weights larger than their value";
  const hlo_instr *conv = d->conv;
  int64_t features = hlo_shape_is_array(&conv->shape) ? conv->shape.dims[conv->conv->output_feature] : 0;
  for (int k = 0; k < d->term_count; k++)
    if (d->terms[k].op == HLO_OP_PARAMETER && rt_cpu_value_room(plan, rt_cpu_dnnl_input(d, 2 + d->terms[k].input)) < 4 * features)
      return "a per-feature term larger than its value";
  for (int k = 0; k < d->post_count; k++) {
    const rt_dnnl_post *p = &d->posts[k];
    int64_t room = p->input >= 0 ? rt_cpu_value_room(plan, rt_cpu_dnnl_input(d, 2 + p->input)) : INT64_MAX;
    if (p->term >= 0 && p->input < 0 && !inside(p->values_offset, 4 * features, s->scratch_bytes))
      return "a post-op's values";
    if (p->term < 0 && p->kind != RT_DNNL_ADD_FULL) continue;
    if (p->input < 0) room = 4 * features;
    bool reordered = d->prims & RT_DNNL_HAS_POST_REORDER(k);
    if ((reordered ? rt_cpu_md_bytes(&d->post_in_md[k]) : rt_cpu_md_bytes(&d->post_md[k])) > room ||
        (p->kind != RT_DNNL_ADD_FULL && room < 4 * features) || (p->kind == RT_DNNL_BIAS && rt_cpu_md_bytes(&d->bias_md) > room))
      return "a post-op's operand larger than its value";
  }
  int64_t out = hlo_shape_bytes(&s->instr->shape);
  if (!s->output && d->out_bytes > out) out = d->out_bytes;
  if (d->out_bytes > out || (!(d->prims & RT_DNNL_HAS_DST_REORDER) && rt_cpu_md_bytes(&d->dst_md) > out))
    return "a result larger than its buffer";
  return NULL;
}

static const char *step_extents(const rt_cpu_plan *plan, const rt_cpu_step *s) {
  int64_t arena = plan->arena_bytes;
  const hlo_shape *shape = &s->instr->shape;
  int64_t bytes = hlo_shape_bytes(shape);
  if (s->kind == RT_STEP_DNNL && s->dnnl->out_bytes > bytes) bytes = s->dnnl->out_bytes;
  const hlo_instr *instr = s->instr;
  if (s->kind == RT_STEP_CONST && !(instr->opcode == HLO_OP_CONSTANT && instr->literal && instr->literal->data &&
                                    hlo_shape_is_array(shape) && hlo_shape_equal(&instr->literal->shape, shape)))
    return "a constant step without its array data";
  if (s->kind == RT_STEP_PARAM && instr->opcode != HLO_OP_PARAMETER) return "a parameter step of another op";
  bool viewed = s->kind == RT_STEP_PART || (rt_cpu_step_writes_buffer(s) && !s->output && !s->part_count);
  if (viewed && !inside(s->offset, bytes, arena)) return "its buffer";
  for (int p = 0; p < s->part_count; p++)
    if (!inside(s->part_offsets[p], hlo_shape_bytes(&shape->tuple[p]), arena)) return "a part's buffer";
  if (rt_cpu_step_writes_buffer(s) && s->scratch_bytes && !inside(s->scratch_offset, s->scratch_bytes, arena))
    return "its scratch";
  int64_t slots = 1 + (int64_t)s->kept_param_count;
  if (s->kept && (s->stamp_offset % 8 || !inside(s->stamp_offset, 8 * slots, arena))) return "its stamps";
  if (s->weight_kept >= 0 && (!plan->steps[s->weight_kept].kept || s->weight_kept >= s->instr->id))
    return "the step whose weights it keeps";
  if (s->kind == RT_STEP_DNNL && rt_cpu_step_keeps_weights(s) &&
      (!inside(s->weight_offset, s->dnnl->weights_bytes, arena) || s->stamp_offset % 8 || !inside(s->stamp_offset, 8, arena)))
    return "its kept weights";
  if (s->kind != RT_STEP_DNNL && rt_cpu_step_keeps_weights(s) &&
      (!inside(s->weight_offset, s->weight_bytes, arena) || s->stamp_offset % 8 || !inside(s->stamp_offset, 8, arena)))
    return "its kept weights";
  const char *what = s->kind == RT_STEP_DNNL ? dnnl_extents(s->dnnl, s) : NULL;
  return what || s->kind != RT_STEP_DNNL ? what : dnnl_inputs(plan, s);
}

/* Every buffer a step places in the arena starts where the planner puts buffers, at a
 * multiple of RT_CPU_ALIGN: kernels read floats and wider vectors there. */
static const char *step_alignment(const rt_cpu_step *s) {
  bool viewed = s->kind == RT_STEP_PART || (rt_cpu_step_writes_buffer(s) && !s->output && !s->part_count);
  if (viewed && s->offset % RT_CPU_ALIGN) return "its buffer";
  for (int p = 0; p < s->part_count; p++)
    if (s->part_offsets[p] % RT_CPU_ALIGN) return "a part's buffer";
  if (rt_cpu_step_writes_buffer(s) && s->scratch_bytes && s->scratch_offset % RT_CPU_ALIGN) return "its scratch";
  if (rt_cpu_step_keeps_weights(s) && s->weight_offset % RT_CPU_ALIGN)
    return "its kept weights";
  return NULL;
}

/* Each step's buffers, parts, scratch, stamps and kept weights inside the arena and aligned,
 * and each fused program one that runs inside the values it is given (fusion_check.c). */
static void check_extents(rt_blob_in *in, const rt_cpu_plan *plan) {
  for (int i = 0; i < plan->step_count && !in->failed; i++) {
    const rt_cpu_step *s = &plan->steps[i];
    const char *before = "", *what = step_extents(plan, s), *after = " reaches outside the arena or its scratch";
    if (!what && (what = step_alignment(s))) after = " is not aligned in the arena";
    if (!what && s->kind == RT_STEP_FUSED && (what = rt_cpu_fusion_check(plan, s)))
      before = "its fused program has ", after = "";
    if (!what) continue;
    char why[sizeof in->why];
    snprintf(why, sizeof why, "step %%%s: %s%s%s", s->instr->name, before, what, after);
    rt_blob_fail(in, why);
  }
}

/* Every value read in the layout it arrives in, every result described as written
 * (dnnl_check.c). */
static void check_layouts(rt_blob_in *in, const rt_cpu_plan *plan, const hlo_comp *entry) {
  int bad;
  const char *what = rt_cpu_dnnl_layouts_check(plan, entry, &bad);
  if (!what) return;
  char why[sizeof in->why];
  snprintf(why, sizeof why, "step %%%s: %s", entry->instrs[bad]->name, what);
  rt_blob_fail(in, why);
}

static rt_cpu_plan *get_plan(rt_blob_in *in, hlo_module *module) {
  rt_cpu_plan *plan = hlo_calloc(1, sizeof *plan);
  if (!plan) return rt_blob_fail(in, "out of memory"), NULL;
  plan->pieces_in_module = true;
  reader r = {.in = in, .entry = module->entry, .n = module->entry->instr_count, .arena = &module->arena};
  plan->step_count = (int)rt_blob_get_range(in, 0, r.n, "the plan's steps");
  plan->arena_bytes = rt_blob_get_range(in, 0, INT64_MAX / 2, "the plan's arena");
  plan->buffer_count = rt_blob_get_range(in, 0, INT64_MAX, "the plan");
  plan->buffer_bytes = rt_blob_get_range(in, 0, INT64_MAX, "the plan");
  plan->peak_live_bytes = rt_blob_get_range(in, 0, INT64_MAX, "the plan");
  plan->max_operands = (int)rt_blob_get_range(in, 0, INT32_MAX - 1, "the plan");
  plan->dynamic = rt_blob_get_bool(in, "the plan");
  plan->kept_count = (int)rt_blob_get_range(in, 0, r.n, "the plan's kept steps");
  plan->kept_slots = (int)rt_blob_get_range(in, 0, INT32_MAX, "the plan's kept stamps");
  if (!in->failed && plan->step_count != (plan->dynamic ? 0 : r.n)) rt_blob_fail(in, "the plan's steps");
  if (!in->failed && (int64_t)sizeof(uint64_t) * plan->kept_slots > plan->arena_bytes)
    rt_blob_fail(in, "the plan's kept stamps");
  plan->steps = in->failed ? NULL : hlo_calloc((size_t)plan->step_count + 1, sizeof(rt_cpu_step));
  if (!in->failed && !plan->steps) rt_blob_fail(in, "out of memory");
  for (int i = 0; i < plan->step_count && !in->failed; i++) {
    plan->steps[i].instr = module->entry->instrs[i];
    get_step(&r, plan, &plan->steps[i]);
    plan->primitives_pending = plan->primitives_pending || plan->steps[i].kind == RT_STEP_DNNL;
  }
  free(r.use_count);
  free(r.result);
  free(r.inside);
  if (!in->failed && !inputs_hold(plan)) rt_blob_fail(in, "a step's inputs");
  if (!in->failed) check_values(in, plan, module->entry);
  if (!in->failed) check_extents(in, plan);
  if (!in->failed) check_layouts(in, plan, module->entry);
  if (in->failed) {
    rt_cpu_plan_free(plan);
    return NULL;
  }
  return plan;
}

static hlo_status check_header(const unsigned char *p, size_t len, hlo_diag *diag) {
  if (len < RT_CPU_BLOB_HEADER || memcmp(p, RT_CPU_BLOB_MAGIC, 8) != 0)
    return hlo_diag_set(diag, HLO_ERR_INPUT, "not a serialized cpu executable (%zu bytes, no header)", len);
  if (p[8] != RT_CPU_BLOB_VERSION)
    return hlo_diag_set(diag, HLO_ERR_INPUT, "a serialized cpu executable of format version %d (this latch reads %d)",
                        p[8], RT_CPU_BLOB_VERSION);
  uint64_t sum = 0;
  for (int i = 0; i < 8; i++) sum |= (uint64_t)p[9 + i] << (8 * i);
  if (sum != rt_blob_checksum(p + RT_CPU_BLOB_HEADER, len - RT_CPU_BLOB_HEADER))
    return hlo_diag_set(diag, HLO_ERR_INPUT, "a damaged serialized cpu executable (checksum mismatch, %zu bytes)", len);
  return HLO_OK;
}

/* The decoder checks that every reference is in range; the verifier checks what the
 * kernel pickers and kernels take for granted of a module (attribute dims within ranks,
 * shapes that follow from operands, reducers that fit): a blob's module must be one the
 * passes could have made. hlo_verify_decoded leaves out what the decoder checked already
 * (links) and what no kernel reads (names). */
static void verify(rt_blob_in *in, const hlo_module *module) {
  if (!module || in->failed) return;
  hlo_diag diag;
  hlo_diag_clear(&diag);
  if (hlo_verify_decoded(module, &diag) == HLO_OK) return;
  if (strstr(diag.message, "out of memory")) {
    rt_blob_fail(in, "out of memory");
    return;
  }
  char why[sizeof in->why];
  snprintf(why, sizeof why, "a module that does not verify (%.120s)", diag.message);
  rt_blob_fail(in, why);
}

hlo_status rt_cpu_deserialize(const void *bytes, size_t len, hlo_module **module, rt_cpu_plan **plan,
                              const char **source, size_t *source_len, hlo_diag *diag) {
  *module = NULL;
  *plan = NULL;
  *source = NULL;
  *source_len = 0;
  if (check_header(bytes, len, diag) != HLO_OK) return diag->status;
  rt_blob_in in;
  rt_blob_in_init(&in, (const unsigned char *)bytes + RT_CPU_BLOB_HEADER, len - RT_CPU_BLOB_HEADER);
  size_t encoded_len;
  const char *encoded = rt_blob_get_bytes(&in, &encoded_len, "the source module");
  hlo_module *m = in.failed ? NULL : rt_cpu_decode_module(&in);
  verify(&in, m);
  rt_cpu_plan *p = m && !in.failed ? get_plan(&in, m) : NULL;
  if (!in.failed && in.p != in.end) rt_blob_fail(&in, "the end (bytes left over)");
  if (in.failed) {
    rt_cpu_plan_free(p);
    hlo_module_free(m);
    bool oom = strcmp(in.why, "out of memory") == 0;
    return hlo_diag_set(diag, oom ? HLO_ERR_INTERNAL : HLO_ERR_INPUT, "%s reading a serialized cpu executable: %s",
                        oom ? "out of memory" : "bad bytes", oom ? "" : in.why);
  }
  *module = m;
  *plan = p;
  *source = encoded;
  *source_len = encoded_len;
  return HLO_OK;
}

hlo_status rt_cpu_plan_make_primitives(rt_cpu_plan *plan, bool for_child, hlo_diag *diag) {
  for (int i = 0; i < plan->step_count; i++) {
    rt_cpu_step *s = &plan->steps[i];
    if (s->kind == RT_STEP_DNNL && for_child) rt_cpu_dnnl_release(s->dnnl); /* the parent's */
    if (s->kind == RT_STEP_DNNL && s->dnnl->conv && !s->dnnl->conv_prim && !rt_cpu_dnnl_recreate(s->dnnl, for_child))
      return hlo_diag_set(diag, HLO_ERR_INTERNAL,
                          "oneDNN did not take the cached description of convolution %%%s again (another oneDNN "
                          "or processor?)",
                          s->dnnl->conv->name);
  }
  plan->primitives_pending = false;
  return HLO_OK;
}
