/* Max, min and sum pools between oneDNN convolutions, planned with them (dnnl_plan.c): the pool
 * reads its producer's blocked result as it is and writes its own result blocked the same way
 * when every reader takes that layout, row-major otherwise, so resnet's and vgg's pools cost
 * no reorder on either side. latch's own kernel runs them (pooling.c), with the reference's
 * NaN and signed-zero rules, which oneDNN's pooling does not keep. */
#include "dnnl_internal.h"

bool rt_cpu_dnnl_pool_supported(const hlo_instr *instr) {
  if (instr->opcode != HLO_OP_REDUCE_WINDOW || instr->operand_count != 2 || instr->called_count != 1 ||
      !instr->window || instr->window->rank != 4)
    return false;
  const hlo_shape *x = &instr->operands[0]->shape, *init = &instr->operands[1]->shape, *y = &instr->shape;
  if (!hlo_shape_is_array(x) || x->dtype != HLO_F32 || x->rank != 4 || !hlo_shape_is_default_layout(x) ||
      !hlo_shape_is_array(y) || y->dtype != HLO_F32 || !hlo_shape_is_default_layout(y) || init->dtype != HLO_F32 ||
      init->rank != 0)
    return false;
  hlo_opcode op = hlo_simple_reducer(instr->called[0]);
  if (op != HLO_OP_MAXIMUM && op != HLO_OP_MINIMUM && op != HLO_OP_ADD) return false;
  for (int d = 0; d < 4; d++) {
    const hlo_window_dim *w = &instr->window->dims[d];
    if (w->lhs_dilate != 1 || w->rhs_dilate != 1 || w->reversal || w->pad_low < 0 || w->pad_high < 0 || w->size < 1 ||
        w->stride < 1)
      return false;
    if (d < 2 && (w->size != 1 || w->stride != 1 || w->pad_low != 0 || w->pad_high != 0)) return false;
  }
  return true;
}

int rt_cpu_dnnl_block_of(const dnnl_memory_desc_t *md, const hlo_shape *shape) {
  static const int blocks[] = {8, 16};
  for (size_t b = 0; b < sizeof blocks / sizeof blocks[0]; b++) {
    dnnl_memory_desc_t like;
    if (rt_cpu_dnnl_block_md(&like, shape, blocks[b]) && dnnl_memory_desc_equal(&like, md)) return blocks[b];
  }
  return 0;
}

bool rt_cpu_dnnl_block_md(dnnl_memory_desc_t *md, const hlo_shape *shape, int block) {
  dnnl_dims_t dims = {shape->dims[0], shape->dims[1], shape->dims[2], shape->dims[3]};
  dnnl_format_tag_t tag = block == 8 ? dnnl_aBcd8b : block == 16 ? dnnl_aBcd16b : dnnl_abcd;
  return dnnl_memory_desc_init_by_tag(md, 4, dims, dnnl_f32, tag) == dnnl_success;
}

bool rt_cpu_dnnl_build_pool(rt_cpu_dnnl *d, const dnnl_memory_desc_t *src_in) {
  const hlo_instr *pool = d->pool;
  d->block = src_in ? rt_cpu_dnnl_block_of(src_in, &pool->operands[0]->shape) : 0;
  if (!d->block) return false;
  d->src_in_md = *src_in;
  if (!rt_cpu_dnnl_block_md(&d->out_md, &pool->shape, d->blocked_out ? d->block : 0)) return false;
  d->out_bytes = (int64_t)dnnl_memory_desc_get_size(&d->out_md);
  d->scratch_bytes = 0;
  return true;
}

hlo_status rt_cpu_dnnl_pool_step(const rt_cpu_dnnl *d, const rt_value *const *in, void *out, bool *finite,
                                 hlo_diag *diag) {
  const hlo_instr *pool = d->pool;
  hlo_opcode op = hlo_simple_reducer(pool->called[0]);
  float init = *(const float *)in[1]->data;
  if (!rt_cpu_pool_blocked_f32(pool->window, op, d->block, in[0]->data, pool->operands[0]->shape.dims, init, out,
                               pool->shape.dims, d->blocked_out, finite))
    return hlo_diag_set(diag, HLO_ERR_INTERNAL, "the blocked pool %%%s was planned for a layout it cannot run",
                        pool->name);
  return HLO_OK;
}
