/* Tensors over the caller's memory (latch_from_borrowed) and telling latch that such memory
 * was written from outside (latch_touch): the zero-copy path for frontends that own their
 * tensors' storage (the Python package hands torch tensors to latch this way). The memory is
 * an rt_value whose release callback gives it back instead of free(). */
#include "capture.h"

latch_tensor *latch_from_borrowed(latch_runtime *rt, latch_dtype dtype, int rank, const int64_t *dims, void *data,
                                  void (*release)(void *release_ctx), void *release_ctx) {
  hlo_dtype d = cap_hlo_dtype(dtype);
  if (d == HLO_INVALID || rank < 0 || rank > HLO_MAX_RANK || (rank > 0 && !dims)) {
    if (release) release(release_ctx);
    return cap_error(rt, "from_borrowed: invalid dtype, or rank %d out of range (0..%d), or dims NULL", rank,
                     HLO_MAX_RANK);
  }
  for (int i = 0; i < rank; i++)
    if (dims[i] < 0) {
      if (release) release(release_ctx);
      return cap_error(rt, "from_borrowed: dim %d is negative (%lld)", i, (long long)dims[i]);
    }
  rt_value *value = rt_value_borrow(d, rank, dims, data, release, release_ctx);
  if (!value) {
    if (release) release(release_ctx);
    return cap_error(rt, "from_borrowed: out of memory");
  }
  if (!data && hlo_shape_bytes(&value->shape) > 0) {
    rt_value_release(value); /* calls release */
    return cap_error(rt, "from_borrowed: data is NULL");
  }
  return cap_wrap(rt, cap_node_data(value));
}

latch_status latch_touch(latch_tensor *t) {
  if (!t || t->node->state != CAP_READY) {
    cap_set_error("touch: the tensor is %s, not a value", !t ? "NULL" : "pending or an error");
    return LATCH_ERR_INPUT;
  }
  rt_value_touch(t->node->value);
  return LATCH_OK;
}
