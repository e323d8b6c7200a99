/* A convolution that is a weights gradient, on oneDNN's backward-weights primitive.
 *
 * The gradient of a convolution's weights is itself a convolution: the forward's source
 * [N, C, H, W] read with its batch dim as the features and its features as the batch, the
 * result's gradient [N, O, OH, OW] as the window (rhs dilated by the forward's stride), giving
 * [C, O, KH, KW]. Run as a forward convolution it is a poor fit for any kernel: a window as
 * large as a whole feature map, a result the size of a filter. oneDNN has a primitive for
 * exactly this product (it is what PyTorch's own backward calls), so an f32 convolution whose
 * lhs holds its features in an outer dim to its batch (the weights gradient's lhs: the
 * forward's source, batch first; XLA writes its weight gradients so too) is described to
 * oneDNN as the weights gradient of the forward convolution it comes from:
 *
 *   src          the lhs, its input-feature dim as N, its batch dim as C
 *   diff_dst     the rhs, its kernel input-feature dim as N, output-feature dim as O
 *   diff_weights the result, its output-feature dim as O, its batch dim as C
 *   strides      the window's rhs dilation; dilation: the window's stride - 1; padding: the
 *                window's (the result's spatial size must be what oneDNN's formula gives)
 *
 * Operands and result are told to oneDNN by their strides; the primitive reads and writes the
 * layouts it prefers (blocked), reordered into the step's scratch on the way in and out. The
 * primitive and its reorders are made when the plan picks the kernel and kept for the process
 * (a table under a lock, as dnnl_conv_bf16.c's); one oneDNN refuses, or offers only its
 * reference implementation for, is left to conv.c's path. A result that is not all finite,
 * from a gradient that is not either, is computed again by the reference kernel (oneDNN's
 * padded tiles multiply zeros of the padding by an inf or NaN of the gradient, taps the
 * reference skips). */
#include <omp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "dnnl_internal.h"
#include "kernel_internal.h"

/* What oneDNN is told: dims and strides of source, gradient of the result and gradient of
 * the weights, in oneDNN's (N, C, H, W), (N, O, OH, OW), (O, C, KH, KW) order, and the window. */
typedef struct grad_key { /* dnnl_dims_t throughout: oneDNN's functions take whole ones */
  dnnl_dims_t src, src_strides, diff_dst, diff_dst_strides, diff_wei, diff_wei_strides;
  dnnl_dims_t stride, dilate, pad_low, pad_high;
  int64_t threads; /* the OpenMP team it is made for (rt_cpu_dnnl_team) */
} grad_key;

/* A kept primitive, the reorders around it (NULL: none) and where each buffer sits in the
 * step's scratch. */
typedef struct grad_prim {
  dnnl_primitive_t prim, src_reorder, diff_dst_reorder, diff_wei_reorder;
  dnnl_memory_desc_t src_md, diff_dst_md, diff_wei_md, scratchpad_md; /* as the primitive reads them */
  int64_t src_at, diff_dst_at, diff_wei_at, scratch_bytes;
} grad_prim;

enum { KEPT_PRIMITIVES = 256 };
static struct {
  grad_key key;
  grad_prim *prim;
} kept[KEPT_PRIMITIVES];
static int kept_count;
static rt_fork_mutex kept_lock = RT_FORK_MUTEX_INIT; /* fork waits for it */

/* dims[j] and strides[j] of shape's dimension order[j]. */
static void described(const hlo_shape *shape, const int64_t *order, int64_t *dims, int64_t *strides) {
  int64_t all[HLO_MAX_RANK];
  hlo_shape_strides(shape, all);
  for (int j = 0; j < 4; j++) dims[j] = shape->dims[order[j]], strides[j] = all[order[j]];
}

static bool f32_4d(const hlo_shape *s) {
  return hlo_shape_is_array(s) && s->dtype == HLO_F32 && s->rank == 4 && hlo_shape_is_default_layout(s) &&
         hlo_shape_elements(s) > 0;
}

