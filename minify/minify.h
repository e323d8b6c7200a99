/* minify/: shrinking a failing module to a small repro: candidate checks isolated in child
 * processes, reduction strategies, the embedded (LATCH_CHECK) entry point and the repro
 * writer. The layer's one header; private to the folder: minify_internal.h. Uses hlo/,
 * cache/, runtime/ (the backend under test only through rt_backend) and the reference
 * evaluator of runtime/reference/ directly: the accuracy check's fp64 run (isolate.c) and
 * the evaluator's observe hook, which tells where a wrong value first appears (scan.c) and
 * what values a candidate's parameters take (values.c).
 *
 * The files, each under its own heading below or in minify_internal.h: isolate.c, minify.c,
 * auto.c, repro.c here; candidate.c, values.c, record.c, embed.c, signature.c, strategies.c,
 * needed.c, scan.c, shapes.c, rewrite.c and inputs.c there. */
#ifndef MIN_MINIFY_H
#define MIN_MINIFY_H
#include <stdbool.h>
#include <stdio.h>
#include <stddef.h>

#include "hlo/hlo.h"
#include "runtime/runtime.h"

/* ---- isolate.c ---- */
/* Checking one candidate: does this module still fail, and the same way? Each check runs in
 * a child process (fork) with a time limit, so a backend that crashes or hangs on a
 * candidate is an outcome ("crashes with SIGABRT", "hangs") rather than the end of the
 * minifier. */

typedef enum min_kind {
  MIN_PASS = 0,      /* no failure */
  MIN_COMPILE_ERROR, /* the backend's compile returned an error */
  MIN_EXECUTE_ERROR, /* compiled, but running it returned an error */
  MIN_ACCURACY,      /* ran, but the outputs fail the accuracy check */
  MIN_CRASH,         /* the check's process died of a signal, or exited without an answer */
  MIN_HANG,          /* the check ran past the time limit and was killed */
  MIN_COMMAND,       /* the --test command says "still failing" */
  MIN_CHECK_ERROR,   /* the check itself could not run (the reference evaluator failed) */
} min_kind;

#define MIN_MAX_FAILED 16

typedef struct min_outcome {
  min_kind kind;
  hlo_status status; /* compile and execute errors */
  hlo_opcode opcode; /* the op a compile or execute error names; HLO_OP_COUNT if none */
  int signal;        /* crash: the signal, 0 when the process exited without an answer */
  int exit_code;     /* crash without a signal; the --test command's exit status */
  char message[1024]; /* a crash: the signal, then the last line the check wrote on stderr */
  /* accuracy: the root tuple's elements that fail (a root that is no tuple is element 0),
   * the first MIN_MAX_FAILED of them in order */
  int failed[MIN_MAX_FAILED];
  int failed_count;
} min_outcome;

/* compile: the backend's compile fails. execute: compile, then run once; a compile or
 * execute error, a crash or a hang fails (the outputs are not compared). accuracy: the same,
 * and the outputs must pass the accuracy check. command: the --test command decides. */
typedef enum min_check_kind { MIN_CHECK_COMPILE, MIN_CHECK_ACCURACY, MIN_CHECK_COMMAND, MIN_CHECK_EXECUTE } min_check_kind;

/* What a check does. */
typedef struct min_predicate {
  min_check_kind kind;
  const rt_backend *backend; /* compile and accuracy */
  const rt_compile_options *compile_options; /* what the backend's compile is told; NULL: the defaults */
  double tol;                /* accuracy: the check's tol (RT_ACCURACY_DEFAULT_TOL) */
  /* command: run through /bin/sh with the candidate's .hlo path appended as its last
   * argument and LATCH_MINIFY_INPUTS naming the candidate's inputs directory. Exit 0 means
   * "still failing" (llvm-reduce's convention) unless command_nonzero (hlo_bisect's:
   * a non-zero exit means failing). */
  const char *command;
  bool command_nonzero;
  const char *work_dir; /* command: where candidates are written */
  const char *env;      /* "NAME=VALUE" set in the check's process; NULL: none */
  double timeout_s;     /* per check; the child is killed past it */
} min_predicate;

/* An accuracy check's reference outputs, known beforehand (recorded from the original run,
 * record.c): the child then compares with them instead of running the reference evaluator
 * twice. Both have the module's output structure. */
typedef struct min_refs {
  const rt_value *declared, *fp64;
} min_refs;

/* Runs the check on module with inputs in a child process. Inputs may be NULL for a compile
 * check, which never reads them. The returned status is an error only when the check could
 * not be started (fork, pipe, writing the candidate). */
hlo_status min_check(const min_predicate *predicate, const hlo_module *module, rt_value *const *inputs,
                     int input_count, min_outcome *outcome, hlo_diag *diag);
