/* What the cpu executable (executable.c) calls besides the plan: the passes it runs after
 * hlo/'s, the serialized form, binding to other sizes, and its own counters, each under the
 * file that defines it. Nothing outside the backend includes this but the tests. */
#ifndef RT_CPU_EXEC_INTERNAL_H
#define RT_CPU_EXEC_INTERNAL_H
#include "plan_internal.h"

/* The passes the cpu backend runs after hlo/'s (executable.c), which the reference evaluator
 * does not: rewrites that are exact only up to rounding, and pay only with the cpu backend's
 * kernels and kept work. */

/* (pass_dot_repeat.c) Rewrites dot(L, W), L [M, K] made by reshapes and concatenations or
 * broadcasts that repeat the values of a V [M, ...] along K, as dot(V, W summed over the
 * repeats): the weight is read once by a reduce instead of multiplied J times by equal values.
 * Not exact (each group of W's rows is summed before the products): for backends that accept
 * reassociated sums. Returns the number of dots rewritten. */
int rt_cpu_pass_dot_of_repeats(hlo_module *module);

/* (pass_fold_affine.c) Folds a chain of per-channel adds, subtracts, multiplies and divides
 * after a convolution whose weight is a parameter (batch norm in inference form) into the
 * convolution: its weight scaled per output feature, then one per-channel add. Not exact (the
 * scale is applied before the sums): for backends that accept reassociated products. Returns
 * the number of convolutions folded into. */
int rt_cpu_pass_fold_affine(hlo_module *module);

/* (pass_space_to_depth.c) Rewrites a convolution with strides of 3 or more over few input
 * features (alexnet's 11x11 stride-4 stem over 3) as a stride-1 convolution over the input's
 * space-to-depth blocks, the kernel padded with zeros and cut the same way. Not exact (the
 * sums include the zeros and run in another order): for backends that accept reassociated
 * sums. Returns the number of convolutions rewritten. */
int rt_cpu_pass_space_to_depth(hlo_module *module);

/* (pass_input_grad.c) Folds a reverse of a convolution's kernel spatial dims into the
 * window's reversal where the convolution then runs on oneDNN's backward-data primitive (an
 * input gradient as XLA writes it). Exact. Returns the number of convolutions rewritten. */
int rt_cpu_pass_input_grad(hlo_module *module);

/* (mark_choices.c) Asks hlo_choice about each f32 product's library (onednn_product) and each
 * oneDNN convolution's and concatenation's trust in known-finite inputs (known_finite), and
 * marks the refused ones with raw attributes the kernels read (kernel_internal.h). */
void rt_cpu_mark_choices(hlo_module *module);

/* (serialize.c, deserialize.c) The executable's serialized form: the module after the
 * passes, the plan with every decision in it (steps, kernels, buffers, fused programs, oneDNN
 * descriptions with their layouts) and the module before the passes, encoded (what bind
 * compares bindings with; NULL when there is none), in a versioned, checksummed binary format
 * (serialize.c's header). Loading runs no pass and no planning: kernels are looked up again
 * by the family recorded for each step, and oneDNN's primitives, which oneDNN 2.6 cannot
 * serialize, are made from their descriptions at the first execute (primitives_pending). */
hlo_status rt_cpu_serialize(const hlo_module *module, const rt_cpu_plan *plan, const char *source, size_t source_len,
                            void **bytes, size_t *len, hlo_diag *diag);
/* On success *module and *plan are new (the plan's steps point into the module), and
 * *source is where the source module's encoding lies in bytes (*source_len bytes; the
 * optimized module's follow), or NULL: the caller copies it or keeps bytes, and decodes it
 * when it binds (rt_cpu_decode_module). A truncated, damaged or foreign blob is
 * HLO_ERR_INPUT naming what could not be read. */
hlo_status rt_cpu_deserialize(const void *bytes, size_t len, hlo_module **module, rt_cpu_plan **plan,
                              const char **source, size_t *source_len, hlo_diag *diag);
/* (serialize.c, deserialize_module.c) A module with its instructions' origins, in the
 * same encoding: print(decode(encode(m))) == print(m); with live_only, only the
 * computations the entry calls, directly or not (an executable's module after the passes
 * keeps the bodies it inlined, which never run). */
void rt_cpu_encode_module(hlo_strbuf *out, const hlo_module *module, bool live_only);
struct rt_blob_in;
hlo_module *rt_cpu_decode_module(struct rt_blob_in *in);
/* (deserialize.c) The oneDNN primitives of a deserialized plan's DNNL steps (dnnl_conv.c
 * per step); HLO_ERR_INTERNAL when oneDNN no longer takes a description. for_child: in a
 * forked child, whose plans' primitives (if made) are its parent's, made for a team of the
 * parent's threads that libgomp cannot start there: each made again for the child's. */
hlo_status rt_cpu_plan_make_primitives(rt_cpu_plan *plan, bool for_child, hlo_diag *diag);

/* (bind.c) The optimized module of a compile of source, rebuilt for binding:
 * source at other sizes. Its entry is its own; its other computations are optimized's, which
 * must outlive it; free it with rt_cpu_bound_module_free. NULL with diag (HLO_ERR_UNSUPPORTED
 * and why) when the compile's decisions cannot be shown to hold at the binding's sizes. */
hlo_module *rt_cpu_bind_module(const hlo_module *source, const hlo_module *optimized, const hlo_module *binding,
                               hlo_diag *diag);
void rt_cpu_bound_module_free(hlo_module *bound);
/* Whether b is a at other sizes: the same computations, instruction counts, opcodes,
 * operands and attributes but sizes (what bind checks of the graph it binds). Two optimized
 * modules alike so are one family: instruction i is the same operation in both. */
bool rt_cpu_same_graph(const hlo_module *a, const hlo_module *b);

/* executable.c */
/* Kept steps skipped so far, process-wide (for tests). */
int64_t rt_cpu_kept_reuse_count(void);
/* Kept steps computed so far (a first run, or new contents of what they read), process-wide
 * (for tests). */
int64_t rt_cpu_kept_made_count(void);
/* Allocations made by cpu executes so far, process-wide: fresh arenas, the entry's results,
 * values of the reference path and tuples (a reference kernel counts once, whatever it
 * allocates inside). For tests. */
int64_t rt_cpu_allocation_count(void);

#endif
