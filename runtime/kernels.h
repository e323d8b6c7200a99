/* The reference evaluator's kernels, one group per file. Each has the rt_kernel signature:
 * operands are borrowed, *out receives a new value; errors go to eval->diag and name the
 * instruction. */
#ifndef RT_KERNELS_H
#define RT_KERNELS_H
#include "eval.h"

#define RT_KERNEL(name) \
  hlo_status name(rt_eval *eval, const hlo_instr *instr, rt_value *const *args, rt_value **out)

/* The kernel computing opcode from its operands' values alone (every op but control flow,
 * tuples, forwarding ops and tokens), or NULL: the table the reference evaluator and the cpu
 * backend's fallback share (eval.c). */
rt_kernel rt_array_kernel(hlo_opcode opcode);

/* kernels_elementwise.c: every elementwise unary and binary op, compare, select, clamp,
 * convert, bitcast-convert, reduce-precision, map */
RT_KERNEL(rt_kernel_unary);
RT_KERNEL(rt_kernel_binary);
RT_KERNEL(rt_kernel_compare);
RT_KERNEL(rt_kernel_select);
RT_KERNEL(rt_kernel_clamp);
RT_KERNEL(rt_kernel_convert);
RT_KERNEL(rt_kernel_bitcast_convert);
RT_KERNEL(rt_kernel_reduce_precision);
RT_KERNEL(rt_kernel_map);

/* kernels_layout.c: data movement */
RT_KERNEL(rt_kernel_broadcast);
RT_KERNEL(rt_kernel_reshape); /* reshape, and bitcast between default layouts */
RT_KERNEL(rt_kernel_transpose);
RT_KERNEL(rt_kernel_slice);
RT_KERNEL(rt_kernel_dynamic_slice);
RT_KERNEL(rt_kernel_dynamic_update_slice);
RT_KERNEL(rt_kernel_concatenate);
RT_KERNEL(rt_kernel_pad);
RT_KERNEL(rt_kernel_reverse);
RT_KERNEL(rt_kernel_iota);

/* kernels_dot.c, kernels_conv.c */
RT_KERNEL(rt_kernel_dot);
RT_KERNEL(rt_kernel_convolution);

/* What dot and convolution share (kernels_dot.c). Both compute in a work type picked from the
 * result's storage type: f64, f32 (for f32, f16 and bf16), or s64 for integers and pred
 * (wrapping unsigned arithmetic, truncated to the result's width when stored). */
hlo_dtype rt_work_dtype(hlo_dtype storage);
/* value as a dense work-type array whose dimension j is value's dimension perm[j]: value's
 * own data when it already is that (*owned NULL), else a copy in *owned for the caller to
 * free. NULL when out of memory. */
const void *rt_work_view(const rt_value *value, const int *perm, hlo_dtype work, void **owned);
/* Whether rt_work_view of a value of this shape copies; if so, rt_work_view_into writes the
 * copy into space (hlo_shape_elements(shape) work-type elements) instead of a new
 * allocation, so a caller with planned memory allocates nothing. */
bool rt_work_view_copies(const hlo_shape *shape, const int *perm, hlo_dtype work);
const void *rt_work_view_into(const rt_value *value, const int *perm, hlo_dtype work, void *space);
/* The inverse: stores a dense work-type array whose dimension j is out's dimension perm[j]. */
void rt_work_store(rt_value *out, const int *perm, const void *data, hlo_dtype work);
/* A float matrix product through packed operands (work f32 or f64): A (m x k) is packed by
 * rows, B is passed as panels of RT_GEMM_COLS columns stored k-major (panel[q * COLS + j]),
 * and each call computes the first `cols` columns of C = A x panel (row stride ldc), or with
 * `accumulate` goes on summing into C: splitting k into pieces then gives the same sums. */
enum { RT_GEMM_COLS = 8 };
void rt_gemm_pack_rows(hlo_dtype work, const void *a, int64_t m, int64_t k, int64_t row_stride,
                       void *packed);
void rt_gemm_panel(hlo_dtype work, const void *packed, int64_t m, int64_t k, const void *panel,
                   int cols, void *c, int64_t ldc, bool accumulate);

/* kernels_reduce.c: reduce; kernels_window.c: reduce-window, select-and-scatter */
RT_KERNEL(rt_kernel_reduce);
RT_KERNEL(rt_kernel_reduce_window);
RT_KERNEL(rt_kernel_select_and_scatter);

/* What the three share (kernels_reduce.c). The opcode of a computation whose root is one
 * add, multiply, maximum, minimum, and or or of its two scalar parameters, so it can run
 * without a call per element; HLO_OP_COUNT for any other computation. */
hlo_opcode rt_simple_reducer(const hlo_comp *comp);
/* What reduce and reduce-window share about their N outputs: output k's declared shape (the
 * k-th tuple element when the result is a tuple); output k made in it and filled with init
 * value args[n + k] (NULL with eval->diag set when it cannot be made or its type differs from
 * input k's); and the simple reducer usable for a single output, else HLO_OP_COUNT (a
 * mistyped reducer also gets HLO_OP_COUNT, so the call reports it). */
const hlo_shape *rt_reduce_declared(const hlo_instr *instr, int k);
rt_value *rt_reduce_output(rt_eval *eval, const hlo_instr *instr, rt_value *const *args, int n, int k);
hlo_opcode rt_fast_reducer(rt_eval *eval, const hlo_instr *instr, int n, const rt_value *output);
/* acc[a] = op(acc[a], x[b]) for such an opcode, in acc's storage type (x has the same type),
 * with the elementwise kernels' semantics. */
void rt_reduce_step(hlo_opcode op, rt_value *acc, int64_t a, const rt_value *x, int64_t b);
/* Calls comp on scalars: element indices[k] of values[k], k < count. scratch holds count
 * reusable scalars (start them NULL, release them when done); *result is a new reference. */
hlo_status rt_call_on_scalars(rt_eval *eval, const hlo_comp *comp, rt_value **scratch,
                              const rt_value *const *values, const int64_t *indices, int count,
                              rt_value **result);

/* kernels_gather.c */
RT_KERNEL(rt_kernel_gather);
RT_KERNEL(rt_kernel_scatter);

/* kernels_sort.c, kernels_batchnorm.c, kernels_rng.c */
RT_KERNEL(rt_kernel_sort);
RT_KERNEL(rt_kernel_batch_norm_inference);
RT_KERNEL(rt_kernel_batch_norm_training);
RT_KERNEL(rt_kernel_batch_norm_grad);
RT_KERNEL(rt_kernel_rng_bit_generator);
RT_KERNEL(rt_kernel_rng);

/* kernels_collective.c: collectives with a single replica, replica-id, partition-id */
RT_KERNEL(rt_kernel_collective);

#endif
