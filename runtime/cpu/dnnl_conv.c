/* A convolution and its epilogue as one oneDNN primitive: descriptors from the HLO's shapes
 * and dimension numbers (any dim_labels, as strides over the row-major arrays), the layouts
 * oneDNN prefers for source, weights and result (format `any`: blocked, nChw8c on AVX2,
 * nChw16c on AVX-512, chosen at run time), reorders where the data arrives or must leave in
 * another layout, post-ops for the epilogue, and the scratchpad in the step's own scratch
 * (user mode), so executes running at once share nothing but the primitives, which oneDNN
 * allows.
 *
 * Weights are reordered into the primitive's layout at most once per contents: the plan keeps
 * them in the arena beside the argument's stamp (rt_value.stamp), and an execute whose weights
 * argument has the same stamp uses them as they are.
 *
 * Threads: each run sets the calling thread's OpenMP team first (dnnl_engine.c).
 *
 * Padding: oneDNN's direct convolutions skip taps that fall into the padding, as the
 * reference does, so a weight holding inf or NaN gives the reference's result. */
#include <math.h>
#include <omp.h>
#include <stdatomic.h>
#include <string.h>

#include "dnnl_internal.h"
#include "runtime/runtime.h"

bool rt_cpu_dnnl_conv_supported(const hlo_instr *conv) {
  if (conv->opcode != HLO_OP_CONVOLUTION || conv->operand_count != 2 || !conv->conv || !conv->window) return false;
  const hlo_shape *x = &conv->operands[0]->shape, *w = &conv->operands[1]->shape, *y = &conv->shape;
  const hlo_shape *shapes[] = {x, w, y};
  for (int s = 0; s < 3; s++)
    if (!hlo_shape_is_array(shapes[s]) || shapes[s]->dtype != HLO_F32 || shapes[s]->rank != 4 ||
        !hlo_shape_is_default_layout(shapes[s]) || hlo_shape_elements(shapes[s]) == 0)
      return false;
  if (conv->conv->spatial_count != 2 || conv->window->rank != 2 || conv->batch_group_count != 1 ||
      conv->feature_group_count < 1)
    return false;
  for (int d = 0; d < 2; d++) {
    const hlo_window_dim *wd = &conv->window->dims[d];
    if (wd->lhs_dilate != 1 || wd->reversal || wd->pad_low < 0 || wd->pad_high < 0 || wd->stride < 1 ||
        wd->rhs_dilate < 1)
      return false;
  }
  int64_t grad_scratch; /* a weights gradient runs on the backward-weights primitive (dnnl_conv_grad.c) */
  return rt_cpu_dnnl_engine() != NULL && !rt_cpu_pick_conv_grad(conv, &grad_scratch);
}

/* Row-major strides of shape's dims. */
static void row_major(const hlo_shape *shape, int64_t *strides) {
  int64_t s = 1;
  for (int d = shape->rank - 1; d >= 0; d--) {
    strides[d] = s;
    s *= shape->dims[d];
  }
}

/* An activation (input or result) as oneDNN's (N, C, H, W) over the row-major HLO array whose
 * batch, feature and spatial dims are b, f, sp. */
static bool activation_md(dnnl_memory_desc_t *md, const hlo_shape *shape, int64_t b, int64_t f, const int64_t *sp) {
  int64_t rm[HLO_MAX_RANK];
  row_major(shape, rm);
  dnnl_dims_t dims = {shape->dims[b], shape->dims[f], shape->dims[sp[0]], shape->dims[sp[1]]};
  dnnl_dims_t strides = {rm[b], rm[f], rm[sp[0]], rm[sp[1]]};
  return dnnl_memory_desc_init_by_strides(md, 4, dims, dnnl_f32, strides) == dnnl_success;
}

bool rt_cpu_dnnl_plain_md(dnnl_memory_desc_t *md, const hlo_instr *conv, bool source) {
  const hlo_conv_dims *c = conv->conv;
  return source ? activation_md(md, &conv->operands[0]->shape, c->input_batch, c->input_feature, c->input_spatial)
                : activation_md(md, &conv->shape, c->output_batch, c->output_feature, c->output_spatial);
}

/* The HLO kernel [O, I/G, KH, KW] (in its dim order) as oneDNN's (O, I, KH, KW), or with
 * groups (G, O/G, I/G, KH, KW): output features of group g are the g-th block of O. */
static bool weights_md(dnnl_memory_desc_t *md, const hlo_instr *conv) {
  const hlo_shape *w = &conv->operands[1]->shape;
  const hlo_conv_dims *c = conv->conv;
  int64_t rm[HLO_MAX_RANK], g = conv->feature_group_count;
  row_major(w, rm);
  int64_t o = c->kernel_output_feature, i = c->kernel_input_feature, h = c->kernel_spatial[0], x = c->kernel_spatial[1];
  if (g == 1) {
    dnnl_dims_t dims = {w->dims[o], w->dims[i], w->dims[h], w->dims[x]};
    dnnl_dims_t strides = {rm[o], rm[i], rm[h], rm[x]};
    return dnnl_memory_desc_init_by_strides(md, 4, dims, dnnl_f32, strides) == dnnl_success;
  }
  dnnl_dims_t dims = {g, w->dims[o] / g, w->dims[i], w->dims[h], w->dims[x]};
  dnnl_dims_t strides = {rm[o] * (w->dims[o] / g), rm[o], rm[i], rm[h], rm[x]};
  return dnnl_memory_desc_init_by_strides(md, 5, dims, dnnl_f32, strides) == dnnl_success;
}

/* The convolution as conv_gemm.c describes it, when the product may run it instead of the
 * primitive: no groups and no post-op, the source arriving and the result leaving
 * row-major, and the weights outweighing the activations. */
static bool gemm_geom(const rt_cpu_dnnl *d, rt_cpu_conv_geom *g) {
  const hlo_instr *conv = d->conv;
  const hlo_conv_dims *c = conv->conv;
  dnnl_memory_desc_t x_plain, y_plain;
  if (conv->feature_group_count != 1 || d->post_count > 0 ||
      !activation_md(&x_plain, &conv->operands[0]->shape, c->input_batch, c->input_feature, c->input_spatial) ||
      !activation_md(&y_plain, &conv->shape, c->output_batch, c->output_feature, c->output_spatial) ||
      !dnnl_memory_desc_equal(&d->src_in_md, &x_plain) || !dnnl_memory_desc_equal(&d->out_md, &y_plain))
    return false;
  const hlo_shape *x = &conv->operands[0]->shape, *w = &conv->operands[1]->shape, *y = &conv->shape;
  int64_t xs[HLO_MAX_RANK], ws[HLO_MAX_RANK], ys[HLO_MAX_RANK];
  row_major(x, xs), row_major(w, ws), row_major(y, ys);
  *g = (rt_cpu_conv_geom){.kind = RT_CPU_CONV_FORWARD, .n = x->dims[c->input_batch], .c = x->dims[c->input_feature],
                          .h = x->dims[c->input_spatial[0]], .w = x->dims[c->input_spatial[1]],
                          .o = y->dims[c->output_feature], .oh = y->dims[c->output_spatial[0]],
                          .ow = y->dims[c->output_spatial[1]], .kh = w->dims[c->kernel_spatial[0]],
                          .kw = w->dims[c->kernel_spatial[1]]};
  int64_t xo[4] = {c->input_batch, c->input_feature, c->input_spatial[0], c->input_spatial[1]};
  int64_t wo[4] = {c->kernel_output_feature, c->kernel_input_feature, c->kernel_spatial[0], c->kernel_spatial[1]};
  int64_t yo[4] = {c->output_batch, c->output_feature, c->output_spatial[0], c->output_spatial[1]};
  for (int j = 0; j < 4; j++) g->src_strides[j] = xs[xo[j]], g->wei_strides[j] = ws[wo[j]], g->dst_strides[j] = ys[yo[j]];
  for (int s = 0; s < 2; s++) {
    const hlo_window_dim *wd = &conv->window->dims[s];
    g->stride[s] = wd->stride, g->dilate[s] = wd->rhs_dilate, g->pad[s] = wd->pad_low;
  }
  return rt_cpu_conv_gemm_pays(g);
}

