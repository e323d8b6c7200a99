/* Writing repro directories (repro.h). */
#include "minify_internal.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hlo/hlo.h"
#include "runtime/runtime.h"

static hlo_status make_dir(const char *path, hlo_diag *diag) {
  if (mkdir(path, 0777) != 0 && errno != EEXIST)
    return hlo_diag_set(diag, HLO_ERR_INPUT, "cannot create directory %s: %s", path, strerror(errno));
  return HLO_OK;
}

static hlo_status write_file(const char *path, const char *text, int mode, hlo_diag *diag) {
  FILE *f = fopen(path, "w");
  if (!f) return hlo_diag_set(diag, HLO_ERR_INPUT, "cannot write %s: %s", path, strerror(errno));
  bool ok = fputs(text, f) >= 0;
  ok &= fclose(f) == 0;
  if (!ok) return hlo_diag_set(diag, HLO_ERR_INTERNAL, "failed writing %s", path);
  if (mode) chmod(path, (mode_t)mode);
  return HLO_OK;
}

hlo_status min_write_case(const char *dir, const char *hlo_name, const hlo_module *module, rt_value *const *inputs,
                          int input_count, hlo_diag *diag) {
  char path[4096];
  if (make_dir(dir, diag) != HLO_OK) return diag->status;
  snprintf(path, sizeof path, "%s/inputs", dir);
  if (make_dir(path, diag) != HLO_OK) return diag->status;
  for (int i = 0; i < input_count && inputs[i]; i++) {
    snprintf(path, sizeof path, "%s/inputs/%d.npy", dir, i);
    if (inputs[i]->shape.dtype == HLO_TUPLE)
      return hlo_diag_set(diag, HLO_ERR_UNSUPPORTED, "parameter %d is a tuple; .npy files cannot hold it", i);
    if (rt_npy_write(path, inputs[i], diag) != HLO_OK) return diag->status;
  }
  char *text = hlo_module_to_text(module);
  if (!text) return hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory printing module %s", module->name);
  snprintf(path, sizeof path, "%s/%s", dir, hlo_name);
  hlo_status status = write_file(path, text, 0, diag);
  free(text);
  return status;
}

/* Single quotes for sh: 'it'\''s'. */
static void sh_quote(hlo_strbuf *sb, const char *text) {
  hlo_sb_puts(sb, "'");
  for (const char *p = text; *p; p++) {
    if (*p == '\'') hlo_sb_puts(sb, "'\\''");
    else hlo_sb_append(sb, p, 1);
  }
  hlo_sb_puts(sb, "'");
}

/* The settings that change the backend's kernels, as NAME=VALUE words for sh: what repro.sh
 * exports, so it replays the kernels the failure was found with. */
static void kernel_settings(hlo_strbuf *sb, const min_predicate *predicate) {
  const rt_compile_options *o = predicate->compile_options;
  hlo_sb_printf(sb, "LATCH_NO_FUSION=%d LATCH_THREADS=%d", o && o->no_fusion ? 1 : 0, rt_parallel_threads());
}

/* The path from directory from to directory to, both absolute and without symlinks, made of
 * "..", and to's own names ("." when the same); false when it does not fit. */
static bool relative_path(const char *from, const char *to, char *out, size_t size) {
  size_t common = 0;
  for (size_t i = 0;; i++) {
    bool from_end = from[i] == 0 || from[i] == '/', to_end = to[i] == 0 || to[i] == '/';
    if (from_end && to_end) common = i;
    if (from[i] != to[i] || from[i] == 0) break;
  }
  size_t used = 0;
  out[0] = 0;
  for (const char *p = from + common; *p; p++)
    if (*p == '/' && used + 4 < size) used += (size_t)snprintf(out + used, size - used, "%s..", used ? "/" : "");
  const char *rest = to + common;
  while (*rest == '/') rest++;
  if (*rest) used += (size_t)snprintf(out + used, size - used, "%s%s", used ? "/" : "", rest);
  if (used == 0) snprintf(out, size, ".");
  return used < size;
}

