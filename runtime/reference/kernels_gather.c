/* gather and scatter with XLA's index arithmetic.
 *
 * Both ops walk a "space" (gather: the output; scatter: the updates) whose dimensions split into
 * batch dimensions, which pick a start index vector out of the indices array, and window
 * dimensions, which offset into the operand from that start. One index_map describes both:
 * for every operand dimension, where its start and its offset come from. gather clamps starts
 * so the slice fits; scatter skips a whole update window that does not fit, as XLA does. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reference.h"

/* Start indices may have any integer type. Unsigned values past int64 are saturated rather
 * than wrapped negative: gather clamps them and scatter skips them either way. */
static int64_t read_index(const rt_value *indices, int64_t flat) {
  if (hlo_dtype_is_unsigned(indices->shape.dtype)) {
    uint64_t wide = rt_get_u64(indices, flat);
    return wide > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)wide;
  }
  return rt_get_i64(indices, flat);
}

/* Copies one element, converting when the types differ (they only do when a declared type
 * and a storage type disagree). */
static void copy_converted(rt_value *dst, int64_t dst_index, const rt_value *src, int64_t src_index) {
  if (dst->shape.dtype == src->shape.dtype)
    rt_copy_element(dst, dst_index, src, src_index);
  else if (hlo_dtype_is_float(dst->shape.dtype) || hlo_dtype_is_float(src->shape.dtype))
    rt_set_f64(dst, dst_index, rt_get_f64(src, src_index));
  else
    rt_set_i64(dst, dst_index, rt_get_i64(src, src_index));
}

typedef struct index_map {
  int operand_rank, indices_rank, space_rank;
  int64_t index_vector_dim;  /* == indices_rank when each index is a scalar */
  /* Per operand dimension. */
  int start_slot[HLO_MAX_RANK];  /* position in the start index vector, or -1 */
  int window_dim[HLO_MAX_RANK];  /* space dimension that offsets into it, or -1 */
  int batch_dim[HLO_MAX_RANK];   /* space dimension giving its batching coordinate, or -1 */
  /* Per indices dimension other than index_vector_dim: the space dimension indexing it. */
  int index_source[HLO_MAX_RANK];
} index_map;

/* The dimension numbers of gather or scatter, under common names. */
typedef struct index_dims {
  const hlo_ints *window_dims;        /* offset_dims / update_window_dims (space dims) */
  const hlo_ints *excluded_dims;      /* collapsed_slice_dims / inserted_window_dims (operand) */
  const hlo_ints *start_map;          /* start_index_map / scatter_dims_to_operand_dims */
  const hlo_ints *operand_batching;   /* operand_batching_dims / input_batching_dims */
  const hlo_ints *indices_batching;   /* start_indices_batching_dims / scatter_indices_batching_dims */
  int64_t index_vector_dim;
} index_dims;

static bool contains(const hlo_ints *ints, int64_t value) {
  for (int i = 0; i < ints->count; i++)
    if (ints->values[i] == value) return true;
  return false;
}

/* Each value in [0, limit) and none repeated. */
static bool valid_dim_list(const hlo_ints *ints, int limit) {
  for (int i = 0; i < ints->count; i++) {
    if (ints->values[i] < 0 || ints->values[i] >= limit) return false;
    for (int j = 0; j < i; j++)
      if (ints->values[j] == ints->values[i]) return false;
  }
  return true;
}

