/* The HLO text printer. Attributes print in XLA's spelling and, where XLA omits defaults,
 * omit them too; everything the IR keeps verbatim (raw attributes, raw constant text) goes
 * out verbatim, so nothing the parser read is lost. */
#include "hlo.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- numbers ---- */

/* NaN text: XLA writes the payload only when it is not the default quiet NaN's. */
static void print_nan(hlo_strbuf *sb, bool negative, uint64_t payload, uint64_t quiet) {
  hlo_sb_puts(sb, negative ? "-nan" : "nan");
  if (payload != quiet) hlo_sb_printf(sb, "(0x%" PRIx64 ")", payload);
}

void hlo_print_f32(hlo_strbuf *sb, float value) {
  uint32_t bits;
  memcpy(&bits, &value, sizeof bits);
  if (isnan(value)) {
    print_nan(sb, bits >> 31, bits & 0x7fffff, 1u << 22);
    return;
  }
  if (isinf(value)) {
    hlo_sb_puts(sb, value < 0 ? "-inf" : "inf");
    return;
  }
  char text[48];
  for (int digits = 1; digits <= 9; digits++) {
    snprintf(text, sizeof text, "%.*g", digits, (double)value);
    /* Readers may use strtof or strtod-then-round; the text must work for both. */
    float direct = strtof(text, NULL), twice = (float)strtod(text, NULL);
    if (memcmp(&direct, &value, sizeof value) == 0 && memcmp(&twice, &value, sizeof value) == 0)
      break;
  }
  hlo_sb_puts(sb, text);
}

void hlo_print_f64(hlo_strbuf *sb, double value) {
  uint64_t bits;
  memcpy(&bits, &value, sizeof bits);
  if (isnan(value)) {
    print_nan(sb, bits >> 63, bits & 0xfffffffffffffull, 1ull << 51);
    return;
  }
  if (isinf(value)) {
    hlo_sb_puts(sb, value < 0 ? "-inf" : "inf");
    return;
  }
  char text[48];
  for (int digits = 1; digits <= 17; digits++) {
    snprintf(text, sizeof text, "%.*g", digits, value);
    double back = strtod(text, NULL);
    if (memcmp(&back, &value, sizeof value) == 0) break;
  }
  hlo_sb_puts(sb, text);
}

/* Half types print their exact value as an f32 would: every half value is an f32 value,
 * and the shortest f32 text reads back to it (as -65504, not -6.55e+04). */
static void print_half(hlo_strbuf *sb, uint16_t bits, bool bf16) {
  int mantissa_bits = bf16 ? 7 : 10;
  uint16_t exponent_mask = bf16 ? 0x7f80 : 0x7c00;
  uint16_t mantissa_mask = (uint16_t)((1u << mantissa_bits) - 1);
  if ((bits & exponent_mask) == exponent_mask && (bits & mantissa_mask)) {
    print_nan(sb, bits >> 15, bits & mantissa_mask, 1u << (mantissa_bits - 1));
    return;
  }
  hlo_print_f32(sb, bf16 ? hlo_bf16_to_f32(bits) : hlo_f16_to_f32(bits));
}

/* ---- literals ---- */

static void print_element(hlo_strbuf *sb, hlo_dtype dtype, const void *data, int64_t i, bool scalar) {
  const unsigned char *bytes = data;
  switch (dtype) {
    case HLO_PRED:
      if (scalar) hlo_sb_puts(sb, bytes[i] ? "true" : "false");
      else hlo_sb_puts(sb, bytes[i] ? "1" : "0"); /* XLA prints pred arrays densely */
      return;
    case HLO_S8: hlo_sb_printf(sb, "%d", ((const int8_t *)data)[i]); return;
    case HLO_S16: hlo_sb_printf(sb, "%d", ((const int16_t *)data)[i]); return;
    case HLO_S32: hlo_sb_printf(sb, "%" PRId32, ((const int32_t *)data)[i]); return;
    case HLO_S64: hlo_sb_printf(sb, "%" PRId64, ((const int64_t *)data)[i]); return;
    case HLO_U8: hlo_sb_printf(sb, "%u", ((const uint8_t *)data)[i]); return;
    case HLO_U16: hlo_sb_printf(sb, "%u", ((const uint16_t *)data)[i]); return;
    case HLO_U32: hlo_sb_printf(sb, "%" PRIu32, ((const uint32_t *)data)[i]); return;
    case HLO_U64: hlo_sb_printf(sb, "%" PRIu64, ((const uint64_t *)data)[i]); return;
    case HLO_F16: print_half(sb, ((const uint16_t *)data)[i], false); return;
    case HLO_BF16: print_half(sb, ((const uint16_t *)data)[i], true); return;
    case HLO_F32: hlo_print_f32(sb, ((const float *)data)[i]); return;
    case HLO_F64: hlo_print_f64(sb, ((const double *)data)[i]); return;
    default: hlo_sb_puts(sb, "0"); return; /* uncomputable types carry raw_text instead */
  }
}

