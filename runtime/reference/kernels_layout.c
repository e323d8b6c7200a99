/* Data-movement kernels: broadcast, reshape/bitcast, transpose, slice, dynamic-slice,
 * dynamic-update-slice, concatenate, pad, reverse, iota.
 *
 * All but iota are one primitive: copy a box of elements between two arrays, each
 * addressed by a start and a stride per dimension (strides may be 0 to repeat or negative
 * to reverse). Each kernel only works out the box. The copy merges dimensions that are
 * contiguous in both arrays, so most copies run as long memcpy rows. Values are dense and
 * row-major; elements are moved as raw bytes, which works for every type in every mode. */
#include <stdlib.h>
#include <string.h>

#include "reference.h"

static hlo_status bad_instr(rt_eval *eval, const hlo_instr *instr, const char *what) {
  return hlo_diag_set(eval->diag, HLO_ERR_INPUT, "%s %%%s: %s", hlo_opcode_name(instr->opcode),
                      instr->name, what);
}

static hlo_status out_of_memory(rt_eval *eval, const hlo_instr *instr) {
  return hlo_diag_set(eval->diag, HLO_ERR_INTERNAL, "out of memory in %s %%%s",
                      hlo_opcode_name(instr->opcode), instr->name);
}

/* A box to copy: dims[i] elements along dimension i, at these strides (in elements). */
typedef struct box {
  int rank;
  int64_t dims[HLO_MAX_RANK];
  int64_t dst_stride[HLO_MAX_RANK];
  int64_t src_stride[HLO_MAX_RANK];
} box;

/* Drops size-1 dimensions and merges neighbours that are contiguous in both arrays.
 * Returns false when the box is empty. */
static bool box_simplify(box *b) {
  int rank = 0;
  for (int i = 0; i < b->rank; i++) {
    if (b->dims[i] == 0) return false;
    if (b->dims[i] == 1) continue;
    if (rank > 0 && b->dst_stride[rank - 1] == b->dst_stride[i] * b->dims[i] &&
        b->src_stride[rank - 1] == b->src_stride[i] * b->dims[i]) {
      b->dims[rank - 1] *= b->dims[i];
      b->dst_stride[rank - 1] = b->dst_stride[i];
      b->src_stride[rank - 1] = b->src_stride[i];
      continue;
    }
    b->dims[rank] = b->dims[i];
    b->dst_stride[rank] = b->dst_stride[i];
    b->src_stride[rank] = b->src_stride[i];
    rank++;
  }
  b->rank = rank;
  return true;
}

/* One row: n elements of `size` bytes at the given strides. */
static void copy_row(char *dst, int64_t ds, const char *src, int64_t ss, int64_t n, size_t size) {
  if (ds == 1 && ss == 1) {
    memcpy(dst, src, (size_t)n * size);
    return;
  }
  /* Broadcasts repeat one element along a contiguous row (ss == 0) and transposes gather
   * into one (ds == 1); plain loops for those let the compiler vectorize them. */
#define ROW(T)                                                                         \
  do {                                                                                 \
    T *d = (T *)(void *)dst;                                                           \
    const T *s = (const T *)(const void *)src;                                         \
    if (ds == 1 && ss == 0) {                                                          \
      T v = s[0];                                                                      \
      for (int64_t i = 0; i < n; i++) d[i] = v;                                        \
    } else if (ds == 1) {                                                              \
      for (int64_t i = 0; i < n; i++) d[i] = s[i * ss];                                \
    } else {                                                                           \
      for (int64_t i = 0; i < n; i++) d[i * ds] = s[i * ss];                           \
    }                                                                                  \
  } while (0)
  switch (size) {
    case 1: ROW(uint8_t); break;
    case 2: ROW(uint16_t); break;
    case 4: ROW(uint32_t); break;
    default: ROW(uint64_t); break;
  }
#undef ROW
}

