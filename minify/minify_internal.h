/* Shared by minify/'s files only: candidates, recorded reference values, the driver's
 * state. */
#ifndef MIN_MINIFY_INTERNAL_H
#define MIN_MINIFY_INTERNAL_H
#include <stdbool.h>

#include "hlo/hlo.h"
#include "runtime/runtime.h"
#include "cache/cache.h"
#include "minify.h"

/* ---- candidate.c ---- */
/* Candidates: a plan says, for each instruction of the entry computation, whether it stays,
 * becomes a parameter or becomes a constant (fed with its reference value), and which
 * instructions are the outputs; building it gives a new module with dead code, unused
 * parameters and unused computations removed, and the inputs that go with it. */

typedef enum min_disp { MIN_KEEP = 0, MIN_TO_PARAM, MIN_TO_CONST } min_disp;

typedef struct min_plan {
  min_disp *disp;     /* one per entry instruction, by id */
  const int *outputs; /* entry instruction ids; NULL keeps the current root */
  int output_count;   /* one output is the root itself, several a tuple of them */
} min_plan;

/* live[i]: whether entry instruction i is in the candidate (reachable from its outputs,
 * where a parameter or constant no longer reaches its operands). */
void min_plan_live(const hlo_module *module, const min_plan *plan, bool *live);

/* Builds the candidate. values[i] must hold the reference value of every live instruction
 * the plan turns into a parameter or constant. New parameters come after the kept ones, in
 * instruction order. NULL with diag when the plan gives an invalid module. */
hlo_module *min_build(const hlo_module *module, rt_value *const *inputs, rt_value *const *values,
                      const min_plan *plan, rt_value ***new_inputs, int *new_input_count, hlo_diag *diag);

/* Entry instructions that are neither parameters nor constants. */
int min_count_ops(const hlo_module *module);

/* ---- values.c ---- */
/* Reference values of a module's entry instructions, computed by the reference evaluator in
 * the declared types: what promoted parameters and constants are fed with. */

/* Runs module on inputs and stores into values[id] (a new reference) the value of every
 * entry instruction with want[id] whose slot is still NULL, plus, while they fit in
 * budget_bytes, the others' (so later requests on the same module cost no new run). */
hlo_status min_values_compute(const hlo_module *module, rt_value *const *inputs, int input_count, const bool *want,
                              rt_value **values, double budget_bytes, hlo_diag *diag);

/* ---- minify.c, strategies.c ---- */
/* The minifier's state shared by its driver (minify.c) and its strategies (strategies.c). */

typedef struct min_memo_entry {
  cache_key key;
  bool failing;
} min_memo_entry;

typedef struct min_ctx {
  const min_options *options;
  min_report *report;
  /* The current smallest failing module, its inputs, and reference values of its entry
   * instructions computed so far (NULL where not yet). */
  hlo_module *module;
  rt_value **inputs;
  int input_count;
  rt_value **values;
  bool values_failed; /* the reference evaluator cannot run this module: no promotions */
  cache_key key;
  min_memo_entry *memo;
  int memo_count, memo_capacity;
  double start;
  hlo_diag *diag;
  hlo_status error; /* a failure of the minifier itself: stop */
} min_ctx;

/* Builds the plan's candidate and checks it (memoized); when it fails the same way and is
 * smaller (fewer ops, or as many ops and fewer instructions), it becomes the current module
 * and the result is true. */
bool min_try(min_ctx *ctx, const min_plan *plan, min_strategy strategy);
/* Whether the check budget is spent or an error stopped the run. */
bool min_stopped(const min_ctx *ctx);

/* The strategies; each returns whether it shrank the module. */
bool min_strategy_dce(min_ctx *ctx);
bool min_strategy_truncate(min_ctx *ctx);
bool min_strategy_outputs(min_ctx *ctx);
bool min_strategy_promote(min_ctx *ctx, min_disp disp);

#endif
