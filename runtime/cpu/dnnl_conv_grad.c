/* A convolution that is a gradient, on oneDNN's backward primitives: a weights gradient on
 * backward-weights, an input gradient on backward-data (what PyTorch's own backward calls).
 *
 * The gradient of a convolution's weights is itself a convolution: the forward's source
 * [N, C, H, W] read with its batch dim as the features and its features as the batch, the
 * result's gradient [N, O, OH, OW] as the window (rhs dilated by the forward's stride), giving
 * [C, O, KH, KW]. Run as a forward convolution it is a poor fit for any kernel: a window as
 * large as a whole feature map, a result the size of a filter. An f32 convolution whose lhs
 * holds its features in an outer dim to its batch (the weights gradient's lhs: the forward's
 * source, batch first; XLA writes its weight gradients so too) is described to oneDNN as the
 * weights gradient of the forward convolution it comes from:
 *
 *   src          the lhs, its input-feature dim as N, its batch dim as C
 *   diff_dst     the rhs, its kernel input-feature dim as N, output-feature dim as O
 *   diff_weights the result, its output-feature dim as O, its batch dim as C
 *   strides      the window's rhs dilation; dilation: the window's stride - 1; padding: the
 *                window's (the result's spatial size must be what oneDNN's formula gives;
 *                the right one may be negative by less than the stride, as below)
 *
 * The gradient of its input, as XLA writes it: the result's gradient dilated by the forward's
 * stride (lhs dilation), padded by the dilated kernel's extent less the forward's padding,
 * convolved at stride 1 with the kernel reversed (window reversal on both spatial dims:
 * pass_input_grad.c folds a reverse of the kernel into it) and read with its features
 * swapped. Described to oneDNN as the backward-data of that forward convolution:
 *
 *   diff_dst     the lhs, batch and features as N and O
 *   weights      the rhs unreversed, its kernel input-feature dim as O, output-feature as I
 *   diff_src     the result, batch and features as N and I
 *   strides      the window's lhs dilation; dilation: its rhs dilation - 1; padding: the
 *                dilated kernel's extent less the window's, each side (the right one may be
 *                negative by less than the stride: source rows no window reads)
 *
 * Operands and result are told to oneDNN by their strides; the primitive reads and writes the
 * layouts it prefers (blocked), reordered into the step's scratch on the way in and out. The
 * primitive and its reorders are made when the plan picks the kernel and kept for the process
 * (a table under a lock, as dnnl_conv_bf16.c's); one oneDNN refuses, or offers only its
 * reference implementation for, is left to conv.c's path. A result that is not all finite,
 * from operands that are not either, is computed again by the reference kernel (oneDNN's
 * padded tiles may multiply zeros of the padding by an inf or NaN, taps the reference
 * skips). */
#include <omp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "dnnl_internal.h"
#include "kernel_internal.h"

typedef enum grad_kind { GRAD_WEIGHTS, GRAD_INPUT } grad_kind;

/* What oneDNN is told: the kind, dims and strides of the source (or its gradient), the
 * weights (or their gradient) and the result's gradient, in oneDNN's (N, C, H, W),
 * (O, C, KH, KW), (N, O, OH, OW) order, and the forward's window. */
typedef struct grad_key { /* dnnl_dims_t throughout: oneDNN's functions take whole ones */
  dnnl_dims_t kind; /* grad_kind, in a whole word: keys are compared as bytes */
  dnnl_dims_t src, src_strides, wei, wei_strides, diff_dst, diff_dst_strides;
  dnnl_dims_t stride, dilate, pad_low, pad_high;
  int64_t threads; /* the OpenMP team it is made for (rt_cpu_dnnl_team) */
} grad_key;

/* Which of src, wei and diff_dst each of the operands and the result is (ROLE_*), per kind,
 * and the oneDNN argument each is. */
enum { ROLE_SRC, ROLE_WEI, ROLE_DIFF_DST, ROLES };
static const int role_of[2][3] = {[GRAD_WEIGHTS] = {ROLE_SRC, ROLE_DIFF_DST, ROLE_WEI},
                                  [GRAD_INPUT] = {ROLE_DIFF_DST, ROLE_WEI, ROLE_SRC}};