/* Copies the box from src + src_offset to dst + dst_offset (offsets in elements). */
static void box_copy(rt_value *dst, int64_t dst_offset, const rt_value *src, int64_t src_offset, box b) {
  if (!box_simplify(&b)) return; /* empty: the offsets may not even be inside the arrays */
  size_t size = hlo_dtype_size(dst->shape.dtype);
  char *d = (char *)dst->data + dst_offset * (int64_t)size;
  const char *s = (const char *)src->data + src_offset * (int64_t)size;
  if (b.rank == 0) {
    memcpy(d, s, size);
    return;
  }
  int outer = b.rank - 1;
  int64_t row = b.dims[outer], ds = b.dst_stride[outer], ss = b.src_stride[outer];
  int64_t coords[HLO_MAX_RANK] = {0};
  int64_t doff = 0, soff = 0; /* in elements, along the outer dimensions */
  for (;;) {
    copy_row(d + doff * (int64_t)size, ds, s + soff * (int64_t)size, ss, row, size);
    int i = outer - 1;
    for (; i >= 0; i--) { /* odometer over the outer dimensions */
      doff += b.dst_stride[i];
      soff += b.src_stride[i];
      if (++coords[i] < b.dims[i]) break;
      doff -= b.dst_stride[i] * b.dims[i];
      soff -= b.src_stride[i] * b.dims[i];
      coords[i] = 0;
    }
    if (i < 0) return;
  }
}

static void row_major_strides(const rt_value *value, int64_t *strides) {
  hlo_shape_strides(&value->shape, strides);
}

/* A box with the dims of `over`; the caller fills in the strides. */
static box box_for(const rt_value *over) {
  box b = {.rank = over->shape.rank};
  for (int i = 0; i < b.rank; i++) b.dims[i] = over->shape.dims[i];
  return b;
}

static bool same_dtype(const rt_value *a, const rt_value *b) { return a->shape.dtype == b->shape.dtype; }

static rt_value *new_result(rt_eval *eval, const hlo_instr *instr) {
  return rt_new_output(eval, instr, &instr->shape);
}

/* Releases result and reports what was wrong. */
static hlo_status fail(rt_eval *eval, const hlo_instr *instr, rt_value *result, const char *what) {
  rt_value_release(result);
  return bad_instr(eval, instr, what);
}

/* ---------------------------------------------------------------------------------------
 * broadcast: operand dimension i becomes result dimension dimensions[i]; the others repeat
 * (stride 0). */

RT_KERNEL(rt_kernel_broadcast) {
  const rt_value *x = args[0];
  rt_value *result = new_result(eval, instr);
  if (!result) return eval->diag->status;
  if (!same_dtype(x, result)) return fail(eval, instr, result, "operand and result types differ");
  if (instr->dimensions.count != x->shape.rank)
    return fail(eval, instr, result, "dimensions={...} must name one result dimension per operand dimension");
  box b = box_for(result);
  row_major_strides(result, b.dst_stride);
  int64_t x_strides[HLO_MAX_RANK];
  row_major_strides(x, x_strides);
  bool used[HLO_MAX_RANK] = {false};
  for (int i = 0; i < x->shape.rank; i++) {
    int64_t d = instr->dimensions.values[i];
    if (d < 0 || d >= b.rank || used[d])
      return fail(eval, instr, result, "a broadcast dimension is out of range or repeated");
    used[d] = true;
    if (x->shape.dims[i] == b.dims[d]) b.src_stride[d] += x_strides[i];
    else if (x->shape.dims[i] != 1)
      return fail(eval, instr, result, "an operand dimension differs from the result dimension it maps to");
  }
  box_copy(result, 0, x, 0, b);
  *out = result;
  return HLO_OK;
}

/* ---------------------------------------------------------------------------------------
 * transpose: result dimension i is operand dimension dimensions[i]. */

/* Checks that perm is a permutation of 0..rank-1. */
static bool is_permutation(const int64_t *perm, int count, int rank) {
  if (count != rank) return false;
  bool seen[HLO_MAX_RANK] = {false};
  for (int i = 0; i < rank; i++) {
    if (perm[i] < 0 || perm[i] >= rank || seen[perm[i]]) return false;
    seen[perm[i]] = true;
  }
  return true;
}

