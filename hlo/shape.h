/* Shapes: an element type with dims and a layout, or a tuple of shapes. */
#ifndef HLO_SHAPE_H
#define HLO_SHAPE_H
#include <stdbool.h>
#include <stdint.h>

#include "arena.h"
#include "dtype.h"
#include "strbuf.h"

#define HLO_MAX_RANK 12

typedef enum hlo_dim_kind {
  HLO_DIM_STATIC = 0,
  HLO_DIM_BOUNDED,   /* f32[<=4]: dims[i] holds the bound */
  HLO_DIM_UNBOUNDED, /* f32[?]: dims[i] is -1 */
} hlo_dim_kind;

typedef struct hlo_shape {
  hlo_dtype dtype; /* HLO_TUPLE for tuples, HLO_TOKEN for token[] */
  int rank;
  int64_t dims[HLO_MAX_RANK];
  uint8_t dim_kind[HLO_MAX_RANK];
  /* Layout, minor-to-major. Always filled (the default {rank-1,...,0} when the text had
   * none); has_layout says whether it was written, so printing can keep the text's choice. */
  bool has_layout;
  int8_t minor_to_major[HLO_MAX_RANK];
  const char *layout_extra; /* text after ':' inside the layout braces, verbatim, or NULL */
  int tuple_count;
  struct hlo_shape *tuple; /* tuple_count element shapes */
} hlo_shape;

/* An array shape with the default layout. */
hlo_shape hlo_shape_make(hlo_dtype dtype, int rank, const int64_t *dims);
hlo_shape hlo_shape_scalar(hlo_dtype dtype);
hlo_shape hlo_shape_tuple(hlo_arena *arena, int count, const hlo_shape *elements);
void hlo_shape_default_layout(hlo_shape *shape);
bool hlo_shape_is_tuple(const hlo_shape *shape);
bool hlo_shape_is_array(const hlo_shape *shape);
bool hlo_shape_is_default_layout(const hlo_shape *shape);
bool hlo_shape_is_dynamic(const hlo_shape *shape);
/* Number of elements (bounds for bounded dims); 1 for scalars, 0 for tuples. */
int64_t hlo_shape_elements(const hlo_shape *shape);
/* Bytes of a dense row-major array of this shape; 0 for tuples and uncomputable types. */
int64_t hlo_shape_bytes(const hlo_shape *shape);
/* Same type and dims (recursively for tuples); layouts are ignored. */
bool hlo_shape_equal(const hlo_shape *a, const hlo_shape *b);
/* Deep copy of the tuple elements into arena. */
hlo_shape hlo_shape_clone(hlo_arena *arena, const hlo_shape *shape);
/* Row-major strides in elements. */
void hlo_shape_strides(const hlo_shape *shape, int64_t *strides);

/* Appends the shape as HLO text: f32[2,3]{1,0}; with_layout false omits layouts. */
void hlo_shape_print(hlo_strbuf *sb, const hlo_shape *shape, bool with_layout);
/* Formats into a caller buffer, for messages. */
const char *hlo_shape_str(const hlo_shape *shape, char *buffer, int size);
/* The same returned by value, so one message can hold several shapes, thread-safely:
 * hlo_shape_text(&a).s. */
typedef struct hlo_shape_text_buf {
  char s[192];
} hlo_shape_text_buf;
hlo_shape_text_buf hlo_shape_text(const hlo_shape *shape);

#endif
