/* Tracing the collectives of latch.h: latch_all_reduce, a graph op over every rank of the
 * runtime's world (latch_options.mpi), latch_world and latch_world_leave. The node keeps the world's size, so
 * its hash (and every graph key above it) differs between worlds of different sizes;
 * lower.c makes it an HLO all-reduce over every replica of a module of that many replicas,
 * which the runtime's collective kernels carry through MPI when the graph runs. */
#include "capture.h"

void latch_world(latch_runtime *rt, int *rank, int *size) {
  bool world = rt && rt->comm;
  if (rank) *rank = world ? rt_comm_rank(rt->comm) : 0;
  if (size) *size = world ? rt_comm_size(rt->comm) : 1;
}

void latch_world_leave(latch_runtime *rt) {
  if (rt) rt_comm_leave(rt->comm);
}

latch_tensor *latch_all_reduce(latch_tensor *x, latch_reduce_op op) {
  latch_tensor *bad = cap_poisoned("all_reduce", 1, &x);
  if (bad) return bad;
  char s[128];
  hlo_dtype dtype = (hlo_dtype)x->node->dtype;
  if (op < LATCH_SUM || op > LATCH_RMIN || dtype == HLO_PRED || (op == LATCH_MEAN && !hlo_dtype_is_float(dtype)))
    return cap_error(x->rt, "all_reduce: op %d of %s: sum, max and min take numbers, mean floating point", (int)op,
                     cap_shape_text(x, s, sizeof s));
  int size = 1;
  latch_world(x->rt, NULL, &size);
  if (size == 1) return latch_retain(x); /* the reduction over one rank */
  cap_node *node = cap_node_like(CAP_ALL_REDUCE, (int)op, 1, &x, 1, dtype, x->node->rank, x->node->dims);
  if (node) node->attrs[0] = size;
  return cap_traced(x->rt, node);
}