/* instr's key; false when it is no weights gradient oneDNN's primitive can express. */
static bool key_for(const hlo_instr *instr, grad_key *key) {
  const hlo_conv_dims *cd = instr->conv;
  const hlo_shape *x = &instr->operands[0]->shape, *g = &instr->operands[1]->shape;
  if (!f32_4d(x) || !f32_4d(g) || !f32_4d(&instr->shape) || cd->spatial_count != 2 || instr->window->rank != 2 ||
      instr->batch_group_count != 1 || instr->feature_group_count != 1 || cd->input_feature > cd->input_batch)
    return false;
  memset(key, 0, sizeof *key);
  int64_t src_order[4] = {cd->input_feature, cd->input_batch, cd->input_spatial[0], cd->input_spatial[1]};
  int64_t diff_dst_order[4] = {cd->kernel_input_feature, cd->kernel_output_feature, cd->kernel_spatial[0],
                               cd->kernel_spatial[1]};
  int64_t diff_wei_order[4] = {cd->output_feature, cd->output_batch, cd->output_spatial[0], cd->output_spatial[1]};
  described(x, src_order, key->src, key->src_strides);
  described(g, diff_dst_order, key->diff_dst, key->diff_dst_strides);
  described(&instr->shape, diff_wei_order, key->diff_wei, key->diff_wei_strides);
  for (int d = 0; d < 2; d++) {
    const hlo_window_dim *wd = &instr->window->dims[d];
    if (wd->lhs_dilate != 1 || wd->reversal || wd->pad_low < 0 || wd->pad_high < 0 || wd->stride < 1 ||
        wd->rhs_dilate < 1)
      return false;
    key->stride[d] = wd->rhs_dilate, key->dilate[d] = wd->stride - 1;
    key->pad_low[d] = wd->pad_low, key->pad_high[d] = wd->pad_high;
    /* the forward's result size by oneDNN's formula must be the gradient's */
    int64_t span = (key->diff_wei[2 + d] - 1) * wd->stride + 1;
    int64_t room = key->src[2 + d] + wd->pad_low + wd->pad_high - span;
    if (room < 0 || room / wd->rhs_dilate + 1 != key->diff_dst[2 + d]) return false;
  }
  key->threads = rt_cpu_dnnl_team();
  return true;
}

static bool md(dnnl_memory_desc_t *m, const int64_t *dims, const int64_t *strides) {
  return dnnl_memory_desc_init_by_strides(m, 4, dims, dnnl_f32, strides) == dnnl_success;
}

static bool any(dnnl_memory_desc_t *m, const int64_t *dims) {
  return dnnl_memory_desc_init_by_tag(m, 4, dims, dnnl_f32, dnnl_format_tag_any) == dnnl_success;
}

static const char *impl_name(const_dnnl_primitive_desc_t pd) {
  const char *name = NULL;
  if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &name) != dnnl_success || !name) return "";
  return name;
}

/* The backward-weights descriptor for the layouts asked (any), with the forward one oneDNN
 * wants as its hint; NULL when refused or only the reference implementation is offered. */
static dnnl_primitive_desc_t grad_pd(const grad_key *key) {
  dnnl_memory_desc_t src, diff_dst, diff_wei;
  dnnl_convolution_desc_t fwd, bwd;
  dnnl_primitive_desc_t hint = NULL, pd = NULL;
  dnnl_primitive_attr_t attr = NULL;
  bool ok = any(&src, key->src) && any(&diff_dst, key->diff_dst) && any(&diff_wei, key->diff_wei) &&
            dnnl_dilated_convolution_forward_desc_init(&fwd, dnnl_forward_training, dnnl_convolution_direct, &src,
                                                       &diff_wei, NULL, &diff_dst, key->stride, key->dilate,
                                                       key->pad_low, key->pad_high) == dnnl_success &&
            dnnl_primitive_desc_create(&hint, &fwd, NULL, rt_cpu_dnnl_engine(), NULL) == dnnl_success &&
            dnnl_dilated_convolution_backward_weights_desc_init(&bwd, dnnl_convolution_direct, &src, &diff_wei, NULL,
                                                                &diff_dst, key->stride, key->dilate, key->pad_low,
                                                                key->pad_high) == dnnl_success &&
            dnnl_primitive_attr_create(&attr) == dnnl_success &&
            dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) == dnnl_success &&
            dnnl_primitive_desc_create(&pd, &bwd, attr, rt_cpu_dnnl_engine(), hint) == dnnl_success;
  if (ok && strncmp(impl_name(pd), "ref", 3) == 0) ok = false;
  if (!ok && pd) dnnl_primitive_desc_destroy(pd), pd = NULL;
  if (attr) dnnl_primitive_attr_destroy(attr);
  if (hint) dnnl_primitive_desc_destroy(hint);
  return pd;
}

