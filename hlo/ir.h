/* The HLO IR: instructions in computations in a module, all owned by the module's arena. */
#ifndef HLO_IR_H
#define HLO_IR_H
#include <stdbool.h>
#include <stdint.h>

#include "arena.h"
#include "diag.h"
#include "shape.h"

typedef enum hlo_opcode {
#define OP(id, text) HLO_OP_##id,
#include "opcode.def"
#undef OP
  HLO_OP_COUNT
} hlo_opcode;

const char *hlo_opcode_name(hlo_opcode opcode);
/* HLO_OP_COUNT when the name is not an opcode. */
hlo_opcode hlo_opcode_from_name(const char *name, size_t len);
bool hlo_opcode_is_elementwise_unary(hlo_opcode opcode);
bool hlo_opcode_is_elementwise_binary(hlo_opcode opcode);

typedef struct hlo_ints {
  int count;
  int64_t *values;
} hlo_ints;

typedef enum hlo_direction {
  HLO_DIR_NONE = 0, HLO_DIR_EQ, HLO_DIR_NE, HLO_DIR_LT, HLO_DIR_LE, HLO_DIR_GT, HLO_DIR_GE
} hlo_direction;

typedef enum hlo_compare_type {
  HLO_CMP_DEFAULT = 0, HLO_CMP_FLOAT, HLO_CMP_TOTALORDER, HLO_CMP_SIGNED, HLO_CMP_UNSIGNED
} hlo_compare_type;

typedef enum hlo_rng_algorithm {
  HLO_RNG_DEFAULT = 0, HLO_RNG_THREE_FRY, HLO_RNG_PHILOX
} hlo_rng_algorithm;

typedef enum hlo_rng_distribution {
  HLO_RNG_UNIFORM = 0, HLO_RNG_NORMAL
} hlo_rng_distribution;

/* window={size=.. stride=.. pad=.. lhs_dilate=.. rhs_dilate=.. rhs_reversal=..}.
 * Unset fields keep their defaults: stride 1, pad 0, dilations 1, no reversal. */
typedef struct hlo_window_dim {
  int64_t size, stride, pad_low, pad_high, lhs_dilate, rhs_dilate;
  bool reversal;
} hlo_window_dim;

typedef struct hlo_window {
  int rank;
  hlo_window_dim dims[HLO_MAX_RANK];
} hlo_window;

/* dim_labels=b01f_01io->b01f, decoded into dimension numbers. */
typedef struct hlo_conv_dims {
  int spatial_count;
  int64_t input_batch, input_feature, input_spatial[HLO_MAX_RANK];
  int64_t kernel_input_feature, kernel_output_feature, kernel_spatial[HLO_MAX_RANK];
  int64_t output_batch, output_feature, output_spatial[HLO_MAX_RANK];
} hlo_conv_dims;

typedef struct hlo_dot_dims {
  hlo_ints lhs_batch, lhs_contracting, rhs_batch, rhs_contracting;
} hlo_dot_dims;

typedef struct hlo_gather_dims {
  hlo_ints offset_dims, collapsed_slice_dims, start_index_map;
  hlo_ints operand_batching_dims, start_indices_batching_dims;
  int64_t index_vector_dim;
  bool indices_are_sorted;
} hlo_gather_dims;

typedef struct hlo_scatter_dims {
  hlo_ints update_window_dims, inserted_window_dims, scatter_dims_to_operand_dims;
  hlo_ints input_batching_dims, scatter_indices_batching_dims;
  int64_t index_vector_dim;
  bool indices_are_sorted, unique_indices;
} hlo_scatter_dims;

/* padding=0_0x1_1_0: per dim low, high, interior. */
typedef struct hlo_padding {
  int rank;
  int64_t low[HLO_MAX_RANK], high[HLO_MAX_RANK], interior[HLO_MAX_RANK];
} hlo_padding;

/* A constant's value: dense row-major data in the shape's element type, or, for types latch
 * does not compute with, the value text as written. Tuples hold one literal per element. */
typedef struct hlo_literal {
  hlo_shape shape;
  void *data;           /* hlo_shape_bytes(&shape) bytes; NULL for tuples and raw_text */
  bool elided;          /* written as {...}: data was filled deterministically */
  const char *raw_text; /* the '(...)' payload for uncomputable types, else NULL */
  struct hlo_literal *elements; /* tuple_count literals when shape is a tuple */
} hlo_literal;

/* An attribute latch does not interpret, kept verbatim so printing loses nothing. */
typedef struct hlo_raw_attr {
  const char *name;
  const char *value;
} hlo_raw_attr;

typedef struct hlo_comp hlo_comp;
typedef struct hlo_module hlo_module;