static const int arg_of[2][ROLES] = {[GRAD_WEIGHTS] = {DNNL_ARG_SRC, DNNL_ARG_DIFF_WEIGHTS, DNNL_ARG_DIFF_DST},
                                     [GRAD_INPUT] = {DNNL_ARG_DIFF_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_DST}};

/* A kept primitive, the reorders of its operands and result (by role; NULL: none) and where
 * each buffer sits in the step's scratch. */
typedef struct grad_prim {
  dnnl_primitive_t prim, reorder[ROLES];
  dnnl_memory_desc_t md[ROLES], scratchpad_md; /* as the primitive reads and writes them */
  int64_t at[ROLES], scratch_bytes;
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

/* The dims and strides of role r in key. */
static int64_t *dims_of(grad_key *key, int r) {
  return r == ROLE_SRC ? key->src : r == ROLE_WEI ? key->wei : key->diff_dst;
}

static int64_t *strides_of(grad_key *key, int r) {
  return r == ROLE_SRC ? key->src_strides : r == ROLE_WEI ? key->wei_strides : key->diff_dst_strides;
}

/* The operands' and the result's dims in oneDNN's order for their roles. */
static void describe(const hlo_instr *instr, grad_key *key, const int64_t *lhs_order, const int64_t *rhs_order,
                     const int64_t *out_order) {
  grad_kind kind = (grad_kind)key->kind[0];
  const hlo_shape *shapes[3] = {&instr->operands[0]->shape, &instr->operands[1]->shape, &instr->shape};
  const int64_t *orders[3] = {lhs_order, rhs_order, out_order};
  for (int k = 0; k < 3; k++) {
    int r = role_of[kind][k];
    described(shapes[k], orders[k], dims_of(key, r), strides_of(key, r));
  }
}

/* A weights gradient's key; false when oneDNN's primitive cannot express it. */
static bool weights_key(const hlo_instr *instr, grad_key *key) {
  const hlo_conv_dims *cd = instr->conv;
  if (cd->input_feature > cd->input_batch) return false;
  key->kind[0] = GRAD_WEIGHTS;
  int64_t src_order[4] = {cd->input_feature, cd->input_batch, cd->input_spatial[0], cd->input_spatial[1]};
  int64_t diff_dst_order[4] = {cd->kernel_input_feature, cd->kernel_output_feature, cd->kernel_spatial[0],
                               cd->kernel_spatial[1]};
  int64_t diff_wei_order[4] = {cd->output_feature, cd->output_batch, cd->output_spatial[0], cd->output_spatial[1]};
  describe(instr, key, src_order, diff_dst_order, diff_wei_order);
  for (int d = 0; d < 2; d++) {
    const hlo_window_dim *wd = &instr->window->dims[d];
    if (wd->lhs_dilate != 1 || wd->reversal || wd->pad_low < 0 || wd->pad_high + wd->rhs_dilate <= 0 ||
        wd->stride < 1 || wd->rhs_dilate < 1)
      return false;
    key->stride[d] = wd->rhs_dilate, key->dilate[d] = wd->stride - 1;
    key->pad_low[d] = wd->pad_low, key->pad_high[d] = wd->pad_high;
    /* the forward's result size by oneDNN's formula must be the gradient's */
    int64_t span = (key->wei[2 + d] - 1) * wd->stride + 1;
    int64_t room = key->src[2 + d] + wd->pad_low + wd->pad_high - span;
    if (room < 0 || room / wd->rhs_dilate + 1 != key->diff_dst[2 + d]) return false;
  }
  return true;
}

/* An input gradient's key; false when the window is not one's or oneDNN's primitive cannot
 * express it. */
static bool input_key(const hlo_instr *instr, grad_key *key) {
  const hlo_conv_dims *cd = instr->conv;
  key->kind[0] = GRAD_INPUT;
  int64_t diff_dst_order[4] = {cd->input_batch, cd->input_feature, cd->input_spatial[0], cd->input_spatial[1]};
  int64_t wei_order[4] = {cd->kernel_input_feature, cd->kernel_output_feature, cd->kernel_spatial[0],
                          cd->kernel_spatial[1]};
  int64_t diff_src_order[4] = {cd->output_batch, cd->output_feature, cd->output_spatial[0], cd->output_spatial[1]};
  describe(instr, key, diff_dst_order, wei_order, diff_src_order);
  for (int d = 0; d < 2; d++) {
    const hlo_window_dim *wd = &instr->window->dims[d];
    if (!wd->reversal || wd->stride != 1 || wd->lhs_dilate < 1 || wd->rhs_dilate < 1) return false;
    int64_t extent = (key->wei[2 + d] - 1) * wd->rhs_dilate;
    key->stride[d] = wd->lhs_dilate, key->dilate[d] = wd->rhs_dilate - 1;
    key->pad_low[d] = extent - wd->pad_low, key->pad_high[d] = extent - wd->pad_high;
    if (key->pad_low[d] < 0 || key->pad_high[d] + wd->lhs_dilate <= 0) return false;
    /* the forward's result size by oneDNN's formula must be the gradient's */
    int64_t room = key->src[2 + d] + key->pad_low[d] + key->pad_high[d] - extent - 1;
    if (room < 0 || room / wd->lhs_dilate + 1 != key->diff_dst[2 + d]) return false;
  }
  return true;
}

/* instr's key; false when it is no gradient oneDNN's primitives can express. */
static bool key_for(const hlo_instr *instr, grad_key *key) {
  const hlo_conv_dims *cd = instr->conv;
  const hlo_shape *x = &instr->operands[0]->shape, *g = &instr->operands[1]->shape;
  if (!f32_4d(x) || !f32_4d(g) || !f32_4d(&instr->shape) || cd->spatial_count != 2 || instr->window->rank != 2 ||
      instr->batch_group_count != 1 || instr->feature_group_count != 1)
    return false;
  memset(key, 0, sizeof *key);
  key->threads = rt_cpu_dnnl_team();
  return instr->window->dims[0].reversal || instr->window->dims[1].reversal ? input_key(instr, key)
                                                                              : weights_key(instr, key);
}

static bool md(dnnl_memory_desc_t *m, const int64_t *dims, const int64_t *strides) {
  return dnnl_memory_desc_init_by_strides(m, 4, dims, dnnl_f32, strides) == dnnl_success;
}

static bool any(dnnl_memory_desc_t *m, const int64_t *dims) {
  return dnnl_memory_desc_init_by_tag(m, 4, dims, dnnl_f32, dnnl_format_tag_any) == dnnl_success;
}

/* key's operand and result descriptions as they are in memory, by role. */
static bool user_mds(grad_key *key, dnnl_memory_desc_t *user) {
  for (int r = 0; r < ROLES; r++)
    if (!md(&user[r], dims_of(key, r), strides_of(key, r))) return false;
  return true;
}

static const char *impl_name(const_dnnl_primitive_desc_t pd) {
  const char *name = NULL;
  if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &name) != dnnl_success || !name) return "";
  return name;
}