/* A reorder from `from` to `to` into *r, or none (NULL) when they are the same layout. */
static bool reorder(dnnl_primitive_t *r, const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to) {
  *r = NULL;
  if (dnnl_memory_desc_equal(from, to)) return true;
  dnnl_primitive_desc_t pd = NULL;
  bool ok = dnnl_reorder_primitive_desc_create(&pd, from, rt_cpu_dnnl_engine(), to, rt_cpu_dnnl_engine(), NULL) ==
                dnnl_success &&
            dnnl_primitive_create(r, pd) == dnnl_success;
  if (pd) dnnl_primitive_desc_destroy(pd);
  if (!ok) *r = NULL;
  return ok;
}

static void release(grad_prim *p) {
  dnnl_primitive_t prims[] = {p->prim, p->src_reorder, p->diff_dst_reorder, p->diff_wei_reorder};
  for (size_t i = 0; i < sizeof prims / sizeof prims[0]; i++)
    if (prims[i]) dnnl_primitive_destroy(prims[i]);
  free(p);
}

/* Scratch for a buffer of md's size when needed, at *at. */
static int64_t take(int64_t *at, bool needed, const dnnl_memory_desc_t *m) {
  int64_t offset = *at;
  if (needed) *at += rt_cpu_aligned((int64_t)dnnl_memory_desc_get_size(m));
  return offset;
}

static grad_prim *make_prim(const grad_key *key) {
  dnnl_memory_desc_t src_user, diff_dst_user, diff_wei_user;
  if (!md(&src_user, key->src, key->src_strides) || !md(&diff_dst_user, key->diff_dst, key->diff_dst_strides) ||
      !md(&diff_wei_user, key->diff_wei, key->diff_wei_strides))
    return NULL;
  int team = rt_cpu_dnnl_team_begin();
  dnnl_primitive_desc_t pd = grad_pd(key);
  grad_prim *p = pd ? hlo_calloc(1, sizeof *p) : NULL;
  bool ok = p != NULL;
  if (ok) {
    p->src_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    p->diff_dst_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_diff_dst_md, 0);
    p->diff_wei_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_diff_weights_md, 0);
    p->scratchpad_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    ok = dnnl_primitive_create(&p->prim, pd) == dnnl_success && reorder(&p->src_reorder, &src_user, &p->src_md) &&
         reorder(&p->diff_dst_reorder, &diff_dst_user, &p->diff_dst_md) &&
         reorder(&p->diff_wei_reorder, &p->diff_wei_md, &diff_wei_user);
  }
  if (pd) dnnl_primitive_desc_destroy(pd);
  omp_set_num_threads(team);
  if (!ok) {
    if (p) release(p);
    return NULL;
  }
  int64_t at = rt_cpu_aligned((int64_t)dnnl_memory_desc_get_size(&p->scratchpad_md));
  p->src_at = take(&at, p->src_reorder != NULL, &p->src_md);
  p->diff_dst_at = take(&at, p->diff_dst_reorder != NULL, &p->diff_dst_md);
  p->diff_wei_at = take(&at, p->diff_wei_reorder != NULL, &p->diff_wei_md);
  p->scratch_bytes = at;
  return p;
}

/* The kept primitive for key (made on first sight); NULL when oneDNN offers none or the table
 * is full. */
static const grad_prim *prim_for(const grad_key *key) {
  rt_fork_lock(&kept_lock);
  const grad_prim *p = NULL;
  for (int i = 0; i < kept_count && !p; i++)
    if (memcmp(&kept[i].key, key, sizeof *key) == 0) p = kept[i].prim;
  if (!p && kept_count < KEPT_PRIMITIVES) {
    grad_prim *made = make_prim(key);
    if (made) {
      kept[kept_count].key = *key;
      kept[kept_count++].prim = made;
      p = made;
    }
  }
  rt_fork_unlock(&kept_lock);
  return p;
}

/* The memories of one run, destroyed together. */
typedef struct memories {
  dnnl_memory_t list[8];
  int count;
  bool failed;
} memories;

static dnnl_memory_t memory(memories *m, const dnnl_memory_desc_t *desc, const void *data) {
  dnnl_memory_t mem = NULL;
  if (m->failed || dnnl_memory_create(&mem, desc, rt_cpu_dnnl_engine(), (void *)data) != dnnl_success) {
    m->failed = true;
    return NULL;
  }
  return m->list[m->count++] = mem;
}