typedef struct hlo_instr {
  hlo_opcode opcode;
  const char *name;
  hlo_shape shape;
  int operand_count;
  struct hlo_instr **operands;
  /* Called computations, in the text's attribute order:
   *   reduce, reduce-window, map, call, sort, scatter, all-reduce: to_apply
   *   fusion: calls; while: condition, body; select-and-scatter: select, scatter
   *   conditional: true, false or the branch_computations list; custom-call: called_computations */
  int called_count;
  hlo_comp **called;
  hlo_comp *parent;
  int id; /* index in parent->instrs */
  /* Where this instruction came from, for backends that rebind a compiled graph to other
   * sizes (runtime/backend.h, bind): 0 for none, else 1 + the instruction's position in the
   * module a backend was handed, counted over computations in order, then instructions in
   * order (hlo_module_number_origins). Clones keep it; passes that copy an instruction
   * (inlining) copy it; instructions passes create get 0. Never printed, never hashed. */
  int32_t origin;

  /* Attributes; which ones an opcode uses is in the comments. */
  int64_t parameter_number; /* parameter */
  int64_t index;            /* get-tuple-element index, iota_dimension, feature_index of batch-norm,
                               dimension of get/set-dimension-size, all-gather/all-to-all dimension */
  hlo_ints dimensions;      /* broadcast, transpose, concatenate, reverse, reduce, sort (one),
                               dynamic_slice_sizes for dynamic-slice, all-gather/reduce-scatter */
  hlo_ints slice_starts, slice_limits, slice_strides; /* slice */
  hlo_padding *padding;     /* pad */
  hlo_window *window;       /* convolution, reduce-window, select-and-scatter */
  hlo_conv_dims *conv;      /* convolution */
  int64_t feature_group_count, batch_group_count; /* convolution; 1 when absent */
  hlo_dot_dims *dot;        /* dot */
  hlo_gather_dims *gather;  /* gather */
  hlo_ints gather_slice_sizes; /* gather slice_sizes */
  hlo_scatter_dims *scatter;   /* scatter */
  hlo_direction direction;     /* compare */
  hlo_compare_type compare_type;
  double epsilon;              /* batch-norm-* */
  bool is_stable;              /* sort */
  hlo_rng_algorithm rng_algorithm; /* rng-bit-generator */
  hlo_rng_distribution rng_distribution; /* rng */
  int64_t exponent_bits, mantissa_bits;  /* reduce-precision */
  hlo_literal *literal;        /* constant */
  const char *custom_call_target; /* custom-call */
  const char *fusion_kind;        /* fusion: kLoop, kInput, kOutput, kCustom */
  bool is_composite;              /* call carrying a composite (is_composite=true) */
  const char *composite_name;     /* its composite.name frontend attribute, or NULL */
  int raw_attr_count;
  hlo_raw_attr *raw_attrs;        /* everything else, verbatim, in text order */
} hlo_instr;

struct hlo_comp {
  const char *name;
  hlo_module *module;
  int instr_count, instr_capacity;
  hlo_instr **instrs; /* operands before users */
  hlo_instr *root;
  int param_count;
  hlo_instr **params; /* by parameter number */
  bool is_entry;
  int id; /* index in module->comps */
};

struct hlo_module {
  hlo_arena arena;
  const char *name;
  int comp_count, comp_capacity;
  hlo_comp **comps; /* callees before callers */
  hlo_comp *entry;
  int raw_attr_count;
  hlo_raw_attr *raw_attrs; /* header attributes other than entry_computation_layout */
  int64_t name_counter; /* build.c: next suffix for generated names; 0 until first used */
};

hlo_module *hlo_module_new(const char *name);
void hlo_module_free(hlo_module *module);
hlo_comp *hlo_module_add_comp(hlo_module *module, const char *name);
hlo_comp *hlo_module_find_comp(const hlo_module *module, const char *name);
/* Appends a bare instruction (no shape, no attributes) to comp; the caller fills it in.
 * Operands are copied. Defaults: feature/batch group counts 1, index_vector_dim set by
 * the gather/scatter owner. */
hlo_instr *hlo_comp_append(hlo_comp *comp, hlo_opcode opcode, const char *name,
                           int operand_count, hlo_instr *const *operands);
/* Registers a parameter instruction in comp->params (grows the table). */
void hlo_comp_set_param(hlo_comp *comp, hlo_instr *param);
/* Reorders comp->instrs so operands come before users; false (with diag) on a cycle. */
bool hlo_comp_sort(hlo_comp *comp, hlo_diag *diag);
/* Reorders module->comps so callees come before callers; false on recursion. */
bool hlo_module_sort(hlo_module *module, hlo_diag *diag);
hlo_ints hlo_ints_copy(hlo_arena *arena, int count, const int64_t *values);
/* Sets every instruction's origin to 1 + its position (see hlo_instr.origin); returns the
 * count of instructions. */
int32_t hlo_module_number_origins(hlo_module *module);
/* Whether a and b agree on every attribute other than their shapes and operands (opcode,
 * called computations by index, dimensions, windows, literals, raw attributes, ...).
 * sizes_too: also compare the size attributes a graph instantiated at other sizes may
 * change (slice starts and limits). On a difference, *which names the attribute. */
bool hlo_instr_same_attrs(const hlo_instr *a, const hlo_instr *b, bool sizes_too, const char **which);
/* A raw attribute's value by name, or NULL. */
const char *hlo_instr_raw_attr(const hlo_instr *instr, const char *name);

#endif
