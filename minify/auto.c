/* min_auto_repro (auto.h). */
#include "minify.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime.h"

/* Appends text to dir/name (created when missing); a failure costs the note, not the repro. */
static void append_text(const char *dir, const char *name, const char *text, const char *mode) {
  char path[4200];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, mode);
  if (!f) return;
  fputs(text, f);
  fclose(f);
}

/* The culprit among the backend's choices, searched on the repro (which fails the way the
 * graph did, and costs less per check), within what is left of the budget. */
static void bisect_repro(const min_auto_request *request, const min_report *report, const min_predicate *predicate,
                         const char *dir) {
  min_bisect_request bisect = {.module = report->module, .inputs = report->inputs, .input_count = report->input_count,
                               .predicate = *predicate, .backend = request->backend,
                               .compile_options = request->compile_options};
  double left = request->budget_s > 0 ? request->budget_s - report->seconds : 0;
  if (request->budget_s > 0 && left < 1) {
    append_text(dir, "report.txt", "culprit:    not searched (the check budget is spent)\n", "a");
    return;
  }
  if (left > 0 && (bisect.predicate.timeout_s <= 0 || bisect.predicate.timeout_s > left)) bisect.predicate.timeout_s = left;
  min_bisect_result result;
  hlo_diag diag;
  hlo_diag_clear(&diag);
  char text[2048], line[2300];
  if (min_bisect(&bisect, &result, &diag) != HLO_OK) {
    snprintf(line, sizeof line, "culprit:    not found (%s)\n", diag.message);
    append_text(dir, "report.txt", line, "a");
    return;
  }
  min_bisect_text(&result, text, sizeof text); /* "culprit: ..." and the settings that show it */
  append_text(dir, "culprit.txt", text, "w");
  append_text(dir, "report.txt", text, "a");
}

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
  options.max_checks = request->max_checks;
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
  if (status == HLO_OK && request->bisect) bisect_repro(request, &report, &options.predicate, dir);
  min_report_free(&report);
  if (status == HLO_OK) snprintf(path, size, "%s", dir);
  return status;
}

hlo_status min_check_mode_parse(const char *text, min_check_mode *mode, hlo_diag *diag) {
  *mode = MIN_MODE_OFF;
  /* eager is the PyTorch frontend's check (latch.torch against eager PyTorch): the
   * library's own checks stay off */
  if (!text || !*text || strcmp(text, "off") == 0 || strcmp(text, "eager") == 0) return HLO_OK;
  if (strcmp(text, "compile") == 0) *mode = MIN_MODE_COMPILE;
  else if (strcmp(text, "accuracy") == 0) *mode = MIN_MODE_ACCURACY;
  else return hlo_diag_set(diag, HLO_ERR_INPUT, "LATCH_CHECK '%s': expected off, compile, accuracy or eager", text);
  return HLO_OK;
}
