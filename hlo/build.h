/* The builder: capture code creates instructions through it. Each function sets the
 * instruction's attributes, infers its shape and checks its called computations; on invalid
 * input it returns NULL with diag naming the op and the shapes, and comp is left unchanged.
 * Generated names are "<opcode>.<n>", unique within the module. Computations must come
 * before their callers in module->comps: create callees first, or call hlo_module_sort
 * before verifying or printing. */
#ifndef HLO_BUILD_H
#define HLO_BUILD_H
#include <stdbool.h>

#include "ir.h"

/* A new computation named name (made unique) or a generated name when NULL; entry makes
 * it the module's entry. */
/* A name no instruction or computation of module has: base, a dot and a fresh number. */
const char *hlo_fresh_name(hlo_module *module, const char *base);
hlo_comp *hlo_build_computation(hlo_module *module, const char *name, bool entry);
/* A computation (x, y) -> op(x, y) on scalars of dtype, for reduce and friends, placed first
 * in the module so it precedes every caller. NULL when op is not a binary elementwise op or
 * dtype is not an array type. */
hlo_comp *hlo_build_scalar_reducer(hlo_module *module, hlo_opcode op, hlo_dtype dtype);
/* The same, but an identical reducer the module already has is returned instead of a new
 * one (reducers are pure, so reduces may share them, as XLA's own modules do). */
hlo_comp *hlo_shared_scalar_reducer(hlo_module *module, hlo_opcode op, hlo_dtype dtype);
/* Makes root the computation's result; it must belong to comp. */
hlo_status hlo_comp_set_root(hlo_comp *comp, hlo_instr *root, hlo_diag *diag);

/* name NULL generates one. The number must not be taken yet. */
hlo_instr *hlo_build_parameter(hlo_comp *comp, int64_t number, const hlo_shape *shape,
                               const char *name, hlo_diag *diag);
/* Copies the literal (data, tuple elements, raw text) into the module. */
hlo_instr *hlo_build_constant(hlo_comp *comp, const hlo_literal *literal, hlo_diag *diag);
/* value converted to dtype (rounded to nearest for halves; pred is value != 0). */
hlo_instr *hlo_build_constant_scalar(hlo_comp *comp, hlo_dtype dtype, double value, hlo_diag *diag);

hlo_instr *hlo_build_unary(hlo_comp *comp, hlo_opcode op, hlo_instr *x, hlo_diag *diag);
hlo_instr *hlo_build_binary(hlo_comp *comp, hlo_opcode op, hlo_instr *a, hlo_instr *b, hlo_diag *diag);
hlo_instr *hlo_build_compare(hlo_comp *comp, hlo_direction direction, hlo_instr *a, hlo_instr *b,
                             hlo_diag *diag);
hlo_instr *hlo_build_select(hlo_comp *comp, hlo_instr *pred, hlo_instr *on_true, hlo_instr *on_false,
                            hlo_diag *diag);
hlo_instr *hlo_build_clamp(hlo_comp *comp, hlo_instr *min, hlo_instr *x, hlo_instr *max, hlo_diag *diag);
hlo_instr *hlo_build_convert(hlo_comp *comp, hlo_instr *x, hlo_dtype dtype, hlo_diag *diag);

/* Result dims[rank]; operand dim i goes to result dim dimensions[i] (x's rank entries). */
hlo_instr *hlo_build_broadcast(hlo_comp *comp, hlo_instr *x, int rank, const int64_t *dims,
                               const int64_t *dimensions, hlo_diag *diag);
hlo_instr *hlo_build_reshape(hlo_comp *comp, hlo_instr *x, int rank, const int64_t *dims, hlo_diag *diag);
/* Result dim i is operand dim permutation[i] (x's rank entries). */
hlo_instr *hlo_build_transpose(hlo_comp *comp, hlo_instr *x, const int64_t *permutation, hlo_diag *diag);
/* x's rank entries each; strides NULL means all 1. */
hlo_instr *hlo_build_slice(hlo_comp *comp, hlo_instr *x, const int64_t *starts, const int64_t *limits,
                           const int64_t *strides, hlo_diag *diag);
hlo_instr *hlo_build_concatenate(hlo_comp *comp, int count, hlo_instr *const *operands,
                                 int64_t dimension, hlo_diag *diag);
hlo_instr *hlo_build_pad(hlo_comp *comp, hlo_instr *x, hlo_instr *value, const hlo_padding *padding,
                         hlo_diag *diag);
hlo_instr *hlo_build_iota(hlo_comp *comp, hlo_dtype dtype, int rank, const int64_t *dims,
                          int64_t iota_dimension, hlo_diag *diag);
/* The result takes lhs's element type. */
hlo_instr *hlo_build_dot(hlo_comp *comp, hlo_instr *lhs, hlo_instr *rhs, const hlo_dot_dims *dims,
                         hlo_diag *diag);
hlo_instr *hlo_build_convolution(hlo_comp *comp, hlo_instr *lhs, hlo_instr *rhs, const hlo_window *window,
                                 const hlo_conv_dims *dims, int64_t feature_group_count,
                                 int64_t batch_group_count, hlo_diag *diag);
/* Reduces dims[dim_count] of x with reducer, starting from the scalar init. */
hlo_instr *hlo_build_reduce(hlo_comp *comp, hlo_instr *x, hlo_instr *init, int dim_count,
                            const int64_t *dims, hlo_comp *reducer, hlo_diag *diag);
hlo_instr *hlo_build_reduce_window(hlo_comp *comp, hlo_instr *x, hlo_instr *init, const hlo_window *window,
                                   hlo_comp *reducer, hlo_diag *diag);
/* slice_sizes has one entry per operand dim. */
hlo_instr *hlo_build_gather(hlo_comp *comp, hlo_instr *operand, hlo_instr *indices,
                            const hlo_gather_dims *dims, const int64_t *slice_sizes, hlo_diag *diag);
hlo_instr *hlo_build_scatter(hlo_comp *comp, hlo_instr *operand, hlo_instr *indices, hlo_instr *updates,
                             const hlo_scatter_dims *dims, hlo_comp *combiner, hlo_diag *diag);
hlo_instr *hlo_build_tuple(hlo_comp *comp, int count, hlo_instr *const *elements, hlo_diag *diag);
hlo_instr *hlo_build_gte(hlo_comp *comp, hlo_instr *tuple, int64_t index, hlo_diag *diag);
hlo_instr *hlo_build_call(hlo_comp *comp, hlo_comp *callee, int count, hlo_instr *const *operands,
                          hlo_diag *diag);

#endif