/* Fills map from the dimension numbers; on inconsistency returns a message saying what. */
static const char *build_map(index_map *map, const index_dims *dims, const hlo_shape *operand,
                             const hlo_shape *indices, int space_rank) {
  memset(map, 0, sizeof *map);
  map->operand_rank = operand->rank;
  map->indices_rank = indices->rank;
  map->space_rank = space_rank;
  map->index_vector_dim = dims->index_vector_dim;
  int64_t ivd = dims->index_vector_dim;
  if (ivd < 0 || ivd > indices->rank) return "index_vector_dim out of range";
  if (!valid_dim_list(dims->window_dims, space_rank)) return "bad window (offset) dimensions";
  if (!valid_dim_list(dims->excluded_dims, operand->rank)) return "bad collapsed/inserted dimensions";
  if (!valid_dim_list(dims->start_map, operand->rank)) return "bad start index map";
  if (!valid_dim_list(dims->operand_batching, operand->rank)) return "bad operand batching dimensions";
  if (!valid_dim_list(dims->indices_batching, indices->rank) || contains(dims->indices_batching, ivd))
    return "bad indices batching dimensions";
  if (dims->operand_batching->count != dims->indices_batching->count)
    return "operand and indices batching dimensions differ in number";
  for (int i = 0; i < dims->operand_batching->count; i++)
    if (contains(dims->excluded_dims, dims->operand_batching->values[i]))
      return "a dimension is both collapsed and batching";
  int64_t vector_length = ivd < indices->rank ? indices->dims[ivd] : 1;
  if (dims->start_map->count != vector_length)
    return "start index map size differs from the index vector length";
  int batch_rank = indices->rank - (ivd < indices->rank ? 1 : 0);
  if (space_rank != dims->window_dims->count + batch_rank) return "result rank does not add up";
  if (operand->rank != dims->window_dims->count + dims->excluded_dims->count + dims->operand_batching->count)
    return "operand rank does not add up";

  /* Space batch dims, ascending, correspond to the indices dims other than index_vector_dim. */
  int batch_dims[HLO_MAX_RANK], batch_count = 0;
  for (int d = 0; d < space_rank; d++)
    if (!contains(dims->window_dims, d)) batch_dims[batch_count++] = d;
  for (int j = 0, k = 0; j < indices->rank; j++) {
    if (j == ivd) continue;
    map->index_source[j] = batch_dims[k++];
  }
  int window_k = 0;
  for (int d = 0; d < operand->rank; d++) {
    map->start_slot[d] = map->window_dim[d] = map->batch_dim[d] = -1;
    bool excluded = contains(dims->excluded_dims, d);
    for (int i = 0; i < dims->operand_batching->count; i++) {
      if (dims->operand_batching->values[i] != d) continue;
      map->batch_dim[d] = map->index_source[dims->indices_batching->values[i]];
      if (operand->dims[d] != indices->dims[dims->indices_batching->values[i]])
        return "operand and indices batching dimensions differ in size";
    }
    for (int k = 0; k < dims->start_map->count; k++)
      if (dims->start_map->values[k] == d) map->start_slot[d] = k;
    if (map->start_slot[d] >= 0 && map->batch_dim[d] >= 0)
      return "a batching dimension is in the start index map";
    if (!excluded && map->batch_dim[d] < 0) map->window_dim[d] = (int)dims->window_dims->values[window_k++];
  }
  return NULL;
}

/* Operand coordinates of the window's corner for a point of the space, before any clamping. */
static void window_start(const index_map *map, const rt_value *indices, const int64_t *space,
                         int64_t *start) {
  int64_t coords[HLO_MAX_RANK];
  for (int j = 0; j < map->indices_rank; j++)
    if (j != map->index_vector_dim) coords[j] = space[map->index_source[j]];
  for (int d = 0; d < map->operand_rank; d++) {
    if (map->start_slot[d] >= 0) {
      if (map->index_vector_dim < map->indices_rank) coords[map->index_vector_dim] = map->start_slot[d];
      start[d] = read_index(indices, rt_flat_index(&indices->shape, coords));
    } else if (map->batch_dim[d] >= 0) {
      start[d] = space[map->batch_dim[d]];
    } else {
      start[d] = 0;
    }
  }
}

/* The space's batch dims must match the indices' dims, or index reads would run off. */
static const char *check_batch_sizes(const index_map *map, const hlo_shape *indices, const hlo_shape *space) {
  for (int j = 0; j < map->indices_rank; j++)
    if (j != map->index_vector_dim && space->dims[map->index_source[j]] != indices->dims[j])
      return "a batch dimension differs in size from the indices";
  return NULL;
}

