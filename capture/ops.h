/* Helpers shared by the files that trace ops (ops_*.c). */
#ifndef CAP_OPS_H
#define CAP_OPS_H
#include "cap.h"

/* A PENDING node of the given result type and dims over the operands' nodes; NULL when
 * memory runs out. */
cap_node *cap_node_like(cap_op op, int sub, int count, latch_tensor *const *operands, int attrs, hlo_dtype dtype,
                        int rank, const int64_t *dims);
/* Hashes node and wraps it (NULL: the out-of-memory error tensor). */
latch_tensor *cap_traced(latch_runtime *rt, cap_node *node);
/* "f32[2,3]" for messages. */
const char *cap_shape_text(const latch_tensor *t, char *buffer, int size);

#endif
