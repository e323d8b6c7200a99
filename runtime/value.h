/* Runtime values: dense row-major arrays (or tuples of values), reference counted. */
#ifndef RT_VALUE_H
#define RT_VALUE_H
#include <stdint.h>

#include "hlo/diag.h"
#include "hlo/shape.h"

typedef struct rt_value {
  int refcount;
  /* Array values: shape.dtype is the storage type, shape.tuple is unused. The layout is
   * always row-major (logical order), whatever the HLO layout says. */
  hlo_shape shape;
  void *data;     /* hlo_shape_bytes(&shape) bytes, owned */
  int64_t count;  /* elements */
  /* Tuple values: shape.dtype == HLO_TUPLE, elements owned (one reference each). */
  int tuple_count;
  struct rt_value **tuple;
  /* Which contents data holds: a number no other value or contents had, given when the
   * value is made and again by rt_value_touch after each write into an existing value
   * (filling a new value before anyone reads it needs none). 0 (views made by hand) is
   * unknown. Backends may keep results computed from an argument while its stamp is the
   * same (the cpu backend's kept reduces). Copies of the struct (a shell around shared
   * data) carry the data's stamp. */
  uint64_t stamp;
} rt_value;

/* A zero-filled array of this (array) shape; the layout is dropped. NULL if too large. */
rt_value *rt_value_new(const hlo_shape *shape);
rt_value *rt_value_new_array(hlo_dtype dtype, int rank, const int64_t *dims);
/* A tuple taking over one reference to each element. */
rt_value *rt_value_new_tuple(int count, rt_value **elements);
rt_value *rt_value_retain(rt_value *value);
/* A new stamp for value: call after writing into the data of a value others may have read. */
void rt_value_touch(rt_value *value);
void rt_value_release(rt_value *value);
/* Every element of the array value set to the bytes at element (one element of its type). */
void rt_value_fill(rt_value *value, const void *element);
/* A deep copy with its own data. */
rt_value *rt_value_copy(const rt_value *value);

/* Element access by flat row-major index, converting to and from wide types. Floats read
 * as double (f16/bf16 widened exactly); writing a double rounds to the element type
 * (round-to-nearest-even); writing integers wraps to the element width, as HLO does. */
double rt_get_f64(const rt_value *value, int64_t index);
int64_t rt_get_i64(const rt_value *value, int64_t index);  /* unsigned 64 reinterpreted */
uint64_t rt_get_u64(const rt_value *value, int64_t index);
void rt_set_f64(rt_value *value, int64_t index, double element);
void rt_set_i64(rt_value *value, int64_t index, int64_t element);
void rt_set_u64(rt_value *value, int64_t index, uint64_t element);
/* Copies one element between values of the same dtype. */
void rt_copy_element(rt_value *dst, int64_t dst_index, const rt_value *src, int64_t src_index);

/* Row-major index helpers. */
int64_t rt_flat_index(const hlo_shape *shape, const int64_t *coords);
/* Advances coords to the next index in row-major order; false after the last. */
int rt_next_coords(const hlo_shape *shape, int64_t *coords);

#endif
