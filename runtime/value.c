/* Values: arrays and tuples with a reference count, and element access by flat index.
 *
 * A warm call of a traced function makes a few small values (the borrowed input, each result,
 * the result tuple), so each is one malloc: a small array's data and a tuple's element list
 * sit in the same block, after the struct (INLINE_BYTES, INLINE_ELEMENTS), and the struct
 * is filled field by field rather than calloc'd (glibc's calloc never takes a block from the
 * thread's cache, and the frees then overflow it into the slower bins). */
#include "runtime.h"

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { INLINE_BYTES = 256, INLINE_ELEMENTS = 8 };

/* Where a value's inline data or elements start: after the struct, at malloc's alignment. */
#define INLINE_AT ((sizeof(rt_value) + alignof(max_align_t) - 1) / alignof(max_align_t) * alignof(max_align_t))

static void *inline_part(rt_value *value) { return (char *)value + INLINE_AT; }

/* Whether p is value's inline part; compared as numbers, since a value made elsewhere (a
 * view, a struct calloc'd by hand) has none to point at. */
static bool is_inline(const rt_value *value, const void *p) { return (uintptr_t)p == (uintptr_t)value + INLINE_AT; }

static _Atomic uint64_t last_stamp;

void rt_value_touch(rt_value *value) { value->stamp = atomic_fetch_add(&last_stamp, 1) + 1; }

/* A value with extra bytes after the struct, every field but the shape set. */
static rt_value *alloc_value(size_t extra) {
  rt_value *value = hlo_malloc(INLINE_AT + extra);
  if (!value) return NULL;
  value->refcount = 1;
  value->data = NULL;
  value->count = 0;
  value->tuple_count = 0;
  value->tuple = NULL;
  value->release = NULL;
  value->release_ctx = NULL;
  rt_value_touch(value);
  return value;
}

static rt_value *new_array(const hlo_shape *shape, bool zeroed) {
  if (!hlo_dtype_is_computable(shape->dtype)) return NULL;
  int64_t bytes = hlo_shape_bytes(shape);
  size_t size = (size_t)(bytes > 0 ? bytes : 1);
  rt_value *value = alloc_value(size <= INLINE_BYTES ? size : 0);
  if (!value) return NULL;
  hlo_shape_set_array(&value->shape, shape->dtype, shape->rank, shape->dims);
  value->count = hlo_shape_elements(&value->shape);
  if (size <= INLINE_BYTES) {
    value->data = inline_part(value);
    if (zeroed) memset(value->data, 0, size);
    return value;
  }
  value->data = zeroed ? hlo_calloc(1, size) : hlo_malloc(size);
  if (!value->data) {
    free(value);
    return NULL;
  }
  return value;
}

rt_value *rt_value_new(const hlo_shape *shape) { return new_array(shape, true); }

rt_value *rt_value_new_unfilled(const hlo_shape *shape) { return new_array(shape, false); }

rt_value *rt_value_new_array(hlo_dtype dtype, int rank, const int64_t *dims) {
  hlo_shape shape = hlo_shape_make(dtype, rank, dims);
  return rt_value_new(&shape);
}

/* ---- large buffers kept between calls (rt_value_new_kept) ----
 * A block is a header holding its data's size, then the data. The last KEPT_SLOTS blocks
 * released are kept (the oldest goes when another comes); a new kept value takes one of its
 * exact size. Released from any thread. */
enum { KEPT_SLOTS = 4, KEPT_HEADER = 64 };

static rt_fork_mutex kept_lock = RT_FORK_MUTEX_INIT; /* fork waits for it */
static char *kept[KEPT_SLOTS]; /* oldest first, NULL at the end */

static size_t block_bytes(const char *block) {
  size_t bytes;
  memcpy(&bytes, block, sizeof bytes);
  return bytes;
}

