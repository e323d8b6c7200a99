#include "hlo.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* Field by field, every byte but the tail padding written: a memset of the whole 152 bytes
 * compiles to `rep stos`, whose start-up was most of a warm call's shape-making (five
 * shapes a call). */
void hlo_shape_set_array(hlo_shape *shape, hlo_dtype dtype, int rank, const int64_t *dims) {
  shape->dtype = dtype;
  shape->rank = rank;
  int known = rank < 0 ? 0 : rank > HLO_MAX_RANK ? HLO_MAX_RANK : rank; /* a bad rank writes no further */
  if (known) memcpy(shape->dims, dims, sizeof(int64_t) * (size_t)known);
  memset(shape->dims + known, 0, sizeof(int64_t) * (size_t)(HLO_MAX_RANK - known));
  shape->layout_extra = NULL;
  shape->tuple = NULL;
  memset(&shape->tuple_count, 0, sizeof *shape - offsetof(hlo_shape, tuple_count));
  hlo_shape_default_layout(shape);
}

hlo_shape hlo_shape_make(hlo_dtype dtype, int rank, const int64_t *dims) {
  hlo_shape shape;
  hlo_shape_set_array(&shape, dtype, rank, dims);
  return shape;
}

hlo_shape hlo_shape_scalar(hlo_dtype dtype) { return hlo_shape_make(dtype, 0, NULL); }

hlo_shape hlo_shape_tuple(hlo_arena *arena, int count, const hlo_shape *elements) {
  hlo_shape shape;
  memset(&shape, 0, sizeof shape);
  shape.dtype = HLO_TUPLE;
  shape.tuple_count = count;
  shape.tuple = hlo_arena_alloc(arena, sizeof(hlo_shape) * (size_t)(count ? count : 1));
  if (!shape.tuple) count = shape.tuple_count = 0; /* arena->failed says why */
  for (int i = 0; i < count; i++) shape.tuple[i] = hlo_shape_clone(arena, &elements[i]);
  return shape;
}

void hlo_shape_default_layout(hlo_shape *shape) {
  for (int i = 0; i < shape->rank; i++) shape->minor_to_major[i] = (int8_t)(shape->rank - 1 - i);
}

bool hlo_shape_is_tuple(const hlo_shape *shape) { return shape->dtype == HLO_TUPLE; }
bool hlo_shape_is_array(const hlo_shape *shape) { return hlo_dtype_is_array(shape->dtype); }

bool hlo_shape_is_default_layout(const hlo_shape *shape) {
  for (int i = 0; i < shape->rank; i++)
    if (shape->minor_to_major[i] != shape->rank - 1 - i) return false;
  return true;
}

bool hlo_shape_is_dynamic(const hlo_shape *shape) {
  for (int i = 0; i < shape->rank; i++)
    if (shape->dim_kind[i] != HLO_DIM_STATIC) return true;
  return false;
}

int64_t hlo_shape_elements(const hlo_shape *shape) {
  if (!hlo_shape_is_array(shape)) return 0;
  int64_t count = 1;
  for (int i = 0; i < shape->rank; i++) count *= shape->dims[i] < 0 ? 0 : shape->dims[i];
  return count;
}

int64_t hlo_shape_bytes(const hlo_shape *shape) {
  return hlo_shape_elements(shape) * (int64_t)hlo_dtype_size(shape->dtype);
}

bool hlo_shape_size_ok(const hlo_shape *shape) {
  if (shape->dtype == HLO_TUPLE) {
    for (int i = 0; i < shape->tuple_count; i++)
      if (!hlo_shape_size_ok(&shape->tuple[i])) return false;
    return true;
  }
  if (!hlo_shape_is_array(shape)) return true;
  bool overflow = false;
  int64_t bytes = (int64_t)hlo_dtype_size(shape->dtype);
  if (bytes < 1) bytes = 1; /* sub-byte types: a byte each at most */
  for (int i = 0; i < shape->rank; i++) bytes = hlo_ck_mul(&overflow, bytes, shape->dims[i] < 0 ? 0 : shape->dims[i]);
  return !overflow && bytes <= HLO_MAX_BYTES;
}

