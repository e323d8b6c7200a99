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
 * instruction order. NULL with diag when the plan gives an invalid module. Shapes only
 * (compile checks): inputs and values may be NULL, and the new inputs are then NULL too;
 * no constants can be made. */
hlo_module *min_build(const hlo_module *module, rt_value *const *inputs, rt_value *const *values,
                      const min_plan *plan, rt_value ***new_inputs, int *new_input_count, hlo_diag *diag);

/* Parameters and constants: what candidates feed ops with. */
bool min_is_leaf(const hlo_instr *instr);
/* Entry instructions that are neither parameters nor constants. */
int min_count_ops(const hlo_module *module);

/* ---- values.c ---- */
/* Reference values of a module's entry instructions, computed by the reference evaluator in
 * the declared types: what promoted parameters and constants are fed with. */

/* Bytes of a value's arrays (a tuple's elements summed); 0 for NULL. */
double min_value_bytes(const rt_value *value);

/* Runs module on inputs and stores into values[id] (a new reference) the value of every
 * entry instruction with want[id] whose slot is still NULL, plus, while they fit in
 * budget_bytes, the others' (so later requests on the same module cost no new run). */
hlo_status min_values_compute(const hlo_module *module, rt_value *const *inputs, int input_count, const bool *want,
                              rt_value **values, double budget_bytes, hlo_diag *diag);

/* ---- record.c ---- */
/* Recorded values of the original run, by instruction name: each entry instruction's value
 * in the declared types and in fp64, as the reference evaluator computed them once (scan.c
 * records them group by group). Candidates keep the names of the instructions they are cut
 * from, so a candidate's promoted inputs and its reference outputs are looked up here
 * instead of being computed again: the accuracy check of a candidate then costs one run of
 * the backend on it, however large the module it came from. */

typedef struct min_record min_record;

min_record *min_record_new(void);
void min_record_free(min_record *record);

/* Stores a new reference to value as name's declared (fp64 false) or fp64 value; an existing
 * one is kept. False when memory runs out. */
bool min_record_put(min_record *record, const char *name, bool fp64, rt_value *value);
/* name's value, borrowed; NULL when not recorded. */
rt_value *min_record_get(const min_record *record, const char *name, bool fp64);
/* Forgets name's values (no longer needed). */
void min_record_drop(min_record *record, const char *name);
/* Bytes the recorded values hold. */
double min_record_bytes(const min_record *record);

/* The module's reference outputs from the record: the root's values, a tuple root built from
 * its elements' (new tuples, which share the elements). False when one is missing (the
 * caller then lets the check compute them); on success refs holds new references, released
 * with min_refs_release. */
bool min_record_refs(const min_record *record, const hlo_module *module, min_refs *refs);
void min_refs_release(min_refs *refs);

/* ---- embed.c ---- */
/* What a repro directory holds within its byte limit. */

typedef struct min_repro_content {
  hlo_module *module; /* with single_file, the repro with inputs as constants (owned); else NULL */
  rt_value **inputs;  /* the remaining parameters' inputs (references; NULL: no data) */
  int input_count;
  bool write_inputs; /* all of them fit and are written; otherwise none, and the repro is seeded */
  double max_bytes, embedded_bytes, written_bytes;
  char left_out[2048]; /* what was left out and why; "" when nothing */
} min_repro_content;

hlo_status min_repro_content_make(const min_report *report, bool single_file, double max_bytes,
                                  min_repro_content *content, hlo_diag *diag);
void min_repro_content_free(min_repro_content *content);

/* ---- signature.c ---- */
/* The failure a candidate must keep: the original's outcome and, for an accuracy failure,
 * the culprit (an original entry instruction) whose value is known to differ and the values
 * it is computed from. */

typedef struct min_signature {
  const hlo_module *original; /* borrowed: the module the minifier was given */
  min_outcome failure;        /* the original's outcome */
  bool any;                   /* --any-failure: every failure matches */
  int output;                 /* accuracy: the original's first failing output (root element) */
  int culprit;                /* accuracy: the original entry id of the culprit; -1 otherwise */
  bool *cone;                 /* by original entry id: the culprit and what it is computed from */
  int *by_name;               /* original entry ids sorted by name */
} min_signature;

/* A match without a culprit (not accuracy, or --any-failure), and no match; a match >= 0 is
 * the original entry id of the candidate's earliest failing output in the culprit's cone. */
#define MIN_MATCH (-1)
#define MIN_NO_MATCH (-2)

/* False when memory runs out. */
bool min_signature_init(min_signature *sig, const hlo_module *original, const min_outcome *failure, bool any);
void min_signature_free(min_signature *sig);
/* Whether got, the outcome of candidate, is the signature's failure: MIN_NO_MATCH, MIN_MATCH
 * or the matching output's original id. */
