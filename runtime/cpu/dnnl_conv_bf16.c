/* Convolutions with bf16 operands on oneDNN's convolution primitive, where the processor has
 * bf16 instructions (rt_cpu_bf16_native): 2-D, any dim_labels, feature groups, strides,
 * dilation and padding. Each operand and the result is told to oneDNN in the layout it has, by
 * its strides, so nothing is copied; oneDNN multiplies bf16 pairs, sums in f32 and writes the
 * result as f32 or rounded once to bf16. The primitive is made when the plan picks the kernel
 * and kept for the process (a table under a lock, as dnnl_matmul.c's); a convolution it refuses
 * takes conv.c's widened path. */
#include <omp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "dnnl_internal.h"
#include "kernel_internal.h"

/* What oneDNN is told: dims and strides of source, weights (with a group dim when grouped)
 * and destination, and the window. */
typedef struct conv_key { /* dnnl_dims_t throughout: oneDNN's functions take whole ones */
  dnnl_dims_t src, src_strides, wei, wei_strides, dst, dst_strides;
  dnnl_dims_t stride, dilate, pad_low, pad_high;
  int wei_rank;
  dnnl_data_type_t dst_type;
  int threads; /* the OpenMP team it is made for (rt_cpu_dnnl_team) */
} conv_key;

enum { KEPT_PRIMITIVES = 256 };
static struct {
  conv_key key;
  dnnl_primitive_t prim;
} kept[KEPT_PRIMITIVES];
static int kept_count;
static rt_fork_mutex kept_lock = RT_FORK_MUTEX_INIT; /* fork waits for it */

/* dims[j] and strides[j] of shape's dimension order[j], for count dims. */
static void described(const hlo_shape *shape, const int64_t *order, int count, int64_t *dims, int64_t *strides) {
  int64_t all[HLO_MAX_RANK];
  hlo_shape_strides(shape, all);
  for (int j = 0; j < count; j++) dims[j] = shape->dims[order[j]], strides[j] = all[order[j]];
}

/* instr's key; false when oneDNN's convolution cannot express it. */
static bool key_for(const hlo_instr *instr, conv_key *key) {
  const hlo_conv_dims *cd = instr->conv;
  const hlo_shape *x = &instr->operands[0]->shape, *w = &instr->operands[1]->shape;
  if (cd->spatial_count != 2 || instr->window->rank != 2 || instr->batch_group_count != 1 ||
      instr->feature_group_count < 1 || !hlo_shape_is_default_layout(x) || !hlo_shape_is_default_layout(w) ||
      !hlo_shape_is_default_layout(&instr->shape))
    return false;
  memset(key, 0, sizeof *key);
  for (int d = 0; d < 2; d++) {
    const hlo_window_dim *wd = &instr->window->dims[d];
    if (wd->lhs_dilate != 1 || wd->reversal || wd->pad_low < 0 || wd->pad_high < 0) return false;
    key->stride[d] = wd->stride, key->dilate[d] = wd->rhs_dilate - 1;
    key->pad_low[d] = wd->pad_low, key->pad_high[d] = wd->pad_high;
  }
  int64_t src_order[4] = {cd->input_batch, cd->input_feature, cd->input_spatial[0], cd->input_spatial[1]};
  int64_t dst_order[4] = {cd->output_batch, cd->output_feature, cd->output_spatial[0], cd->output_spatial[1]};
  int64_t wei_order[4] = {cd->kernel_output_feature, cd->kernel_input_feature, cd->kernel_spatial[0],
                          cd->kernel_spatial[1]};
  described(x, src_order, 4, key->src, key->src_strides);
  described(&instr->shape, dst_order, 4, key->dst, key->dst_strides);
  int64_t wei[4], wei_strides[4], groups = instr->feature_group_count;
  described(w, wei_order, 4, wei, wei_strides);
  if (groups == 1) {
    key->wei_rank = 4;
    memcpy(key->wei, wei, sizeof wei);
    memcpy(key->wei_strides, wei_strides, sizeof wei_strides);
  } else { /* output features g * (O / G) + o: a group dim in front */
    if (wei[0] % groups) return false;
    key->wei_rank = 5;
    int64_t g_wei[5] = {groups, wei[0] / groups, wei[1], wei[2], wei[3]};
    int64_t g_strides[5] = {wei[0] / groups * wei_strides[0], wei_strides[0], wei_strides[1], wei_strides[2],
                            wei_strides[3]};
    memcpy(key->wei, g_wei, sizeof g_wei);
    memcpy(key->wei_strides, g_strides, sizeof g_strides);
  }
  key->dst_type = instr->shape.dtype == HLO_BF16 ? dnnl_bf16 : dnnl_f32;
  key->threads = rt_cpu_dnnl_team();
  return true;
}