/* The backward descriptor of key's kind for the layouts asked (any), with the forward one
 * oneDNN wants as its hint; NULL when refused or only the reference implementation is
 * offered. */
static dnnl_primitive_desc_t grad_pd(const grad_key *key) {
  dnnl_memory_desc_t src, wei, diff_dst;
  dnnl_convolution_desc_t fwd, bwd;
  dnnl_primitive_desc_t hint = NULL, pd = NULL;
  dnnl_primitive_attr_t attr = NULL;
  bool ok = any(&src, key->src) && any(&wei, key->wei) && any(&diff_dst, key->diff_dst) &&
            dnnl_dilated_convolution_forward_desc_init(&fwd, dnnl_forward_training, dnnl_convolution_direct, &src,
                                                       &wei, NULL, &diff_dst, key->stride, key->dilate,
                                                       key->pad_low, key->pad_high) == dnnl_success &&
            dnnl_primitive_desc_create(&hint, &fwd, NULL, rt_cpu_dnnl_engine(), NULL) == dnnl_success;
  if (ok && key->kind[0] == GRAD_WEIGHTS)
    ok = dnnl_dilated_convolution_backward_weights_desc_init(&bwd, dnnl_convolution_direct, &src, &wei, NULL,
                                                             &diff_dst, key->stride, key->dilate, key->pad_low,
                                                             key->pad_high) == dnnl_success;
  else if (ok)
    ok = dnnl_dilated_convolution_backward_data_desc_init(&bwd, dnnl_convolution_direct, &src, &wei, &diff_dst,
                                                          key->stride, key->dilate, key->pad_low,
                                                          key->pad_high) == dnnl_success;
  ok = ok && dnnl_primitive_attr_create(&attr) == dnnl_success &&
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
  if (p->prim) dnnl_primitive_destroy(p->prim);
  for (int r = 0; r < ROLES; r++)
    if (p->reorder[r]) dnnl_primitive_destroy(p->reorder[r]);
  free(p);
}

