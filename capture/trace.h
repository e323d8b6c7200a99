/* Trace contexts: what a traced function call collects while the frontend function runs on
 * this thread (see function.c for what is done with it).
 *
 * Symbolic dims live beside the nodes, not in them: node hashes and lowering keep using the
 * concrete sizes of this call (the symbols' hints), and a node made by this trace points at
 * its rank expressions in dims[] through node->trace_sym. A node not made by this trace
 * (an input, a weight, a constant) has the dims of its data, guarded elsewhere. */
#ifndef CAP_TRACE_H
#define CAP_TRACE_H
#include "cap.h"
#include "guards/guard_set.h"

/* A tensor the function reached that was not an input: kept by handle, so the next call
 * reads what the handle holds then (a weight updated in place is seen). */
typedef struct cap_captured {
  latch_tensor *handle; /* retained */
  cap_node *node;       /* what it held when the trace read it (not retained) */
} cap_captured;

typedef struct cap_trace {
  latch_runtime *rt;
  uint32_t id;
  guard_set *guards;
  bool symbolic; /* some input dim is symbolic: infer dims of every new node */
  int input_count;
  /* The function is given handles of its own for its inputs (one per distinct caller
   * handle), so that a caller's handle it reaches another way (a weight also passed as an
   * input) is told apart and guarded. latch_assign on either one is mirrored onto the
   * other: to the function they are one tensor, as in eager mode. */
  latch_tensor **inputs;         /* retained; NULL once dropped */
  latch_tensor *const *callers;  /* the call's own handles */
  cap_node **input_nodes;        /* what each input held when the trace began */
  guard_expr (*input_dims)[HLO_MAX_RANK];
  guard_expr *dims;              /* symbolic dims of the nodes this trace made */
  int dim_count, dim_capacity;
  cap_captured *captured;
  int captured_count, captured_capacity;
  guard_expr *sizes;             /* latch_size table */
  int size_count, size_capacity;
  cap_node *seed;                /* the random ops' seed, a graph input; NULL when none */
  const char *value_read;        /* why this function must be traced every call, or NULL */
  bool failed;                   /* out of memory while tracing: keep no entry */
} cap_trace;

/* (trace.c) Begins a trace on this thread: the inputs' dims static or symbolic as marked
 * (symbolic[i * HLO_MAX_RANK + d], independent[...] likewise; both may be NULL). */
latch_status cap_trace_begin(cap_trace *trace, latch_runtime *rt, int input_count, latch_tensor *const *inputs,
                             const bool *symbolic, const bool *independent);
void cap_trace_end(cap_trace *trace); /* detaches it from the thread */
void cap_trace_drop_inputs(cap_trace *trace); /* releases the function's input handles */
void cap_trace_free(cap_trace *trace);

/* Hooks called by the op and tensor code while a trace is active on this thread. */
void cap_trace_new_node(cap_trace *trace, cap_node *node);       /* a new PENDING node */
void cap_trace_operands(cap_trace *trace, int count, latch_tensor *const *operands);
void cap_trace_assigned(cap_trace *trace, latch_tensor *dst); /* after latch_assign(dst, ...) */
void cap_trace_value_read(cap_trace *trace, const char *what);
void cap_trace_dim_read(cap_trace *trace, const cap_node *node, int dim);
/* The symbolic dims of any node as seen by this trace; its attrs (a slice's start and stop
 * may be symbolic; every other attr is a plain number). */
void cap_trace_node_dims(cap_trace *trace, const cap_node *node, guard_expr *out);
bool cap_trace_node_attrs(cap_trace *trace, const cap_node *node, guard_expr *out); /* false: all plain */

/* The sizes latch_reshape_sized passed to the reshape being traced, or NULL; a size's
 * expression. */
const latch_size *cap_trace_reshape_sizes(void);
const latch_size *cap_trace_slice_sizes(void); /* latch_slice_sized's start and stop */
guard_expr cap_trace_size_expr(cap_trace *trace, latch_size s);

/* (symbolic.c) Infers a new node's symbolic dims from its operands', recording as guards
 * every equality, divisibility and bound the op's shape check relied on. For a slice, out
 * has room for rank + 4 expressions: the dims, then the attrs. */
void cap_symbolic_infer(cap_trace *trace, cap_node *node, guard_expr *out);

#endif