static char *repro_script(const char *dir, const min_report *report, const min_predicate *predicate,
                          const min_repro_info *info, const min_repro_content *content) {
  hlo_strbuf sb;
  hlo_sb_init(&sb);
  char failure[1400];
  min_outcome_describe(&report->failure, failure, sizeof failure);
  for (char *p = failure; *p; p++)
    if (*p == '\n') *p = ' ';
  hlo_sb_puts(&sb, "#!/bin/sh\n# Written by latch minify. Exits non-zero exactly when this failure reproduces:\n#   ");
  hlo_sb_puts(&sb, failure);
  /* 125 is git bisect run's "cannot test": 0 would say "does not reproduce" and any other
   * non-zero status "reproduces", both untrue when nothing ran. */
  hlo_sb_puts(&sb, "\n# 0 when it does not, 125 when it cannot run at all.\n");
  hlo_sb_puts(&sb, "here=$(cd \"$(dirname \"$0\")\" && pwd) || exit 125\n");
  hlo_sb_puts(&sb, "# the settings that change the backend's kernels, as the failure was found with\nexport ");
  kernel_settings(&sb, predicate);
  hlo_sb_puts(&sb, "\n");
  if (predicate->kind == MIN_CHECK_COMMAND) {
    /* The command runs where latch minify ran it, so a relative path in it (./test.sh)
     * means what it meant then; that directory is named relative to the repro's, so the
     * two can move together (to another machine, another checkout). */
    char cwd[4096], real_dir[4096], rel[4096];
    if (getcwd(cwd, sizeof cwd) && realpath(dir, real_dir) && relative_path(real_dir, cwd, rel, sizeof rel)) {
      hlo_sb_puts(&sb, "cd \"$here\"/");
      sh_quote(&sb, rel);
      hlo_sb_puts(&sb, " || { echo 'repro.sh: the directory latch minify ran in is gone' >&2; exit 125; }\n");
    }
    hlo_sb_puts(&sb, "export LATCH_MINIFY_INPUTS=\"$here/inputs\"\n");
    hlo_sb_printf(&sb, "%s \"$here/repro.hlo\"\nstatus=$?\n", predicate->command);
    if (predicate->command_nonzero) hlo_sb_puts(&sb, "exit $status\n");
    else hlo_sb_puts(&sb, "# the test command exits 0 while the failure is there\n[ $status -ne 0 ]\n");
    return hlo_sb_take(&sb);
  }
  hlo_sb_puts(&sb, "cd \"$here\" || exit 125\n");
  hlo_sb_puts(&sb, "# The latch binary: $LATCH_BIN, else the one that wrote this repro, else latch on PATH.\n");
  hlo_sb_puts(&sb, "LATCH=${LATCH_BIN:-}\n");
  if (info->latch_bin) {
    hlo_sb_puts(&sb, "if [ -z \"$LATCH\" ] && [ -x ");
    sh_quote(&sb, info->latch_bin);
    hlo_sb_puts(&sb, " ]; then LATCH=");
    sh_quote(&sb, info->latch_bin);
    hlo_sb_puts(&sb, "; fi\n");
  }
  hlo_sb_puts(&sb, "[ -n \"$LATCH\" ] || LATCH=$(command -v latch) || { echo 'repro.sh: no latch binary: set LATCH_BIN' >&2; exit 125; }\n");
  hlo_sb_puts(&sb, "echo \"repro.sh: running $LATCH\" >&2\n");
  /* A hang reproduces as timeout's exit status 124. */
  if (report->failure.kind == MIN_HANG) {
    int seconds = (int)(predicate->timeout_s + 0.999);
    hlo_sb_printf(&sb, "exec timeout -s KILL %d ", seconds < 1 ? 1 : seconds);
  } else {
    hlo_sb_puts(&sb, "exec ");
  }
  hlo_sb_puts(&sb, "\"$LATCH\" run repro.hlo ");
  if (content->input_count > 0) hlo_sb_puts(&sb, content->write_inputs ? "--inputs inputs " : "--seed 0 ");
  hlo_sb_puts(&sb, "--backend ");
  sh_quote(&sb, info->backend);
  /* `latch run --check compile` only compiles (no inputs); execute compiles and runs. */
  if (predicate->kind == MIN_CHECK_ACCURACY) hlo_sb_printf(&sb, " --check accuracy --tol %g\n", predicate->tol);
  else if (predicate->kind == MIN_CHECK_EXECUTE) hlo_sb_puts(&sb, " --check execute\n");
  else hlo_sb_puts(&sb, " --check compile\n");
  return hlo_sb_take(&sb);
}