static void keep_block(void *release_ctx) {
  rt_fork_lock(&kept_lock);
  char *oldest = kept[KEPT_SLOTS - 1] ? kept[0] : NULL;
  int n = 0;
  while (n < KEPT_SLOTS && kept[n]) n++;
  if (oldest) memmove(kept, kept + 1, sizeof kept[0] * (KEPT_SLOTS - 1)), n--;
  kept[n] = release_ctx;
  rt_fork_unlock(&kept_lock);
  free(oldest);
}

static char *take_block(size_t bytes) {
  char *block = NULL;
  rt_fork_lock(&kept_lock);
  for (int i = KEPT_SLOTS - 1; i >= 0 && !block; i--) {
    if (!kept[i] || block_bytes(kept[i]) != bytes) continue;
    block = kept[i];
    memmove(kept + i, kept + i + 1, sizeof kept[0] * (size_t)(KEPT_SLOTS - 1 - i));
    kept[KEPT_SLOTS - 1] = NULL;
  }
  rt_fork_unlock(&kept_lock);
  if (!block && (block = hlo_malloc(KEPT_HEADER + bytes))) memcpy(block, &bytes, sizeof bytes);
  return block;
}

rt_value *rt_value_new_kept(const hlo_shape *shape) {
  int64_t bytes = hlo_shape_bytes(shape);
  if (!hlo_dtype_is_computable(shape->dtype) || bytes <= INLINE_BYTES) return rt_value_new_unfilled(shape);
  char *block = take_block((size_t)bytes);
  rt_value *value = block ? alloc_value(0) : NULL;
  if (!value) {
    free(block);
    return NULL;
  }
  hlo_shape_set_array(&value->shape, shape->dtype, shape->rank, shape->dims);
  value->count = hlo_shape_elements(&value->shape);
  value->data = block + KEPT_HEADER;
  value->release = keep_block;
  value->release_ctx = block;
  return value;
}

static void keep_borrowed(void *release_ctx) { (void)release_ctx; }

rt_value *rt_value_borrow(hlo_dtype dtype, int rank, const int64_t *dims, void *data,
                          void (*release)(void *release_ctx), void *release_ctx) {
  if (!hlo_dtype_is_computable(dtype)) return NULL;
  rt_value *value = alloc_value(0);
  if (!value) return NULL;
  hlo_shape_set_array(&value->shape, dtype, rank, dims);
  value->count = hlo_shape_elements(&value->shape);
  value->data = data;
  value->release = release ? release : keep_borrowed; /* never free()d: not latch's memory */
  value->release_ctx = release_ctx;
  return value;
}

rt_value *rt_value_new_tuple(int count, rt_value **elements) {
  bool inline_elements = count <= INLINE_ELEMENTS;
  rt_value *value = alloc_value(inline_elements ? sizeof(rt_value *) * (size_t)count : 0);
  if (!value) return NULL;
  hlo_shape_set_array(&value->shape, HLO_TUPLE, 0, NULL);
  value->tuple_count = count;
  value->tuple = inline_elements ? inline_part(value) : hlo_calloc((size_t)(count ? count : 1), sizeof(rt_value *));
  if (!value->tuple) {
    free(value);
    return NULL;
  }
  for (int i = 0; i < count; i++) value->tuple[i] = elements[i];
  return value;
}

rt_value *rt_value_retain(rt_value *value) {
  if (value) value->refcount++;
  return value;
}

void rt_value_release(rt_value *value) {
  if (!value || --value->refcount > 0) return;
  for (int i = 0; i < value->tuple_count; i++) rt_value_release(value->tuple[i]);
  if (!is_inline(value, value->tuple)) free(value->tuple);
  if (value->release)
    value->release(value->release_ctx);
  else if (!is_inline(value, value->data))
    free(value->data);
  free(value);
}

#define FILL_AS(U)                                                                          \
  do {                                                                                      \
    U v, *d = value->data;                                                                  \
    memcpy(&v, element, sizeof v);                                                          \
    for (int64_t i = 0; i < value->count; i++) d[i] = v;                                    \
  } while (0)