int min_signature_match(const min_signature *sig, const hlo_module *candidate, const min_outcome *got);
/* Whether a match found earlier (memoized) still matches after the signature narrowed. */
bool min_signature_still(const min_signature *sig, int match);
/* An adopted candidate's match becomes the culprit (the first op known to differ so far). */
void min_signature_narrow(min_signature *sig, int match);
/* The culprit's name, NULL when there is none. */
const char *min_signature_culprit(const min_signature *sig);

/* ---- the minifier's state (minify.c, strategies.c, needed.c, scan.c, shapes.c, inputs.c) ----
 * Shared by its driver (minify.c) and its strategies. */

typedef struct min_memo_entry {
  cache_key key;
  int match; /* min_signature_match's answer */
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
  bool shapes_only;   /* a compile check: no input data anywhere, inputs and values NULL */
  /* The original run's values (scan.c) while the current module is cut from it unchanged;
   * NULL otherwise. Candidates are then checked against it. */
  min_record *record;
  cache_key key;
  min_signature sig; /* the failure candidates must keep */
  min_memo_entry *memo;
  int memo_count, memo_capacity;
  double start;
  hlo_diag *diag;
  hlo_status error; /* a failure of the minifier itself: stop */
} min_ctx;

/* ---- minify.c ---- */
/* Releases each of count values and frees the array. */
void min_release_all(rt_value **values, int count);
/* Makes module, with its inputs (taken over), the current one; false on an error. */
bool min_set_current(min_ctx *ctx, hlo_module *module, rt_value **inputs, int input_count);
/* One progress line, when progress is on. */
void min_progress(min_ctx *ctx, const char *format, ...) __attribute__((format(printf, 2, 3)));

/* Builds the plan's candidate and checks it (memoized); when it fails the same way and is
 * smaller (fewer ops, or as many ops and fewer instructions), it becomes the current module
 * and the result is true. */
bool min_try(min_ctx *ctx, const min_plan *plan, min_strategy strategy);
/* Checks a candidate built otherwise (taken over with its inputs); smaller says whether the
 * strategy counts it as an improvement. The same adoption as min_try. */
bool min_try_candidate(min_ctx *ctx, hlo_module *candidate, rt_value **inputs, int input_count, min_strategy strategy,
                       bool smaller);
/* Whether outcome, candidate's, is the failure the minifier keeps (min_signature_match). */
int min_judge(min_ctx *ctx, const hlo_module *candidate, const min_outcome *outcome);
/* Whether the check budget is spent or an error stopped the run. */
bool min_stopped(const min_ctx *ctx);
/* The options' predicate with its time limit cut to the time budget left. */
min_predicate min_budgeted(const min_ctx *ctx);
/* Whether the repro's inputs still exceed the target size (and shapes may change). */
bool min_inputs_large(const min_ctx *ctx);

/* ---- strategies.c ---- */
/* The strategies (here and in the four files below) each return whether they shrank the
 * module. */
bool min_strategy_dce(min_ctx *ctx);
bool min_strategy_truncate(min_ctx *ctx);
bool min_strategy_outputs(min_ctx *ctx);
bool min_strategy_promote(min_ctx *ctx, min_disp disp);

/* ---- needed.c ---- */
bool min_strategy_needed(min_ctx *ctx);

/* ---- shapes.c ---- */
/* Smaller dims. */
bool min_strategy_shapes(min_ctx *ctx);
/* Infers every non-parameter shape of copy again, callees first, and verifies it: after a
 * rewrite that changed attributes or types. False (diag says why) when it does not fit. */
bool min_reinfer(hlo_module *copy, hlo_diag *diag);

/* ---- rewrite.c ---- */
/* Rewrites in place of cuts (bypass, attributes, types, metadata), on modules small enough
 * to try each instruction; they drop ctx->record, whose values no longer fit the rewritten
 * instructions. */
bool min_strategy_rewrite(min_ctx *ctx);

/* ---- inputs.c ---- */
/* Constants in place of parameters. */
bool min_strategy_inputs(min_ctx *ctx);

/* ---- scan.c ---- */
/* True when a group of the current module fails on its own the way the module does and
 * became the current module, with ctx->record holding its values; budget_bytes bounds the
 * values kept. */
bool min_scan_accuracy(min_ctx *ctx, double budget_bytes);
/* scan.c: runs the references of the current (whole) module once, recording every value in
 * a new ctx->record while they fit in budget_bytes (no record when they do not); refs gets
 * the outputs. False when the reference evaluator cannot run the module. */
bool min_record_whole(min_ctx *ctx, double budget_bytes, min_refs *refs);

#endif
