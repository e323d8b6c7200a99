/* The cpu backend's data-movement kernels. broadcast, transpose, slice, reverse,
 * concatenate and pad are all one strided box copy: walk a box of coordinates and move
 * element dst[dst_base + c.dst_strides] = src[src_base + c.src_strides]. A broadcast dim has
 * source stride 0, a transposed one the operand's stride of the dim it came from, a slice's
 * stride is scaled, a reversed one is negative. The innermost dimension is a plain loop over
 * elements of 1, 2, 4 or 8 bytes; rows are split over threads when the box is large.
 * A transpose reads its rows with a large stride, one cache line (and often one page) per
 * element: when another dim reads contiguously, the box is copied in TILE x TILE tiles of
 * that dim and the last one instead, so each line read is used TILE times. */
#include <string.h>

#include "kernel_internal.h"
#include "runtime/runtime.h"

typedef struct box {
  int rank;
  int64_t dims[HLO_MAX_RANK];
  size_t size;
  char *dst;
  int64_t dst_base, dst_strides[HLO_MAX_RANK];
  const char *src;
  int64_t src_base, src_strides[HLO_MAX_RANK];
} box;

/* One row: n elements from src + s to dst + d, with the last dim's strides. */
static inline void copy_row(const box *b, int64_t d, int64_t s, int64_t n, int64_t ds, int64_t ss) {
  if (ds == 1 && ss == 1) {
    memcpy(b->dst + d * (int64_t)b->size, b->src + s * (int64_t)b->size, (size_t)n * b->size);
    return;
  }
  /* a broadcast row repeats one element: a fill the compiler vectorizes */
#define ROW(T)                                                                               \
  do {                                                                                       \
    T *dp = (T *)b->dst + d;                                                                 \
    const T *sp = (const T *)b->src + s;                                                     \
    if (ds == 1 && ss == 0) {                                                                \
      T v = *sp;                                                                             \
      for (int64_t i = 0; i < n; i++) dp[i] = v;                                             \
    } else {                                                                                 \
      for (int64_t i = 0; i < n; i++) dp[i * ds] = sp[i * ss];                               \
    }                                                                                        \
  } while (0)
  switch (b->size) {
    case 1: ROW(uint8_t); break;
    case 2: ROW(uint16_t); break;
    case 4: ROW(uint32_t); break;
    default: ROW(uint64_t); break;
  }
#undef ROW
}

/* Rows [begin, end) of the box: a row is a run of the last dimension. The first row's place
 * takes a divide per dim; each next one steps the coordinates as an odometer does, so short
 * rows (a reversed or sliced 3x3 kernel's) do not pay the divides each. */
static void box_rows(void *ctx, int64_t begin, int64_t end) {
  const box *b = ctx;
  int last = b->rank - 1;
  int64_t n = b->dims[last], ds = b->dst_strides[last], ss = b->src_strides[last];
  int64_t c[HLO_MAX_RANK], d = b->dst_base, s = b->src_base, rest = begin;
  for (int k = last - 1; k >= 0; k--) {
    c[k] = rest % b->dims[k];
    rest /= b->dims[k];
    d += c[k] * b->dst_strides[k];
    s += c[k] * b->src_strides[k];
  }
  for (int64_t row = begin; row < end; row++) {
    copy_row(b, d, s, n, ds, ss);
    for (int k = last - 1; k >= 0; k--) { /* the next row */
      d += b->dst_strides[k];
      s += b->src_strides[k];
      if (++c[k] < b->dims[k]) break;
      d -= b->dst_strides[k] * b->dims[k];
      s -= b->src_strides[k] * b->dims[k];
      c[k] = 0;
    }
  }
}

enum { TILE = 16 };

typedef struct tiled {
  const box *b;
  int t;          /* the dim whose source stride is 1 */
  int64_t blocks; /* ceil(dims[t] / TILE) */
} tiled;