/* Nested braces per dim, spaced the way XLA prints one-line literals:
 * {1, 2} for rank 1, { {1, 2}, {3, 4} } above it. */
static void print_nested(hlo_strbuf *sb, const hlo_shape *shape, const void *data, int dim,
                         int64_t *offset) {
  int64_t size = shape->dims[dim];
  bool innermost = dim == shape->rank - 1;
  bool spaced = shape->rank > 1 && (!innermost || size > 1);
  if (size <= 0) {
    hlo_sb_puts(sb, "{}");
    return;
  }
  hlo_sb_puts(sb, spaced ? "{ " : "{");
  for (int64_t i = 0; i < size; i++) {
    if (i) hlo_sb_puts(sb, ", ");
    if (innermost) print_element(sb, shape->dtype, data, (*offset)++, false);
    else print_nested(sb, shape, data, dim + 1, offset);
  }
  hlo_sb_puts(sb, spaced ? " }" : "}");
}

void hlo_print_literal(hlo_strbuf *sb, const hlo_literal *literal) {
  if (literal->raw_text) {
    hlo_sb_puts(sb, literal->raw_text);
    return;
  }
  const hlo_shape *shape = &literal->shape;
  if (shape->dtype == HLO_TUPLE) {
    hlo_sb_puts(sb, "(");
    for (int i = 0; i < shape->tuple_count; i++) {
      if (i) hlo_sb_puts(sb, ", ");
      if (literal->elements) hlo_print_literal(sb, &literal->elements[i]);
    }
    hlo_sb_puts(sb, ")");
    return;
  }
  if (!literal->data) {
    hlo_sb_puts(sb, shape->rank ? "{...}" : "0");
    return;
  }
  if (shape->rank == 0) {
    print_element(sb, shape->dtype, literal->data, 0, true);
    return;
  }
  int64_t offset = 0;
  print_nested(sb, shape, literal->data, 0, &offset);
}

/* ---- attributes ---- */

/* The attributes one instruction prints, so a raw attribute of the same name (a parser may
 * keep both) does not print twice. */
typedef struct attr_printer {
  hlo_strbuf *sb;
  int count;
  const char *names[24];
} attr_printer;

static void attr_begin(attr_printer *ap, const char *name) {
  if (ap->count < (int)(sizeof ap->names / sizeof ap->names[0])) ap->names[ap->count++] = name;
  hlo_sb_printf(ap->sb, ", %s=", name);
}

static bool attr_printed(const attr_printer *ap, const char *name) {
  for (int i = 0; i < ap->count; i++)
    if (strcmp(ap->names[i], name) == 0) return true;
  return false;
}

static void print_int_list(hlo_strbuf *sb, const int64_t *values, int count) {
  hlo_sb_puts(sb, "{");
  for (int i = 0; i < count; i++) hlo_sb_printf(sb, i ? ",%" PRId64 : "%" PRId64, values[i]);
  hlo_sb_puts(sb, "}");
}

static void attr_ints(attr_printer *ap, const char *name, const hlo_ints *ints) {
  attr_begin(ap, name);
  print_int_list(ap->sb, ints->values, ints->count);
}

static void attr_int(attr_printer *ap, const char *name, int64_t value) {
  attr_begin(ap, name);
  hlo_sb_printf(ap->sb, "%" PRId64, value);
}

static void attr_word(attr_printer *ap, const char *name, const char *value) {
  attr_begin(ap, name);
  hlo_sb_puts(ap->sb, value);
}

