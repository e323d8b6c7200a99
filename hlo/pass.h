/* Graph-rewriting passes over a module: dead-code elimination, common-subexpression
 * elimination, algebraic simplification. Each keeps the module valid (verifiable, printable)
 * and returns how many rewrites it made, so a driver can run them to a fixed point and tests
 * can see what happened. Rewrites never change a computation's parameters or result shape. */
#ifndef HLO_PASS_H
#define HLO_PASS_H
#include "ir.h"

/* Removes instructions the root does not depend on (parameters stay: they are the
 * computation's signature). Returns the number removed. */
int hlo_pass_dce(hlo_module *module);
/* Makes later instructions equal to an earlier one (same opcode, shape, operands and
 * attributes) use the earlier one; the duplicates are left dead for DCE. Instructions with
 * effects or randomness (rng, custom-call, infeed, collectives, ...) are never merged.
 * Returns the number of instructions replaced. */
int hlo_pass_cse(hlo_module *module);
/* Rewrites exact identities: x*1, x+0 and x-0 for integers, convert to the same type,
 * no-op reshape/broadcast/transpose/slice, reshape of reshape, transpose of transpose,
 * a transpose that moves only size-1 dims -> reshape, and folds scalar arithmetic on constants. Returns the number of rewrites. */
int hlo_pass_simplify(hlo_module *module);
/* A transpose that moves only size-1 dims (the others keep their order), with default
 * layouts: the same bytes in the same order, a reshape. simplify makes it one; binding a
 * compiled graph to other sizes must check that it still is one. */
bool hlo_transpose_is_bitcast(const hlo_instr *transpose);
/* Replaces each call by a copy of its computation's instructions, parameters mapped to the
 * call's operands (the called computation itself stays; DCE leaves the dead call). Backends
 * then run the callee's ops with their own kernels: the cpu backend ran calls, such as the
 * capture layer's layer_norm and softmax composites, op by op on the reference evaluator.
 * Returns the number of calls inlined. */
int hlo_pass_inline_calls(hlo_module *module);
/* inline_calls once, then simplify, cse, dce until nothing changes (bounded). Returns the
 * total rewrites. */
int hlo_pass_run_all(hlo_module *module);

/* Rewrites dot(L, W), L [M, K] made by reshapes and concatenations or broadcasts that
 * repeat the values of a V [M, ...] along K, as dot(V, W summed over the repeats): the
 * weight is read once by a reduce instead of multiplied J times by equal values. Not
 * exact (each group of W's rows is summed before the products): for backends that accept
 * reassociated sums. Returns the number of dots rewritten. */
int hlo_pass_dot_of_repeats(hlo_module *module);

/* Points every use of from (operands of comp's instructions, and the root) at to. */
void hlo_replace_uses(hlo_comp *comp, hlo_instr *from, hlo_instr *to);

#endif