static bool any_md(dnnl_memory_desc_t *md, const dnnl_memory_desc_t *like) {
  return dnnl_memory_desc_init_by_tag(md, like->ndims, like->dims, dnnl_f32, dnnl_format_tag_any) == dnnl_success;
}

/* Post-ops for d's epilogue; binary ones read post_md[k]. The bias is the primitive's. */
static bool make_post_ops(rt_cpu_dnnl *d, int post_count, dnnl_post_ops_t *ops) {
  if (dnnl_post_ops_create(ops) != dnnl_success) return false;
  bool ok = true;
  for (int k = 0; k < post_count && ok; k++) {
    const rt_dnnl_post *p = &d->posts[k];
    switch (p->kind) {
      case RT_DNNL_BIAS:
        break;
      case RT_DNNL_ADD_C: case RT_DNNL_ADD_FULL:
        ok = dnnl_post_ops_append_binary(*ops, dnnl_binary_add, &d->post_md[k]) == dnnl_success;
        break;
      case RT_DNNL_SUB_C:
        ok = dnnl_post_ops_append_binary(*ops, dnnl_binary_sub, &d->post_md[k]) == dnnl_success;
        break;
      case RT_DNNL_MUL_C:
        ok = dnnl_post_ops_append_binary(*ops, dnnl_binary_mul, &d->post_md[k]) == dnnl_success;
        break;
      case RT_DNNL_RELU:
        ok = dnnl_post_ops_append_eltwise(*ops, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f) == dnnl_success;
        break;
      case RT_DNNL_CLIP:
        ok = dnnl_post_ops_append_eltwise(*ops, 1.0f, dnnl_eltwise_clip_v2, p->lo, p->hi) == dnnl_success;
        break;
    }
  }
  return ok;
}

/* The binary post-ops' operand layouts: [1, C, 1, 1] for per-feature ones, and the full
 * operand as it arrives (post_in[k], else row-major in the result's dims). */
static bool post_mds(rt_cpu_dnnl *d, const dnnl_memory_desc_t *out_plain, const dnnl_memory_desc_t *const *post_in) {
  for (int k = 0; k < d->post_count; k++) {
    const rt_dnnl_post *p = &d->posts[k];
    if (p->kind == RT_DNNL_ADD_FULL) {
      d->post_md[k] = post_in && post_in[k] ? *post_in[k] : *out_plain;
    } else if (p->kind == RT_DNNL_ADD_C || p->kind == RT_DNNL_SUB_C || p->kind == RT_DNNL_MUL_C) {
      dnnl_dims_t dims = {1, out_plain->dims[1], 1, 1}, strides = {out_plain->dims[1], 1, 1, 1};
      if (dnnl_memory_desc_init_by_strides(&d->post_md[k], 4, dims, dnnl_f32, strides) != dnnl_success) return false;
    }
  }
  return true;
}

static const char *impl_name(dnnl_primitive_desc_t pd) {
  const char *name = NULL;
  if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &name) != dnnl_success || !name) return "";
  return name;
}

/* The convolution's primitive descriptor by alg with the first post_count post-ops, for the
 * layouts x, w, y (format `any` lets oneDNN choose); NULL when it refuses or offers only its
 * reference implementation (slower than the existing path). */
static dnnl_primitive_desc_t conv_pd(rt_cpu_dnnl *d, dnnl_alg_kind_t alg, int post_count,
                                     const dnnl_memory_desc_t *x_any, const dnnl_memory_desc_t *w_any,
                                     const dnnl_memory_desc_t *y_any) {
  const hlo_instr *conv = d->conv;
  dnnl_memory_desc_t bias;
  bool has_bias = d->post_count > 0 && d->posts[0].kind == RT_DNNL_BIAS;
  dnnl_dims_t bias_dims = {y_any->dims[1]};
  if (dnnl_memory_desc_init_by_tag(&bias, 1, bias_dims, dnnl_f32, dnnl_a) != dnnl_success) return NULL;
  dnnl_dims_t strides, dilates, pad_l, pad_r;
  for (int s = 0; s < 2; s++) {
    const hlo_window_dim *wd = &conv->window->dims[s];
    strides[s] = wd->stride;
    dilates[s] = wd->rhs_dilate - 1;
    pad_l[s] = wd->pad_low;
    pad_r[s] = wd->pad_high;
  }
  dnnl_convolution_desc_t desc;
  if (dnnl_dilated_convolution_forward_desc_init(&desc, dnnl_forward_inference, alg, x_any,
                                                 w_any, has_bias ? &bias : NULL, y_any, strides, dilates, pad_l,
                                                 pad_r) != dnnl_success)
    return NULL;
  dnnl_primitive_attr_t attr = NULL;
  dnnl_post_ops_t ops = NULL;
  dnnl_primitive_desc_t pd = NULL;
  bool ok = dnnl_primitive_attr_create(&attr) == dnnl_success &&
            dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) == dnnl_success &&
            make_post_ops(d, post_count, &ops) && dnnl_primitive_attr_set_post_ops(attr, ops) == dnnl_success &&
            dnnl_primitive_desc_create(&pd, &desc, attr, rt_cpu_dnnl_engine(), NULL) == dnnl_success;
  if (ok && strncmp(impl_name(pd), "ref", 3) == 0) ok = false;
  if (!ok && pd) dnnl_primitive_desc_destroy(pd), pd = NULL;
  if (ops) dnnl_post_ops_destroy(ops);
  if (attr) dnnl_primitive_attr_destroy(attr);
  if (pd) d->bias_md = bias;
  return pd;
}

/* A reorder from `from` to `to` when they differ (r->prim NULL when they do not). */
static bool make_reorder(rt_dnnl_reorder *r, const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to) {
  r->prim = NULL;
  if (dnnl_memory_desc_equal(from, to)) return true;
  dnnl_primitive_desc_t pd = NULL;
  bool ok = dnnl_reorder_primitive_desc_create(&pd, from, rt_cpu_dnnl_engine(), to, rt_cpu_dnnl_engine(), NULL) == dnnl_success &&
            dnnl_primitive_create(&r->prim, pd) == dnnl_success;
  if (pd) dnnl_primitive_desc_destroy(pd);
  if (!ok) r->prim = NULL;
  return ok;
}