/* The same with an accuracy check's references given (NULL: computed in the child). */
hlo_status min_check_refs(const min_predicate *predicate, const hlo_module *module, rt_value *const *inputs,
                          int input_count, const min_refs *refs, min_outcome *outcome, hlo_diag *diag);

/* The same check in this process, no fork and no time limit: what the child does. Crashes
 * and hangs of the backend crash or hang the caller. */
void min_check_inline(const min_predicate *predicate, const hlo_module *module, rt_value *const *inputs,
                      int input_count, min_outcome *outcome);
void min_check_inline_refs(const min_predicate *predicate, const hlo_module *module, rt_value *const *inputs,
                           int input_count, const min_refs *refs, min_outcome *outcome);

/* Kills the process group of the check running now, if any: for a command's handler of
 * SIGINT and SIGTERM, so that a minifier stopped from outside leaves no check behind (each
 * runs in its own group, which the terminal's signals do not reach). Async-signal-safe. */
void min_check_kill_running(void);

/* "compile", "accuracy", "compile and run", "test command". */
const char *min_check_kind_name(min_check_kind kind);

/* Whether got is the failure want is: same kind; for compile and execute errors the same
 * status, the same op and the same message class; for crashes the same signal (or exit code)
 * and, when both name one, the same op. Accuracy failures match by kind here; which output
 * fails is the minifier's signature (signature.c). */
bool min_outcome_same(const min_outcome *want, const min_outcome *got);
/* A message's class: its words without instruction names, numbers and shapes ("backend cpu
 * cannot compile cosine %cosine.3" and "... cosine %c" are one class). */
void min_message_class(const char *message, char *buffer, int size);
/* One line: "compile error (unsupported) on cosine: ...", "crash (signal 6, SIGABRT)". */
void min_outcome_describe(const min_outcome *outcome, char *buffer, int size);

/* The op a backend message is about: the first %word naming an instruction of module, else
 * the first opcode name, else the first bare word naming an instruction; HLO_OP_COUNT if
 * none. */
hlo_opcode min_opcode_in_message(const hlo_module *module, const char *message);

/* ---- minify.c ---- */
/* The minifier: shrinks a module that fails a check (a compile error, an accuracy failure,
 * a crash or hang of the backend, or an external test command) to a small module that fails
 * the same way, with inputs, and writes it as a repro directory.
 *
 * First the whole module is checked: it must fail, and how it fails is the signature every
 * candidate must keep (signature.c); a module that passes gets no repro. Then, for an
 * accuracy failure, the scan (scan.c): the module's ops in groups, each run on the values
 * the reference recorded for its operands (record.c), until a group fails on its own the
 * same way; candidates cut from it are then checked against the record, without the
 * reference. A compile check never has input data at all: candidates carry shapes only.
 *
 * Strategies on ops, each repeated until it no longer shrinks the graph, all of them again
 * until none does:
 *   dce       dead-code elimination and removal of unused parameters (applied to every
 *             candidate as well; checked alone once, since a dead op can be the culprit)
 *   truncate  binary search for the shortest failing prefix of the entry's instructions,
 *             every value the prefix leaves unused becoming an output (as hlo_bisect)
 *   needed    the ops the failure needs, one by one (needed.c): a candidate keeps a set of
 *             ops fed by parameters; finds failures that need two ops together
 *   outputs   removal of outputs (root tuple elements): the last alone, then halves,
 *             quarters, ... one at a time
 *   promote   delta debugging: a chunk of instructions becomes parameters fed with their
 *             reference values, so what only fed the chunk dies; chunks from all of them
 *             at once down to one at a time
 *   constant  the same with constants holding the reference values (small values only)
 * When the cuts no longer shrink it, and the module is small (rewrite.c):
 *   bypass    an instruction replaced by an operand of its shape, in every computation
 *   attributes slices, pads and windows made plainer (starts 0, strides 1, no padding)
 *   types     f64 to f32, s64 to s32, bf16 and f16 to f32, module and inputs together
 *   metadata  debug attributes, frontend attributes, sharding and written layouts dropped
 * and the cuts run again after any of them wins; a module checked against the scan's record
 * rewrites only once its inputs are small (after shapes below, then the loop runs again).
 * Then, while the repro's inputs exceed small_inputs_bytes, on data:
 *   shapes    a dim size the parameters share made smaller (1, then halvings), the graph's
 *             shapes inferred again (shapes.c)
 *   inputs    a parameter replaced by values the module makes: a broadcast constant (zeros,
 *             ones, its mean), then a small seeded array written as a generator (inputs.c)
 * Every candidate is checked in a child process with a time limit (isolate.c) and memoized by
 * its canonical hash (cache_hash_module); the final repro is checked again several times. */

