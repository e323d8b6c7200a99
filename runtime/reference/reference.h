/* runtime/reference/: the reference evaluator (one plain kernel per HLO op, exact semantics,
 * an fp64 mode), the reference backend and the accuracy check against it. The layer's one
 * header; the cpu backend uses its kernels as its fallback. Uses runtime/ and hlo/.
 * Declarations sit under the file that defines them. */
#ifndef RT_REFERENCE_H
#define RT_REFERENCE_H
#include <stdbool.h>

#include "hlo/hlo.h"
#include "runtime/runtime.h"

/* ---- eval.c ---- */
/* The reference evaluator: runs a module op by op with XLA's semantics, in the declared
 * element types, or in fp64 mode where every floating-point value is computed in f64. */

typedef struct rt_eval_options {
  bool fp64; /* floats are stored and computed as f64; results come back as f64 */
  /* When set, called with each entry-computation instruction's value (borrowed) right after
   * it is computed; the minifier keeps the ones it promotes to parameters or constants. */
  void (*observe)(void *context, const hlo_instr *instr, rt_value *value);
  void *observe_context;
  /* The world the module's replicas and partitions run across (borrowed); NULL: one device. */
  rt_comm *comm;
} rt_eval_options;

/* Runs module's entry computation. args are in the declared parameter types (in fp64 mode
 * floats may also be passed as f64). On success *result holds a new reference. */
hlo_status rt_evaluate(const hlo_module *module, rt_value *const *args, int arg_count,
                       const rt_eval_options *options, rt_value **result, hlo_diag *diag);

/* State of one evaluation, passed to every kernel. */
typedef struct rt_eval {
  const rt_eval_options *options;
  hlo_diag *diag;
  int call_depth;
} rt_eval;

/* Evaluates a computation on arguments (borrowed); *result is a new reference. */
hlo_status rt_eval_comp(rt_eval *eval, const hlo_comp *comp, rt_value *const *args, int arg_count,
                        rt_value **result);

/* The type values of a declared type are stored in: f64 for floats in fp64 mode. */
hlo_dtype rt_storage_dtype(const rt_eval *eval, hlo_dtype declared);
/* A zeroed output for an instruction's declared (array) shape in its storage type; NULL
 * with an error in eval->diag when the type is not computable or memory runs out. */
rt_value *rt_new_output(rt_eval *eval, const hlo_instr *instr, const hlo_shape *declared);
/* Converts a value to the storage type for declared (a no-op reference when equal). */
rt_value *rt_to_storage(rt_eval *eval, rt_value *value, hlo_dtype declared);

/* Sets eval->diag to "OPCODE %NAME: message" and returns code: how kernels report errors. */
hlo_status rt_kernel_fail(rt_eval *eval, const hlo_instr *instr, hlo_status code, const char *format, ...)
    __attribute__((format(printf, 4, 5)));

/* A kernel computes one instruction from its operands' values (borrowed) into a new value. */
typedef hlo_status (*rt_kernel)(rt_eval *eval, const hlo_instr *instr, rt_value *const *args,
                                rt_value **out);
/* The kernel the evaluator runs for opcode: rt_array_kernel's, or control flow (call,
 * while, conditional), tuples, forwarding ops and tokens; NULL for an opcode it cannot run. */
rt_kernel rt_eval_kernel(hlo_opcode opcode);

/* ---- kernels_*.c ---- */
/* The reference evaluator's kernels, one group per file. Each has the rt_kernel signature:
 * operands are borrowed, *out receives a new value; errors go to eval->diag and name the
 * instruction. */

#define RT_KERNEL(name) \
  hlo_status name(rt_eval *eval, const hlo_instr *instr, rt_value *const *args, rt_value **out)

/* (eval.c) The kernel computing opcode from its operands' values alone (every op but control
 * flow, tuples, forwarding ops and tokens), or NULL: the table the reference evaluator and
 * the cpu backend's fallback share. */
rt_kernel rt_array_kernel(hlo_opcode opcode);

/* kernels_elementwise.c: every elementwise unary and binary op, compare, select, clamp, map */
RT_KERNEL(rt_kernel_unary);
RT_KERNEL(rt_kernel_binary);
RT_KERNEL(rt_kernel_compare);
RT_KERNEL(rt_kernel_select);
RT_KERNEL(rt_kernel_clamp);
RT_KERNEL(rt_kernel_map);
/* Element index of value as an integer whose order is XLA's total order of floats
 * (-NaN < -Inf < ... < -0 < +0 < ... < +Inf < +NaN), read from the storage bits; an
 * integer's own value for other types. What compare's TOTALORDER and sort use. */
int64_t rt_total_order_key(const rt_value *value, int64_t index);

/* kernels_convert.c: convert, bitcast-convert, reduce-precision */
RT_KERNEL(rt_kernel_convert);
RT_KERNEL(rt_kernel_bitcast_convert);
RT_KERNEL(rt_kernel_reduce_precision);

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
/* Whether perm (rank entries) is 0, 1, ..., rank - 1: a view through it is the value itself. */
bool rt_perm_is_identity(const int *perm, int rank);
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

/* kernels_reduce.c: reduce */
RT_KERNEL(rt_kernel_reduce);
/* kernels_window.c: reduce-window, select-and-scatter */
RT_KERNEL(rt_kernel_reduce_window);
RT_KERNEL(rt_kernel_select_and_scatter);

/* kernels_reduce.c */
/* What reduce and reduce-window share about their N outputs: output k's declared shape (the
 * k-th tuple element when the result is a tuple); output k made in it and filled with init
 * value args[n + k] (NULL with eval->diag set when it cannot be made or its type differs from
 * input k's); and the simple reducer usable for a single output, else HLO_OP_COUNT (a
 * mistyped reducer also gets HLO_OP_COUNT, so the call reports it). */
const hlo_shape *rt_reduce_declared(const hlo_instr *instr, int k);
/* What both check of their N inputs and N init values (args): a to_apply computation,
 * arrays, inputs of one shape, scalar inits of their input's type, and a result of N arrays
 * (a tuple of them when N > 1). NULL, or what is wrong. */
const char *rt_reduce_check_operands(const hlo_instr *instr, rt_value *const *args, int n);
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

/* kernels_spmd.c: the collectives across the ranks of eval->options->comm, for a module of
 * replica_count * num_partitions devices, one per rank */
RT_KERNEL(rt_kernel_collective_spmd);
/* Whether the module runs on more than one device (replica_count or num_partitions > 1). */
bool rt_module_is_spmd(const hlo_module *module);

/* ---- eval_backend.c ---- */
/* The reference evaluator as a backend: compile keeps a copy of the module; execute runs
 * rt_evaluate in the declared types. */
extern const rt_backend rt_backend_reference;

/* ---- accuracy_check.c ---- */
/* Runs module's reference in the declared types and in fp64 on args, then compares result
 * with them. An error (status with diag) when a reference run fails. */
hlo_status rt_accuracy_check(const hlo_module *module, rt_value *const *args, int arg_count, const rt_value *result,
                             double tol, rt_accuracy_verdict *verdict, hlo_diag *diag);

#endif
