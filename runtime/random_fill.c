/* Seeded inputs: splitmix64 streams turned into values with exact integer arithmetic. */
#include "runtime.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GOLDEN_GAMMA UINT64_C(0x9e3779b97f4a7c15)

typedef struct splitmix {
  uint64_t state;
} splitmix;

static uint64_t next(splitmix *g) {
  g->state += GOLDEN_GAMMA;
  return rt_mix64(g->state);
}

static splitmix stream_start(uint64_t seed, uint64_t stream) {
  splitmix g = {rt_mix64(seed ^ rt_mix64(stream + GOLDEN_GAMMA))};
  return g;
}

/* Significand bits of the grid for a float type: every multiple of 2^-(bits-1) in [-1, 1)
 * is exactly representable in the type, so no rounding happens anywhere. */
static int grid_bits(hlo_dtype dtype) {
  switch (dtype) {
    case HLO_BF16: return 8;
    case HLO_F16: return 11;
    case HLO_F32: return 24;
    default: return 53;
  }
}

/* Stores a value that is exact in the element type. Because it is exact, f32 and bf16 need
 * no rounding (a bf16 is the top half of its f32), which makes big inputs several times
 * faster to fill than rt_set_f64's general rounding, with the same bytes. */
static void store_exact(rt_value *value, int64_t index, double x) {
  float narrow = (float)x;
  uint32_t bits;
  switch (value->shape.dtype) {
    case HLO_F32: ((float *)value->data)[index] = narrow; return;
    case HLO_BF16:
      memcpy(&bits, &narrow, sizeof bits);
      ((uint16_t *)value->data)[index] = (uint16_t)(bits >> 16);
      return;
    default: rt_set_f64(value, index, x); return;
  }
}

void rt_random_fill(rt_value *value, uint64_t seed, uint64_t stream) {
  splitmix g = stream_start(seed, stream);
  hlo_dtype dtype = value->shape.dtype;
  if (hlo_dtype_is_float(dtype)) {
    int bits = grid_bits(dtype);
    int64_t half = INT64_C(1) << (bits - 1);
    double step = ldexp(1.0, 1 - bits); /* a power of two: multiplying by it is exact */
    for (int64_t i = 0; i < value->count; i++) {
      int64_t k = (int64_t)(next(&g) >> (64 - bits)) - half;
      store_exact(value, i, (double)k * step);
    }
  } else if (dtype == HLO_PRED) {
    for (int64_t i = 0; i < value->count; i++) rt_set_i64(value, i, (int64_t)(next(&g) >> 63));
  } else {
    for (int64_t i = 0; i < value->count; i++) rt_set_i64(value, i, (int64_t)(next(&g) >> 61));
  }
  rt_value_touch(value); /* it may be filled again after a backend has read it */
}

rt_value *rt_random_value(const hlo_shape *shape, uint64_t seed, uint64_t stream, hlo_diag *diag) {
  if (shape->dtype == HLO_TOKEN) return rt_value_new_tuple(0, NULL);
  if (shape->dtype == HLO_TUPLE) {
    int count = shape->tuple_count;
    rt_value **elements = hlo_calloc((size_t)count + 1, sizeof(rt_value *));
    if (!elements) {
      hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory");
      return NULL;
    }
    int made = 0;
    for (; made < count; made++) {
      elements[made] = rt_random_value(&shape->tuple[made], seed, rt_mix64(stream ^ rt_mix64((uint64_t)made + 1)), diag);
      if (!elements[made]) break;
    }
    rt_value *tuple = made == count ? rt_value_new_tuple(count, elements) : NULL;
    if (!tuple) {
      for (int i = 0; i < made; i++) rt_value_release(elements[i]);
      if (made == count) hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory");
    }
    free(elements);
    return tuple;
  }
  if (!hlo_dtype_is_computable(shape->dtype)) {
    hlo_diag_set(diag, HLO_ERR_UNSUPPORTED, "cannot make inputs of element type %s",
                 hlo_dtype_name(shape->dtype));
    return NULL;
  }
  int64_t dims[HLO_MAX_RANK];
  for (int i = 0; i < shape->rank; i++) dims[i] = shape->dims[i] < 0 ? 1 : shape->dims[i];
  rt_value *value = rt_value_new_array(shape->dtype, shape->rank, dims);
  if (!value) {
    char text[128];
    hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory for an input of shape %s",
                 hlo_shape_str(shape, text, sizeof text));
    return NULL;
  }
  rt_random_fill(value, seed, stream);
  return value;
}