static void print_string(hlo_strbuf *sb, const char *text) {
  hlo_sb_puts(sb, "\"");
  for (const char *p = text; *p; p++) {
    if (*p == '"' || *p == '\\') hlo_sb_printf(sb, "\\%c", *p);
    else if (*p == '\n') hlo_sb_puts(sb, "\\n");
    else hlo_sb_append(sb, p, 1);
  }
  hlo_sb_puts(sb, "\"");
}

static void attr_comp(attr_printer *ap, const char *name, const hlo_comp *comp) {
  attr_begin(ap, name);
  hlo_sb_printf(ap->sb, "%%%s", comp ? comp->name : "?");
}

static void attr_comp_list(attr_printer *ap, const char *name, hlo_comp *const *comps, int count) {
  attr_begin(ap, name);
  hlo_sb_puts(ap->sb, "{");
  for (int i = 0; i < count; i++) hlo_sb_printf(ap->sb, "%s%%%s", i ? ", " : "", comps[i] ? comps[i]->name : "?");
  hlo_sb_puts(ap->sb, "}");
}

/* x-separated per-dim values, as in size=3x3; NULL field means "is this dim's value". */
typedef int64_t (*window_field)(const hlo_window_dim *dim);
static int64_t w_size(const hlo_window_dim *d) { return d->size; }
static int64_t w_stride(const hlo_window_dim *d) { return d->stride; }
static int64_t w_lhs_dilate(const hlo_window_dim *d) { return d->lhs_dilate; }
static int64_t w_rhs_dilate(const hlo_window_dim *d) { return d->rhs_dilate; }
static int64_t w_reversal(const hlo_window_dim *d) { return d->reversal; }

static bool window_field_set(const hlo_window *w, window_field field, int64_t default_value) {
  for (int i = 0; i < w->rank; i++)
    if (field(&w->dims[i]) != default_value) return true;
  return false;
}

static void print_window_field(hlo_strbuf *sb, const hlo_window *w, const char *name,
                               window_field field, bool *first) {
  hlo_sb_printf(sb, "%s%s=", *first ? "" : " ", name);
  for (int i = 0; i < w->rank; i++) hlo_sb_printf(sb, i ? "x%" PRId64 : "%" PRId64, field(&w->dims[i]));
  *first = false;
}

/* window={size=3x3 stride=2x2 pad=1_1x1_1 lhs_dilate=.. rhs_dilate=.. rhs_reversal=..}:
 * size always, the rest only where some dim differs from the default. */
static void attr_window(attr_printer *ap, const hlo_window *w) {
  hlo_strbuf *sb = ap->sb;
  attr_begin(ap, "window");
  hlo_sb_puts(sb, "{");
  bool first = true;
  if (w->rank > 0) {
    print_window_field(sb, w, "size", w_size, &first);
    if (window_field_set(w, w_stride, 1)) print_window_field(sb, w, "stride", w_stride, &first);
    bool padded = false;
    for (int i = 0; i < w->rank; i++) padded |= w->dims[i].pad_low != 0 || w->dims[i].pad_high != 0;
    if (padded) {
      hlo_sb_puts(sb, " pad=");
      for (int i = 0; i < w->rank; i++)
        hlo_sb_printf(sb, "%s%" PRId64 "_%" PRId64, i ? "x" : "", w->dims[i].pad_low, w->dims[i].pad_high);
    }
    if (window_field_set(w, w_lhs_dilate, 1)) print_window_field(sb, w, "lhs_dilate", w_lhs_dilate, &first);
    if (window_field_set(w, w_rhs_dilate, 1)) print_window_field(sb, w, "rhs_dilate", w_rhs_dilate, &first);
    if (window_field_set(w, w_reversal, 0)) print_window_field(sb, w, "rhs_reversal", w_reversal, &first);
  }
  hlo_sb_puts(sb, "}");
}

/* padding=0_0x1_1_0: the interior part on every dim once any dim has one. */
static void attr_padding(attr_printer *ap, const hlo_padding *pad) {
  bool interior = false;
  for (int i = 0; i < pad->rank; i++) interior |= pad->interior[i] != 0;
  attr_begin(ap, "padding");
  for (int i = 0; i < pad->rank; i++) {
    hlo_sb_printf(ap->sb, "%s%" PRId64 "_%" PRId64, i ? "x" : "", pad->low[i], pad->high[i]);
    if (interior) hlo_sb_printf(ap->sb, "_%" PRId64, pad->interior[i]);
  }
}

