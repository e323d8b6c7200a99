/* Field-by-field comparison of two instructions' attributes, and origin numbering: what a
 * backend needs to check, without printing anything, that a module is the graph it compiled
 * instantiated at other sizes (runtime/backend.h, bind). CSE compares printed text instead,
 * where a print per instruction costs nothing next to the passes; binding a new size must
 * stay in microseconds. A field added to hlo_instr must be added here. */
#include <string.h>

#include "hlo.h"

int32_t hlo_module_number_origins(hlo_module *module) {
  int32_t next = 0;
  for (int c = 0; c < module->comp_count; c++) {
    hlo_comp *comp = module->comps[c];
    for (int i = 0; i < comp->instr_count; i++) comp->instrs[i]->origin = ++next;
  }
  return next;
}

static bool same_text(const char *a, const char *b) { return a == b || (a && b && !strcmp(a, b)); }

static bool same_literal(const hlo_literal *a, const hlo_literal *b) {
  if (a == b) return true;
  if (!a || !b || !hlo_shape_equal(&a->shape, &b->shape) || a->elided != b->elided ||
      !same_text(a->raw_text, b->raw_text))
    return false;
  if (a->shape.dtype == HLO_TUPLE) {
    for (int i = 0; i < a->shape.tuple_count; i++)
      if (!same_literal(&a->elements[i], &b->elements[i])) return false;
    return true;
  }
  if (!a->data || !b->data) return a->data == b->data;
  return !memcmp(a->data, b->data, (size_t)hlo_shape_bytes(&a->shape));
}

static bool same_window(const hlo_window *a, const hlo_window *b) {
  if (a == b) return true;
  if (!a || !b || a->rank != b->rank) return false;
  for (int d = 0; d < a->rank; d++) {
    const hlo_window_dim *x = &a->dims[d], *y = &b->dims[d];
    if (x->size != y->size || x->stride != y->stride || x->pad_low != y->pad_low || x->pad_high != y->pad_high ||
        x->lhs_dilate != y->lhs_dilate || x->rhs_dilate != y->rhs_dilate || x->reversal != y->reversal)
      return false;
  }
  return true;
}

static bool same_padding(const hlo_padding *a, const hlo_padding *b) {
  if (a == b) return true;
  if (!a || !b || a->rank != b->rank) return false;
  size_t n = sizeof(int64_t) * (size_t)a->rank;
  return !memcmp(a->low, b->low, n) && !memcmp(a->high, b->high, n) && !memcmp(a->interior, b->interior, n);
}

static bool same_conv(const hlo_conv_dims *a, const hlo_conv_dims *b) {
  if (a == b) return true;
  if (!a || !b || a->spatial_count != b->spatial_count) return false;
  size_t n = sizeof(int64_t) * (size_t)a->spatial_count;
  return a->input_batch == b->input_batch && a->input_feature == b->input_feature &&
         a->kernel_input_feature == b->kernel_input_feature && a->kernel_output_feature == b->kernel_output_feature &&
         a->output_batch == b->output_batch && a->output_feature == b->output_feature &&
         !memcmp(a->input_spatial, b->input_spatial, n) && !memcmp(a->kernel_spatial, b->kernel_spatial, n) &&
         !memcmp(a->output_spatial, b->output_spatial, n);
}

static bool same_dot(const hlo_dot_dims *a, const hlo_dot_dims *b) {
  if (a == b) return true;
  return a && b && hlo_ints_equal(&a->lhs_batch, &b->lhs_batch) && hlo_ints_equal(&a->lhs_contracting, &b->lhs_contracting) &&
         hlo_ints_equal(&a->rhs_batch, &b->rhs_batch) && hlo_ints_equal(&a->rhs_contracting, &b->rhs_contracting);
}

static bool same_gather(const hlo_gather_dims *a, const hlo_gather_dims *b) {
  if (a == b) return true;
  return a && b && hlo_ints_equal(&a->offset_dims, &b->offset_dims) &&
         hlo_ints_equal(&a->collapsed_slice_dims, &b->collapsed_slice_dims) &&
         hlo_ints_equal(&a->start_index_map, &b->start_index_map) &&
         hlo_ints_equal(&a->operand_batching_dims, &b->operand_batching_dims) &&
         hlo_ints_equal(&a->start_indices_batching_dims, &b->start_indices_batching_dims) &&
         a->index_vector_dim == b->index_vector_dim && a->indices_are_sorted == b->indices_are_sorted;
}

