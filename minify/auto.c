/* min_auto_repro (auto.h). */
#include "minify.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime.h"

hlo_status min_auto_repro(const min_auto_request *request, char *path, size_t size, hlo_diag *diag) {
  double max_bytes = request->max_bytes;
  if (!(max_bytes == 0 || max_bytes >= 1))
    return hlo_diag_set(diag, HLO_ERR_INPUT, "a repro's max_bytes must be 0 or at least 1, got %g", max_bytes);
  char made[] = "/tmp/latch-repro-XXXXXX";
  const char *dir = request->dir;
  if (!dir) {
    if (!mkdtemp(made)) return hlo_diag_set(diag, HLO_ERR_INTERNAL, "cannot create %s: %s", made, strerror(errno));
    dir = made;
  }
  min_options options = {0};
  /* A compile error needs no data, whatever check found it: candidates carry shapes only,
   * no input is copied and the reference never runs. */
  bool compile_error = request->failure && request->failure->kind == MIN_COMPILE_ERROR;
  options.predicate.kind = compile_error ? MIN_CHECK_COMPILE : request->kind;
  options.predicate.backend = request->backend;
  options.predicate.compile_options = request->compile_options;
  options.predicate.tol = request->tol > 0 ? request->tol : RT_ACCURACY_DEFAULT_TOL;
  options.predicate.timeout_s = request->timeout_s > 0 ? request->timeout_s : 30;
  options.budget_s = request->budget_s;
  options.failure = request->failure;
  /* shapes shrink until the inputs fit the limit too */
  if (max_bytes > 0 && max_bytes < MIN_SMALL_INPUTS_BYTES) options.small_inputs_bytes = max_bytes;
  min_report report;
  hlo_status status = min_minify(request->module, compile_error ? NULL : request->inputs,
                                 compile_error ? 0 : request->input_count, &options, &report, diag);
  if (status != HLO_OK) return status;
  /* The capture layer runs inside the user's program, not the latch command: repro.sh finds
   * latch through LATCH_BIN or PATH. */
  min_repro_info info = {.backend = request->backend->name, .latch_bin = NULL, .source = NULL, .max_bytes = max_bytes};
  status = min_write_repro(dir, &report, &options.predicate, &info, diag);
  min_report_free(&report);
  if (status == HLO_OK) snprintf(path, size, "%s", dir);
  return status;
}

hlo_status min_check_mode_parse(const char *text, min_check_mode *mode, hlo_diag *diag) {
  *mode = MIN_MODE_OFF;
  if (!text || !*text || strcmp(text, "off") == 0) return HLO_OK;
  if (strcmp(text, "compile") == 0) *mode = MIN_MODE_COMPILE;
  else if (strcmp(text, "accuracy") == 0) *mode = MIN_MODE_ACCURACY;
  else return hlo_diag_set(diag, HLO_ERR_INPUT, "LATCH_CHECK '%s': expected off, compile or accuracy", text);
  return HLO_OK;
}