static void attr_slice(attr_printer *ap, const hlo_instr *instr) {
  attr_begin(ap, "slice");
  hlo_sb_puts(ap->sb, "{");
  for (int i = 0; i < instr->slice_starts.count; i++) {
    int64_t stride = i < instr->slice_strides.count ? instr->slice_strides.values[i] : 1;
    hlo_sb_printf(ap->sb, "%s[%" PRId64 ":%" PRId64, i ? ", " : "", instr->slice_starts.values[i],
                  i < instr->slice_limits.count ? instr->slice_limits.values[i] : 0);
    if (stride != 1) hlo_sb_printf(ap->sb, ":%" PRId64, stride);
    hlo_sb_puts(ap->sb, "]");
  }
  hlo_sb_puts(ap->sb, "}");
}

/* dim_labels=b01f_01io->b01f, rebuilt from the decoded dimension numbers. */
static void print_labels(hlo_strbuf *sb, int spatial_count, int64_t a, char a_label, int64_t b,
                         char b_label, const int64_t *spatial) {
  char labels[HLO_MAX_RANK + 3];
  int rank = spatial_count + 2;
  if (rank > HLO_MAX_RANK) rank = HLO_MAX_RANK;
  memset(labels, '?', sizeof labels);
  if (a >= 0 && a < rank) labels[a] = a_label;
  if (b >= 0 && b < rank) labels[b] = b_label;
  for (int i = 0; i < spatial_count && i < HLO_MAX_RANK; i++)
    if (spatial[i] >= 0 && spatial[i] < rank) labels[spatial[i]] = (char)('0' + i);
  hlo_sb_append(sb, labels, (size_t)rank);
}

static void attr_dim_labels(attr_printer *ap, const hlo_conv_dims *d) {
  attr_begin(ap, "dim_labels");
  print_labels(ap->sb, d->spatial_count, d->input_batch, 'b', d->input_feature, 'f', d->input_spatial);
  hlo_sb_puts(ap->sb, "_");
  print_labels(ap->sb, d->spatial_count, d->kernel_input_feature, 'i', d->kernel_output_feature, 'o',
               d->kernel_spatial);
  hlo_sb_puts(ap->sb, "->");
  print_labels(ap->sb, d->spatial_count, d->output_batch, 'b', d->output_feature, 'f', d->output_spatial);
}

static void attr_dot(attr_printer *ap, const hlo_dot_dims *d) {
  if (d->lhs_batch.count) attr_ints(ap, "lhs_batch_dims", &d->lhs_batch);
  attr_ints(ap, "lhs_contracting_dims", &d->lhs_contracting);
  if (d->rhs_batch.count) attr_ints(ap, "rhs_batch_dims", &d->rhs_batch);
  attr_ints(ap, "rhs_contracting_dims", &d->rhs_contracting);
}

static void attr_gather(attr_printer *ap, const hlo_instr *instr) {
  const hlo_gather_dims *g = instr->gather;
  attr_ints(ap, "offset_dims", &g->offset_dims);
  attr_ints(ap, "collapsed_slice_dims", &g->collapsed_slice_dims);
  attr_ints(ap, "start_index_map", &g->start_index_map);
  if (g->operand_batching_dims.count) attr_ints(ap, "operand_batching_dims", &g->operand_batching_dims);
  if (g->start_indices_batching_dims.count)
    attr_ints(ap, "start_indices_batching_dims", &g->start_indices_batching_dims);
  attr_int(ap, "index_vector_dim", g->index_vector_dim);
  attr_ints(ap, "slice_sizes", &instr->gather_slice_sizes);
  if (g->indices_are_sorted) attr_word(ap, "indices_are_sorted", "true");
}

static void attr_scatter(attr_printer *ap, const hlo_scatter_dims *s) {
  attr_ints(ap, "update_window_dims", &s->update_window_dims);
  attr_ints(ap, "inserted_window_dims", &s->inserted_window_dims);
  attr_ints(ap, "scatter_dims_to_operand_dims", &s->scatter_dims_to_operand_dims);
  if (s->input_batching_dims.count) attr_ints(ap, "input_batching_dims", &s->input_batching_dims);
  if (s->scatter_indices_batching_dims.count)
    attr_ints(ap, "scatter_indices_batching_dims", &s->scatter_indices_batching_dims);
  attr_int(ap, "index_vector_dim", s->index_vector_dim);
  if (s->indices_are_sorted) attr_word(ap, "indices_are_sorted", "true");
  if (s->unique_indices) attr_word(ap, "unique_indices", "true");
}

