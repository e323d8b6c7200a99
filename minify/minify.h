/* The minifier: shrinks a module that fails a check (a compile error, an accuracy failure,
 * a crash or hang of the backend, or an external test command) to a small module that fails
 * the same way, with inputs, and writes it as a repro directory.
 *
 * Strategies, each repeated until it no longer shrinks the graph, all of them again until
 * none does:
 *   dce       dead-code elimination and removal of unused parameters (applied to every
 *             candidate as well; checked alone once, since a dead op can be the culprit)
 *   truncate  binary search for the shortest failing prefix of the entry's instructions,
 *             every value the prefix leaves unused becoming an output (as hlo_bisect)
 *   outputs   removal of outputs (root tuple elements): the last alone, then halves,
 *             quarters, ... one at a time
 *   promote   delta debugging: a chunk of instructions becomes parameters fed with their
 *             reference values, so what only fed the chunk dies; chunks from all of them
 *             at once down to one at a time
 *   constant  the same with constants holding the reference values (small values only)
 * Every candidate is checked in a child process with a time limit (check.h) and memoized by
 * its canonical hash (cache_hash_module); the final repro is checked again several times. */
#ifndef MIN_MINIFY_H
#define MIN_MINIFY_H
#include <stdio.h>

#include "check.h"

typedef enum min_strategy { MIN_DCE, MIN_TRUNCATE, MIN_OUTPUTS, MIN_PROMOTE, MIN_CONSTANT, MIN_STRATEGY_COUNT } min_strategy;

const char *min_strategy_name(min_strategy strategy);

typedef struct min_options {
  min_predicate predicate;
  int rechecks;   /* times the final repro is checked again; 0 means 3 */
  int max_checks; /* stop shrinking after this many checks; 0 means no limit */
  FILE *progress; /* one line per check and per accepted step, or NULL for silence */
} min_options;

typedef struct min_report {
  /* The repro: module and its inputs (one reference each). */
  hlo_module *module;
  rt_value **inputs;
  int input_count;
  min_outcome failure; /* the original module's failure */
  int instrs_before, instrs_after; /* entry computation instructions */
  int ops_before, ops_after;       /* of those, neither parameters nor constants */
  int checks;                      /* child processes run, rechecks included */
  int memo_hits;                   /* candidates answered from the memo table */
  int wins[MIN_STRATEGY_COUNT];    /* accepted steps per strategy */
  int rechecks, reproduced;        /* final checks run, and how many failed the same way */
  bool flaky;                      /* reproduced < rechecks */
  double seconds;
} min_report;

/* Minifies module, run on inputs (in the parameters' declared types, one per parameter).
 * HLO_ERR_INPUT when the module does not fail the check at all (report->failure says how
 * it came out); other errors when the minifier itself cannot go on. On success report owns
 * the repro; free it with min_report_free. */
hlo_status min_minify(const hlo_module *module, rt_value *const *inputs, int input_count, const min_options *options,
                      min_report *report, hlo_diag *diag);
void min_report_free(min_report *report);

#endif
