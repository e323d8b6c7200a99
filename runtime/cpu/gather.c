/* The cpu backend's gather for whole rows of a matrix: an embedding lookup. The operand is
 * [rows, width]; each index picks one row, copied whole into the output, whose dims are
 * the indices' dims then width:
 *   gather(table, ids), offset_dims={rank(ids)}, collapsed_slice_dims={0},
 *   start_index_map={0}, index_vector_dim=rank(ids), slice_sizes={1, width}
 * (or with ids ending in a dim of 1 at index_vector_dim). As XLA defines gather, a start
 * index outside the operand is clamped into it: below 0 reads row 0, past the end the last
 * row. Other gathers take the reference kernel. */
#include <string.h>

#include "kernel_internal.h"
#include "runtime/runtime.h"

typedef struct row_job {
  const char *table, *ids;
  char *out;
  hlo_dtype id_type;
  int64_t rows;    /* of the table */
  size_t row_size; /* bytes */
} row_job;

static int64_t id_at(const row_job *j, int64_t i) {
  switch (j->id_type) {
    case HLO_S8: return ((const int8_t *)j->ids)[i];
    case HLO_S16: return ((const int16_t *)j->ids)[i];
    case HLO_S32: return ((const int32_t *)j->ids)[i];
    case HLO_S64: return ((const int64_t *)j->ids)[i];
    case HLO_U8: return ((const uint8_t *)j->ids)[i];
    case HLO_U16: return ((const uint16_t *)j->ids)[i];
    case HLO_U32: return ((const uint32_t *)j->ids)[i];
    default: { /* u64: past INT64_MAX is past the end */
      uint64_t v = ((const uint64_t *)j->ids)[i];
      return v > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v;
    }
  }
}

static void copy_rows(void *ctx, int64_t begin, int64_t end) {
  const row_job *j = ctx;
  for (int64_t i = begin; i < end; i++) {
    int64_t row = id_at(j, i);
    row = row < 0 ? 0 : row >= j->rows ? j->rows - 1 : row;
    memcpy(j->out + i * (int64_t)j->row_size, j->table + row * (int64_t)j->row_size, j->row_size);
  }
}

static bool gather_rows(const hlo_instr *instr, const rt_value *const *in, rt_value *out) {
  const hlo_shape *table = &in[0]->shape;
  row_job j = {.table = in[0]->data, .ids = in[1]->data, .out = out->data, .id_type = in[1]->shape.dtype,
               .rows = table->dims[0], .row_size = (size_t)table->dims[1] * hlo_dtype_size(table->dtype)};
  (void)instr;
  int64_t count = hlo_shape_elements(&in[1]->shape);
  if (count == 0 || j.row_size == 0) return true;
  int64_t grain = RT_CPU_GRAIN / (table->dims[1] > 0 ? table->dims[1] : 1);
  rt_parallel_for(count, grain > 0 ? grain : 1, copy_rows, &j);
  return true;
}

static bool is_list(const hlo_ints *list, int64_t value) { return list->count == 1 && list->values[0] == value; }

static bool plain(const hlo_shape *shape) {
  return hlo_shape_is_array(shape) && hlo_dtype_is_computable(shape->dtype) && !hlo_shape_is_dynamic(shape) &&
         hlo_shape_is_default_layout(shape);
}

rt_cpu_kernel rt_cpu_pick_gather(const hlo_instr *instr) {
  if (instr->opcode != HLO_OP_GATHER || instr->operand_count != 2 || !instr->gather) return NULL;
  const hlo_shape *table = &instr->operands[0]->shape, *ids = &instr->operands[1]->shape, *out = &instr->shape;
  if (!plain(table) || !plain(ids) || !plain(out) || table->rank != 2 || out->dtype != table->dtype) return NULL;
  hlo_dtype t = ids->dtype;
  if (!hlo_dtype_is_integral(t) || t == HLO_PRED) return NULL;
  const hlo_gather_dims *g = instr->gather;
  /* the index vector: implicit after the last dim, or a trailing dim of 1 */
  int id_rank = ids->rank;
  if (g->index_vector_dim == ids->rank - 1 && ids->rank > 0 && ids->dims[ids->rank - 1] == 1) id_rank = ids->rank - 1;
  else if (g->index_vector_dim != ids->rank) return NULL;
  if (!is_list(&g->offset_dims, id_rank) || !is_list(&g->collapsed_slice_dims, 0) || !is_list(&g->start_index_map, 0) ||
      g->operand_batching_dims.count != 0 || g->start_indices_batching_dims.count != 0)
    return NULL;
  const hlo_ints *sizes = &instr->gather_slice_sizes;
  if (sizes->count != 2 || sizes->values[0] != 1 || sizes->values[1] != table->dims[1] || table->dims[0] < 1) return NULL;
  if (out->rank != id_rank + 1 || out->dims[id_rank] != table->dims[1]) return NULL;
  for (int d = 0; d < id_rank; d++)
    if (out->dims[d] != ids->dims[d]) return NULL;
  return gather_rows;
}