static bool is_activation(const rt_dnnl_post *p) { return p->kind == RT_DNNL_RELU || p->kind == RT_DNNL_CLIP; }

static bool activation_last(const rt_cpu_dnnl *d) {
  return d->post_count > 0 && is_activation(&d->posts[d->post_count - 1]);
}

static bool winograd(const rt_cpu_dnnl *d) { return d->alg == dnnl_convolution_winograd; }

/* The post-ops the fast primitive applies: all, but a Winograd step's last activation, which
 * run_conv applies after checking the result (oneDNN's relu would turn the NaN of an
 * overflow in the transforms into 0 and hide it). */
static int fast_posts(const rt_cpu_dnnl *d) { return d->post_count - (winograd(d) && activation_last(d)); }

/* For inputs that are not all finite (oneDNN's relu and clip turn NaN into numbers; the step
 * then applies the activation itself, as the reference does), and for a Winograd step's
 * (see alg): the convolution without a last activation, direct, in the source and result
 * layouts the first one chose; its weights' too unless it is Winograd's. */
static bool make_safe(rt_cpu_dnnl *d) {
  d->safe_prim = NULL;
  d->safe_scratchpad_md = (dnnl_memory_desc_t){0};
  d->safe_weights_md = (dnnl_memory_desc_t){0};
  if (!activation_last(d) && !winograd(d)) return true;
  dnnl_memory_desc_t w_any;
  if (!any_md(&w_any, &d->weights_in_md)) return false;
  int team = rt_cpu_dnnl_team_begin();
  dnnl_primitive_desc_t pd = conv_pd(d, dnnl_convolution_direct, d->post_count - activation_last(d), &d->src_md,
                                     winograd(d) ? &w_any : &d->weights_md, &d->dst_md);
  omp_set_num_threads(team);
  bool ok = pd && dnnl_memory_desc_equal(dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0), &d->dst_md) &&
            dnnl_memory_desc_equal(dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0), &d->src_md) &&
            dnnl_primitive_create(&d->safe_prim, pd) == dnnl_success;
  if (ok) d->safe_scratchpad_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
  if (ok && winograd(d)) d->safe_weights_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
  if (pd) dnnl_primitive_desc_destroy(pd);
  if (!ok) d->safe_prim = NULL;
  return ok;
}

/* The index of d's first full-shape post-op (a residual) that arrives row-major, or -1. */
static int row_major_residual(const rt_cpu_dnnl *d, const dnnl_memory_desc_t *const *post_in) {
  for (int k = 0; k < d->post_count; k++)
    if (d->posts[k].kind == RT_DNNL_ADD_FULL && !(post_in && post_in[k])) return k;
  return -1;
}

/* When a residual arrives row-major: asks oneDNN which layout the convolution writes with the
 * post-ops before it, and plans every row-major residual to be reordered into that layout
 * (post_in_md keeps how it arrives). false when nothing changed. */
static bool plan_residual_reorders(rt_cpu_dnnl *d, const dnnl_memory_desc_t *const *post_in,
                                   const dnnl_memory_desc_t *x_any, const dnnl_memory_desc_t *w_any,
                                   const dnnl_memory_desc_t *y_any, const dnnl_memory_desc_t *y_plain) {
  int first = row_major_residual(d, post_in);
  if (first < 0) return false;
  dnnl_primitive_desc_t pd = conv_pd(d, d->alg, first, x_any, w_any, y_any);
  if (!pd) return false;
  dnnl_memory_desc_t written = *dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
  dnnl_primitive_desc_destroy(pd);
  if (dnnl_memory_desc_equal(&written, y_plain)) return false;
  for (int k = first; k < d->post_count; k++)
    if (d->posts[k].kind == RT_DNNL_ADD_FULL && !(post_in && post_in[k])) d->post_md[k] = written;
  return true;
}

/* Which of the optional primitives d has (RT_DNNL_HAS_*, a residual's reorder for post k). */
static unsigned made_prims(const rt_cpu_dnnl *d) {
  unsigned made = (d->safe_prim ? RT_DNNL_HAS_SAFE : 0) | (d->src_reorder.prim ? RT_DNNL_HAS_SRC_REORDER : 0) |
                  (d->weights_reorder.prim ? RT_DNNL_HAS_WEIGHTS_REORDER : 0) |
                  (d->dst_reorder.prim ? RT_DNNL_HAS_DST_REORDER : 0) |
                  (d->safe_weights_reorder.prim ? RT_DNNL_HAS_SAFE_WEIGHTS_REORDER : 0);
  for (int k = 0; k < d->post_count; k++)
    if (d->post_reorder[k].prim) made |= RT_DNNL_HAS_POST_REORDER(k);
  return made;
}

/* The reorders between the layouts chosen: of the source, the result, the weights and each
 * residual that arrives in another layout than the primitive reads. */
static bool make_reorders(rt_cpu_dnnl *d) {
  bool ok = make_reorder(&d->src_reorder, &d->src_in_md, &d->src_md) &&
            make_reorder(&d->dst_reorder, &d->dst_md, &d->out_md) &&
            make_reorder(&d->weights_reorder, &d->weights_in_md, &d->weights_md);
  d->safe_weights_reorder.prim = NULL;
  if (ok && winograd(d)) ok = make_reorder(&d->safe_weights_reorder, &d->weights_in_md, &d->safe_weights_md);
  for (int k = 0; k < d->post_count && ok; k++)
    ok = d->posts[k].kind != RT_DNNL_ADD_FULL || make_reorder(&d->post_reorder[k], &d->post_in_md[k], &d->post_md[k]);
  return ok;
}

/* Whether d asks oneDNN for Winograd (dnnl_convolution_winograd; direct when it refuses: a
 * binary post-op such as a residual or a per-feature scale): a 3x3 convolution, stride 1, no
 * dilation or groups, 64 or more features in and out, a result of 7x7 or more, on a processor
 * with AVX-512 (oneDNN 2.6 has no f32 Winograd kernel for AVX2). Asked, oneDNN runs its 2x3
 * or 4x3 kernel; resnet50's four kinds of such layers at 224x224 and batch 1, in the graph
 * (AMD EPYC, AVX-512, 2 threads, ONEDNN_VERBOSE): 56x56x64 1.23 -> 0.69 ms, 28x28x128
 * 1.13 -> 0.70, 14x14x256 1.15 -> 0.81, 7x7x512 1.49 -> 1.11; at batch 8 its 4x3 kernel
 * 8.1 -> 3.3 ms and 7.4 -> 4.0 on the 28x28 and 14x14 ones. dnnl_convolution_auto, tried
 * first, kept the direct kernel at batch 1 (vgg16's step 151 ms against 73-94 asked).
 * Below 64 features oneDNN took it for layers too small to gain (3 to 4 features at 6x6),
 * whose bindings at other batch sizes then keep their weights in another layout and cannot
 * share them. */