static dnnl_primitive_t make_primitive(const conv_key *key) {
  dnnl_memory_desc_t src, wei, dst;
  dnnl_convolution_desc_t desc;
  dnnl_primitive_desc_t pd = NULL;
  dnnl_primitive_t prim = NULL;
  bool ok =
      dnnl_memory_desc_init_by_strides(&src, 4, key->src, dnnl_bf16, key->src_strides) == dnnl_success &&
      dnnl_memory_desc_init_by_strides(&wei, key->wei_rank, key->wei, dnnl_bf16, key->wei_strides) == dnnl_success &&
      dnnl_memory_desc_init_by_strides(&dst, 4, key->dst, key->dst_type, key->dst_strides) == dnnl_success &&
      dnnl_dilated_convolution_forward_desc_init(&desc, dnnl_forward_inference, dnnl_convolution_direct, &src, &wei,
                                                 NULL, &dst, key->stride, key->dilate, key->pad_low,
                                                 key->pad_high) == dnnl_success &&
      dnnl_primitive_desc_create(&pd, &desc, NULL, rt_cpu_dnnl_engine(), NULL) == dnnl_success;
  /* oneDNN's reference implementation is slower than the widened path */
  const char *impl = NULL;
  ok = ok && dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl &&
       strncmp(impl, "ref", 3) != 0;
  if (ok && dnnl_primitive_create(&prim, pd) != dnnl_success) prim = NULL;
  if (pd) dnnl_primitive_desc_destroy(pd);
  return prim;
}

/* The kept primitive for key (made on first sight); NULL when oneDNN offers none or the table
 * is full. */
static dnnl_primitive_t primitive_for(const conv_key *key) {
  rt_fork_lock(&kept_lock);
  dnnl_primitive_t prim = NULL;
  for (int i = 0; i < kept_count && !prim; i++)
    if (memcmp(&kept[i].key, key, sizeof *key) == 0) prim = kept[i].prim;
  if (!prim && kept_count < KEPT_PRIMITIVES && (prim = make_primitive(key))) {
    kept[kept_count].key = *key;
    kept[kept_count++].prim = prim;
  }
  rt_fork_unlock(&kept_lock);
  return prim;
}

static dnnl_memory_t user_memory(dnnl_primitive_t prim, dnnl_query_t what, const void *data) {
  const_dnnl_primitive_desc_t pd;
  dnnl_memory_t mem = NULL;
  if (dnnl_primitive_get_primitive_desc(prim, &pd) != dnnl_success ||
      dnnl_memory_create(&mem, dnnl_primitive_desc_query_md(pd, what, 0), rt_cpu_dnnl_engine(), (void *)data) !=
          dnnl_success)
    return NULL;
  return mem;
}

static _Atomic int64_t runs;

static bool conv_bf16_run(const hlo_instr *instr, const rt_value *const *in, rt_value *out, void *scratch) {
  (void)scratch;
  atomic_fetch_add(&runs, 1);
  conv_key key;
  dnnl_primitive_t prim = key_for(instr, &key) ? primitive_for(&key) : NULL;
  if (!prim) return false; /* made when picked: only memory can have run out since */
  int team = rt_cpu_dnnl_team_begin();
  dnnl_stream_t stream = NULL;
  dnnl_memory_t src = user_memory(prim, dnnl_query_src_md, in[0]->data);
  dnnl_memory_t wei = user_memory(prim, dnnl_query_weights_md, in[1]->data);
  dnnl_memory_t dst = user_memory(prim, dnnl_query_dst_md, out->data);
  dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}};
  bool ok = src && wei && dst &&
            dnnl_stream_create(&stream, rt_cpu_dnnl_engine(), dnnl_stream_default_flags) == dnnl_success &&
            dnnl_primitive_execute(prim, stream, 3, args) == dnnl_success && dnnl_stream_wait(stream) == dnnl_success;
  if (stream) dnnl_stream_destroy(stream);
  if (src) dnnl_memory_destroy(src);
  if (wei) dnnl_memory_destroy(wei);
  if (dst) dnnl_memory_destroy(dst);
  omp_set_num_threads(team);
  return ok;
}

rt_cpu_scratch_kernel rt_cpu_pick_conv_bf16(const hlo_instr *instr, int64_t *scratch_bytes) {
  if (instr->opcode != HLO_OP_CONVOLUTION || !instr->conv || !instr->window || instr->operand_count != 2 ||
      !hlo_shape_is_array(&instr->shape) || (instr->shape.dtype != HLO_F32 && instr->shape.dtype != HLO_BF16) ||
      instr->operands[0]->shape.dtype != HLO_BF16 || instr->operands[1]->shape.dtype != HLO_BF16 ||
      hlo_shape_elements(&instr->shape) == 0 || !rt_cpu_bf16_native())
    return NULL;
  conv_key key;
  if (!key_for(instr, &key) || !primitive_for(&key)) return NULL;
  *scratch_bytes = 0;
  return conv_bf16_run;
}

int64_t rt_cpu_conv_bf16_runs(void) { return atomic_load(&runs); }
