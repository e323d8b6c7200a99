/* The minifier's driver: the original check, the strategy loop, memoized candidate checks,
 * the final rechecks (minify.h). */
#include "minify.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "minify_internal.h"
#include "hlo/hlo.h"

/* Reference values kept per module beyond those asked for, so most promotions on the same
 * module need no second evaluation. */
#define VALUE_BUDGET_BYTES (256.0 * 1024 * 1024)

const char *min_strategy_name(min_strategy strategy) {
  static const char *const names[] = {"dce", "truncate", "outputs", "promote", "constant"};
  return strategy < MIN_STRATEGY_COUNT ? names[strategy] : "?";
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void release_all(rt_value **values, int count) {
  for (int i = 0; values && i < count; i++) rt_value_release(values[i]);
  free(values);
}

/* Makes module (and its inputs, taken over) the current one. */
static bool set_current(min_ctx *ctx, hlo_module *module, rt_value **inputs, int input_count) {
  rt_value **values = calloc((size_t)module->entry->instr_count + 1, sizeof(rt_value *));
  if (!values) {
    ctx->error = hlo_diag_set(ctx->diag, HLO_ERR_INTERNAL, "out of memory");
    hlo_module_free(module);
    release_all(inputs, input_count);
    return false;
  }
  if (ctx->module) release_all(ctx->values, ctx->module->entry->instr_count);
  hlo_module_free(ctx->module);
  release_all(ctx->inputs, ctx->input_count);
  ctx->module = module;
  ctx->inputs = inputs;
  ctx->input_count = input_count;
  ctx->values = values;
  ctx->values_failed = false;
  ctx->key = cache_hash_module(module);
  return true;
}

bool min_stopped(const min_ctx *ctx) {
  int limit = ctx->options->max_checks;
  return ctx->error != HLO_OK || (limit > 0 && ctx->report->checks >= limit);
}

static min_memo_entry *memo_find(min_ctx *ctx, cache_key key) {
  for (int i = 0; i < ctx->memo_count; i++)
    if (cache_key_equal(ctx->memo[i].key, key)) return &ctx->memo[i];
  return NULL;
}

static void memo_add(min_ctx *ctx, cache_key key, bool failing) {
  if (ctx->memo_count == ctx->memo_capacity) {
    int capacity = ctx->memo_capacity ? ctx->memo_capacity * 2 : 64;
    min_memo_entry *memo = realloc(ctx->memo, sizeof *memo * (size_t)capacity);
    if (!memo) return; /* a memo miss later only costs a check */
    ctx->memo = memo;
    ctx->memo_capacity = capacity;
  }
  ctx->memo[ctx->memo_count++] = (min_memo_entry){key, failing};
}

static void progress(min_ctx *ctx, const char *format, ...) __attribute__((format(printf, 2, 3)));
static void progress(min_ctx *ctx, const char *format, ...) {
  FILE *out = ctx->options->progress;
  if (!out) return;
  va_list args;
  va_start(args, format);
  fprintf(out, "minify: [%d checks, %.1f s] ", ctx->report->checks, now_s() - ctx->start);
  vfprintf(out, format, args);
  fputc('\n', out);
  va_end(args);
}

/* Reference values the plan needs and the current module lacks; false when they cannot be had. */
static bool ensure_values(min_ctx *ctx, const min_plan *plan, const bool *live) {
  const hlo_comp *entry = ctx->module->entry;
  int n = entry->instr_count;
  bool *want = calloc((size_t)n + 1, sizeof *want);
  if (!want) return false;
  bool missing = false;
  for (int i = 0; i < n; i++) {
    want[i] = live[i] && plan->disp[i] != MIN_KEEP && entry->instrs[i]->opcode != HLO_OP_PARAMETER;
    missing |= want[i] && !ctx->values[i];
  }
  bool ok = !missing;
  if (missing && !ctx->values_failed) {
    hlo_diag diag;
    hlo_diag_clear(&diag);
    progress(ctx, "computing reference values of %d instructions", n);
    if (min_values_compute(ctx->module, ctx->inputs, ctx->input_count, want, ctx->values, VALUE_BUDGET_BYTES,
                           &diag) != HLO_OK) {
      progress(ctx, "the reference evaluator cannot run this module (%s): no promotions", diag.message);
      ctx->values_failed = true;
    } else {
      ok = true;
      for (int i = 0; i < n; i++) ok &= !want[i] || ctx->values[i] != NULL;
    }
  }
  free(want);
  return ok;
}

bool min_try(min_ctx *ctx, const min_plan *plan, min_strategy strategy) {
  if (min_stopped(ctx)) return false;
  int n = ctx->module->entry->instr_count;
  bool *live = calloc((size_t)n + 1, sizeof *live);
  if (!live) return false;
  min_plan_live(ctx->module, plan, live);
  bool have_values = ensure_values(ctx, plan, live);
  free(live);
  if (!have_values) return false;
  hlo_diag diag;
  hlo_diag_clear(&diag);
  rt_value **inputs = NULL;
  int input_count = 0;
  hlo_module *candidate = min_build(ctx->module, ctx->inputs, ctx->values, plan, &inputs, &input_count, &diag);
  if (!candidate) {
    progress(ctx, "%s: skipped an invalid candidate: %s", min_strategy_name(strategy), diag.message);
    return false;
  }
  int ops = min_count_ops(candidate), instrs = candidate->entry->instr_count;
  int cur_ops = min_count_ops(ctx->module);
  bool smaller = ops < cur_ops || (ops == cur_ops && instrs < n);
  cache_key key = cache_hash_module(candidate);
  if (!smaller || cache_key_equal(key, ctx->key)) {
    hlo_module_free(candidate);
    release_all(inputs, input_count);
    return false;
  }
  bool failing;
  const char *how = "";
  min_memo_entry *known = memo_find(ctx, key);
  if (known) {
    failing = known->failing;
    ctx->report->memo_hits++;
    how = " (memoized)";
  } else {
    min_outcome outcome;
    if (min_check(&ctx->options->predicate, candidate, inputs, input_count, &outcome, ctx->diag) != HLO_OK) {
      ctx->error = ctx->diag->status;
      hlo_module_free(candidate);
      release_all(inputs, input_count);
      return false;
    }
    ctx->report->checks++;
    failing = min_outcome_same(&ctx->report->failure, &outcome);
    memo_add(ctx, key, failing);
  }
  progress(ctx, "%s: %d instructions (%d ops) -> %d (%d ops): %s%s", min_strategy_name(strategy), n, cur_ops, instrs,
           ops, failing ? "fails the same way" : "does not", how);
  if (!failing) {
    hlo_module_free(candidate);
    release_all(inputs, input_count);
    return false;
  }
  ctx->report->wins[strategy]++;
  return set_current(ctx, candidate, inputs, input_count);
}

/* Checks the final repro again: a failure that does not always come back is flaky. */
static void recheck(min_ctx *ctx) {
  int times = ctx->options->rechecks > 0 ? ctx->options->rechecks : 3;
  for (int i = 0; i < times && ctx->error == HLO_OK; i++) {
    min_outcome outcome;
    if (min_check(&ctx->options->predicate, ctx->module, ctx->inputs, ctx->input_count, &outcome, ctx->diag) !=
        HLO_OK) {
      ctx->error = ctx->diag->status;
      return;
    }
    ctx->report->checks++;
    ctx->report->rechecks++;
    ctx->report->reproduced += min_outcome_same(&ctx->report->failure, &outcome);
  }
  ctx->report->flaky = ctx->report->reproduced < ctx->report->rechecks;
  progress(ctx, "final repro failed the same way %d of %d times%s", ctx->report->reproduced, ctx->report->rechecks,
           ctx->report->flaky ? ": FLAKY" : "");
}

static void shrink(min_ctx *ctx) {
  bool changed = true;
  while (changed && !min_stopped(ctx)) {
    changed = false;
    changed |= min_strategy_dce(ctx);
    changed |= min_strategy_truncate(ctx);
    changed |= min_strategy_outputs(ctx);
    changed |= min_strategy_promote(ctx, MIN_TO_PARAM);
    changed |= min_strategy_promote(ctx, MIN_TO_CONST);
    if (changed)
      progress(ctx, "now %d instructions (%d ops)", ctx->module->entry->instr_count, min_count_ops(ctx->module));
  }
}

hlo_status min_minify(const hlo_module *module, rt_value *const *inputs, int input_count, const min_options *options,
                      min_report *report, hlo_diag *diag) {
  memset(report, 0, sizeof *report);
  min_ctx ctx = {.options = options, .report = report, .start = now_s(), .diag = diag, .error = HLO_OK};
  if (!module->entry) return hlo_diag_set(diag, HLO_ERR_INPUT, "module %s has no entry computation", module->name);
  hlo_module *copy = hlo_module_clone(module, diag);
  rt_value **copies = calloc((size_t)input_count + 1, sizeof(rt_value *));
  if (!copy || !copies) {
    hlo_module_free(copy);
    free(copies);
    return diag->status != HLO_OK ? diag->status : hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory");
  }
  for (int i = 0; i < input_count; i++) copies[i] = rt_value_retain(inputs[i]);
  if (!set_current(&ctx, copy, copies, input_count)) return ctx.error;
  report->instrs_before = ctx.module->entry->instr_count;
  report->ops_before = min_count_ops(ctx.module);

  hlo_status status = min_check(&options->predicate, ctx.module, ctx.inputs, ctx.input_count, &report->failure, diag);
  report->checks = 1;
  char text[1400];
  min_outcome_describe(&report->failure, text, sizeof text);
  if (status == HLO_OK && (report->failure.kind == MIN_PASS || report->failure.kind == MIN_CHECK_ERROR))
    status = hlo_diag_set(diag, HLO_ERR_INPUT, "the module does not fail the check, so there is nothing to minify (%s)",
                          text);
  if (status == HLO_OK) {
    progress(&ctx, "%d instructions (%d ops) fail with %s", report->instrs_before, report->ops_before, text);
    memo_add(&ctx, ctx.key, true);
    shrink(&ctx);
    if (ctx.error == HLO_OK) recheck(&ctx);
    status = ctx.error;
  }
  report->module = ctx.module;
  report->inputs = ctx.inputs;
  report->input_count = ctx.input_count;
  report->instrs_after = ctx.module->entry->instr_count;
  report->ops_after = min_count_ops(ctx.module);
  report->seconds = now_s() - ctx.start;
  release_all(ctx.values, ctx.module->entry->instr_count);
  free(ctx.memo);
  if (status != HLO_OK) min_report_free(report); /* report->failure still says how the original came out */
  return status;
}

void min_report_free(min_report *report) {
  hlo_module_free(report->module);
  release_all(report->inputs, report->input_count);
  report->module = NULL;
  report->inputs = NULL;
  report->input_count = 0;
}