static bool winograd_candidate(const rt_cpu_dnnl *d) {
  const hlo_instr *conv = d->conv;
  const hlo_conv_dims *c = conv->conv;
  if (conv->feature_group_count != 1 || conv->operands[0]->shape.dims[c->input_feature] < 64 ||
      conv->shape.dims[c->output_feature] < 64 || conv->shape.dims[c->output_spatial[0]] < 7 ||
      conv->shape.dims[c->output_spatial[1]] < 7)
    return false;
  for (int s = 0; s < 2; s++) {
    const hlo_window_dim *wd = &conv->window->dims[s];
    if (wd->size != 3 || wd->stride != 1 || wd->rhs_dilate != 1) return false;
  }
  return (dnnl_get_effective_cpu_isa() & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core;
}

/* The algorithm pd runs, by its implementation's name (jit_wino_4x3, jit_fp32_wino_2x3),
 * which names what runs whatever its descriptor says. */
static dnnl_alg_kind_t chosen_alg(dnnl_primitive_desc_t pd) {
  return strstr(impl_name(pd), "wino") ? dnnl_convolution_winograd : dnnl_convolution_direct;
}

/* The convolution's primitive descriptor for x, w and y, with each row-major residual read
 * in the layout oneDNN writes, else as it arrives; NULL when oneDNN refuses both. */
static dnnl_primitive_desc_t layouts_pd(rt_cpu_dnnl *d, const dnnl_memory_desc_t *const *post_in,
                                        const dnnl_memory_desc_t *x, const dnnl_memory_desc_t *w,
                                        const dnnl_memory_desc_t *y, const dnnl_memory_desc_t *y_plain) {
  for (int k = 0; k < d->post_count; k++) d->post_md[k] = d->post_in_md[k];
  bool residual_reordered = plan_residual_reorders(d, post_in, x, w, y, y_plain);
  dnnl_primitive_desc_t pd = conv_pd(d, d->alg, d->post_count, x, w, y);
  if (!pd && residual_reordered) { /* oneDNN refused the blocked residual: read it as it arrives */
    for (int k = 0; k < d->post_count; k++) d->post_md[k] = d->post_in_md[k];
    pd = conv_pd(d, d->alg, d->post_count, x, w, y);
  }
  return pd;
}

/* pd made again in its layouts without its last activation (fast_posts); NULL when oneDNN
 * refuses that. */
static dnnl_primitive_desc_t without_activation(rt_cpu_dnnl *d, dnnl_primitive_desc_t pd) {
  dnnl_memory_desc_t x = *dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0),
                     w = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0),
                     y = *dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
  dnnl_primitive_desc_destroy(pd);
  pd = conv_pd(d, d->alg, fast_posts(d), &x, &w, &y);
  if (pd && chosen_alg(pd) != d->alg) dnnl_primitive_desc_destroy(pd), pd = NULL;
  return pd;
}

/* On a processor with AVX-512, the result is asked for in nChw16c, and a grouped
 * convolution's source too, before `any` (which stays everywhere on AVX2, where oneDNN picks
 * nChw8c itself, and where oneDNN refuses the blocked request: groups of 3 channels); false
 * when the processor has no AVX-512 (nothing to ask first). With `any` there, oneDNN 2.6
 * picks its brgconv kernels over NHWC (acdb), and those refuse a residual as a binary post-op: every convolution that adds one
 * fell to its im2col gemm over NCHW (resnet50's 1x1 ones at 56x56: 19-47 ms instead of 1),
 * and NHWC is no single-block layout for the blocked pools and concatenations, so each
 * result was reordered on its way out. Asked for nChw16c, it runs its direct AVX-512
 * kernels (jit:avx512_core, jit_1x1, jit_dw); a depthwise one with `any` for its source
 * offers only the reference, which is refused. Measured on AMD EPYC with AVX-512 (2
 * threads, `latch bench --mode once --size 224`), before and after: resnet50 at batch 1
 * 174 -> 41 ms, at batch 8 1363 -> 306; resnet18 40 -> 18 and 299 -> 131; mobilenet_v2
 * 9.3 -> 4.6 and 75 -> 32; squeezenet1_1 5.8 -> 3.7 and 46 -> 30; alexnet and vgg16 level. */
static bool blocked_on_avx512(const rt_cpu_dnnl *d, dnnl_memory_desc_t *x_any, dnnl_memory_desc_t *y_any) {
  if ((dnnl_get_effective_cpu_isa() & dnnl_cpu_isa_avx512_core) != dnnl_cpu_isa_avx512_core) return false;
  if (d->conv->feature_group_count > 1 &&
      dnnl_memory_desc_init_by_tag(x_any, 4, x_any->dims, dnnl_f32, dnnl_aBcd16b) != dnnl_success)
    return false;
  return dnnl_memory_desc_init_by_tag(y_any, 4, y_any->dims, dnnl_f32, dnnl_aBcd16b) == dnnl_success;
}

/* layouts_pd with the blocked request first (blocked_on_avx512), then `any`. */
static dnnl_primitive_desc_t any_layouts_pd(rt_cpu_dnnl *d, const dnnl_memory_desc_t *const *post_in,
                                            const dnnl_memory_desc_t *x_any, const dnnl_memory_desc_t *w_any,
                                            const dnnl_memory_desc_t *y_any, const dnnl_memory_desc_t *y_plain) {
  dnnl_memory_desc_t x_blocked = *x_any, y_blocked = *y_any;
  dnnl_primitive_desc_t pd = NULL;
  if (blocked_on_avx512(d, &x_blocked, &y_blocked)) pd = layouts_pd(d, post_in, &x_blocked, w_any, &y_blocked, y_plain);
  return pd ? pd : layouts_pd(d, post_in, x_any, w_any, y_any, y_plain);
}

/* A block of md's size at *at in the scratch, when needed. */
static int64_t take(int64_t *at, bool needed, const dnnl_memory_desc_t *md) {
  int64_t offset = *at;
  if (needed) *at += rt_cpu_aligned((int64_t)dnnl_memory_desc_get_size(md));
  return offset;
}

