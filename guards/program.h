/* Guard programs: a guard set compiled into a flat list of checks, ordered cheapest and most
 * discriminating first (input count, dtypes and ranks, static arguments, static dims, then
 * symbol bindings and the constraints between them), evaluated until the first failure.
 * A passing check leaves every symbol's value for this call in bindings, which is what a
 * symbolic executable needs to size its buffers. */
#ifndef GUARD_PROGRAM_H
#define GUARD_PROGRAM_H
#include <stdbool.h>
#include <stdint.h>

#include "guard_set.h"

typedef struct guard_program guard_program;

/* What a call passes in, per tensor input. */
typedef struct guard_tensor {
  hlo_dtype dtype;
  int rank;
  const int64_t *dims;
} guard_tensor;

/* Why a check failed, for LATCH_LOG=recompiles and the recompile-limit warning. */
typedef struct guard_failure {
  int check;              /* index of the failing check in the program */
  int input, dim;         /* the input dim involved, or -1 */
  int64_t expected, got;  /* for dtype, rank and dim checks */
  char message[256];      /* "input 0 dim 1: expected 784, got 785" */
} guard_failure;

/* NULL with diag when the set is unusable (see guard_set_ok) or memory runs out. The
 * program is independent of the set afterwards. */
guard_program *guard_program_compile(const guard_set *set, hlo_diag *diag);
void guard_program_free(guard_program *program);
int guard_program_symbol_count(const guard_program *program);
int guard_program_check_count(const guard_program *program);

/* True when every check passes; bindings (guard_program_symbol_count entries, may be NULL
 * when there are none) then hold the symbols' values. False with why filled (may be NULL)
 * otherwise. Never allocates. */
bool guard_program_check(const guard_program *program, const guard_tensor *inputs, int input_count,
                         const guard_static *statics, int static_count, int64_t *bindings,
                         guard_failure *why);

/* One check per line, in evaluation order. */
void guard_program_print(const guard_program *program, hlo_strbuf *sb);

/* One fact in the same words (describe.c): "input 0 dim 1 == 784", "s0 % 4 == 0". */
void guard_fact_print(hlo_strbuf *sb, const guard_fact *fact);
const char *guard_rel_name(guard_rel rel);

#endif