/* The role written: the result's. */
static int result_role(const grad_key *key) { return role_of[key->kind[0]][2]; }

static const dnnl_query_t query_of[2][ROLES] = {
    [GRAD_WEIGHTS] = {dnnl_query_src_md, dnnl_query_diff_weights_md, dnnl_query_diff_dst_md},
    [GRAD_INPUT] = {dnnl_query_diff_src_md, dnnl_query_weights_md, dnnl_query_diff_dst_md}};

static grad_prim *make_prim(grad_key *key) {
  dnnl_memory_desc_t user[ROLES];
  if (!user_mds(key, user)) return NULL;
  int team = rt_cpu_dnnl_team_begin();
  dnnl_primitive_desc_t pd = grad_pd(key);
  grad_prim *p = pd ? hlo_calloc(1, sizeof *p) : NULL;
  bool ok = p != NULL;
  int out = result_role(key);
  if (ok) {
    for (int r = 0; r < ROLES; r++) p->md[r] = *dnnl_primitive_desc_query_md(pd, query_of[key->kind[0]][r], 0);
    p->scratchpad_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    ok = dnnl_primitive_create(&p->prim, pd) == dnnl_success;
    for (int r = 0; r < ROLES && ok; r++)
      ok = r == out ? reorder(&p->reorder[r], &p->md[r], &user[r]) : reorder(&p->reorder[r], &user[r], &p->md[r]);
  }
  if (pd) dnnl_primitive_desc_destroy(pd);
  omp_set_num_threads(team);
  if (!ok) {
    if (p) release(p);
    return NULL;
  }
  int64_t at = rt_cpu_aligned((int64_t)dnnl_memory_desc_get_size(&p->scratchpad_md));
  for (int r = 0; r < ROLES; r++) {
    p->at[r] = at;
    if (p->reorder[r]) at += rt_cpu_aligned((int64_t)dnnl_memory_desc_get_size(&p->md[r]));
  }
  p->scratch_bytes = at;
  return p;
}

/* The kept primitive for key (made on first sight); NULL when oneDNN offers none or the table
 * is full. */