/* rt_cpu_dnnl_build, asking for Winograd where it is a candidate when winograd_first. */
static bool build(rt_cpu_dnnl *d, const dnnl_memory_desc_t *src_in, const dnnl_memory_desc_t *const *post_in,
                  bool winograd_first) {
  const hlo_instr *conv = d->conv;
  dnnl_memory_desc_t x_plain, y_plain;
  if (!rt_cpu_dnnl_plain_md(&x_plain, conv, true) || !rt_cpu_dnnl_plain_md(&y_plain, conv, false) ||
      !weights_md(&d->weights_in_md, conv) || !post_mds(d, &y_plain, post_in))
    return false;
  d->src_in_md = src_in ? *src_in : x_plain;
  dnnl_memory_desc_t x_any, w_any, y_any;
  if (!any_md(&x_any, &x_plain) || !any_md(&w_any, &d->weights_in_md) || !any_md(&y_any, &y_plain)) return false;
  for (int k = 0; k < d->post_count; k++) d->post_in_md[k] = d->post_md[k];
  d->alg = winograd_first && winograd_candidate(d) && hlo_choice("winograd", conv->name) ? dnnl_convolution_winograd
                                                                                          : dnnl_convolution_direct;
  int team = rt_cpu_dnnl_team_begin();
  dnnl_primitive_desc_t pd = any_layouts_pd(d, post_in, &x_any, &w_any, &y_any, &y_plain);
  if (!pd && winograd(d)) { /* a binary post-op (a residual, a per-feature scale): direct */
    d->alg = dnnl_convolution_direct;
    pd = any_layouts_pd(d, post_in, &x_any, &w_any, &y_any, &y_plain);
  }
  if (pd) d->alg = chosen_alg(pd);
  if (pd && fast_posts(d) < d->post_count) pd = without_activation(d, pd);
  omp_set_num_threads(team);
  if (!pd) return false;
  d->src_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
  d->weights_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
  d->dst_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
  d->scratchpad_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
  d->out_md = d->blocked_out ? d->dst_md : y_plain;
  d->out_bytes = (int64_t)dnnl_memory_desc_get_size(&d->out_md);
  d->weights_bytes = (int64_t)dnnl_memory_desc_get_size(&d->weights_md);
  bool ok = dnnl_primitive_create(&d->conv_prim, pd) == dnnl_success;
  dnnl_primitive_desc_destroy(pd);
  ok = ok && make_safe(d) && make_reorders(d);
  d->prims = made_prims(d);
  d->wino = ok && !winograd(d) && rt_cpu_wino_fits(d) && rt_cpu_wino_pays(d) && hlo_choice("winograd", conv->name);
  if (d->wino) {
    d->wino_workers = rt_cpu_wino_workers();
    if (rt_cpu_wino_weights_bytes(d) > d->weights_bytes) d->weights_bytes = rt_cpu_wino_weights_bytes(d);
  }
  int64_t at = 0;
  d->scratchpad_offset = take(&at, true, dnnl_memory_desc_get_size(&d->safe_scratchpad_md) >
                                               dnnl_memory_desc_get_size(&d->scratchpad_md)
                                           ? &d->safe_scratchpad_md
                                           : &d->scratchpad_md);
  d->src_reorder.offset = take(&at, d->src_reorder.prim != NULL, &d->src_md);
  d->dst_offset = take(&at, d->dst_reorder.prim != NULL, &d->dst_md);
  d->weights_scratch_offset = take(&at, d->weights_reorder.prim != NULL, &d->weights_md);
  d->safe_weights_reorder.offset = take(&at, d->safe_weights_reorder.prim != NULL, &d->safe_weights_md);
  for (int k = 0; k < d->post_count; k++)
    d->post_reorder[k].offset = take(&at, d->post_reorder[k].prim != NULL, &d->post_md[k]);
  for (int k = 0; k < d->post_count; k++) { /* per-feature values computed over [C] */
    rt_dnnl_post *p = &d->posts[k];
    p->values_offset = at;
    if (p->term >= 0 && p->input < 0) at += rt_cpu_aligned((int64_t)sizeof(float) * y_plain.dims[1]);
  }
  d->wino_offset = at;
  if (d->wino) at += rt_cpu_wino_scratch_bytes(d);
  rt_cpu_conv_geom g; /* the product's room, from the scratch's start: it runs instead of the rest */
  if (ok && gemm_geom(d, &g) && rt_cpu_conv_gemm_scratch(&g) > at) at = rt_cpu_conv_gemm_scratch(&g);
  d->scratch_bytes = at;
  if (!ok) rt_cpu_dnnl_release(d);
  return ok;
}

/* Winograd first where it is a candidate; direct when that fails past choosing the primitive
 * (oneDNN has no reorder from a weights layout the graph gives, such as a reversed kernel
 * read with its features swapped, into its Winograd one). */
bool rt_cpu_dnnl_build(rt_cpu_dnnl *d, const dnnl_memory_desc_t *src_in, const dnnl_memory_desc_t *const *post_in) {
  if (build(d, src_in, post_in, true)) return true;
  return winograd(d) && build(d, src_in, post_in, false);
}

/* Whether a scratchpad oneDNN asks for is the one the plan has (exact), or only fits in the
 * room the plan gave the step's scratchpads. */
static bool scratchpad_ok(const dnnl_memory_desc_t *asked, const dnnl_memory_desc_t *planned, size_t room, bool exact) {
  return exact ? dnnl_memory_desc_equal(asked, planned) : dnnl_memory_desc_get_size(asked) <= room;
}

/* The descriptions a loaded step holds stay as they were read (a serialization after a run
 * writes the same bytes): oneDNN must give equal ones again, and only the primitives are
 * new. A forked child's (for_child) are made for its team of one, whose scratchpads may be
 * smaller than its parent's team's: they need only fit where the plan put them. */
bool rt_cpu_dnnl_recreate(rt_cpu_dnnl *d, bool for_child) {
  if (!d->conv) return true; /* a pool: latch's own kernel, no primitive */
  dnnl_memory_desc_t scratchpad = d->scratchpad_md, bias = d->bias_md, safe_scratchpad = d->safe_scratchpad_md,
                     safe_weights = d->safe_weights_md;
  size_t room = dnnl_memory_desc_get_size(&scratchpad) > dnnl_memory_desc_get_size(&safe_scratchpad)
                    ? dnnl_memory_desc_get_size(&scratchpad)
                    : dnnl_memory_desc_get_size(&safe_scratchpad);
  int team = rt_cpu_dnnl_team_begin();
  dnnl_primitive_desc_t pd = conv_pd(d, d->alg, fast_posts(d), &d->src_md, &d->weights_md, &d->dst_md);
  omp_set_num_threads(team);
  bool ok = pd && chosen_alg(pd) == d->alg &&
            scratchpad_ok(dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0), &scratchpad, room, !for_child) &&
            dnnl_memory_desc_equal(&d->bias_md, &bias) && dnnl_primitive_create(&d->conv_prim, pd) == dnnl_success;
  if (pd) dnnl_primitive_desc_destroy(pd);
  ok = ok && make_safe(d) && scratchpad_ok(&d->safe_scratchpad_md, &safe_scratchpad, room, !for_child) &&
       dnnl_memory_desc_equal(&d->safe_weights_md, &safe_weights);
  d->bias_md = bias;
  d->safe_scratchpad_md = safe_scratchpad;
  d->safe_weights_md = safe_weights;
  ok = ok && make_reorders(d) && made_prims(d) == d->prims && (!d->wino || rt_cpu_wino_valid(d));
  if (!ok) rt_cpu_dnnl_release(d);
  return ok;
}

void rt_cpu_dnnl_release(rt_cpu_dnnl *d) {
  if (!d) return;
  dnnl_primitive_t prims[] = {d->conv_prim, d->safe_prim, d->src_reorder.prim, d->weights_reorder.prim,
                              d->dst_reorder.prim, d->safe_weights_reorder.prim};
  for (size_t i = 0; i < sizeof prims / sizeof prims[0]; i++)
    if (prims[i]) dnnl_primitive_destroy(prims[i]);
  d->conv_prim = d->safe_prim = d->src_reorder.prim = d->weights_reorder.prim = d->dst_reorder.prim = NULL;
  d->safe_weights_reorder.prim = NULL;
  for (int k = 0; k < RT_DNNL_MAX_POSTS; k++) {
    if (d->post_reorder[k].prim) dnnl_primitive_destroy(d->post_reorder[k].prim);
    d->post_reorder[k].prim = NULL;
  }
}