static const char *direction_name(hlo_direction d) {
  static const char *const names[] = {"", "EQ", "NE", "LT", "LE", "GT", "GE"};
  return d > HLO_DIR_NONE && d <= HLO_DIR_GE ? names[d] : NULL;
}

static const char *compare_type_name(hlo_compare_type t) {
  static const char *const names[] = {"", "FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED"};
  return t > HLO_CMP_DEFAULT && t <= HLO_CMP_UNSIGNED ? names[t] : NULL;
}

/* A dimension attribute some parsers keep in dimensions and others in index. */
static void attr_one_dim(attr_printer *ap, const hlo_instr *instr) {
  if (instr->dimensions.count) {
    attr_ints(ap, "dimensions", &instr->dimensions);
  } else {
    attr_begin(ap, "dimensions");
    print_int_list(ap->sb, &instr->index, 1);
  }
}

/* Opcode-specific attributes, in the order XLA prints them. */
static void print_op_attrs(attr_printer *ap, const hlo_instr *instr) {
  switch (instr->opcode) {
    case HLO_OP_BROADCAST: case HLO_OP_TRANSPOSE: case HLO_OP_CONCATENATE: case HLO_OP_REVERSE:
    case HLO_OP_REDUCE: case HLO_OP_SORT: case HLO_OP_MAP:
      attr_ints(ap, "dimensions", &instr->dimensions);
      if (instr->opcode == HLO_OP_SORT && instr->is_stable) attr_word(ap, "is_stable", "true");
      break;
    case HLO_OP_ALL_GATHER: case HLO_OP_REDUCE_SCATTER: case HLO_OP_GET_DIMENSION_SIZE:
    case HLO_OP_SET_DIMENSION_SIZE:
      attr_one_dim(ap, instr);
      break;
    case HLO_OP_ALL_TO_ALL:
      if (instr->dimensions.count) attr_ints(ap, "dimensions", &instr->dimensions);
      break;
    case HLO_OP_DYNAMIC_SLICE: attr_ints(ap, "dynamic_slice_sizes", &instr->dimensions); break;
    case HLO_OP_SLICE: attr_slice(ap, instr); break;
    case HLO_OP_PAD: if (instr->padding) attr_padding(ap, instr->padding); break;
    case HLO_OP_REDUCE_WINDOW: case HLO_OP_SELECT_AND_SCATTER:
      if (instr->window) attr_window(ap, instr->window);
      break;
    case HLO_OP_CONVOLUTION:
      if (instr->window) attr_window(ap, instr->window);
      if (instr->conv) attr_dim_labels(ap, instr->conv);
      if (instr->feature_group_count != 1) attr_int(ap, "feature_group_count", instr->feature_group_count);
      if (instr->batch_group_count != 1) attr_int(ap, "batch_group_count", instr->batch_group_count);
      break;
    case HLO_OP_DOT: if (instr->dot) attr_dot(ap, instr->dot); break;
    case HLO_OP_GATHER: if (instr->gather) attr_gather(ap, instr); break;
    case HLO_OP_SCATTER: if (instr->scatter) attr_scatter(ap, instr->scatter); break;
    case HLO_OP_COMPARE:
      if (direction_name(instr->direction)) attr_word(ap, "direction", direction_name(instr->direction));
      if (compare_type_name(instr->compare_type)) attr_word(ap, "type", compare_type_name(instr->compare_type));
      break;
    case HLO_OP_GET_TUPLE_ELEMENT: attr_int(ap, "index", instr->index); break;
    case HLO_OP_IOTA: attr_int(ap, "iota_dimension", instr->index); break;
    case HLO_OP_BATCH_NORM_TRAINING: case HLO_OP_BATCH_NORM_INFERENCE: case HLO_OP_BATCH_NORM_GRAD:
      attr_begin(ap, "epsilon");
      hlo_print_f64(ap->sb, instr->epsilon);
      attr_int(ap, "feature_index", instr->index);
      break;
    case HLO_OP_RNG:
      attr_word(ap, "distribution", instr->rng_distribution == HLO_RNG_NORMAL ? "rng_normal" : "rng_uniform");
      break;
    case HLO_OP_RNG_BIT_GENERATOR:
      attr_word(ap, "algorithm", instr->rng_algorithm == HLO_RNG_THREE_FRY ? "rng_three_fry"
                                 : instr->rng_algorithm == HLO_RNG_PHILOX  ? "rng_philox"
                                                                           : "rng_default");
      break;
    case HLO_OP_REDUCE_PRECISION:
      attr_int(ap, "exponent_bits", instr->exponent_bits);
      attr_int(ap, "mantissa_bits", instr->mantissa_bits);
      break;
    case HLO_OP_FUSION:
      if (instr->fusion_kind) attr_word(ap, "kind", instr->fusion_kind);
      break;
    case HLO_OP_CUSTOM_CALL:
      if (instr->custom_call_target) {
        attr_begin(ap, "custom_call_target");
        print_string(ap->sb, instr->custom_call_target);
      }
      break;
    case HLO_OP_CALL:
      if (instr->is_composite) attr_word(ap, "is_composite", "true");
      break;
    default:
      break;
  }
}