static const grad_prim *prim_for(grad_key *key) {
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

static bool run(const grad_prim *p, grad_key *key, const rt_value *const *in, rt_value *out, char *scratch) {
  dnnl_memory_desc_t user[ROLES];
  if (!user_mds(key, user)) return false;
  grad_kind kind = (grad_kind)key->kind[0];
  const void *data[3] = {in[0]->data, in[1]->data, out->data};
  memories m = {0};
  dnnl_memory_t as_is[ROLES], used[ROLES];
  for (int k = 0; k < 3; k++) {
    int r = role_of[kind][k];
    as_is[r] = memory(&m, &user[r], data[k]);
    used[r] = p->reorder[r] ? memory(&m, &p->md[r], scratch + p->at[r]) : as_is[r];
  }
  dnnl_memory_t pad = memory(&m, &p->scratchpad_md, scratch);
  dnnl_stream_t stream = NULL;
  bool ok = !m.failed && dnnl_stream_create(&stream, rt_cpu_dnnl_engine(), dnnl_stream_default_flags) == dnnl_success;
  dnnl_exec_arg_t args[ROLES + 1] = {{DNNL_ARG_SCRATCHPAD, pad}};
  for (int r = 0; r < ROLES; r++) args[1 + r] = (dnnl_exec_arg_t){arg_of[kind][r], used[r]};
  int written = result_role(key);
  for (int r = 0; r < ROLES && ok; r++)
    if (r != written) ok = run_reorder(p->reorder[r], stream, as_is[r], used[r]);
  ok = ok && execute(p->prim, stream, ROLES + 1, args) &&
       run_reorder(p->reorder[written], stream, used[written], as_is[written]) &&
       dnnl_stream_wait(stream) == dnnl_success;
  if (stream) dnnl_stream_destroy(stream);
  for (int i = 0; i < m.count; i++) dnnl_memory_destroy(m.list[i]);
  return ok;
}

static _Atomic int64_t runs[2];

static bool all_finite(const rt_value *v) { return rt_cpu_finite_run(v->data, v->count); }

/* ok's result, or the reference's when the result is not all finite and an operand is not
 * either: only an operand's inf or NaN meets the padding's zeros. The smaller side is
 * scanned first (a weights gradient's result can be far larger than its operands). */
static bool checked(bool ok, const hlo_instr *instr, const rt_value *const *in, rt_value *out) {
  if (!ok) return false;
  bool out_first = out->count <= in[0]->count + in[1]->count;
  bool suspect = out_first ? !all_finite(out) && (!all_finite(in[1]) || !all_finite(in[0]))
                           : (!all_finite(in[1]) || !all_finite(in[0])) && !all_finite(out);
  return suspect ? rt_cpu_reference_conv(instr, in, out) : ok;
}

static bool conv_grad_run(const hlo_instr *instr, const rt_value *const *in, rt_value *out, void *scratch) {
  grad_key key;
  const grad_prim *p = key_for(instr, &key) ? prim_for(&key) : NULL;
  if (!p) return false; /* made when picked: only memory can have run out since */
  atomic_fetch_add(&runs[key.kind[0]], 1);
  int team = rt_cpu_dnnl_team_begin();
  bool ok = run(p, &key, in, out, scratch);
  omp_set_num_threads(team);
  return checked(ok, instr, in, out);
}

/* key's geometry for conv_gemm.c. */
static rt_cpu_conv_geom geom_of(const grad_key *key) {
  rt_cpu_conv_geom g = {.kind = key->kind[0] == GRAD_INPUT ? RT_CPU_CONV_INPUT_GRAD : RT_CPU_CONV_WEIGHTS_GRAD,
                        .n = key->src[0], .c = key->src[1], .h = key->src[2], .w = key->src[3], .o = key->wei[0],
                        .oh = key->diff_dst[2], .ow = key->diff_dst[3], .kh = key->wei[2], .kw = key->wei[3]};
  for (int d = 0; d < 2; d++)
    g.stride[d] = key->stride[d], g.dilate[d] = key->dilate[d] + 1, g.pad[d] = key->pad_low[d];
  memcpy(g.src_strides, key->src_strides, sizeof g.src_strides);
  memcpy(g.wei_strides, key->wei_strides, sizeof g.wei_strides);
  memcpy(g.dst_strides, key->diff_dst_strides, sizeof g.dst_strides);
  return g;
}

static bool conv_grad_gemm_run(const hlo_instr *instr, const rt_value *const *in, rt_value *out, void *scratch) {
  grad_key key;
  if (!key_for(instr, &key)) return false;
  rt_cpu_conv_geom g = geom_of(&key);
  atomic_fetch_add(&runs[key.kind[0]], 1);
  const float *a = in[0]->data, *b = in[1]->data;
  bool ok = g.kind == RT_CPU_CONV_INPUT_GRAD ? rt_cpu_conv_gemm_run(&g, NULL, b, a, out->data, scratch)
                                             : rt_cpu_conv_gemm_run(&g, a, NULL, b, out->data, scratch);
  return checked(ok, instr, in, out);
}

/* One whose weights outweigh its activations runs as one matrix product (conv_gemm.c),
 * the rest on oneDNN's primitive. */
rt_cpu_scratch_kernel rt_cpu_pick_conv_grad(const hlo_instr *instr, int64_t *scratch_bytes) {
  if (instr->opcode != HLO_OP_CONVOLUTION || !instr->conv || !instr->window || instr->operand_count != 2 ||
      !rt_cpu_dnnl_engine())
    return NULL;
  grad_key key;
  if (!key_for(instr, &key)) return NULL;
  rt_cpu_conv_geom g = geom_of(&key);
  if (rt_cpu_conv_gemm_pays(&g)) {
    *scratch_bytes = rt_cpu_conv_gemm_scratch(&g);
    return conv_grad_gemm_run;
  }
  const grad_prim *p = prim_for(&key);
  if (!p) return NULL;
  *scratch_bytes = p->scratch_bytes;
  return conv_grad_run;
}

int64_t rt_cpu_conv_grad_runs(void) { return atomic_load(&runs[GRAD_WEIGHTS]); }

int64_t rt_cpu_conv_input_grad_runs(void) { return atomic_load(&runs[GRAD_INPUT]); }