/* Reorders made of weights, process-wide (for tests). */
static _Atomic int64_t weight_reorders;

int64_t rt_cpu_dnnl_weight_reorder_count(void) { return atomic_load(&weight_reorders); }

/* The memories of one run, destroyed together. */
typedef struct run_memories {
  dnnl_memory_t list[8 + 3 * RT_DNNL_MAX_POSTS];
  int count;
  bool failed;
} run_memories;

static dnnl_memory_t memory(run_memories *m, const dnnl_memory_desc_t *md, const void *data) {
  dnnl_memory_t mem = NULL;
  if (m->failed || dnnl_memory_create(&mem, md, rt_cpu_dnnl_engine(), (void *)data) != dnnl_success) {
    m->failed = true;
    return NULL;
  }
  m->list[m->count++] = mem;
  return mem;
}

static bool reorder(dnnl_stream_t stream, run_memories *m, const rt_dnnl_reorder *r, const dnnl_memory_desc_t *from,
                    const void *src, const dnnl_memory_desc_t *to, void *dst) {
  dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, memory(m, from, src)}, {DNNL_ARG_TO, memory(m, to, dst)}};
  return !m->failed && dnnl_primitive_execute(r->prim, stream, 2, args) == dnnl_success;
}

enum { FINITE_CHUNK = 1 << 16, FINITE_MAX_CHUNKS = 64 };

/* The activation last in d's epilogue, over the result as the reference computes it
 * (maximum and clamp keep NaN), in whatever layout it is: elementwise, and zero padding
 * stays zero (a clamp is absorbed only when its range holds 0). */
static void activate(const rt_cpu_dnnl *d, float *y, int64_t count) {
  const rt_dnnl_post *p = &d->posts[d->post_count - 1];
  float lo = p->kind == RT_DNNL_RELU ? 0 : p->lo, hi = p->kind == RT_DNNL_RELU ? INFINITY : p->hi;
  for (int64_t i = 0; i < count; i++) {
    float v = y[i];
    y[i] = isnan(v) ? v : v < lo ? lo : v > hi ? hi : v;
  }
}

/* A scan of x in chunks; with activated set (x is then its result, written), that step's
 * last activation is applied to each chunk found finite. */
typedef struct finite_job {
  const float *x;
  const rt_cpu_dnnl *activated;
  int64_t count, chunk;
  bool finite[FINITE_MAX_CHUNKS];
} finite_job;

static void finite_chunks(void *ctx, int64_t begin, int64_t end) {
  finite_job *j = ctx;
  for (int64_t c = begin; c < end; c++) {
    int64_t first = c * j->chunk, n = j->count - first < j->chunk ? j->count - first : j->chunk;
    j->finite[c] = rt_cpu_finite_run(j->x + first, n);
    if (j->finite[c] && j->activated) activate(j->activated, (float *)j->x + first, n);
  }
}

/* Whether x's count values are all finite, scanned in chunks over the threads (activated:
 * see finite_job). */
static bool finite_over_threads(const float *x, int64_t count, const rt_cpu_dnnl *activated) {
  finite_job j = {.x = x, .activated = activated, .count = count};
  int64_t chunks = count / FINITE_CHUNK < 1 ? 1 : count / FINITE_CHUNK < FINITE_MAX_CHUNKS ? count / FINITE_CHUNK : FINITE_MAX_CHUNKS;
  j.chunk = (count + chunks - 1) / chunks;
  rt_parallel_for(chunks, 1, finite_chunks, &j);
  bool finite = true;
  for (int64_t c = 0; c < chunks; c++) finite = finite && j.finite[c];
  return finite;
}

/* A Winograd step's result y: whether it is all finite, and where it is, with the
 * activation the primitive left out applied. */
static bool checked_result(const rt_cpu_dnnl *d, float *y, int64_t count) {
  return finite_over_threads(y, count, fast_posts(d) < d->post_count ? d : NULL);
}

/* A large activation (megabytes at batch 8) is scanned in chunks over the threads: the scan
 * reads the whole source once more, and alone on one thread it was a tenth of mobilenet_v2's
 * step at batch 8. */
static bool all_finite(const float *x, int64_t count) {
  if (count < 2 * FINITE_CHUNK) return rt_cpu_finite_run(x, count);
  return finite_over_threads(x, count, NULL);
}

/* The kept stamp's top bit: the kept weights hold inf or NaN (stamps count up from 1). The
 * next: the stamp is of weights seen at the last run but not transformed (churning). The two
 * below: how many runs in a row came with new weights (up to 3). A stamp with either of the
 * first two set is no match for weights() and wino_filters(). */
#define NONFINITE_WEIGHTS ((uint64_t)1 << 63)
#define SEEN_WEIGHTS ((uint64_t)1 << 62)
#define NEW_RUNS_SHIFT 60
#define NEW_RUNS ((uint64_t)3 << NEW_RUNS_SHIFT)

/* Whether a step whose weights are transformed (a Winograd step, oneDNN's or wino.c's) or
 * reordered at a cost the product of conv_gemm.c avoids (gemm) runs otherwise this run: its
 * weights are new, and were new at the two runs before too (a training step's, updated at
 * every call), or are not kept at all. A transform made for one run does not pay: oneDNN's
 * reorder into its Winograd layout took longer than the convolution it served (resnet18's
 * training step at 64x64, batch 16: 2.3 ms a reorder), as did its reorder of a 512x512x3x3
 * kernel into its direct layout (1.1 ms). The first weights, weights that come again, and
 * weights written once in a while are transformed and kept as before. *kept_stamp records
 * what was seen; *new_runs: the count to record after a transform. */
static bool churning(bool transformed, uint64_t *kept_stamp, uint64_t stamp, uint64_t *new_runs) {
  *new_runs = 0;
  if (!transformed) return false;
  if (!kept_stamp) return true;
  uint64_t k = *kept_stamp;
  if (k == 0 || (stamp && (k & ~(NONFINITE_WEIGHTS | SEEN_WEIGHTS | NEW_RUNS)) == stamp))
    return false; /* the first, the kept, or those seen at the last run */
  uint64_t runs = (k & NEW_RUNS) >> NEW_RUNS_SHIFT;
  *new_runs = runs < 3 ? runs + 1 : 3;
  if (*new_runs < 2) return false;
  *kept_stamp = stamp | SEEN_WEIGHTS | *new_runs << NEW_RUNS_SHIFT;
  return true;
}

/* The weights in the primitive's layout: kept ones reordered again only for new contents
 * (a stamp of 0 is unknown contents: always again). *finite: whether they are all finite
 * (looked at only when the step has an activation to guard). */
static const void *weights(dnnl_stream_t stream, run_memories *m, const rt_cpu_dnnl *d, const rt_value *w,
                           char *scratch, char *kept, uint64_t *kept_stamp, uint64_t stamp, bool *ok, bool *finite) {
  bool guard = d->safe_prim != NULL;
  if (!d->weights_reorder.prim) {
    *finite = !guard || all_finite(w->data, w->count);
    return w->data;
  }
  char *to = kept ? kept : scratch + d->weights_scratch_offset;
  if (kept && stamp && (*kept_stamp & ~(NONFINITE_WEIGHTS | NEW_RUNS)) == stamp) {
    *finite = !(*kept_stamp & NONFINITE_WEIGHTS);
    return to;
  }
  if (kept) *kept_stamp = 0;
  *ok = reorder(stream, m, &d->weights_reorder, &d->weights_in_md, w->data, &d->weights_md, to);
  *finite = !guard || all_finite(w->data, w->count);
  if (*ok && kept) *kept_stamp = stamp | (*finite ? 0 : NONFINITE_WEIGHTS);
  atomic_fetch_add(&weight_reorders, 1);
  return to;
}

