/* Traced functions' cache entries (function.c, entry.c). One entry is what one trace left:
 * its guard program, the graph's executable, where each graph parameter comes from on a
 * later call, where each output and in-place update goes, and, for a trace with symbolic
 * dims, the graph as a template whose dims are expressions over the guard symbols. */
#ifndef CAP_FUNCTION_H
#define CAP_FUNCTION_H
#include <pthread.h>

#include "cap.h"
#include "guards/program.h"
#include "trace.h"

/* Where a graph parameter or a function output comes from on a call. */
typedef enum cap_src_kind {
  CAP_SRC_INPUT,    /* index: the call's input */
  CAP_SRC_CAPTURED, /* index: the entry's captured handle (a weight) */
  CAP_SRC_CONST,    /* node: data the function made itself, kept */
  CAP_SRC_SEED,     /* the call's random seed */
  CAP_SRC_ROOT,     /* outputs only; index: a graph output */
} cap_src_kind;

typedef struct cap_src {
  cap_src_kind kind;
  int index;
  cap_node *node; /* CONST: retained */
} cap_src;

typedef struct cap_entry_captured {
  latch_tensor *handle; /* retained */
  uint8_t dtype, rank;  /* checked on every call: a weight replaced by another shape misses */
  int64_t dims[HLO_MAX_RANK];
  /* Its relation to the inputs in the trace, checked on every call (a weight also passed
   * as an input reads and writes that input's buffer): the input it was passed as (the
   * same handle), and the first input holding its data (the same node); -1: none. */
  int passed_as, shares_data_with;
} cap_entry_captured;

typedef struct cap_tmpl_node {
  uint16_t op, sub;
  uint8_t dtype, rank;
  int operand_count, attr_count;
  int *operands;    /* >= 0: an earlier template node; < 0: parameter -1 - operand */
  int64_t *attrs;
  double scalar[2];
  guard_expr *dims; /* rank expressions over the entry's symbols */
  guard_expr *attr_exprs; /* a slice's attrs when its start or stop is symbolic, else NULL */
} cap_tmpl_node;

/* What runs one binding of a symbolic entry other than the trace's own: the entry's
 * executable bound to it (backends with bind; it shares the entry's executable, so it is
 * destroyed first), the binding's module itself (backends with execute_module), or else a
 * compiled specialization. */
typedef struct cap_spec {
  int64_t *bindings;
  cache_entry *cached;
  hlo_module *module;
  rt_executable *bound;
  const rt_backend *bound_by; /* the backend whose executable bound is */
} cap_spec;

typedef struct cap_entry {
  guard_program *program;
  int symbol_count;
  int64_t *hint_bindings;        /* the symbols' values in the trace */
  cache_entry *cached;           /* the executable for hint_bindings (NULL: no graph) */
  int param_count, root_count, output_count, alias_count, captured_count, input_count;
  cap_src *params, *outputs;
  struct { int root; cap_src target; } *aliases; /* target: INPUT or CAPTURED */
  cap_entry_captured *captured;
  /* Per input, the first input in the trace holding the same data (node) and the first
   * passed as the same handle: input i itself when none before it. */
  int *same_data_as, *same_handle_as;
  /* The inputs' dtypes, ranks and dims in the trace (the automatic shape policy compares
   * a missing call against them). */
  uint8_t *dtypes, *ranks;
  int64_t (*dims)[HLO_MAX_RANK];
  /* Symbolic entries only. */
  int node_count;
  cap_tmpl_node *nodes;
  int *roots;
  pthread_mutex_t spec_lock;
  cap_spec *specs;
  int spec_count, spec_capacity;
} cap_entry;

/* (entry.c) Builds the entry for a finished trace whose outputs are outputs[] and whose
 * in-place updates are on the trace's inputs and captured handles. Leaves the graph's
 * parameter nodes for the first run in *first_params (malloc'd). NULL with the error set. */
cap_entry *cap_entry_build(cap_trace *trace, latch_tensor *const *outputs, int output_count,
                           cap_node ***first_params, bool *compiled, latch_status *status);
void cap_entry_free(latch_runtime *rt, cap_entry *entry);
/* Whether the call's inputs pass the entry (guards, captured shapes, and how inputs and
 * weights share tensors). */
bool cap_entry_check(const cap_entry *entry, const guard_tensor *inputs, latch_tensor *const *handles, int input_count,
                     const guard_static *statics, int static_count, int64_t *bindings, guard_failure *why);
/* What a call of an entry did beyond running it. */
typedef enum cap_run_kind {
  CAP_RUN_PLAIN,        /* the trace's executable, or one made for this binding before */
  CAP_RUN_SPECIALIZED,  /* a new binding: a backend compile of the instantiated template */
  CAP_RUN_INSTANTIATED, /* a new binding: the template's module built, run or bound without compiling */
} cap_run_kind;

/* Runs the entry on a call. params: the parameter nodes to use (the trace's first run), or
 * NULL to take them from the sources. */
latch_status cap_entry_run(latch_runtime *rt, cap_entry *entry, latch_tensor *const *inputs, uint64_t seed,
                           const int64_t *bindings, cap_node *const *params, latch_tensor **outputs,
                           cap_run_kind *kind, uint64_t *instantiate_ns);
cap_node *cap_seed_node(uint64_t seed); /* random.c */
/* Whether LATCH_LOG's comma-separated list names word ("recompiles", "guards"). */
bool cap_log_has(const char *word);

#endif