/* Copies x into result with result dimension i taken from x dimension perm[i]. */
static bool permute_into(rt_value *result, const rt_value *x, const int64_t *perm) {
  box b = box_for(result);
  row_major_strides(result, b.dst_stride);
  int64_t x_strides[HLO_MAX_RANK];
  row_major_strides(x, x_strides);
  for (int i = 0; i < b.rank; i++) {
    if (x->shape.dims[perm[i]] != b.dims[i]) return false;
    b.src_stride[i] = x_strides[perm[i]];
  }
  box_copy(result, 0, x, 0, b);
  return true;
}

RT_KERNEL(rt_kernel_transpose) {
  const rt_value *x = args[0];
  rt_value *result = new_result(eval, instr);
  if (!result) return eval->diag->status;
  if (!same_dtype(x, result) || result->shape.rank != x->shape.rank ||
      !is_permutation(instr->dimensions.values, instr->dimensions.count, x->shape.rank))
    return fail(eval, instr, result, "dimensions={...} must permute the operand's dimensions");
  if (!permute_into(result, x, instr->dimensions.values))
    return fail(eval, instr, result, "the result's dimensions are not the permuted operand's");
  *out = result;
  return HLO_OK;
}

/* ---------------------------------------------------------------------------------------
 * reshape and bitcast. A reshape reinterprets the row-major order. A bitcast reinterprets
 * the physical order given by the layouts: the operand's elements are laid out in its
 * minor-to-major order, and the result reads that buffer in its own. With default layouts
 * both are row-major and it is a reshape. */

/* perm[k] = the logical dimension that is k-th from major in the shape's layout. */
static bool major_to_minor(const hlo_shape *shape, int64_t *perm) {
  for (int k = 0; k < shape->rank; k++) perm[k] = shape->minor_to_major[shape->rank - 1 - k];
  return is_permutation(perm, shape->rank, shape->rank);
}

static bool is_tiled(const hlo_shape *shape) {
  return shape->layout_extra && strstr(shape->layout_extra, "T(") != NULL;
}

/* The bitcast: physical = operand transposed into its major-to-minor order; the result's
 * physical array (its dims in its own major-to-minor order) is that buffer reshaped;
 * transposing it back by the inverse permutation gives the logical result. */
static hlo_status bitcast_with_layouts(rt_eval *eval, const hlo_instr *instr, const rt_value *x,
                                       const hlo_shape *operand_shape, rt_value *result) {
  int64_t in_perm[HLO_MAX_RANK], out_perm[HLO_MAX_RANK];
  if (!major_to_minor(operand_shape, in_perm) || !major_to_minor(&instr->shape, out_perm) ||
      operand_shape->rank != x->shape.rank)
    return bad_instr(eval, instr, "a layout is not a permutation of the dimensions");
  int64_t dims[HLO_MAX_RANK];
  for (int k = 0; k < x->shape.rank; k++) dims[k] = x->shape.dims[in_perm[k]];
  rt_value *physical = rt_value_new_array(x->shape.dtype, x->shape.rank, dims);
  if (!physical) return out_of_memory(eval, instr);
  permute_into(physical, x, in_perm);
  /* The same bytes, viewed with the result's physical dims. */
  for (int k = 0; k < result->shape.rank; k++) dims[k] = result->shape.dims[out_perm[k]];
  physical->shape = hlo_shape_make(physical->shape.dtype, result->shape.rank, dims);
  int64_t inverse[HLO_MAX_RANK];
  for (int k = 0; k < result->shape.rank; k++) inverse[out_perm[k]] = k;
  permute_into(result, physical, inverse);
  rt_value_release(physical);
  return HLO_OK;
}