static char *report_text(const min_report *report, const min_predicate *predicate, const min_repro_info *info,
                         const min_repro_content *content) {
  hlo_strbuf sb;
  hlo_sb_init(&sb);
  char failure[1400];
  min_outcome_describe(&report->failure, failure, sizeof failure);
  hlo_sb_puts(&sb, "latch minify report\n");
  if (info->source) hlo_sb_printf(&sb, "source:     %s\n", info->source);
  if (predicate->kind == MIN_CHECK_COMMAND)
    hlo_sb_printf(&sb, "check:      --test %s (%s means failing)\n", predicate->command,
                  predicate->command_nonzero ? "a non-zero exit" : "exit 0");
  else
    hlo_sb_printf(&sb, "check:      %s on backend %s\n", min_check_kind_name(predicate->kind), info->backend);
  hlo_sb_printf(&sb, "timeout:    %g s per check\n", predicate->timeout_s);
  if (info->latch_bin) hlo_sb_printf(&sb, "latch:      %s\n", info->latch_bin);
  /* What decides the kernels: a repro from another machine or build may not fail there. */
  hlo_sb_printf(&sb, "build:      %s\n", rt_build_id());
  hlo_sb_printf(&sb, "cpu:        %s\n", rt_cpu_features()[0] ? rt_cpu_features() : "(features unknown)");
  if (predicate->backend && predicate->backend->describe) {
    char choices[512];
    predicate->backend->describe(choices, sizeof choices);
    hlo_sb_printf(&sb, "kernels:    %s\n", choices);
  }
  hlo_sb_printf(&sb, "threads:    %d\n", rt_parallel_threads());
  hlo_sb_puts(&sb, "settings:   ");
  kernel_settings(&sb, predicate);
  hlo_sb_puts(&sb, " (repro.sh sets them)\n");
  hlo_sb_printf(&sb, "failure:    %s\n", failure);
  if (report->first_differing[0])
    hlo_sb_printf(&sb, "differs:    %%%s is the first op found whose value differs (output %d of the original fails)\n",
                  report->first_differing, report->failed_output);
  hlo_sb_printf(&sb, "before:     %d instructions (%d ops)\n", report->instrs_before, report->ops_before);
  hlo_sb_printf(&sb, "after:      %d instructions (%d ops), %d parameters\n", report->instrs_after, report->ops_after,
                report->input_count);
  hlo_sb_printf(&sb, "inputs:     %.0f bytes before, %.0f bytes after\n", report->input_bytes_before,
                report->input_bytes_after);
  hlo_sb_printf(&sb, "repro:      %s, %.0f input bytes embedded as constants, %.0f written as .npy (limit %.0f)\n",
                info->single_file ? "one file" : "repro.hlo and inputs/", content->embedded_bytes,
                content->written_bytes, content->max_bytes);
  if (report->simpler_inputs[0]) hlo_sb_printf(&sb, "replaced:   %s (the module makes these inputs itself)\n", report->simpler_inputs);
  if (content->left_out[0])
    hlo_sb_printf(&sb, "left out:   %s; the repro runs on seeded inputs (latch run --seed 0)\n", content->left_out);
  hlo_sb_puts(&sb, "strategies that worked:");
  bool any = false;
  for (int s = 0; s < MIN_STRATEGY_COUNT; s++)
    if (report->wins[s]) {
      hlo_sb_printf(&sb, " %s %d", min_strategy_name((min_strategy)s), report->wins[s]);
      any = true;
    }
  hlo_sb_puts(&sb, any ? "\n" : " none\n");
  hlo_sb_printf(&sb, "checks:     %d (and %d answered from the memo table)\n", report->checks, report->memo_hits);
  if (report->stopped_early)
    hlo_sb_puts(&sb, "budget:     spent before the strategies were done: this is the smallest failing module "
                     "found, not a minimal one\n");
  hlo_sb_printf(&sb, "rechecks:   the repro failed the same way %d of %d times%s\n", report->reproduced,
                report->rechecks, report->flaky ? " (FLAKY)" : "");
  hlo_sb_printf(&sb, "time:       %.2f s\n", report->seconds);
  return hlo_sb_take(&sb);
}

hlo_status min_write_repro(const char *dir, const min_report *report, const min_predicate *predicate,
                           const min_repro_info *info, hlo_diag *diag) {
  min_repro_content content;
  if (min_repro_content_make(report, info->single_file, info->max_bytes, &content, diag) != HLO_OK)
    return diag->status;
  const hlo_module *module = content.module ? content.module : report->module;
  hlo_status status = min_write_case(dir, "repro.hlo", module, content.inputs,
                                     content.write_inputs ? content.input_count : 0, diag);
  char path[4096];
  char *script = status == HLO_OK ? repro_script(dir, report, predicate, info, &content) : NULL;
  char *text = status == HLO_OK ? report_text(report, predicate, info, &content) : NULL;
  if (status == HLO_OK && (!script || !text)) status = hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory");
  snprintf(path, sizeof path, "%s/repro.sh", dir);
  if (status == HLO_OK) status = write_file(path, script, 0755, diag);
  snprintf(path, sizeof path, "%s/report.txt", dir);
  if (status == HLO_OK) status = write_file(path, text, 0, diag);
  free(script);
  free(text);
  min_repro_content_free(&content);
  return status;
}
