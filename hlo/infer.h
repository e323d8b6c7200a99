/* Shape inference: the shape an instruction must have, computed from its operands' shapes,
 * its attributes and its called computations, following XLA's operation semantics. */
#ifndef HLO_INFER_H
#define HLO_INFER_H
#include <stdbool.h>

#include "ir.h"

enum {
  /* Also accept what XLA's MLIR importer accepts although XLA's verifier does not: a
   * convolution window whose sizes differ from the kernel's spatial dims, a reduce whose init
   * values are not scalars, called computations that return a one-element tuple instead of a
   * scalar. The verifier uses it only for computations the entry never reaches. */
  HLO_INFER_IMPORTER = 1u << 0,
};

/* Fills *out with the result shape of instr (default layout, tuple elements in arena).
 * Ops whose result cannot be derived (parameter, constant, iota, rng, custom-call, infeed,
 * recv, async ops, ...) give their declared instr->shape. Ops whose result element type
 * is chosen by the instruction (convert, bitcast-convert, dot and convolution's preferred
 * type) and ops whose result dims are chosen by it (broadcast, reshape) read those from
 * instr->shape. Errors name the opcode, the instruction, the mismatch and the operand
 * shapes. */
hlo_status hlo_infer_shape(const hlo_instr *instr, hlo_shape *out, hlo_arena *arena,
                           hlo_diag *diag);
hlo_status hlo_infer_shape_flags(const hlo_instr *instr, unsigned flags, hlo_shape *out,
                                 hlo_arena *arena, hlo_diag *diag);

/* Same element type and dims, layouts ignored, recursively for tuples; an unbounded dim (?)
 * matches any size and a bounded dim compares by its bound. */
bool hlo_shape_compatible(const hlo_shape *a, const hlo_shape *b);

/* The number of window positions along one dim of size base (after base dilation and
 * padding); false when the window's fields are invalid (size, stride or dilation < 1). */
bool hlo_window_output_size(int64_t base, const hlo_window_dim *dim, int64_t *out);

/* Appends " (lhs f32[2,3], rhs f32[4,5])": each operand's role and shape, for messages. */
void hlo_describe_operands(const hlo_instr *instr, hlo_strbuf *sb);

/* The size of one replica group from the raw replica_groups attribute ({{0,1},{2,3}} or
 * the iota form [2,64]<=[128]); 0 when it is absent, empty or not understood. */
int64_t hlo_replica_group_size(const hlo_instr *instr);

#endif