RT_KERNEL(rt_kernel_reshape) {
  rt_value *x = args[0];
  if (x->shape.dtype == HLO_TUPLE && instr->shape.dtype == HLO_TUPLE) { /* a bitcast of a tuple */
    *out = rt_value_retain(x);
    return HLO_OK;
  }
  rt_value *result = new_result(eval, instr);
  if (!result) return eval->diag->status;
  if (!same_dtype(x, result)) return fail(eval, instr, result, "operand and result element types differ");
  if (x->count != result->count) return fail(eval, instr, result, "operand and result element counts differ");
  const hlo_shape *operand_shape = instr->operand_count > 0 ? &instr->operands[0]->shape : &x->shape;
  bool physical = instr->opcode == HLO_OP_BITCAST &&
                  (!hlo_shape_is_default_layout(operand_shape) || !hlo_shape_is_default_layout(&instr->shape));
  if (!physical) {
    memcpy(result->data, x->data, (size_t)(x->count * (int64_t)hlo_dtype_size(x->shape.dtype)));
    *out = result;
    return HLO_OK;
  }
  if (is_tiled(operand_shape) || is_tiled(&instr->shape)) {
    rt_value_release(result);
    return hlo_diag_set(eval->diag, HLO_ERR_UNSUPPORTED,
                        "bitcast %%%s: tiled layouts are not supported by the reference evaluator",
                        instr->name);
  }
  hlo_status status = bitcast_with_layouts(eval, instr, x, operand_shape, result);
  if (status != HLO_OK) {
    rt_value_release(result);
    return status;
  }
  *out = result;
  return HLO_OK;
}

/* ---------------------------------------------------------------------------------------
 * slice, reverse */

RT_KERNEL(rt_kernel_slice) {
  const rt_value *x = args[0];
  rt_value *result = new_result(eval, instr);
  if (!result) return eval->diag->status;
  int rank = x->shape.rank;
  if (!same_dtype(x, result) || result->shape.rank != rank || instr->slice_starts.count != rank ||
      instr->slice_limits.count != rank)
    return fail(eval, instr, result, "slice={...} must give start:limit for every dimension");
  box b = box_for(result);
  row_major_strides(result, b.dst_stride);
  int64_t x_strides[HLO_MAX_RANK], offset = 0;
  row_major_strides(x, x_strides);
  for (int i = 0; i < rank; i++) {
    int64_t start = instr->slice_starts.values[i], limit = instr->slice_limits.values[i];
    int64_t stride = instr->slice_strides.count == rank ? instr->slice_strides.values[i] : 1;
    if (start < 0 || limit > x->shape.dims[i] || start > limit || stride < 1 ||
        b.dims[i] != hlo_slice_size(start, limit, stride))
      return fail(eval, instr, result, "a slice range is out of bounds or disagrees with the result shape");
    offset += start * x_strides[i];
    b.src_stride[i] = x_strides[i] * stride;
  }
  box_copy(result, 0, x, offset, b);
  *out = result;
  return HLO_OK;
}

RT_KERNEL(rt_kernel_reverse) {
  const rt_value *x = args[0];
  rt_value *result = new_result(eval, instr);
  if (!result) return eval->diag->status;
  if (!same_dtype(x, result) || result->count != x->count || result->shape.rank != x->shape.rank)
    return fail(eval, instr, result, "the result's shape differs from the operand's");
  box b = box_for(result);
  row_major_strides(result, b.dst_stride);
  row_major_strides(x, b.src_stride);
  int64_t offset = 0;
  bool reversed[HLO_MAX_RANK] = {false};
  for (int k = 0; k < instr->dimensions.count; k++) {
    int64_t d = instr->dimensions.values[k];
    if (d < 0 || d >= b.rank) return fail(eval, instr, result, "a reversed dimension is out of range");
    if (reversed[d]) continue; /* reversing twice would undo it; XLA forbids repeats anyway */
    reversed[d] = true;
    offset += (b.dims[d] - 1) * b.src_stride[d];
    b.src_stride[d] = -b.src_stride[d];
  }
  box_copy(result, 0, x, offset, b);
  *out = result;
  return HLO_OK;
}

/* ---------------------------------------------------------------------------------------
 * dynamic-slice, dynamic-update-slice: start indices are scalars of any integer type,
 * clamped so the box stays inside the operand. */

/* Element i of an integer index value, clamped into [0, limit]. */
static int64_t clamped_start(const rt_value *index, int64_t i, int64_t limit) {
  if (limit < 0) limit = 0;
  if (hlo_dtype_is_unsigned(index->shape.dtype)) {
    uint64_t u = rt_get_u64(index, i);
    return u > (uint64_t)limit ? limit : (int64_t)u;
  }
  int64_t s = rt_get_i64(index, i);
  return s < 0 ? 0 : s > limit ? limit : s;
}