RT_KERNEL(rt_kernel_gather) {
  const rt_value *operand = args[0], *indices = args[1];
  const hlo_gather_dims *gd = instr->gather;
  if (!gd || instr->operand_count != 2) return rt_kernel_fail(eval, instr, HLO_ERR_INPUT, "needs operand, indices and dimension numbers");
  if (operand->shape.dtype == HLO_TUPLE || indices->shape.dtype == HLO_TUPLE || !hlo_shape_is_array(&instr->shape))
    return rt_kernel_fail(eval, instr, HLO_ERR_INPUT, "operands and result must be arrays");
  index_dims dims = {&gd->offset_dims, &gd->collapsed_slice_dims, &gd->start_index_map,
                     &gd->operand_batching_dims, &gd->start_indices_batching_dims, gd->index_vector_dim};
  index_map map;
  const char *why = build_map(&map, &dims, &operand->shape, &indices->shape, instr->shape.rank);
  if (!why) why = check_batch_sizes(&map, &indices->shape, &instr->shape);
  if (!why && instr->gather_slice_sizes.count != operand->shape.rank) why = "slice_sizes has the wrong length";
  const int64_t *slice = instr->gather_slice_sizes.values;
  for (int d = 0; !why && d < operand->shape.rank; d++) {
    if (slice[d] < 0 || slice[d] > operand->shape.dims[d]) why = "a slice size exceeds the operand";
    else if (map.window_dim[d] < 0 && slice[d] != 1) why = "a collapsed or batching dimension needs slice size 1";
    else if (map.window_dim[d] >= 0 && instr->shape.dims[map.window_dim[d]] != slice[d])
      why = "an offset dimension differs from its slice size";
  }
  if (why) return rt_kernel_fail(eval, instr, HLO_ERR_INPUT, "%s", why);

  rt_value *result = rt_new_output(eval, instr, &instr->shape);
  if (!result) return eval->diag->status;
  int64_t coords[HLO_MAX_RANK] = {0}, start[HLO_MAX_RANK], at[HLO_MAX_RANK];
  for (int64_t i = 0; i < result->count; i++, rt_next_coords(&result->shape, coords)) {
    window_start(&map, indices, coords, start);
    for (int d = 0; d < operand->shape.rank; d++) {
      /* XLA clamps the start so the whole slice lies inside the operand. */
      int64_t high = operand->shape.dims[d] - slice[d];
      int64_t s = start[d] < 0 ? 0 : start[d] > high ? high : start[d];
      at[d] = s + (map.window_dim[d] >= 0 ? coords[map.window_dim[d]] : 0);
    }
    copy_converted(result, i, operand, rt_flat_index(&operand->shape, at));
  }
  *out = result;
  return HLO_OK;
}

/* How scatter combines an operand element with an update. The common reducers are recognised
 * so they run without a computation call per element; everything else calls to_apply. */
typedef enum combiner {
  COMBINE_CALL, COMBINE_ASSIGN, COMBINE_KEEP, COMBINE_ADD, COMBINE_MUL, COMBINE_MAX, COMBINE_MIN
} combiner;

static bool is_param(const hlo_instr *instr, int64_t number) {
  return instr->opcode == HLO_OP_PARAMETER && instr->parameter_number == number;
}

/* A single-operand scatter's to_apply is "fast" when its root is a parameter, or one
 * commutative binary op of both parameters, all in the operand's type. */
static combiner classify_combiner(const hlo_comp *comp, int n, hlo_dtype dtype) {
  if (n != 1 || !comp || comp->param_count != 2 || !comp->root) return COMBINE_CALL;
  const hlo_instr *root = comp->root;
  if (!hlo_shape_is_array(&root->shape) || root->shape.rank != 0) return COMBINE_CALL;
  if (is_param(root, 1)) return COMBINE_ASSIGN;
  if (is_param(root, 0)) return COMBINE_KEEP;
  /* pred arithmetic has its own rules in the elementwise kernels; leave it to them. */
  if (dtype == HLO_PRED || root->operand_count != 2) return COMBINE_CALL;
  const hlo_instr *a = root->operands[0], *b = root->operands[1];
  if (!((is_param(a, 0) && is_param(b, 1)) || (is_param(a, 1) && is_param(b, 0)))) return COMBINE_CALL;
  if (a->shape.dtype != root->shape.dtype || b->shape.dtype != root->shape.dtype) return COMBINE_CALL;
  switch (root->opcode) {
    case HLO_OP_ADD: return COMBINE_ADD;
    case HLO_OP_MULTIPLY: return COMBINE_MUL;
    case HLO_OP_MAXIMUM: return COMBINE_MAX;
    case HLO_OP_MINIMUM: return COMBINE_MIN;
    default: return COMBINE_CALL;
  }
}

/* Floats are combined in double and rounded once on store: for f32 and narrower that equals
 * the operation done in the element type. max/min propagate NaN, as XLA's do. */
static double combine_float(combiner kind, double a, double b) {
  switch (kind) {
    case COMBINE_ADD: return a + b;
    case COMBINE_MUL: return a * b;
    case COMBINE_MAX: return a != a ? a : b != b ? b : a > b ? a : b;
    case COMBINE_MIN: return a != a ? a : b != b ? b : a < b ? a : b;
    default: return b;
  }
}