static bool execute(dnnl_primitive_t prim, dnnl_stream_t stream, int count, const dnnl_exec_arg_t *args) {
  return dnnl_primitive_execute(prim, stream, count, args) == dnnl_success;
}

/* A reorder from user memory to the primitive's buffer (or the primitive's to the user's). */
static bool run_reorder(dnnl_primitive_t r, dnnl_stream_t stream, dnnl_memory_t from, dnnl_memory_t to) {
  dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
  return !r || execute(r, stream, 2, args);
}

static bool run(const grad_prim *p, const grad_key *key, const rt_value *const *in, rt_value *out, char *scratch) {
  dnnl_memory_desc_t src_user, diff_dst_user, diff_wei_user;
  if (!md(&src_user, key->src, key->src_strides) || !md(&diff_dst_user, key->diff_dst, key->diff_dst_strides) ||
      !md(&diff_wei_user, key->diff_wei, key->diff_wei_strides))
    return false;
  memories m = {0};
  dnnl_memory_t src_in = memory(&m, &src_user, in[0]->data), diff_dst_in = memory(&m, &diff_dst_user, in[1]->data);
  dnnl_memory_t wei_out = memory(&m, &diff_wei_user, out->data);
  dnnl_memory_t src = p->src_reorder ? memory(&m, &p->src_md, scratch + p->src_at) : src_in;
  dnnl_memory_t diff_dst = p->diff_dst_reorder ? memory(&m, &p->diff_dst_md, scratch + p->diff_dst_at) : diff_dst_in;
  dnnl_memory_t diff_wei = p->diff_wei_reorder ? memory(&m, &p->diff_wei_md, scratch + p->diff_wei_at) : wei_out;
  dnnl_memory_t pad = memory(&m, &p->scratchpad_md, scratch);
  dnnl_stream_t stream = NULL;
  bool ok = !m.failed && dnnl_stream_create(&stream, rt_cpu_dnnl_engine(), dnnl_stream_default_flags) == dnnl_success;
  dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, src}, {DNNL_ARG_DIFF_DST, diff_dst}, {DNNL_ARG_DIFF_WEIGHTS, diff_wei},
                             {DNNL_ARG_SCRATCHPAD, pad}};
  ok = ok && run_reorder(p->src_reorder, stream, src_in, src) &&
       run_reorder(p->diff_dst_reorder, stream, diff_dst_in, diff_dst) && execute(p->prim, stream, 4, args) &&
       run_reorder(p->diff_wei_reorder, stream, diff_wei, wei_out) && dnnl_stream_wait(stream) == dnnl_success;
  if (stream) dnnl_stream_destroy(stream);
  for (int i = 0; i < m.count; i++) dnnl_memory_destroy(m.list[i]);
  return ok;
}

static _Atomic int64_t runs;

static bool conv_grad_run(const hlo_instr *instr, const rt_value *const *in, rt_value *out, void *scratch) {
  atomic_fetch_add(&runs, 1);
  grad_key key;
  const grad_prim *p = key_for(instr, &key) ? prim_for(&key) : NULL;
  if (!p) return false; /* made when picked: only memory can have run out since */
  int team = rt_cpu_dnnl_team_begin();
  bool ok = run(p, &key, in, out, scratch);
  omp_set_num_threads(team);
  /* only the gradient's inf or NaN meets the padding's zeros */
  if (ok && !rt_cpu_finite_run(out->data, out->count) && !rt_cpu_finite_run(in[1]->data, in[1]->count))
    return rt_cpu_reference_conv(instr, in, out);
  return ok;
}

rt_cpu_scratch_kernel rt_cpu_pick_conv_grad(const hlo_instr *instr, int64_t *scratch_bytes) {
  if (instr->opcode != HLO_OP_CONVOLUTION || !instr->conv || !instr->window || instr->operand_count != 2 ||
      !rt_cpu_dnnl_engine())
    return NULL;
  grad_key key;
  const grad_prim *p = key_for(instr, &key) ? prim_for(&key) : NULL;
  if (!p) return NULL;
  *scratch_bytes = p->scratch_bytes;
  return conv_grad_run;
}

int64_t rt_cpu_conv_grad_runs(void) { return atomic_load(&runs); }