/* Reads the starts from the scalar operands args[first..first+rank-1], or from one rank-1
 * operand (the older form of the op), each clamped into [0, dims[i] - sizes[i]]. */
static bool read_starts(const hlo_instr *instr, rt_value *const *args, int first, const rt_value *x,
                        const int64_t *sizes, int64_t *starts) {
  int rank = x->shape.rank;
  int given = instr->operand_count - first;
  bool vector_form = rank > 0 && given == 1 && args[first]->shape.rank == 1;
  if (!vector_form && given != rank) return false;
  for (int i = 0; i < rank; i++) {
    const rt_value *index = vector_form ? args[first] : args[first + i];
    if (!hlo_dtype_is_integral(index->shape.dtype)) return false;
    if (vector_form ? index->count != rank : index->count != 1) return false;
    starts[i] = clamped_start(index, vector_form ? i : 0, x->shape.dims[i] - sizes[i]);
  }
  return true;
}

RT_KERNEL(rt_kernel_dynamic_slice) {
  const rt_value *x = args[0];
  rt_value *result = new_result(eval, instr);
  if (!result) return eval->diag->status;
  int rank = x->shape.rank;
  if (!same_dtype(x, result) || result->shape.rank != rank)
    return fail(eval, instr, result, "the result's rank or type differs from the operand's");
  box b = box_for(result);
  for (int i = 0; i < rank; i++) {
    int64_t size = instr->dimensions.count == rank ? instr->dimensions.values[i] : b.dims[i];
    if (size != b.dims[i] || size > x->shape.dims[i])
      return fail(eval, instr, result, "dynamic_slice_sizes disagree with the operand or the result");
  }
  int64_t starts[HLO_MAX_RANK];
  if (!read_starts(instr, args, 1, x, b.dims, starts))
    return fail(eval, instr, result, "start indices must be one integer scalar per dimension");
  row_major_strides(result, b.dst_stride);
  row_major_strides(x, b.src_stride);
  int64_t offset = 0;
  for (int i = 0; i < rank; i++) offset += starts[i] * b.src_stride[i];
  box_copy(result, 0, x, offset, b);
  *out = result;
  return HLO_OK;
}

RT_KERNEL(rt_kernel_dynamic_update_slice) {
  const rt_value *x = args[0], *update = args[1];
  rt_value *result = new_result(eval, instr);
  if (!result) return eval->diag->status;
  int rank = x->shape.rank;
  if (!same_dtype(x, result) || !same_dtype(update, result) || result->count != x->count ||
      update->shape.rank != rank)
    return fail(eval, instr, result, "operand, update and result must share type and rank");
  for (int i = 0; i < rank; i++)
    if (update->shape.dims[i] > x->shape.dims[i])
      return fail(eval, instr, result, "the update is larger than the operand");
  int64_t starts[HLO_MAX_RANK];
  if (!read_starts(instr, args, 2, x, update->shape.dims, starts))
    return fail(eval, instr, result, "start indices must be one integer scalar per dimension");
  memcpy(result->data, x->data, (size_t)(x->count * (int64_t)hlo_dtype_size(x->shape.dtype)));
  box b = box_for(update);
  row_major_strides(result, b.dst_stride);
  row_major_strides(update, b.src_stride);
  int64_t offset = 0;
  for (int i = 0; i < rank; i++) offset += starts[i] * b.dst_stride[i];
  box_copy(result, offset, update, 0, b);
  *out = result;
  return HLO_OK;
}

/* ---------------------------------------------------------------------------------------
 * concatenate */