/* The filters transformed for wino.c, kept: transformed again only for new contents, as
 * weights() reorders. *finite: whether the weights are all finite. */
static const void *wino_filters(const rt_cpu_dnnl *d, const rt_value *w, char *kept, uint64_t *kept_stamp,
                                uint64_t stamp, bool *finite) {
  if (stamp && (*kept_stamp & ~(NONFINITE_WEIGHTS | NEW_RUNS)) == stamp) {
    *finite = !(*kept_stamp & NONFINITE_WEIGHTS);
    return kept;
  }
  *kept_stamp = 0;
  rt_cpu_wino_filters(d, w->data, (float *)kept);
  *finite = all_finite(w->data, w->count);
  *kept_stamp = stamp | (*finite ? 0 : NONFINITE_WEIGHTS);
  atomic_fetch_add(&weight_reorders, 1);
  return kept;
}

/* Term t of d's per-feature values at feature c; in[2 + k] is d's input k. Each op as the
 * reference computes it in f32 (maximum and minimum propagate NaN). */
static float term_at(const rt_cpu_dnnl *d, int t, const rt_value *const *in, int64_t c) {
  const rt_dnnl_term *x = &d->terms[t];
  if (x->op == HLO_OP_PARAMETER) return ((const float *)in[2 + x->input]->data)[c];
  if (x->op == HLO_OP_CONSTANT) return x->value;
  float a = term_at(d, x->a, in, c), b = x->b >= 0 ? term_at(d, x->b, in, c) : 0;
  switch (x->op) {
    case HLO_OP_RSQRT: return 1.0f / sqrtf(a);
    case HLO_OP_SQRT: return sqrtf(a);
    case HLO_OP_NEGATE: return -a;
    case HLO_OP_ADD: return a + b;
    case HLO_OP_SUBTRACT: return a - b;
    case HLO_OP_MULTIPLY: return a * b;
    case HLO_OP_DIVIDE: return a / b;
    case HLO_OP_MAXIMUM: return isnan(a) || isnan(b) ? NAN : a > b ? a : b;
    case HLO_OP_MINIMUM: return isnan(a) || isnan(b) ? NAN : a < b ? a : b;
    default: return NAN; /* the planner takes no other op */
  }
}

/* Post-op k's operand: an input's data, or its per-feature value computed into scratch. */
static const void *post_operand(const rt_cpu_dnnl *d, int k, const rt_value *const *in, char *scratch) {
  const rt_dnnl_post *p = &d->posts[k];
  if (p->input >= 0) return in[2 + p->input]->data;
  float *values = (float *)(scratch + p->values_offset);
  int64_t features = d->conv->shape.dims[d->conv->conv->output_feature];
  for (int64_t c = 0; c < features; c++) values[c] = term_at(d, p->term, in, c);
  return values;
}

/* Inputs scanned (sources and post-op inputs), process-wide (for tests). */
static _Atomic int64_t input_scans;

int64_t rt_cpu_dnnl_input_scan_count(void) { return atomic_load(&input_scans); }

/* Whether d's result is known finite after a run that took the fast primitive: a clamp
 * between finite bounds last. */
static bool clamps_finite(const rt_cpu_dnnl *d) {
  const rt_dnnl_post *p = d->post_count ? &d->posts[d->post_count - 1] : NULL;
  return p && p->kind == RT_DNNL_CLIP && isfinite(p->lo) && isfinite(p->hi);
}

/* The safe primitive's weights when they are not the fast one's (Winograd's): oneDNN's
 * direct layout, reordered into the scratch for this run. */
static const void *safe_weights(dnnl_stream_t stream, run_memories *m, const rt_cpu_dnnl *d, const rt_value *w,
                                char *scratch, const void *fast, bool *ok) {
  if (!d->safe_weights_reorder.prim) return fast;
  char *to = scratch + d->safe_weights_reorder.offset;
  *ok = *ok && reorder(stream, m, &d->safe_weights_reorder, &d->weights_in_md, w->data, &d->safe_weights_md, to);
  return to;
}

/* Runs the fast primitive, or the safe one (safe), over args whose weights are args[1]. */
static bool execute(dnnl_stream_t stream, run_memories *m, const rt_cpu_dnnl *d, dnnl_exec_arg_t *args, int n,
                    bool safe, const void *w) {
  args[1] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, memory(m, safe && winograd(d) ? &d->safe_weights_md : &d->weights_md, w)};
  return !m->failed && dnnl_primitive_execute(safe ? d->safe_prim : d->conv_prim, stream, n, args) == dnnl_success;
}

/* Three ways, by what the step planned and what its operands hold: latch's own Winograd
 * (wino.c, on AVX2) when its filters are kept (a parameter's or a kept step's) and every
 * operand is finite; oneDNN's fast primitive (its own Winograd on AVX-512: the result then
 * checked); or the safe primitive when an operand, or a Winograd result, is not finite. */
