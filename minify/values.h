/* Reference values of a module's entry instructions, computed by the reference evaluator in
 * the declared types: what promoted parameters and constants are fed with. */
#ifndef MIN_VALUES_H
#define MIN_VALUES_H
#include <stdbool.h>

#include "hlo/ir.h"
#include "runtime/value.h"

/* Runs module on inputs and stores into values[id] (a new reference) the value of every
 * entry instruction with want[id] whose slot is still NULL, plus, while they fit in
 * budget_bytes, the others' (so later requests on the same module cost no new run). */
hlo_status min_values_compute(const hlo_module *module, rt_value *const *inputs, int input_count, const bool *want,
                              rt_value **values, double budget_bytes, hlo_diag *diag);

#endif
