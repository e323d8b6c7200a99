/* The verifier: a module's structure is sound and every instruction's declared shape is
 * the one its operands and attributes give. */
#ifndef HLO_VERIFY_H
#define HLO_VERIFY_H
#include "ir.h"

/* Checks the module: an entry exists, every computation has a root, parameter numbers are
 * 0..n-1, operands live in the same computation and come before their users, computations
 * are called only by later ones (so never recursively), instruction names are unique per
 * computation, called computations take and return what their caller passes and expects,
 * and each instruction's declared shape equals its inferred shape (layouts ignored).
 * Computations the entry never reaches are checked with XLA's importer's leniency
 * (HLO_INFER_IMPORTER). Errors name the computation and the instruction. */
hlo_status hlo_verify_module(const hlo_module *module, hlo_diag *diag);

/* The checks on one instruction's called computations: a reducer takes 2N scalars of the
 * init types and returns N of them, a while condition takes the loop state and returns
 * pred[], a call's parameters match its operands, and so on. flags as in infer.h. Call it
 * after hlo_infer_shape accepted instr: it relies on the operand counts being right. */
hlo_status hlo_verify_calls(const hlo_instr *instr, unsigned flags, hlo_diag *diag);

/* The last of hlo_verify_module's checks on one computation alone: each instruction's
 * declared shape is its inferred shape, and its called computations fit it. For a
 * computation whose links are already known sound but whose shapes were rewritten (a cpu
 * executable bound to other sizes shares called computations with another module). */
hlo_status hlo_verify_shapes(const hlo_comp *comp, hlo_diag *diag);
/* The same for the instructions i with only[i] set (only NULL: all): a bound executable's
 * instructions whose shape, operand shapes and slice bounds are the compiled ones' infer
 * as they did at compile time. */
hlo_status hlo_verify_some_shapes(const hlo_comp *comp, const bool *only, hlo_diag *diag);

#endif