static bool run_conv(dnnl_stream_t stream, run_memories *m, const rt_cpu_dnnl *d, const rt_value *const *in,
                     void *out, char *scratch, char *kept, uint64_t *kept_stamp, uint64_t stamp, bool *in_finite,
                     bool *result_finite) {
  bool ok = true, own = d->wino && kept;
  /* direct: oneDNN's Winograd runs its safe primitive, which takes every value (its weights
   * reordered by safe_weights below, in[1] when they need none); wino.c's runs oneDNN's fast
   * one, its weights reordered into the scratch for this run */
  uint64_t new_runs;
  rt_cpu_conv_geom g; /* a step the product may run counts its runs with new weights too (gemm_run) */
  bool gemm = gemm_geom(d, &g) && rt_cpu_conv_gemm_scratch(&g) <= d->scratch_bytes;
  bool direct = churning(winograd(d) || own || gemm, kept_stamp, stamp, &new_runs), safe_direct = direct && winograd(d);
  own = own && !direct;
  bool guard = own || (d->safe_prim && !safe_direct);
  const void *src = in[0]->data;
  if (d->src_reorder.prim) {
    void *to = scratch + d->src_reorder.offset;
    ok = reorder(stream, m, &d->src_reorder, &d->src_in_md, src, &d->src_md, to);
    src = to;
  }
  bool finite = !safe_direct;
  const void *w = !ok         ? NULL
                  : safe_direct ? in[1]->data
                  : own         ? wino_filters(d, in[1], kept, kept_stamp, stamp, &finite)
                  : direct      ? weights(stream, m, d, in[1], scratch, NULL, NULL, 0, &ok, &finite)
                                : weights(stream, m, d, in[1], scratch, kept, kept_stamp, stamp, &ok, &finite);
  if (new_runs && !direct && *kept_stamp) *kept_stamp |= new_runs << NEW_RUNS_SHIFT;
  if (guard && finite && !in_finite[0]) { /* the source as it arrives (a blocked one is padded) */
    finite = in_finite[0] = all_finite(in[0]->data, (int64_t)dnnl_memory_desc_get_size(&d->src_in_md) / 4);
    atomic_fetch_add(&input_scans, 1);
  }
  void *dst = d->dst_reorder.prim ? scratch + d->dst_offset : out;
  dnnl_exec_arg_t args[5 + RT_DNNL_MAX_POSTS];
  const void *post_data[RT_DNNL_MAX_POSTS] = {NULL};
  int n = 0;
  args[n++] = (dnnl_exec_arg_t){DNNL_ARG_SRC, memory(m, &d->src_md, src)};
  n++; /* the weights: execute's */
  args[n++] = (dnnl_exec_arg_t){DNNL_ARG_DST, memory(m, &d->dst_md, dst)};
  args[n++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, memory(m, &d->scratchpad_md, scratch + d->scratchpad_offset)};
  for (int k = 0; k < d->post_count; k++) {
    const rt_dnnl_post *p = &d->posts[k];
    if (p->term < 0 && p->kind != RT_DNNL_ADD_FULL) continue;
    const void *data = post_operand(d, k, in, scratch);
    if (ok && d->post_reorder[k].prim) {
      void *to = scratch + d->post_reorder[k].offset;
      ok = reorder(stream, m, &d->post_reorder[k], &d->post_in_md[k], data, &d->post_md[k], to);
      data = to;
    }
    bool *known = p->input >= 0 ? &in_finite[2 + p->input] : NULL; /* an input's, not a value made here */
    if (guard && finite && !(known && *known)) { /* ADD_FULL: the operand as the primitive reads it (maybe padded) */
      finite = all_finite(data, p->kind == RT_DNNL_ADD_FULL ? (int64_t)dnnl_memory_desc_get_size(&d->post_md[k]) / 4
                                                            : d->conv->shape.dims[d->conv->conv->output_feature]);
      if (known) *known = finite;
      atomic_fetch_add(&input_scans, 1);
    }
    post_data[k] = data;
    if (p->kind == RT_DNNL_BIAS) args[n++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, memory(m, &d->bias_md, data)};
    else /* oneDNN numbers its post-ops without the bias, which comes first when present */
      args[n++] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_MULTIPLE_POST_OP(k - (d->posts[0].kind == RT_DNNL_BIAS)) | DNNL_ARG_SRC_1,
                                    memory(m, &d->post_md[k], data)};
  }
  bool done = ok && own && finite && rt_cpu_wino_run(d, src, w, post_data, dst, scratch + d->wino_offset);
  if (ok && own && !done) { /* oneDNN's weights, reordered into the scratch for this run */
    bool weights_finite;
    w = weights(stream, m, d, in[1], scratch, NULL, NULL, 0, &ok, &weights_finite);
  }
  bool safe = !finite && d->safe_prim, checked = false;
  if (!done) {
    if (safe) w = safe_weights(stream, m, d, in[1], scratch, w, &ok);
    ok = ok && execute(stream, m, d, args, n, safe, w);
    /* oneDNN's Winograd over finite operands: the result is checked (and then activated), and
     * known finite after; an inf or NaN there (an overflow in its transforms) is computed
     * again directly */
    checked = ok && !safe && winograd(d);
    if (checked && !checked_result(d, dst, (int64_t)dnnl_memory_desc_get_size(&d->dst_md) / 4)) {
      safe = true;
      checked = false;
      w = safe_weights(stream, m, d, in[1], scratch, w, &ok);
      ok = ok && execute(stream, m, d, args, n, safe, w);
    }
  }
  if (ok && d->dst_reorder.prim) ok = reorder(stream, m, &d->dst_reorder, &d->dst_md, dst, &d->out_md, out);
  if (ok && safe && activation_last(d)) activate(d, out, d->out_bytes / (int64_t)sizeof(float));
  *result_finite = ok && (done || checked || (finite && clamps_finite(d)));
  return ok;
}

/* Products run instead of a step's primitive, process-wide (for tests). */
static _Atomic int64_t gemm_steps;

int64_t rt_cpu_dnnl_gemm_step_count(void) { return atomic_load(&gemm_steps); }

/* Whether the step ran as conv_gemm.c's product: one that may (gemm_geom) whose weights are
 * churning. A result not all finite is left to the primitives, which take every value. */
static bool gemm_run(const rt_cpu_dnnl *d, const rt_value *const *in, void *out, void *scratch, uint64_t *kept_stamp,
                     uint64_t stamp, bool *result_finite) {
  rt_cpu_conv_geom g;
  uint64_t new_runs;
  if (!d->conv || !gemm_geom(d, &g) || rt_cpu_conv_gemm_scratch(&g) > d->scratch_bytes ||
      !churning(true, kept_stamp, stamp, &new_runs))
    return false;
  if (!rt_cpu_conv_gemm_run(&g, in[0]->data, in[1]->data, NULL, out, scratch) ||
      !all_finite(out, d->out_bytes / (int64_t)sizeof(float)))
    return false;
  atomic_fetch_add(&gemm_steps, 1);
  *result_finite = true;
  return true;
}

hlo_status rt_cpu_dnnl_step(const rt_cpu_dnnl *d, const rt_value *const *in, void *out, void *scratch, char *kept,
                            uint64_t *kept_stamp, uint64_t weight_stamp, bool *in_finite, bool *result_finite,
                            hlo_diag *diag) {
  *result_finite = false;
  /* the known_finite choice refused for this op (mark_choices.c): every input scanned */
  const hlo_instr *op = d->conv ? d->conv : d->concat;
  if (op && hlo_instr_raw_attr(op, RT_CPU_SCAN_INPUTS))
    for (int k = 0; k < RT_CPU_DNNL_STEP_INPUTS; k++) in_finite[k] = false;
  if (d->pool) return rt_cpu_dnnl_pool_step(d, in, out, result_finite, diag);
  if (d->concat) return rt_cpu_dnnl_concat_step(d, in, in_finite, out, result_finite, diag);
  if (gemm_run(d, in, out, scratch, kept_stamp, weight_stamp, result_finite)) return HLO_OK;
  int team = rt_cpu_dnnl_team_begin();
  dnnl_stream_t stream = NULL;
  run_memories m = {.count = 0};
  bool ok = dnnl_stream_create(&stream, rt_cpu_dnnl_engine(), dnnl_stream_default_flags) == dnnl_success &&
            run_conv(stream, &m, d, in, out, (char *)scratch, kept, kept_stamp, weight_stamp, in_finite,
                     result_finite) &&
            dnnl_stream_wait(stream) == dnnl_success;
  for (int i = 0; i < m.count; i++) dnnl_memory_destroy(m.list[i]);
  if (stream) dnnl_stream_destroy(stream);
  omp_set_num_threads(team);
  if (!ok)
    return hlo_diag_set(diag, HLO_ERR_INTERNAL, "oneDNN failed running convolution %%%s (out of memory?)",
                        d->conv->name);
  return HLO_OK;
}