bool hlo_shape_equal(const hlo_shape *a, const hlo_shape *b) {
  if (a->dtype != b->dtype) return false;
  if (a->dtype == HLO_TUPLE) {
    if (a->tuple_count != b->tuple_count) return false;
    for (int i = 0; i < a->tuple_count; i++)
      if (!hlo_shape_equal(&a->tuple[i], &b->tuple[i])) return false;
    return true;
  }
  if (a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++)
    if (a->dims[i] != b->dims[i] || a->dim_kind[i] != b->dim_kind[i]) return false;
  return true;
}

hlo_shape hlo_shape_clone(hlo_arena *arena, const hlo_shape *shape) {
  hlo_shape copy = *shape;
  if (shape->dtype == HLO_TUPLE) {
    copy.tuple = hlo_arena_alloc(arena, sizeof(hlo_shape) * (size_t)(shape->tuple_count ? shape->tuple_count : 1));
    if (!copy.tuple) copy.tuple_count = 0; /* arena->failed says why */
    for (int i = 0; i < copy.tuple_count; i++) copy.tuple[i] = hlo_shape_clone(arena, &shape->tuple[i]);
  }
  if (shape->layout_extra) copy.layout_extra = hlo_arena_strdup(arena, shape->layout_extra);
  return copy;
}

void hlo_shape_strides(const hlo_shape *shape, int64_t *strides) {
  int64_t stride = 1;
  for (int i = shape->rank - 1; i >= 0; i--) {
    strides[i] = stride;
    stride *= shape->dims[i];
  }
}

void hlo_shape_print(hlo_strbuf *sb, const hlo_shape *shape, bool with_layout) {
  if (shape->dtype == HLO_TUPLE) {
    hlo_sb_puts(sb, "(");
    for (int i = 0; i < shape->tuple_count; i++) {
      if (i) hlo_sb_puts(sb, ", ");
      hlo_shape_print(sb, &shape->tuple[i], with_layout);
    }
    hlo_sb_puts(sb, ")");
    return;
  }
  hlo_sb_puts(sb, hlo_dtype_name(shape->dtype));
  hlo_sb_puts(sb, "[");
  for (int i = 0; i < shape->rank; i++) {
    if (i) hlo_sb_puts(sb, ",");
    if (shape->dim_kind[i] == HLO_DIM_UNBOUNDED) hlo_sb_puts(sb, "?");
    else hlo_sb_printf(sb, "%s%lld", shape->dim_kind[i] == HLO_DIM_BOUNDED ? "<=" : "",
                       (long long)shape->dims[i]);
  }
  hlo_sb_puts(sb, "]");
  if (!with_layout || !hlo_shape_is_array(shape)) return;
  if (!shape->has_layout && !shape->layout_extra) return;
  hlo_sb_puts(sb, "{");
  for (int i = 0; i < shape->rank; i++) hlo_sb_printf(sb, i ? ",%d" : "%d", shape->minor_to_major[i]);
  if (shape->layout_extra) hlo_sb_printf(sb, ":%s", shape->layout_extra);
  hlo_sb_puts(sb, "}");
}

const char *hlo_shape_str(const hlo_shape *shape, char *buffer, int size) {
  hlo_strbuf sb;
  hlo_sb_init(&sb);
  hlo_shape_print(&sb, shape, false);
  snprintf(buffer, (size_t)size, "%s", sb.data ? sb.data : "");
  hlo_sb_free(&sb);
  return buffer;
}

hlo_shape_text_buf hlo_shape_text(const hlo_shape *shape) {
  hlo_shape_text_buf t;
  hlo_shape_str(shape, t.s, (int)sizeof t.s);
  return t;
}