void rt_value_fill(rt_value *value, const void *element) {
  size_t size = hlo_dtype_size(value->shape.dtype);
  switch (size) {
    case 1: memset(value->data, *(const uint8_t *)element, (size_t)value->count); break;
    case 2: FILL_AS(uint16_t); break;
    case 4: FILL_AS(uint32_t); break;
    case 8: FILL_AS(uint64_t); break;
    default:
      for (int64_t i = 0; i < value->count; i++) memcpy((char *)value->data + i * (int64_t)size, element, size);
  }
}

rt_value *rt_value_copy(const rt_value *value) {
  if (value->shape.dtype == HLO_TUPLE) {
    rt_value **elements = hlo_calloc((size_t)(value->tuple_count ? value->tuple_count : 1), sizeof(rt_value *));
    if (!elements) return NULL;
    for (int i = 0; i < value->tuple_count; i++) elements[i] = rt_value_copy(value->tuple[i]);
    rt_value *copy = rt_value_new_tuple(value->tuple_count, elements);
    free(elements);
    return copy;
  }
  rt_value *copy = rt_value_new_unfilled(&value->shape);
  if (copy) memcpy(copy->data, value->data, (size_t)hlo_shape_bytes(&value->shape));
  return copy;
}

double rt_get_f64(const rt_value *value, int64_t index) {
  const void *data = value->data;
  switch (value->shape.dtype) {
    case HLO_PRED: return ((const uint8_t *)data)[index] != 0;
    case HLO_S8: return ((const int8_t *)data)[index];
    case HLO_S16: return ((const int16_t *)data)[index];
    case HLO_S32: return ((const int32_t *)data)[index];
    case HLO_S64: return (double)((const int64_t *)data)[index];
    case HLO_U8: return ((const uint8_t *)data)[index];
    case HLO_U16: return ((const uint16_t *)data)[index];
    case HLO_U32: return ((const uint32_t *)data)[index];
    case HLO_U64: return (double)((const uint64_t *)data)[index];
    case HLO_F16: return hlo_f16_to_f32(((const uint16_t *)data)[index]);
    case HLO_BF16: return hlo_bf16_to_f32(((const uint16_t *)data)[index]);
    case HLO_F32: return ((const float *)data)[index];
    case HLO_F64: return ((const double *)data)[index];
    default: return 0;
  }
}

int64_t rt_get_i64(const rt_value *value, int64_t index) {
  const void *data = value->data;
  switch (value->shape.dtype) {
    case HLO_PRED: return ((const uint8_t *)data)[index] != 0;
    case HLO_S8: return ((const int8_t *)data)[index];
    case HLO_S16: return ((const int16_t *)data)[index];
    case HLO_S32: return ((const int32_t *)data)[index];
    case HLO_S64: return ((const int64_t *)data)[index];
    case HLO_U8: return ((const uint8_t *)data)[index];
    case HLO_U16: return ((const uint16_t *)data)[index];
    case HLO_U32: return ((const uint32_t *)data)[index];
    case HLO_U64: return (int64_t)((const uint64_t *)data)[index];
    default: {
      /* float to integer: truncate toward zero, saturating, NaN to 0 (as XLA's convert) */
      double element = rt_get_f64(value, index);
      if (element != element) return 0;
      if (element >= 9223372036854775807.0) return INT64_MAX;
      if (element <= -9223372036854775808.0) return INT64_MIN;
      return (int64_t)element;
    }
  }
}

uint64_t rt_get_u64(const rt_value *value, int64_t index) {
  if (hlo_dtype_is_float(value->shape.dtype)) {
    double element = rt_get_f64(value, index);
    if (element != element || element <= 0) return 0;
    if (element >= 18446744073709551615.0) return UINT64_MAX;
    return (uint64_t)element;
  }
  return (uint64_t)rt_get_i64(value, index);
}