/* Called computations, named the way each opcode's attribute names them. */
static void print_called(attr_printer *ap, const hlo_instr *instr) {
  int n = instr->called_count;
  if (n == 0) return;
  hlo_comp *const *called = instr->called;
  switch (instr->opcode) {
    case HLO_OP_WHILE:
      attr_comp(ap, "condition", called[0]);
      if (n > 1) attr_comp(ap, "body", called[1]);
      return;
    case HLO_OP_SELECT_AND_SCATTER:
      attr_comp(ap, "select", called[0]);
      if (n > 1) attr_comp(ap, "scatter", called[1]);
      return;
    case HLO_OP_CONDITIONAL:
      if (n == 2 && instr->operand_count > 0 && instr->operands[0] &&
          instr->operands[0]->shape.dtype == HLO_PRED) {
        attr_comp(ap, "true_computation", called[0]);
        attr_comp(ap, "false_computation", called[1]);
      } else {
        attr_comp_list(ap, "branch_computations", called, n);
      }
      return;
    case HLO_OP_FUSION: case HLO_OP_ASYNC_START: case HLO_OP_ASYNC_UPDATE: case HLO_OP_ASYNC_DONE:
      attr_comp(ap, "calls", called[0]);
      return;
    case HLO_OP_CUSTOM_CALL:
      attr_comp_list(ap, "called_computations", called, n);
      return;
    default:
      if (n == 1) attr_comp(ap, "to_apply", called[0]);
      else attr_comp_list(ap, "called_computations", called, n);
      return;
  }
}

void hlo_print_instr(hlo_strbuf *sb, const hlo_instr *instr) {
  hlo_sb_printf(sb, "%%%s = ", instr->name);
  hlo_shape_print(sb, &instr->shape, true);
  hlo_sb_printf(sb, " %s(", hlo_opcode_name(instr->opcode));
  if (instr->opcode == HLO_OP_PARAMETER) {
    hlo_sb_printf(sb, "%" PRId64, instr->parameter_number);
  } else if (instr->opcode == HLO_OP_CONSTANT && instr->literal) {
    hlo_print_literal(sb, instr->literal);
  } else {
    for (int i = 0; i < instr->operand_count; i++)
      hlo_sb_printf(sb, "%s%%%s", i ? ", " : "", instr->operands[i] ? instr->operands[i]->name : "?");
  }
  hlo_sb_puts(sb, ")");
  attr_printer ap = {sb, 0, {NULL}};
  print_op_attrs(&ap, instr);
  print_called(&ap, instr);
  for (int i = 0; i < instr->raw_attr_count; i++) {
    const hlo_raw_attr *attr = &instr->raw_attrs[i];
    if (attr_printed(&ap, attr->name)) continue;
    hlo_sb_printf(sb, ", %s=%s", attr->name, attr->value);
  }
}

/* ---- computations and the module ---- */

/* Array shapes with their layout written out, default or not: entry_computation_layout
 * always states layouts. */
static void print_shape_with_layout(hlo_strbuf *sb, const hlo_shape *shape) {
  if (shape->dtype == HLO_TUPLE) {
    hlo_sb_puts(sb, "(");
    for (int i = 0; i < shape->tuple_count; i++) {
      if (i) hlo_sb_puts(sb, ", ");
      print_shape_with_layout(sb, &shape->tuple[i]);
    }
    hlo_sb_puts(sb, ")");
    return;
  }
  hlo_shape copy = *shape;
  copy.has_layout = shape->rank > 0; /* XLA writes scalars without braces */
  hlo_shape_print(sb, &copy, true);
}

