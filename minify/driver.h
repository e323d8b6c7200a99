/* The minifier's state shared by its driver (minify.c) and its strategies (strategies.c). */
#ifndef MIN_DRIVER_H
#define MIN_DRIVER_H
#include "cache/hash.h"
#include "candidate.h"
#include "minify.h"

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