void rt_set_f64(rt_value *value, int64_t index, double element) {
  void *data = value->data;
  switch (value->shape.dtype) {
    case HLO_F16: ((uint16_t *)data)[index] = hlo_f64_to_f16(element); return;
    case HLO_BF16: ((uint16_t *)data)[index] = hlo_f64_to_bf16(element); return;
    case HLO_F32: ((float *)data)[index] = (float)element; return;
    case HLO_F64: ((double *)data)[index] = element; return;
    case HLO_PRED: ((uint8_t *)data)[index] = element != 0; return;
    default: break;
  }
  /* float to integer: truncate toward zero, saturate, NaN to 0 */
  if (hlo_dtype_is_unsigned(value->shape.dtype)) {
    uint64_t wide;
    if (element != element || element <= 0) wide = 0;
    else if (element >= 18446744073709551615.0) wide = UINT64_MAX;
    else wide = (uint64_t)element;
    uint64_t max = value->shape.dtype == HLO_U64 ? UINT64_MAX : (UINT64_C(1) << hlo_dtype_bits(value->shape.dtype)) - 1;
    rt_set_u64(value, index, wide > max ? max : wide);
  } else {
    int bits = hlo_dtype_bits(value->shape.dtype);
    double high = bits == 64 ? 9223372036854775807.0 : (double)((INT64_C(1) << (bits - 1)) - 1);
    double low = bits == 64 ? -9223372036854775808.0 : -(double)(INT64_C(1) << (bits - 1));
    int64_t wide;
    if (element != element) wide = 0;
    else if (element >= high) wide = bits == 64 ? INT64_MAX : (INT64_C(1) << (bits - 1)) - 1;
    else if (element <= low) wide = bits == 64 ? INT64_MIN : -(INT64_C(1) << (bits - 1));
    else wide = (int64_t)element;
    rt_set_i64(value, index, wide);
  }
}

void rt_set_i64(rt_value *value, int64_t index, int64_t element) {
  void *data = value->data;
  switch (value->shape.dtype) {
    case HLO_PRED: ((uint8_t *)data)[index] = element != 0; return;
    case HLO_S8: ((int8_t *)data)[index] = (int8_t)element; return;
    case HLO_S16: ((int16_t *)data)[index] = (int16_t)element; return;
    case HLO_S32: ((int32_t *)data)[index] = (int32_t)element; return;
    case HLO_S64: ((int64_t *)data)[index] = element; return;
    case HLO_U8: ((uint8_t *)data)[index] = (uint8_t)element; return;
    case HLO_U16: ((uint16_t *)data)[index] = (uint16_t)element; return;
    case HLO_U32: ((uint32_t *)data)[index] = (uint32_t)element; return;
    case HLO_U64: ((uint64_t *)data)[index] = (uint64_t)element; return;
    default: rt_set_f64(value, index, (double)element); return;
  }
}

void rt_set_u64(rt_value *value, int64_t index, uint64_t element) {
  if (hlo_dtype_is_float(value->shape.dtype)) rt_set_f64(value, index, (double)element);
  else rt_set_i64(value, index, (int64_t)element);
}

void rt_copy_element(rt_value *dst, int64_t dst_index, const rt_value *src, int64_t src_index) {
  size_t size = hlo_dtype_size(dst->shape.dtype);
  memcpy((char *)dst->data + (size_t)dst_index * size, (const char *)src->data + (size_t)src_index * size, size);
}

int64_t rt_flat_index(const hlo_shape *shape, const int64_t *coords) {
  int64_t index = 0;
  for (int i = 0; i < shape->rank; i++) index = index * shape->dims[i] + coords[i];
  return index;
}

int rt_next_coords(const hlo_shape *shape, int64_t *coords) {
  for (int i = shape->rank - 1; i >= 0; i--) {
    if (++coords[i] < shape->dims[i]) return 1;
    coords[i] = 0;
  }
  return 0;
}