static bool same_scatter(const hlo_scatter_dims *a, const hlo_scatter_dims *b) {
  if (a == b) return true;
  return a && b && hlo_ints_equal(&a->update_window_dims, &b->update_window_dims) &&
         hlo_ints_equal(&a->inserted_window_dims, &b->inserted_window_dims) &&
         hlo_ints_equal(&a->scatter_dims_to_operand_dims, &b->scatter_dims_to_operand_dims) &&
         hlo_ints_equal(&a->input_batching_dims, &b->input_batching_dims) &&
         hlo_ints_equal(&a->scatter_indices_batching_dims, &b->scatter_indices_batching_dims) &&
         a->index_vector_dim == b->index_vector_dim && a->indices_are_sorted == b->indices_are_sorted &&
         a->unique_indices == b->unique_indices;
}

static bool same_raw_attrs(const hlo_instr *a, const hlo_instr *b) {
  if (a->raw_attr_count != b->raw_attr_count) return false;
  for (int i = 0; i < a->raw_attr_count; i++)
    if (!same_text(a->raw_attrs[i].name, b->raw_attrs[i].name) || !same_text(a->raw_attrs[i].value, b->raw_attrs[i].value))
      return false;
  return true;
}

static bool same_called(const hlo_instr *a, const hlo_instr *b) {
  if (a->called_count != b->called_count) return false;
  for (int i = 0; i < a->called_count; i++)
    if (!a->called[i] != !b->called[i] || (a->called[i] && a->called[i]->id != b->called[i]->id)) return false;
  return true;
}

#define DIFFERS(what)        \
  do {                       \
    if (which) *which = what; \
    return false;            \
  } while (0)

bool hlo_instr_same_attrs(const hlo_instr *a, const hlo_instr *b, bool sizes_too, const char **which) {
  if (a->opcode != b->opcode) DIFFERS("opcode");
  if (a->operand_count != b->operand_count) DIFFERS("operand count");
  if (!same_called(a, b)) DIFFERS("called computations");
  if (a->parameter_number != b->parameter_number) DIFFERS("parameter number");
  if (a->index != b->index) DIFFERS("index");
  if (!hlo_ints_equal(&a->dimensions, &b->dimensions)) DIFFERS("dimensions");
  if (sizes_too && !hlo_ints_equal(&a->slice_starts, &b->slice_starts)) DIFFERS("slice starts");
  if (sizes_too && !hlo_ints_equal(&a->slice_limits, &b->slice_limits)) DIFFERS("slice limits");
  if (!hlo_ints_equal(&a->slice_strides, &b->slice_strides)) DIFFERS("slice strides");
  if (!same_padding(a->padding, b->padding)) DIFFERS("padding");
  if (!same_window(a->window, b->window)) DIFFERS("window");
  if (!same_conv(a->conv, b->conv)) DIFFERS("convolution dimension numbers");
  if (a->feature_group_count != b->feature_group_count || a->batch_group_count != b->batch_group_count)
    DIFFERS("group counts");
  if (!same_dot(a->dot, b->dot)) DIFFERS("dot dimension numbers");
  if (!same_gather(a->gather, b->gather)) DIFFERS("gather dimension numbers");
  if (!hlo_ints_equal(&a->gather_slice_sizes, &b->gather_slice_sizes)) DIFFERS("gather slice sizes");
  if (!same_scatter(a->scatter, b->scatter)) DIFFERS("scatter dimension numbers");
  if (a->direction != b->direction || a->compare_type != b->compare_type) DIFFERS("comparison");
  if (memcmp(&a->epsilon, &b->epsilon, sizeof a->epsilon)) DIFFERS("epsilon");
  if (a->is_stable != b->is_stable) DIFFERS("is_stable");
  if (a->rng_algorithm != b->rng_algorithm || a->rng_distribution != b->rng_distribution) DIFFERS("rng kind");
  if (a->exponent_bits != b->exponent_bits || a->mantissa_bits != b->mantissa_bits) DIFFERS("precision bits");
  if (!same_literal(a->literal, b->literal)) DIFFERS("constant value");
  if (!same_text(a->custom_call_target, b->custom_call_target)) DIFFERS("custom-call target");
  if (!same_text(a->fusion_kind, b->fusion_kind)) DIFFERS("fusion kind");
  if (a->is_composite != b->is_composite || !same_text(a->composite_name, b->composite_name)) DIFFERS("composite");
  if (!same_raw_attrs(a, b)) DIFFERS("attributes");
  return true;
}