typedef enum min_strategy {
  MIN_SCAN,
  MIN_DCE,
  MIN_TRUNCATE,
  MIN_OUTPUTS,
  MIN_NEEDED,
  MIN_PROMOTE,
  MIN_CONSTANT,
  MIN_SHAPES,
  MIN_INPUTS,
  MIN_BYPASS,
  MIN_ATTRS,
  MIN_TYPES,
  MIN_METADATA,
  MIN_STRATEGY_COUNT
} min_strategy;

const char *min_strategy_name(min_strategy strategy);

typedef struct min_options {
  min_predicate predicate;
  int rechecks;   /* times the final repro is checked again; 0 means 3 */
  int max_checks; /* stop shrinking after this many checks; 0 means no limit */
  FILE *progress; /* one line per check and per accepted step, or NULL for silence */
  bool progress_line; /* a terminal: one line rewritten in place (checks, size, time) */
  /* Accuracy checks: the original run's values the scan may keep (0: a quarter of the
   * machine's memory); no_scan skips the scan and shrinks the module whole. */
  double record_budget_bytes;
  bool no_scan;
  /* After the ops: dims and inputs shrink while the inputs exceed small_inputs_bytes (0:
   * MIN_SMALL_INPUTS_BYTES); keep_shapes skips that. */
  double small_inputs_bytes;
  bool keep_shapes;
  /* Seconds the whole minification may take (0: no limit): each check's time limit is cut
   * to what is left, and when it is spent the smallest failing module so far is the repro. */
  double budget_s;
  /* The original module's failure when the caller has already seen it: it is not checked
   * again. A hang is then not minified at all (each candidate that still hangs would wait
   * out the time limit): the repro is the module as it is. */
  const min_outcome *failure;
  /* Any failure counts for a candidate, not only the original's (its signature: the kind;
   * the op and message class of a compile error or crash; the output and first differing op
   * of an accuracy failure). */
  bool any_failure;
  /* Skips the rewrites (bypass, attributes, types, metadata): the repro is what cuts alone
   * make of the module. */
  bool no_rewrite;
} min_options;

#define MIN_SMALL_INPUTS_BYTES (64.0 * 1024)

typedef struct min_report {
  /* The repro: module and its inputs (one reference each). */
  hlo_module *module;
  rt_value **inputs;
  int input_count;
  min_outcome failure; /* the original module's failure */
  /* An accuracy failure: the original's first failing output (root element), and the first
   * op found whose value differs (an entry instruction's name; "" when none). */
  int failed_output;
  char first_differing[256];
  int instrs_before, instrs_after; /* entry computation instructions */
  double input_bytes_before, input_bytes_after; /* the entry parameters' bytes */
  int ops_before, ops_after;       /* of those, neither parameters nor constants */
  int checks;                      /* child processes run, rechecks included */
  int memo_hits;                   /* candidates answered from the memo table */
  int wins[MIN_STRATEGY_COUNT];    /* accepted steps per strategy */
  int rechecks, reproduced;        /* final checks run, and how many failed the same way */
  bool flaky;                      /* reproduced < rechecks */
  /* The check or time budget ran out before the strategies were done: the repro is the
   * smallest failing module found, not a minimal one. */
  bool stopped_early;
  double seconds;
  /* The parameters the inputs strategy replaced and by what ("%x (f32[1,3]) by a seeded
   * array, ..."; "" when none), and how many became seeded arrays. */
  char simpler_inputs[1024];
  int seeded_inputs;
} min_report;

/* Minifies module, run on inputs (in the parameters' declared types, one per parameter).
 * HLO_ERR_INPUT when the module does not fail the check at all (report->failure says how
 * it came out); other errors when the minifier itself cannot go on. On success report owns
 * the repro; free it with min_report_free. */
hlo_status min_minify(const hlo_module *module, rt_value *const *inputs, int input_count, const min_options *options,
                      min_report *report, hlo_diag *diag);
void min_report_free(min_report *report);

/* Bytes of an array shape, or of a tuple's elements summed. */
double min_shape_bytes(const hlo_shape *shape);
/* Bytes of module's entry parameters. */
double min_input_bytes(const hlo_module *module);

/* ---- auto.c ---- */
/* The one call the capture layer makes when a compiled graph fails its check: minify the
 * graph and leave a repro directory, quietly, so the caller can print one warning line with
 * the path and go on with reference results. */