/* Integers wrap: do the arithmetic in uint64 (no undefined overflow) and let the store
 * truncate to the element width. */
static void combine_fast(combiner kind, rt_value *dst, int64_t at, const rt_value *update, int64_t from) {
  if (kind == COMBINE_KEEP) return;
  if (kind == COMBINE_ASSIGN) {
    copy_converted(dst, at, update, from);
    return;
  }
  hlo_dtype dtype = dst->shape.dtype;
  if (hlo_dtype_is_float(dtype)) {
    rt_set_f64(dst, at, combine_float(kind, rt_get_f64(dst, at), rt_get_f64(update, from)));
    return;
  }
  uint64_t a = rt_get_u64(dst, at), b = rt_get_u64(update, from), r;
  bool is_signed = hlo_dtype_is_signed(dtype);
  bool a_less = is_signed ? (int64_t)a < (int64_t)b : a < b;
  switch (kind) {
    case COMBINE_ADD: r = a + b; break;
    case COMBINE_MUL: r = a * b; break;
    case COMBINE_MAX: r = a_less ? b : a; break;
    default: r = a_less ? a : b; break;
  }
  rt_set_u64(dst, at, r);
}

/* Calls to_apply on (outputs[0..n)[at], updates[0..n)[from]) and stores the results. */
static hlo_status combine_call(rt_eval *eval, const hlo_instr *instr, int n, rt_value **outputs,
                               int64_t at, rt_value *const *updates, int64_t from) {
  rt_value *scalars[2 * 64];
  for (int i = 0; i < 2 * n; i++) {
    const rt_value *source = i < n ? outputs[i] : updates[i - n];
    scalars[i] = rt_value_new_array(source->shape.dtype, 0, NULL);
    if (scalars[i]) rt_copy_element(scalars[i], 0, source, i < n ? at : from);
  }
  hlo_status status = HLO_OK;
  for (int i = 0; i < 2 * n; i++)
    if (!scalars[i]) status = rt_kernel_fail(eval, instr, HLO_ERR_INTERNAL, "out of memory");
  rt_value *result = NULL;
  if (status == HLO_OK) status = rt_eval_comp(eval, instr->called[0], scalars, 2 * n, &result);
  for (int i = 0; i < 2 * n; i++) rt_value_release(scalars[i]);
  if (status != HLO_OK) return status;
  bool is_tuple = result->shape.dtype == HLO_TUPLE;
  if ((n > 1 && (!is_tuple || result->tuple_count != n)) || (n == 1 && is_tuple && result->tuple_count != 1)) {
    rt_value_release(result);
    return rt_kernel_fail(eval, instr, HLO_ERR_INPUT, "to_apply must return %d scalar%s", n, n > 1 ? "s" : "");
  }
  for (int i = 0; i < n; i++) {
    const rt_value *element = is_tuple ? result->tuple[i] : result;
    if (element->shape.dtype == HLO_TUPLE || element->count != 1) {
      rt_value_release(result);
      return rt_kernel_fail(eval, instr, HLO_ERR_INPUT, "to_apply must return scalars");
    }
    copy_converted(outputs[i], at, element, 0);
  }
  rt_value_release(result);
  return HLO_OK;
}

/* The outputs start as copies of the operands, in the result's storage types. */
static hlo_status init_outputs(rt_eval *eval, const hlo_instr *instr, int n, rt_value *const *operands,
                               rt_value **outputs) {
  for (int i = 0; i < n; i++) {
    const hlo_shape *declared = n == 1 && !hlo_shape_is_tuple(&instr->shape) ? &instr->shape
                                                                            : &instr->shape.tuple[i];
    outputs[i] = rt_new_output(eval, instr, declared);
    if (!outputs[i]) return eval->diag->status;
    if (outputs[i]->count != operands[i]->count)
      return rt_kernel_fail(eval, instr, HLO_ERR_INPUT, "result %d has %lld elements, operand has %lld", i,
                  (long long)outputs[i]->count, (long long)operands[i]->count);
    for (int64_t k = 0; k < operands[i]->count; k++) copy_converted(outputs[i], k, operands[i], k);
  }
  return HLO_OK;
}

