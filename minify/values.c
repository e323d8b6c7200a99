/* Reference values through the evaluator's observer hook (values.h). */
#include "minify_internal.h"

#include "runtime/reference/reference.h"

typedef struct collector {
  const bool *want;
  rt_value **values;
  double budget, used;
} collector;

double min_value_bytes(const rt_value *value) {
  if (!value) return 0;
  if (value->shape.dtype != HLO_TUPLE) return (double)hlo_shape_bytes(&value->shape);
  double total = 0;
  for (int i = 0; i < value->tuple_count; i++) total += min_value_bytes(value->tuple[i]);
  return total;
}

static void observe(void *context, const hlo_instr *instr, rt_value *value) {
  collector *c = context;
  if (c->values[instr->id]) return;
  double bytes = min_value_bytes(value);
  if (!c->want[instr->id] && c->used + bytes > c->budget) return;
  c->values[instr->id] = rt_value_retain(value);
  c->used += bytes;
}

hlo_status min_values_compute(const hlo_module *module, rt_value *const *inputs, int input_count, const bool *want,
                              rt_value **values, double budget_bytes, hlo_diag *diag) {
  collector c = {want, values, budget_bytes, 0};
  for (int i = 0; i < module->entry->instr_count; i++)
    if (values[i]) c.used += min_value_bytes(values[i]);
  rt_eval_options options = {.fp64 = false, .observe = observe, .observe_context = &c};
  rt_value *result = NULL;
  hlo_status status = rt_evaluate(module, inputs, input_count, &options, &result, diag);
  rt_value_release(result);
  return status;
}
