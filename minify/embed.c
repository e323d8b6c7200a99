/* What a repro directory holds (minify.h): within the repro's byte limit, inputs embedded as
 * constants in the module (single file) or written as .npy files; an input that does not
 * fit is left out, and the repro then runs on seeded inputs (as `latch run --seed 0` makes
 * them), the report saying which were left out and why. Inputs are taken in parameter
 * order, so what fits does not depend on anything but the sizes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "minify_internal.h"

static void note(min_repro_content *c, int index, const rt_value *value, double size, const char *why) {
  size_t used = strlen(c->left_out);
  char shape[160] = "a tuple";
  if (value) hlo_shape_str(&value->shape, shape, sizeof shape);
  snprintf(c->left_out + used, sizeof c->left_out - used, "%sinput %d (%s, %.0f bytes): %s", used ? "; " : "",
           index, value ? shape : "no data", size, why);
}

/* The module with each input that fits the budget turned into a constant. */
static hlo_module *embed(const min_report *report, double *budget, min_repro_content *c, hlo_diag *diag) {
  const hlo_comp *entry = report->module->entry;
  int n = entry->instr_count;
  min_disp *disp = hlo_calloc((size_t)n + 1, sizeof *disp);
  rt_value **values = hlo_calloc((size_t)n + 1, sizeof *values);
  hlo_module *module = NULL;
  if (disp && values) {
    for (int p = 0; p < report->input_count && p < entry->param_count; p++) {
      rt_value *value = report->inputs[p];
      double size = min_value_bytes(value);
      if (!value || value->shape.dtype == HLO_TUPLE || hlo_shape_is_dynamic(&entry->params[p]->shape) ||
          size > *budget)
        continue;
      disp[entry->params[p]->id] = MIN_TO_CONST;
      values[entry->params[p]->id] = value;
      *budget -= size;
      c->embedded_bytes += size;
    }
    min_plan plan = {disp, NULL, 0};
    module = min_build(report->module, report->inputs, values, &plan, &c->inputs, &c->input_count, diag);
  } else {
    hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory");
  }
  free(disp);
  free(values);
  return module;
}

hlo_status min_repro_content_make(const min_report *report, bool single_file, double max_bytes, min_repro_content *c,
                                  hlo_diag *diag) {
  memset(c, 0, sizeof *c);
  double budget = max_bytes > 0 ? max_bytes : MIN_REPRO_DEFAULT_MAX_BYTES;
  c->max_bytes = budget;
  if (single_file) {
    c->module = embed(report, &budget, c, diag);
    if (!c->module) return diag->status;
  } else {
    c->inputs = hlo_calloc((size_t)report->input_count + 1, sizeof *c->inputs);
    if (!c->inputs) return hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory");
    for (int i = 0; i < report->input_count; i++) c->inputs[i] = rt_value_retain(report->inputs[i]);
    c->input_count = report->input_count;
  }
  /* The parameters left: all written, or none (latch run --inputs wants every file). */
  double need = 0;
  c->write_inputs = true;
  for (int i = 0; i < c->input_count; i++) {
    need += min_value_bytes(c->inputs[i]);
    if (!c->inputs[i] || c->inputs[i]->shape.dtype == HLO_TUPLE) c->write_inputs = false;
  }
  if (need > budget) c->write_inputs = false;
  char over[160];
  snprintf(over, sizeof over, "the inputs left take %.0f bytes together, over the limit's %.0f left", need, budget);
  if (!c->write_inputs)
    for (int i = 0; i < c->input_count; i++) {
      const char *why = !c->inputs[i] ? "shapes only (a compile check makes no data)"
                        : c->inputs[i]->shape.dtype == HLO_TUPLE ? "a tuple, which .npy cannot hold"
                                                                  : over;
      note(c, i, c->inputs[i], min_value_bytes(c->inputs[i]), why);
    }
  else
    c->written_bytes = need;
  return HLO_OK;
}

void min_repro_content_free(min_repro_content *c) {
  hlo_module_free(c->module);
  for (int i = 0; i < c->input_count; i++) rt_value_release(c->inputs[i]);
  free(c->inputs);
  memset(c, 0, sizeof *c);
}