static const char *check_scatter_args(const hlo_instr *instr, int n, rt_value *const *args) {
  if (instr->operand_count < 3 || instr->operand_count % 2 == 0 || n > 64)
    return "needs N operands, indices and N updates (N <= 64)";
  if (!instr->scatter) return "has no dimension numbers";
  if (instr->called_count < 1) return "has no to_apply computation";
  if (n == 1 ? hlo_shape_is_tuple(&instr->shape) && instr->shape.tuple_count != 1
             : !hlo_shape_is_tuple(&instr->shape) || instr->shape.tuple_count != n)
    return "result shape does not match the number of operands";
  for (int i = 0; i < instr->operand_count; i++)
    if (args[i]->shape.dtype == HLO_TUPLE) return "operands must be arrays";
  for (int i = 1; i < n; i++) {
    if (args[i]->shape.rank != args[0]->shape.rank || args[n + 1 + i]->shape.rank != args[n + 1]->shape.rank)
      return "operands (or updates) differ in rank";
    for (int d = 0; d < args[0]->shape.rank; d++)
      if (args[i]->shape.dims[d] != args[0]->shape.dims[d]) return "operands differ in shape";
    for (int d = 0; d < args[n + 1]->shape.rank; d++)
      if (args[n + 1 + i]->shape.dims[d] != args[n + 1]->shape.dims[d]) return "updates differ in shape";
  }
  return NULL;
}

RT_KERNEL(rt_kernel_scatter) {
  int n = (instr->operand_count - 1) / 2;
  const char *why = check_scatter_args(instr, n, args);
  if (why) return rt_kernel_fail(eval, instr, HLO_ERR_INPUT, "%s", why);
  rt_value *const *operands = args, *const *updates = args + n + 1;
  const rt_value *indices = args[n];
  const hlo_scatter_dims *sd = instr->scatter;
  index_dims dims = {&sd->update_window_dims, &sd->inserted_window_dims, &sd->scatter_dims_to_operand_dims,
                     &sd->input_batching_dims, &sd->scatter_indices_batching_dims, sd->index_vector_dim};
  const hlo_shape *operand_shape = &operands[0]->shape, *update_shape = &updates[0]->shape;
  index_map map;
  why = build_map(&map, &dims, operand_shape, &indices->shape, update_shape->rank);
  if (!why) why = check_batch_sizes(&map, &indices->shape, update_shape);
  int64_t window_size[HLO_MAX_RANK];
  for (int d = 0; !why && d < operand_shape->rank; d++) {
    window_size[d] = map.window_dim[d] >= 0 ? update_shape->dims[map.window_dim[d]] : 1;
    if (window_size[d] > operand_shape->dims[d]) why = "an update window is larger than the operand";
  }
  if (why) return rt_kernel_fail(eval, instr, HLO_ERR_INPUT, "%s", why);

  rt_value *outputs[64] = {0};
  hlo_status status = init_outputs(eval, instr, n, operands, outputs);
  combiner kind = classify_combiner(instr->called[0], n, outputs[0] ? outputs[0]->shape.dtype : HLO_INVALID);
  int64_t coords[HLO_MAX_RANK] = {0}, start[HLO_MAX_RANK], at[HLO_MAX_RANK];
  for (int64_t u = 0; status == HLO_OK && u < updates[0]->count; u++, rt_next_coords(update_shape, coords)) {
    window_start(&map, indices, coords, start);
    /* XLA skips an update window unless all of it lands inside the operand. */
    bool fits = true;
    for (int d = 0; d < operand_shape->rank && fits; d++)
      fits = start[d] >= 0 && start[d] <= operand_shape->dims[d] - window_size[d];
    if (!fits) continue;
    for (int d = 0; d < operand_shape->rank; d++)
      at[d] = start[d] + (map.window_dim[d] >= 0 ? coords[map.window_dim[d]] : 0);
    int64_t flat = rt_flat_index(operand_shape, at);
    if (kind == COMBINE_CALL)
      status = combine_call(eval, instr, n, outputs, flat, updates, u);
    else
      combine_fast(kind, outputs[0], flat, updates[0], u);
  }
  if (status != HLO_OK) {
    for (int i = 0; i < n; i++) rt_value_release(outputs[i]);
    return status;
  }
  if (n == 1 && !hlo_shape_is_tuple(&instr->shape)) {
    *out = outputs[0];
    return HLO_OK;
  }
  *out = rt_value_new_tuple(n, outputs);
  if (!*out) {
    for (int i = 0; i < n; i++) rt_value_release(outputs[i]);
    return rt_kernel_fail(eval, instr, HLO_ERR_INTERNAL, "out of memory");
  }
  return HLO_OK;
}