static void print_entry_layout(hlo_strbuf *sb, const hlo_comp *entry) {
  hlo_sb_puts(sb, ", entry_computation_layout={(");
  for (int i = 0; i < entry->param_count; i++) {
    if (i) hlo_sb_puts(sb, ", ");
    if (entry->params[i]) print_shape_with_layout(sb, &entry->params[i]->shape);
  }
  hlo_sb_puts(sb, ")->");
  if (entry->root) print_shape_with_layout(sb, &entry->root->shape);
  hlo_sb_puts(sb, "}");
}

static void print_comp(hlo_strbuf *sb, const hlo_comp *comp, bool is_entry) {
  hlo_sb_printf(sb, "%s%%%s (", is_entry ? "ENTRY " : "", comp->name);
  for (int i = 0; i < comp->param_count; i++) {
    const hlo_instr *param = comp->params[i];
    hlo_sb_printf(sb, "%s%s: ", i ? ", " : "", param ? param->name : "?");
    if (param) hlo_shape_print(sb, &param->shape, false);
  }
  hlo_sb_puts(sb, ") -> ");
  if (comp->root) hlo_shape_print(sb, &comp->root->shape, false);
  else hlo_sb_puts(sb, "()");
  hlo_sb_puts(sb, " {\n");
  for (int i = 0; i < comp->instr_count; i++) {
    const hlo_instr *instr = comp->instrs[i];
    hlo_sb_puts(sb, instr == comp->root ? "  ROOT " : "  ");
    hlo_print_instr(sb, instr);
    hlo_sb_puts(sb, "\n");
  }
  hlo_sb_puts(sb, "}\n");
}

/* Callees before callers, whatever order module->comps is in: XLA's parser needs a
 * computation defined before it is named. A sorted module keeps its order. */
static void place(const hlo_comp *comp, unsigned char *state, const hlo_comp **order, int *placed) {
  if (state[comp->id]) return; /* placed, or on the stack of a (broken) recursive call */
  state[comp->id] = 1;
  for (int i = 0; i < comp->instr_count; i++)
    for (int k = 0; k < comp->instrs[i]->called_count; k++) {
      const hlo_comp *callee = comp->instrs[i]->called[k];
      const hlo_module *m = comp->module;
      if (callee && callee->id >= 0 && callee->id < m->comp_count && m->comps[callee->id] == callee)
        place(callee, state, order, placed);
    }
  order[(*placed)++] = comp;
}

static bool ids_consistent(const hlo_module *module) {
  for (int i = 0; i < module->comp_count; i++)
    if (module->comps[i]->id != i) return false;
  return true;
}

void hlo_print_module(hlo_strbuf *sb, const hlo_module *module) {
  hlo_sb_printf(sb, "HloModule %s", module->name);
  if (module->entry) print_entry_layout(sb, module->entry);
  for (int i = 0; i < module->raw_attr_count; i++)
    hlo_sb_printf(sb, ", %s=%s", module->raw_attrs[i].name, module->raw_attrs[i].value);
  hlo_sb_puts(sb, "\n");
  int count = module->comp_count;
  const hlo_comp **order = hlo_malloc(sizeof(hlo_comp *) * (size_t)(count + 1));
  unsigned char *state = hlo_calloc((size_t)count + 1, 1);
  if (!order || !state) {
    sb->failed = true; /* out of memory, as if the text could not grow: the caller sees it */
    free(order);
    free(state);
    return;
  }
  int placed = 0;
  if (ids_consistent(module)) {
    for (int i = 0; i < count; i++) place(module->comps[i], state, order, &placed);
  } else {
    for (int i = 0; i < count; i++) order[placed++] = module->comps[i];
  }
  for (int i = 0; i < placed; i++) {
    hlo_sb_puts(sb, "\n");
    print_comp(sb, order[i], order[i] == module->entry || order[i]->is_entry);
  }
  free(order);
  free(state);
}

char *hlo_module_to_text(const hlo_module *module) {
  hlo_strbuf sb;
  hlo_sb_init(&sb);
  hlo_print_module(&sb, module);
  return hlo_sb_take(&sb);
}
