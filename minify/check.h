/* Checking one candidate: does this module still fail, and the same way? Each check runs in
 * a child process (fork) with a time limit, so a backend that crashes or hangs on a
 * candidate is an outcome ("crashes with SIGABRT", "hangs") rather than the end of the
 * minifier. */
#ifndef MIN_CHECK_H
#define MIN_CHECK_H
#include <stdbool.h>

#include "hlo/ir.h"
#include "runtime/backend.h"

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

typedef struct min_outcome {
  min_kind kind;
  hlo_status status; /* compile and execute errors */
  hlo_opcode opcode; /* the op a compile or execute error names; HLO_OP_COUNT if none */
  int signal;        /* crash: the signal, 0 when the process exited without an answer */
  int exit_code;     /* crash without a signal; the --test command's exit status */
  char message[1024];
} min_outcome;

typedef enum min_check_kind { MIN_CHECK_COMPILE, MIN_CHECK_ACCURACY, MIN_CHECK_COMMAND } min_check_kind;

/* What a check does. */
typedef struct min_predicate {
  min_check_kind kind;
  const rt_backend *backend; /* compile and accuracy */
  double tol;                /* accuracy: the check's tol (RT_ACCURACY_DEFAULT_TOL) */
  /* command: run through /bin/sh with the candidate's .hlo path appended as its last
   * argument and LATCH_MINIFY_INPUTS naming the candidate's inputs directory. Exit 0 means
   * "still failing" (llvm-reduce's convention) unless command_nonzero (hlo_bisect's:
   * a non-zero exit means failing). */
  const char *command;
  bool command_nonzero;
  const char *work_dir; /* command: where candidates are written */
  double timeout_s;     /* per check; the child is killed past it */
} min_predicate;

/* Runs the check on module with inputs in a child process. The returned status is an error
 * only when the check could not be started (fork, pipe, writing the candidate). */
hlo_status min_check(const min_predicate *predicate, const hlo_module *module, rt_value *const *inputs,
                     int input_count, min_outcome *outcome, hlo_diag *diag);

/* The same check in this process, no fork and no time limit: what `latch run --check` and
 * the child do. Crashes and hangs of the backend crash or hang the caller. */
void min_check_inline(const min_predicate *predicate, const hlo_module *module, rt_value *const *inputs,
                      int input_count, min_outcome *outcome);

/* Whether got is the failure want is: same kind; for compile and execute errors the same
 * status and the same op; for crashes the same signal (or exit code). */
bool min_outcome_same(const min_outcome *want, const min_outcome *got);
/* One line: "compile error (unsupported) on cosine: ...", "crash (signal 6, SIGABRT)". */
void min_outcome_describe(const min_outcome *outcome, char *buffer, int size);

/* The op a backend message is about: the first %word naming an instruction of module, else
 * the first opcode name, else the first bare word naming an instruction; HLO_OP_COUNT if
 * none. */
hlo_opcode min_opcode_in_message(const hlo_module *module, const char *message);

#endif