/* Items are (coordinates of every dim but t and the last, block of TILE along t). */
static void tile_items(void *ctx, int64_t begin, int64_t end) {
  const tiled *tl = ctx;
  const box *b = tl->b;
  int last = b->rank - 1, t = tl->t;
  int64_t nt = b->dims[t], nl = b->dims[last];
  int64_t dt = b->dst_strides[t], st = b->src_strides[t], dl = b->dst_strides[last], sl = b->src_strides[last];
  for (int64_t item = begin; item < end; item++) {
    int64_t blk = item % tl->blocks, rest = item / tl->blocks;
    int64_t d = b->dst_base, s = b->src_base;
    for (int k = last - 1; k >= 0; k--) {
      if (k == t) continue;
      int64_t c = rest % b->dims[k];
      rest /= b->dims[k];
      d += c * b->dst_strides[k];
      s += c * b->src_strides[k];
    }
    int64_t i0 = blk * TILE, rows = nt - i0 < TILE ? nt - i0 : TILE;
    d += i0 * dt;
    s += i0 * st;
#define TILE_COPY(T)                                                                         \
  do {                                                                                       \
    T *dp = (T *)b->dst + d;                                                                 \
    const T *sp = (const T *)b->src + s;                                                     \
    for (int64_t j0 = 0; j0 < nl; j0 += TILE) {                                              \
      int64_t j1 = nl - j0 < TILE ? nl : j0 + TILE;                                          \
      for (int64_t i = 0; i < rows; i++)                                                     \
        for (int64_t j = j0; j < j1; j++) dp[i * dt + j * dl] = sp[i * st + j * sl];         \
    }                                                                                        \
  } while (0)
    switch (b->size) {
      case 1: TILE_COPY(uint8_t); break;
      case 2: TILE_COPY(uint16_t); break;
      case 4: TILE_COPY(uint32_t); break;
      default: TILE_COPY(uint64_t); break;
    }
#undef TILE_COPY
  }
}

/* The dim to tile with the last one, or -1: one whose source is contiguous while the last
 * dim's is not, both long enough for tiles to pay. */
static int tile_dim(const box *b) {
  int last = b->rank - 1;
  if (b->rank < 2 || b->src_strides[last] == 1 || b->src_strides[last] == 0 || b->dims[last] < TILE) return -1;
  for (int k = last - 1; k >= 0; k--)
    if (b->src_strides[k] == 1 && b->dims[k] >= TILE) return k;
  return -1;
}

/* Drops size-1 dims and merges neighbours that step through both arrays as one dim would:
 * a bias broadcast to [1, C, 2, 2] becomes rows of 4 instead of 4 rows of 1, each of which
 * paid a divide per dim to find its place. Assumes no dim is 0. */
static void simplify_box(box *b) {
  int rank = 0;
  for (int k = 0; k < b->rank; k++) {
    if (b->dims[k] == 1) continue;
    if (rank > 0 && b->dst_strides[rank - 1] == b->dst_strides[k] * b->dims[k] &&
        b->src_strides[rank - 1] == b->src_strides[k] * b->dims[k]) {
      b->dims[rank - 1] *= b->dims[k];
      b->dst_strides[rank - 1] = b->dst_strides[k];
      b->src_strides[rank - 1] = b->src_strides[k];
      continue;
    }
    b->dims[rank] = b->dims[k];
    b->dst_strides[rank] = b->dst_strides[k];
    b->src_strides[rank] = b->src_strides[k];
    rank++;
  }
  b->rank = rank;
}

static void box_copy(box *b) {
  int64_t count = 1;
  for (int k = 0; k < b->rank; k++) count *= b->dims[k];
  if (count == 0) return;
  simplify_box(b);
  if (b->rank == 0) { /* one element: a unit row */
    b->rank = 1;
    b->dims[0] = 1;
    b->dst_strides[0] = b->src_strides[0] = 1;
  }
  int64_t rows = 1, total = 1;
  for (int k = 0; k < b->rank; k++) total *= b->dims[k];
  if (total == 0) return;
  for (int k = 0; k < b->rank - 1; k++) rows *= b->dims[k];
  int64_t per_row = b->dims[b->rank - 1];
  int t = tile_dim(b);
  if (t >= 0) {
    tiled tl = {.b = b, .t = t, .blocks = (b->dims[t] + TILE - 1) / TILE};
    int64_t items = rows / b->dims[t] * tl.blocks, grain = RT_CPU_GRAIN / (TILE * per_row);
    rt_parallel_for(items, grain > 0 ? grain : 1, tile_items, &tl);
    return;
  }
  int64_t grain = RT_CPU_GRAIN / (per_row > 0 ? per_row : 1);
  rt_parallel_for(rows, grain > 0 ? grain : 1, box_rows, b);
}

