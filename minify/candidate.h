/* Candidates: a plan says, for each instruction of the entry computation, whether it stays,
 * becomes a parameter or becomes a constant (fed with its reference value), and which
 * instructions are the outputs; building it gives a new module with dead code, unused
 * parameters and unused computations removed, and the inputs that go with it. */
#ifndef MIN_CANDIDATE_H
#define MIN_CANDIDATE_H
#include <stdbool.h>

#include "hlo/ir.h"
#include "runtime/value.h"

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

#endif