RT_KERNEL(rt_kernel_concatenate) {
  rt_value *result = new_result(eval, instr);
  if (!result) return eval->diag->status;
  int rank = result->shape.rank;
  int64_t dim = instr->dimensions.count == 1 ? instr->dimensions.values[0] : -1;
  if (dim < 0 || dim >= rank) return fail(eval, instr, result, "dimensions={d} must name one dimension");
  int64_t strides[HLO_MAX_RANK], position = 0;
  row_major_strides(result, strides);
  for (int k = 0; k < instr->operand_count; k++) {
    const rt_value *x = args[k];
    bool fits = same_dtype(x, result) && x->shape.rank == rank &&
                position + x->shape.dims[dim] <= result->shape.dims[dim];
    for (int i = 0; fits && i < rank; i++) fits = i == dim || x->shape.dims[i] == result->shape.dims[i];
    if (!fits) return fail(eval, instr, result, "operand shapes do not add up to the result");
    box b = box_for(x);
    memcpy(b.dst_stride, strides, sizeof strides);
    row_major_strides(x, b.src_stride);
    box_copy(result, position * strides[dim], x, 0, b);
    position += x->shape.dims[dim];
  }
  if (position != result->shape.dims[dim]) return fail(eval, instr, result, "operand shapes do not add up to the result");
  *out = result;
  return HLO_OK;
}

/* ---------------------------------------------------------------------------------------
 * pad: the result is the padding value, with operand element j of dimension i placed at
 * low[i] + j * (interior[i] + 1). Negative low or high crop, so only the elements that
 * land inside the result are copied. */

RT_KERNEL(rt_kernel_pad) {
  const rt_value *x = args[0], *pad_value = args[1];
  rt_value *result = new_result(eval, instr);
  if (!result) return eval->diag->status;
  int rank = x->shape.rank;
  const hlo_padding *padding = instr->padding;
  if (!same_dtype(x, result) || !same_dtype(pad_value, result) || pad_value->count != 1 ||
      result->shape.rank != rank || (rank > 0 && (!padding || padding->rank != rank)))
    return fail(eval, instr, result, "needs an operand, a scalar of its type and padding= for every dimension");
  rt_value_fill(result, pad_value->data);
  box b = box_for(x);
  int64_t result_strides[HLO_MAX_RANK], x_strides[HLO_MAX_RANK], dst = 0, src = 0;
  row_major_strides(result, result_strides);
  row_major_strides(x, x_strides);
  for (int i = 0; i < rank; i++) {
    int64_t n = x->shape.dims[i], low = padding->low[i], gap = padding->interior[i] + 1;
    int64_t size = result->shape.dims[i];
    if (padding->interior[i] < 0 ||
        size != low + padding->high[i] + n + (n > 0 ? (n - 1) * padding->interior[i] : 0))
      return fail(eval, instr, result, "padding disagrees with the result shape");
    /* the operand indices j with 0 <= low + j * gap < size */
    int64_t first = low >= 0 ? 0 : (-low + gap - 1) / gap;
    int64_t last = size - 1 - low < 0 ? -1 : (size - 1 - low) / gap;
    if (last > n - 1) last = n - 1;
    b.dims[i] = last >= first ? last - first + 1 : 0;
    b.dst_stride[i] = result_strides[i] * gap;
    b.src_stride[i] = x_strides[i];
    dst += (low + first * gap) * result_strides[i];
    src += first * x_strides[i];
  }
  bool empty = false;
  for (int i = 0; i < rank; i++) empty = empty || b.dims[i] == 0;
  if (!empty) box_copy(result, dst, x, src, b);
  *out = result;
  return HLO_OK;
}

/* ---------------------------------------------------------------------------------------
 * iota: each element is its index along iota_dimension, converted to the element type. */

RT_KERNEL(rt_kernel_iota) {
  (void)args;
  rt_value *result = new_result(eval, instr);
  if (!result) return eval->diag->status;
  int rank = result->shape.rank;
  if (rank == 0 || instr->index < 0 || instr->index >= rank)
    return fail(eval, instr, result, "iota_dimension is out of range");
  int64_t strides[HLO_MAX_RANK];
  row_major_strides(result, strides);
  int64_t stride = strides[instr->index], size = result->shape.dims[instr->index];
  bool is_float = hlo_dtype_is_float(result->shape.dtype);
  for (int64_t i = 0; i < result->count; i++) {
    int64_t k = i / stride % size;
    if (is_float) rt_set_f64(result, i, (double)k);
    else rt_set_i64(result, i, k);
  }
  *out = result;
  return HLO_OK;
}