/* A box over out, written densely, reading in with the given strides. */
static void box_into(box *b, const rt_value *in, rt_value *out) {
  b->rank = out->shape.rank;
  b->size = hlo_dtype_size(out->shape.dtype);
  b->dst = out->data;
  b->src = in->data;
  hlo_shape_strides(&out->shape, b->dst_strides);
  for (int k = 0; k < b->rank; k++) b->dims[k] = out->shape.dims[k];
}

static bool broadcast_kernel(const hlo_instr *instr, const rt_value *const *in, rt_value *out) {
  box b = {0};
  box_into(&b, in[0], out);
  int64_t in_strides[HLO_MAX_RANK];
  hlo_shape_strides(&in[0]->shape, in_strides);
  for (int k = 0; k < instr->dimensions.count; k++) {
    int64_t d = instr->dimensions.values[k];
    /* a size-1 operand dim broadcast to a larger one repeats its element */
    b.src_strides[d] = in[0]->shape.dims[k] == out->shape.dims[d] ? in_strides[k] : 0;
  }
  box_copy(&b);
  return true;
}

static bool transpose_kernel(const hlo_instr *instr, const rt_value *const *in, rt_value *out) {
  box b = {0};
  box_into(&b, in[0], out);
  int64_t in_strides[HLO_MAX_RANK];
  hlo_shape_strides(&in[0]->shape, in_strides);
  for (int k = 0; k < b.rank; k++) b.src_strides[k] = in_strides[instr->dimensions.values[k]];
  box_copy(&b);
  return true;
}

static bool slice_kernel(const hlo_instr *instr, const rt_value *const *in, rt_value *out) {
  box b = {0};
  box_into(&b, in[0], out);
  int64_t in_strides[HLO_MAX_RANK];
  hlo_shape_strides(&in[0]->shape, in_strides);
  for (int k = 0; k < b.rank; k++) {
    b.src_strides[k] = in_strides[k] * instr->slice_strides.values[k];
    b.src_base += in_strides[k] * instr->slice_starts.values[k];
  }
  box_copy(&b);
  return true;
}

static bool reverse_kernel(const hlo_instr *instr, const rt_value *const *in, rt_value *out) {
  box b = {0};
  box_into(&b, in[0], out);
  int64_t in_strides[HLO_MAX_RANK];
  hlo_shape_strides(&in[0]->shape, in_strides);
  for (int k = 0; k < b.rank; k++) b.src_strides[k] = in_strides[k];
  for (int k = 0; k < instr->dimensions.count; k++) {
    int64_t d = instr->dimensions.values[k];
    if (out->shape.dims[d] == 0) return true;
    b.src_base += in_strides[d] * (out->shape.dims[d] - 1);
    b.src_strides[d] = -in_strides[d];
  }
  box_copy(&b);
  return true;
}

static bool concatenate_kernel(const hlo_instr *instr, const rt_value *const *in, rt_value *out) {
  int64_t axis = instr->dimensions.values[0], at = 0;
  int64_t out_strides[HLO_MAX_RANK];
  hlo_shape_strides(&out->shape, out_strides);
  for (int k = 0; k < instr->operand_count; k++) {
    box b = {0};
    b.rank = out->shape.rank;
    b.size = hlo_dtype_size(out->shape.dtype);
    b.dst = out->data;
    b.src = in[k]->data;
    hlo_shape_strides(&in[k]->shape, b.src_strides);
    for (int d = 0; d < b.rank; d++) {
      b.dims[d] = in[k]->shape.dims[d];
      b.dst_strides[d] = out_strides[d];
    }
    b.dst_base = at * out_strides[axis];
    at += in[k]->shape.dims[axis];
    box_copy(&b);
  }
  return true;
}

/* Fills with the padding value, then copies the operand into its (spread) place. Picked
 * only for non-negative edge padding. */