typedef struct min_auto_request {
  const hlo_module *module;   /* the failing graph */
  rt_value *const *inputs;    /* its inputs, in the parameters' declared types */
  int input_count;
  const rt_backend *backend;  /* the backend that failed */
  const rt_compile_options *compile_options; /* its compile options (NULL: the defaults) */
  min_check_kind kind;        /* MIN_CHECK_COMPILE, MIN_CHECK_EXECUTE or MIN_CHECK_ACCURACY */
  double tol;                 /* accuracy tolerance; 0 gives RT_ACCURACY_DEFAULT_TOL */
  double timeout_s;           /* per check; 0 gives 30 s */
  double budget_s;            /* the whole minification (min_options.budget_s); 0: no limit */
  const min_outcome *failure; /* the failure already seen (min_options.failure), or NULL */
  const char *dir;            /* the repro directory; NULL makes a new /tmp/latch-repro-XXXXXX */
  /* The input bytes the repro may hold (LATCH_REPRO_MAX_BYTES; 0: MIN_REPRO_DEFAULT_MAX_BYTES);
   * an input past it is left out, and the report says so. */
  double max_bytes;
  int max_checks; /* checks the minification may take (min_options.max_checks); 0: no limit */
  /* Afterwards, min_bisect on the repro, within what is left of budget_s: its answer is
   * appended to report.txt and written to culprit.txt. */
  bool bisect;
} min_auto_request;

/* LATCH_CHECK's values: off (or unset, or empty), compile, accuracy (which implies compile). */
typedef enum min_check_mode { MIN_MODE_OFF = 0, MIN_MODE_COMPILE, MIN_MODE_ACCURACY } min_check_mode;
/* Parses text (NULL is off); HLO_ERR_INPUT naming the three values on anything else. */
hlo_status min_check_mode_parse(const char *text, min_check_mode *mode, hlo_diag *diag);

/* Minifies and writes the repro; its directory goes to path (size bytes). HLO_ERR_INPUT when
 * the graph does not fail the check again (a flaky failure that did not come back), or when
 * max_bytes is neither 0 nor at least 1. */
hlo_status min_auto_repro(const min_auto_request *request, char *path, size_t size, hlo_diag *diag);

/* ---- bisect.c ---- */
/* The culprit among the backend's own choices: which pass application or kernel choice
 * (hlo_choice) makes a module fail, by a binary search over how many are taken. */

typedef struct min_choice {
  char kind[32];  /* "fold_affine", "fusion", "winograd", ... */
  char name[256]; /* the instruction it was made on */
} min_choice;

typedef struct min_bisect_request {
  const hlo_module *module;
  rt_value *const *inputs; /* accuracy and command checks; may be NULL for compile */
  int input_count;
  /* The check (min_check); its compile_options are replaced by each step's. A command
   * check sees LATCH_CHOICES=N in its environment. */
  min_predicate predicate;
  const rt_backend *backend;                 /* whose choices are listed */
  const rt_compile_options *compile_options; /* the rest of the compile options; NULL: defaults */
} min_bisect_request;

typedef struct min_bisect_result {
  min_outcome failure; /* with every choice taken */
  int64_t total;       /* choices the full compile made */
  /* The culprit: the choice (1-based) whose taking makes the module fail, 0 when it fails
   * with every choice refused; its kind, instruction, and place among those of its kind. */
  int64_t culprit;
  min_choice choice;
  int64_t application, of;
  bool is_pass;
  int checks;
  char line[512]; /* "culprit: pass fold_affine, application 3 of 7 (%fusion.12)" */
} min_bisect_result;

/* HLO_ERR_INPUT when the module does not fail with every choice taken. */
hlo_status min_bisect(const min_bisect_request *request, min_bisect_result *result, hlo_diag *diag);
/* The line, then the settings that reproduce it and the checks, as text for a terminal or
 * culprit.txt. */
void min_bisect_text(const min_bisect_result *result, char *buffer, size_t size);

/* ---- repro.c ---- */
/* Repro directories: the module as HLO text, its inputs as .npy files, one command that
 * reproduces the failure, and a report of the minification. */

struct min_report;
struct min_predicate;

/* Writes dir/hlo_name (HLO text) and dir/inputs/I.npy for each input; dir is created. */
hlo_status min_write_case(const char *dir, const char *hlo_name, const hlo_module *module, rt_value *const *inputs,
                          int input_count, hlo_diag *diag);

/* What repro.sh runs. */
typedef struct min_repro_info {
  const char *backend;   /* --backend NAME for latch run */
  const char *latch_bin; /* the latch binary the minifier ran as, recorded as a fallback; may be NULL */
  const char *source;    /* the original module's file, for the report; may be NULL */
  bool single_file;      /* inputs embedded in repro.hlo as constants, where they fit */
  double max_bytes;      /* the inputs' bytes a repro may hold; 0: MIN_REPRO_DEFAULT_MAX_BYTES */
} min_repro_info;

/* LATCH_REPRO_MAX_BYTES's default: a repro never holds more input data than this. */
#define MIN_REPRO_DEFAULT_MAX_BYTES (64.0 * 1024 * 1024)

/* The whole repro directory: repro.hlo, inputs/, repro.sh, report.txt. */
hlo_status min_write_repro(const char *dir, const struct min_report *report, const struct min_predicate *predicate,
                           const min_repro_info *info, hlo_diag *diag);

#endif