static bool pad_kernel(const hlo_instr *instr, const rt_value *const *in, rt_value *out) {
  size_t size = hlo_dtype_size(out->shape.dtype);
  char *dst = out->data;
#define FILL(T)                                                                              \
  do {                                                                                       \
    T v, *p = (T *)dst;                                                                      \
    memcpy(&v, in[1]->data, sizeof v);                                                       \
    for (int64_t i = 0; i < out->count; i++) p[i] = v;                                       \
  } while (0)
  switch (size) { /* typed, not a memcpy call per element */
    case 1: FILL(uint8_t); break;
    case 2: FILL(uint16_t); break;
    case 4: FILL(uint32_t); break;
    case 8: FILL(uint64_t); break;
    default:
      for (int64_t i = 0; i < out->count; i++) memcpy(dst + i * (int64_t)size, in[1]->data, size);
  }
#undef FILL
  box b = {0};
  int64_t out_strides[HLO_MAX_RANK];
  hlo_shape_strides(&out->shape, out_strides);
  b.rank = out->shape.rank;
  b.size = size;
  b.dst = out->data;
  b.src = in[0]->data;
  hlo_shape_strides(&in[0]->shape, b.src_strides);
  for (int d = 0; d < b.rank; d++) {
    b.dims[d] = in[0]->shape.dims[d];
    b.dst_strides[d] = out_strides[d] * (instr->padding->interior[d] + 1);
    b.dst_base += out_strides[d] * instr->padding->low[d];
  }
  box_copy(&b);
  return true;
}

static bool iota_kernel(const hlo_instr *instr, const rt_value *const *in, rt_value *out) {
  (void)in;
  int64_t strides[HLO_MAX_RANK];
  hlo_shape_strides(&out->shape, strides);
  int64_t d = instr->index, n = out->shape.dims[d], stride = strides[d];
  for (int64_t i = 0; i < out->count; i++) {
    int64_t v = (i / stride) % n;
    switch (out->shape.dtype) {
      case HLO_F32: ((float *)out->data)[i] = (float)v; break;
      case HLO_F64: ((double *)out->data)[i] = (double)v; break;
      case HLO_S32: ((int32_t *)out->data)[i] = (int32_t)v; break;
      case HLO_S64: ((int64_t *)out->data)[i] = v; break;
      case HLO_U8: ((uint8_t *)out->data)[i] = (uint8_t)v; break;
      case HLO_U32: ((uint32_t *)out->data)[i] = (uint32_t)v; break;
      default: break;
    }
  }
  return true;
}

static bool static_array(const hlo_shape *shape) {
  return hlo_shape_is_array(shape) && hlo_dtype_is_computable(shape->dtype) && !hlo_shape_is_dynamic(shape);
}

rt_cpu_kernel rt_cpu_pick_layout(const hlo_instr *instr) {
  if (!static_array(&instr->shape)) return NULL;
  for (int k = 0; k < instr->operand_count; k++)
    if (!static_array(&instr->operands[k]->shape) || instr->operands[k]->shape.dtype != instr->shape.dtype)
      return NULL;
  switch (instr->opcode) {
    case HLO_OP_BROADCAST:
      if (instr->operand_count != 1 || instr->dimensions.count != instr->operands[0]->shape.rank) return NULL;
      for (int k = 0; k < instr->dimensions.count; k++) {
        int64_t d = instr->dimensions.values[k];
        if (d < 0 || d >= instr->shape.rank) return NULL;
        int64_t from = instr->operands[0]->shape.dims[k];
        if (from != instr->shape.dims[d] && from != 1) return NULL;
      }
      return broadcast_kernel;
    case HLO_OP_TRANSPOSE:
      return instr->operand_count == 1 && instr->dimensions.count == instr->shape.rank ? transpose_kernel : NULL;
    case HLO_OP_SLICE:
      return instr->operand_count == 1 ? slice_kernel : NULL;
    case HLO_OP_REVERSE:
      return instr->operand_count == 1 ? reverse_kernel : NULL;
    case HLO_OP_CONCATENATE:
      return instr->operand_count >= 1 && instr->dimensions.count == 1 ? concatenate_kernel : NULL;
    case HLO_OP_PAD:
      if (instr->operand_count != 2 || !instr->padding || instr->operands[1]->shape.rank != 0) return NULL;
      for (int d = 0; d < instr->shape.rank; d++)
        if (instr->padding->low[d] < 0 || instr->padding->high[d] < 0 || instr->padding->interior[d] < 0)
          return NULL;
      return pad_kernel;
    case HLO_OP_IOTA:
      switch (instr->shape.dtype) {
        case HLO_F32: case HLO_F64: case HLO_S32: case HLO_S64: case HLO_U8: case HLO_U32:
          return instr->shape.rank > 0 && instr->index >= 0 && instr->index < instr->shape.rank ? iota_kernel : NULL;
        default:
          return NULL;
      }
    default:
      return NULL;
  }
}
