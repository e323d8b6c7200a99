/* The minifier's driver: the original check, the strategy loop, memoized candidate checks,
 * the final rechecks (minify.h). */
#include "minify.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "minify_internal.h"
#include "hlo/hlo.h"

/* Reference values kept per module beyond those asked for, so most promotions on the same
 * module need no second evaluation. */
#define VALUE_BUDGET_BYTES (256.0 * 1024 * 1024)
/* A compile check's repro is given seeded inputs up to this size (shapes only above it). */
#define SEEDED_INPUT_LIMIT_BYTES (256.0 * 1024 * 1024)

const char *min_strategy_name(min_strategy strategy) {
  static const char *const names[] = {"scan", "dce", "truncate", "outputs", "needed", "promote", "constant", "shapes", "inputs",
                                       "bypass", "attributes", "types", "metadata"};
  return strategy < MIN_STRATEGY_COUNT ? names[strategy] : "?";
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

void min_release_all(rt_value **values, int count) {
  for (int i = 0; values && i < count; i++) rt_value_release(values[i]);
  free(values);
}

bool min_set_current(min_ctx *ctx, hlo_module *module, rt_value **inputs, int input_count) {
  rt_value **values = hlo_calloc((size_t)module->entry->instr_count + 1, sizeof(rt_value *));
  cache_key key = {0, 0};
  if (!values || !cache_hash_module(module, &key)) {
    free(values);
    ctx->error = hlo_diag_set(ctx->diag, HLO_ERR_INTERNAL, "out of memory");
    hlo_module_free(module);
    min_release_all(inputs, input_count);
    return false;
  }
  if (ctx->module) min_release_all(ctx->values, ctx->module->entry->instr_count);
  hlo_module_free(ctx->module);
  min_release_all(ctx->inputs, ctx->input_count);
  ctx->module = module;
  ctx->inputs = inputs;
  ctx->input_count = input_count;
  ctx->values = values;
  ctx->values_failed = false;
  for (int i = 0; ctx->record && i < module->entry->instr_count; i++)
    values[i] = rt_value_retain(min_record_get(ctx->record, module->entry->instrs[i]->name, false));
  ctx->key = key;
  return true;
}

/* Seconds of the budget left; a large number when there is no budget. */
static double budget_left(const min_ctx *ctx) {
  double budget = ctx->options->budget_s;
  return budget > 0 ? budget - (now_s() - ctx->start) : 1e18;
}

bool min_stopped(const min_ctx *ctx) {
  int limit = ctx->options->max_checks;
  return ctx->error != HLO_OK || (limit > 0 && ctx->report->checks >= limit) || budget_left(ctx) <= 0;
}

/* The predicate with its time limit cut to the budget left. */
min_predicate min_budgeted(const min_ctx *ctx) {
  min_predicate predicate = ctx->options->predicate;
  double left = budget_left(ctx);
  if (left < 0.001) left = 0.001;
  if (predicate.timeout_s <= 0 || predicate.timeout_s > left) predicate.timeout_s = left < 1e9 ? left : 0;
  return predicate;
}

static min_memo_entry *memo_find(min_ctx *ctx, cache_key key) {
  for (int i = 0; i < ctx->memo_count; i++)
    if (cache_key_equal(ctx->memo[i].key, key)) return &ctx->memo[i];
  return NULL;
}

static void memo_add(min_ctx *ctx, cache_key key, int match) {
  if (ctx->memo_count == ctx->memo_capacity) {
    int capacity = ctx->memo_capacity ? ctx->memo_capacity * 2 : 64;
    min_memo_entry *memo = hlo_realloc(ctx->memo, sizeof *memo * (size_t)capacity);
    if (!memo) return; /* a memo miss later only costs a check */
    ctx->memo = memo;
    ctx->memo_capacity = capacity;
  }
  ctx->memo[ctx->memo_count++] = (min_memo_entry){key, match};
}

void min_progress(min_ctx *ctx, const char *format, ...) {
  FILE *out = ctx->options->progress;
  if (!out) return;
  char event[1600];
  va_list args;
  va_start(args, format);
  vsnprintf(event, sizeof event, format, args);
  va_end(args);
  double elapsed = now_s() - ctx->start;
  if (!ctx->options->progress_line) {
    fprintf(out, "minify: [%d checks, %.1f s] %s\n", ctx->report->checks, elapsed, event);
    return;
  }
  /* One line, rewritten in place: the counters, then the latest event cut to fit. */
  char line[160];
  int len = snprintf(line, sizeof line, "minify: %d checks, %d instructions (%d ops), %.0f input bytes, %.1f s | %s",
                     ctx->report->checks, ctx->module->entry->instr_count, min_count_ops(ctx->module),
                     min_input_bytes(ctx->module), elapsed, event);
  if (len >= 100) len = 100;
  fprintf(out, "\r\033[K%.*s", len, line);
  fflush(out);
}

/* Reference values the plan needs and the current module lacks; false when they cannot be had. */
static bool ensure_values(min_ctx *ctx, const min_plan *plan, const bool *live) {
  if (ctx->shapes_only) return true;
  const hlo_comp *entry = ctx->module->entry;
  int n = entry->instr_count;
  bool *want = hlo_calloc((size_t)n + 1, sizeof *want);
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
    min_progress(ctx, "computing reference values of %d instructions", n);
    if (min_values_compute(ctx->module, ctx->inputs, ctx->input_count, want, ctx->values, VALUE_BUDGET_BYTES,
                           &diag) != HLO_OK) {
      min_progress(ctx, "the reference evaluator cannot run this module (%s): no promotions", diag.message);
      ctx->values_failed = true;
    } else {
      ok = true;
      for (int i = 0; i < n; i++) ok &= !want[i] || ctx->values[i] != NULL;
    }
  }
  free(want);
  return ok;
}

/* min_check, against the record's references while there is one. */
static hlo_status check(min_ctx *ctx, const hlo_module *module, rt_value *const *inputs, int input_count,
                        min_outcome *outcome) {
  min_refs refs;
  bool recorded = ctx->record && ctx->options->predicate.kind == MIN_CHECK_ACCURACY &&
                  min_record_refs(ctx->record, module, &refs);
  min_predicate predicate = min_budgeted(ctx);
  hlo_status status =
      min_check_refs(&predicate, module, inputs, input_count, recorded ? &refs : NULL, outcome, ctx->diag);
  if (recorded) min_refs_release(&refs);
  /* Cut short by the budget rather than the check's own limit: not a verdict on the candidate. */
  if (status == HLO_OK && outcome->kind == MIN_HANG && predicate.timeout_s != ctx->options->predicate.timeout_s)
    outcome->kind = MIN_PASS;
  return status;
}

int min_judge(min_ctx *ctx, const hlo_module *candidate, const min_outcome *outcome) {
  return min_signature_match(&ctx->sig, candidate, outcome);
}

/* A candidate adopted with match: the signature narrows to its failing output. */
static void adopted(min_ctx *ctx, int match) {
  min_signature_narrow(&ctx->sig, match);
}

bool min_try(min_ctx *ctx, const min_plan *plan, min_strategy strategy) {
  if (min_stopped(ctx)) return false;
  int n = ctx->module->entry->instr_count;
  bool *live = hlo_calloc((size_t)n + 1, sizeof *live);
  if (!live) return false;
  min_plan_live(ctx->module, plan, live);
  bool have_values = ensure_values(ctx, plan, live);
  free(live);
  if (!have_values) return false;
  hlo_diag diag;
  hlo_diag_clear(&diag);
  rt_value **inputs = NULL;
  int input_count = 0;
  hlo_module *candidate = min_build(ctx->module, ctx->inputs, ctx->shapes_only ? NULL : ctx->values, plan, &inputs,
                                    &input_count, &diag);
  if (!candidate) {
    min_progress(ctx, "%s: skipped an invalid candidate: %s", min_strategy_name(strategy), diag.message);
    return false;
  }
  int ops = min_count_ops(candidate), instrs = candidate->entry->instr_count;
  int cur_ops = min_count_ops(ctx->module);
  bool smaller = ops < cur_ops || (ops == cur_ops && instrs < n);
  return min_try_candidate(ctx, candidate, inputs, input_count, strategy, smaller);
}

bool min_try_candidate(min_ctx *ctx, hlo_module *candidate, rt_value **inputs, int input_count, min_strategy strategy,
                       bool smaller) {
  int n = ctx->module->entry->instr_count, cur_ops = min_count_ops(ctx->module);
  int ops = min_count_ops(candidate), instrs = candidate->entry->instr_count;
  cache_key key = {0, 0};
  if (!cache_hash_module(candidate, &key)) {
    ctx->error = hlo_diag_set(ctx->diag, HLO_ERR_INTERNAL, "out of memory hashing a candidate");
    smaller = false; /* freed below, and the search stops */
  }
  if (min_stopped(ctx) || !smaller || cache_key_equal(key, ctx->key)) {
    hlo_module_free(candidate);
    min_release_all(inputs, input_count);
    return false;
  }
  bool failing;
  int match = MIN_NO_MATCH;
  const char *how = "";
  min_memo_entry *known = memo_find(ctx, key);
  if (known) {
    match = known->match;
    failing = min_signature_still(&ctx->sig, match);
    ctx->report->memo_hits++;
    how = " (memoized)";
  } else {
    min_outcome outcome;
    if (check(ctx, candidate, inputs, input_count, &outcome) != HLO_OK) {
      ctx->error = ctx->diag->status;
      hlo_module_free(candidate);
      min_release_all(inputs, input_count);
      return false;
    }
    ctx->report->checks++;
    match = min_judge(ctx, candidate, &outcome);
    failing = match != MIN_NO_MATCH;
    memo_add(ctx, key, match);
  }
  min_progress(ctx, "%s: %d instructions (%d ops, %.0f input bytes) -> %d (%d ops, %.0f input bytes): %s%s",
               min_strategy_name(strategy), n, cur_ops, min_input_bytes(ctx->module), instrs, ops,
               min_input_bytes(candidate), failing ? "fails the same way" : "does not", how);
  if (!failing) {
    hlo_module_free(candidate);
    min_release_all(inputs, input_count);
    return false;
  }
  ctx->report->wins[strategy]++;
  adopted(ctx, match);
  return min_set_current(ctx, candidate, inputs, input_count);
}

/* Checks the final repro again: a failure that does not always come back is flaky. */
static void recheck(min_ctx *ctx) {
  int times = ctx->options->rechecks > 0 ? ctx->options->rechecks : 3;
  for (int i = 0; i < times && !min_stopped(ctx); i++) {
    min_outcome outcome;
    if (check(ctx, ctx->module, ctx->inputs, ctx->input_count, &outcome) != HLO_OK) {
      ctx->error = ctx->diag->status;
      return;
    }
    ctx->report->checks++;
    ctx->report->rechecks++;
    ctx->report->reproduced += min_judge(ctx, ctx->module, &outcome) != MIN_NO_MATCH;
  }
  ctx->report->flaky = ctx->report->reproduced < ctx->report->rechecks;
  min_progress(ctx, "final repro failed the same way %d of %d times%s", ctx->report->reproduced, ctx->report->rechecks,
           ctx->report->flaky ? ": FLAKY" : "");
}

static void shrink(min_ctx *ctx) {
  bool changed = true;
  while (changed && !min_stopped(ctx)) {
    changed = false;
    changed |= min_strategy_dce(ctx);
    changed |= min_strategy_truncate(ctx);
    changed |= min_strategy_needed(ctx);
    changed |= min_strategy_outputs(ctx);
    changed |= min_strategy_promote(ctx, MIN_TO_PARAM);
    if (!ctx->shapes_only) changed |= min_strategy_promote(ctx, MIN_TO_CONST);
    /* rewrites drop the record: with large inputs every later check would run the
     * reference on them, so they wait until shapes have shrunk */
    if (!changed && !min_stopped(ctx) && (!ctx->record || !min_inputs_large(ctx)))
      changed = min_strategy_rewrite(ctx);
    if (changed)
      min_progress(ctx, "now %d instructions (%d ops)", ctx->module->entry->instr_count, min_count_ops(ctx->module));
  }
}

/* Whether the repro's inputs are still larger than the options' target. */
bool min_inputs_large(const min_ctx *ctx) {
  double target = ctx->options->small_inputs_bytes > 0 ? ctx->options->small_inputs_bytes : MIN_SMALL_INPUTS_BYTES;
  return !ctx->options->keep_shapes && min_input_bytes(ctx->module) > target;
}

/* After the ops: smaller shapes, then simpler inputs, while the inputs are large. The
 * record no longer applies once shapes or inputs change: checks compute their references. */
static bool shrink_data(min_ctx *ctx) {
  if (!min_inputs_large(ctx)) return false;
  min_record_free(ctx->record);
  ctx->record = NULL;
  bool changed = true, any = false;
  while (changed && min_inputs_large(ctx) && !min_stopped(ctx)) {
    changed = min_strategy_shapes(ctx);
    if (min_inputs_large(ctx)) changed |= min_strategy_inputs(ctx);
    if (changed) min_progress(ctx, "now %.0f input bytes", min_input_bytes(ctx->module));
    any |= changed;
  }
  return any;
}

/* The whole module's check. An accuracy check runs the references here once, recording every
 * value while they fit the budget, so the scan and the candidates cut from the module need no
 * reference run of their own. */
static hlo_status check_whole(min_ctx *ctx, double budget) {
  min_report *report = ctx->report;
  const min_options *options = ctx->options;
  min_refs refs = {NULL, NULL};
  bool accuracy = options->predicate.kind == MIN_CHECK_ACCURACY &&
                  (!options->failure || options->failure->kind == MIN_ACCURACY);
  bool have_refs = accuracy && min_record_whole(ctx, budget, &refs);
  hlo_status status = HLO_OK;
  if (options->failure) { /* seen by the caller: not checked again */
    report->failure = *options->failure;
  } else {
    min_predicate predicate = min_budgeted(ctx);
    status = min_check_refs(&predicate, ctx->module, ctx->inputs, ctx->input_count, have_refs ? &refs : NULL,
                            &report->failure, ctx->diag);
    report->checks++;
  }
  if (have_refs) min_refs_release(&refs);
  return status;
}

/* The first check: the original module, whole, must fail; what it fails with is the
 * signature every candidate must keep. Then, for an accuracy failure, the scan (scan.c),
 * which finds a small group failing the same way. */
static hlo_status first_check(min_ctx *ctx, const hlo_module *original) {
  min_report *report = ctx->report;
  const min_options *options = ctx->options;
  double budget = options->record_budget_bytes;
  if (budget <= 0) budget = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE) / 4;
  hlo_status status = check_whole(ctx, budget);
  char text[1400];
  min_outcome_describe(&report->failure, text, sizeof text);
  if (status == HLO_OK && (report->failure.kind == MIN_PASS || report->failure.kind == MIN_CHECK_ERROR))
    status = hlo_diag_set(ctx->diag, HLO_ERR_INPUT,
                          "the module does not fail the check, so there is nothing to minify (%s)", text);
  if (status != HLO_OK) return status;
  if (!min_signature_init(&ctx->sig, original, &report->failure, options->any_failure))
    return hlo_diag_set(ctx->diag, HLO_ERR_INTERNAL, "out of memory");
  min_progress(ctx, "%d instructions (%d ops) fail with %s", report->instrs_before, report->ops_before, text);
  if (report->failure.kind != MIN_ACCURACY) { /* the record serves accuracy failures only */
    min_record_free(ctx->record);
    ctx->record = NULL;
  }
  if (report->failure.kind == MIN_ACCURACY && !options->no_scan) {
    min_scan_accuracy(ctx, budget);
    return ctx->error;
  }
  return HLO_OK;
}

/* A compile check's repro gets seeded inputs at the end (as `latch run` makes them), where
 * they are small enough to write; larger ones stay NULL and the repro uses the seed. */
static void seed_inputs(min_ctx *ctx) {
  const hlo_comp *entry = ctx->module->entry;
  double bytes = 0;
  for (int i = 0; i < entry->param_count; i++) bytes += (double)hlo_shape_bytes(&entry->params[i]->shape);
  if (bytes > SEEDED_INPUT_LIMIT_BYTES) return;
  for (int i = 0; i < ctx->input_count && i < entry->param_count; i++) {
    hlo_diag diag;
    hlo_diag_clear(&diag);
    if (!ctx->inputs[i]) ctx->inputs[i] = rt_random_value(&entry->params[i]->shape, 0, (uint64_t)i, &diag);
  }
}

/* The original as the current module: a copy, with its inputs (none for a compile check). */
static bool start(min_ctx *ctx, const hlo_module *module, rt_value *const *inputs, int input_count) {
  hlo_module *copy = hlo_module_clone(module, ctx->diag);
  if (!copy) return false;
  if (ctx->shapes_only) input_count = module->entry->param_count;
  rt_value **copies = hlo_calloc((size_t)input_count + 1, sizeof(rt_value *));
  if (!copies) {
    hlo_module_free(copy);
    hlo_diag_set(ctx->diag, HLO_ERR_INTERNAL, "out of memory");
    return false;
  }
  for (int i = 0; !ctx->shapes_only && i < input_count; i++) copies[i] = rt_value_retain(inputs[i]);
  return min_set_current(ctx, copy, copies, input_count);
}

hlo_status min_minify(const hlo_module *module, rt_value *const *inputs, int input_count, const min_options *options,
                      min_report *report, hlo_diag *diag) {
  memset(report, 0, sizeof *report);
  min_ctx ctx = {.options = options, .report = report, .start = now_s(), .diag = diag, .error = HLO_OK};
  ctx.shapes_only = options->predicate.kind == MIN_CHECK_COMPILE;
  ctx.sig.culprit = ctx.sig.output = -1;
  if (!module->entry) return hlo_diag_set(diag, HLO_ERR_INPUT, "module %s has no entry computation", module->name);
  if (!start(&ctx, module, inputs, input_count))
    return diag->status != HLO_OK ? diag->status : hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory");
  report->instrs_before = ctx.module->entry->instr_count;
  report->ops_before = min_count_ops(ctx.module);
  report->input_bytes_before = min_input_bytes(ctx.module);

  hlo_status status = first_check(&ctx, module);
  if (status == HLO_OK) {
    memo_add(&ctx, ctx.key, MIN_MATCH);
    bool known_hang = options->failure && options->failure->kind == MIN_HANG;
    if (!known_hang) {
      shrink(&ctx);
      /* the rewrites deferred while the record served large inputs, once smaller shapes made
       * them small (not after simpler inputs: they would rewrite the generators) */
      if (shrink_data(&ctx) && !report->wins[MIN_INPUTS] && !min_inputs_large(&ctx) && min_strategy_rewrite(&ctx))
        shrink(&ctx);
      report->stopped_early = ctx.error == HLO_OK && min_stopped(&ctx);
      if (ctx.error == HLO_OK) recheck(&ctx);
    }
    status = ctx.error;
  }
  if (ctx.shapes_only) seed_inputs(&ctx);
  if (options->progress && options->progress_line) fputc('\n', options->progress);
  report->module = ctx.module;
  report->inputs = ctx.inputs;
  report->input_count = ctx.input_count;
  report->instrs_after = ctx.module->entry->instr_count;
  report->ops_after = min_count_ops(ctx.module);
  report->input_bytes_after = min_input_bytes(ctx.module);
  report->seconds = now_s() - ctx.start;
  report->failed_output = ctx.sig.output;
  const char *culprit = min_signature_culprit(&ctx.sig);
  snprintf(report->first_differing, sizeof report->first_differing, "%s", culprit ? culprit : "");
  min_signature_free(&ctx.sig);
  min_release_all(ctx.values, ctx.module->entry->instr_count);
  min_record_free(ctx.record);
  free(ctx.memo);
  if (status != HLO_OK) min_report_free(report); /* report->failure still says how the original came out */
  return status;
}

double min_shape_bytes(const hlo_shape *shape) {
  if (shape->dtype != HLO_TUPLE) return (double)hlo_shape_bytes(shape);
  double total = 0;
  for (int i = 0; i < shape->tuple_count; i++) total += min_shape_bytes(&shape->tuple[i]);
  return total;
}

double min_input_bytes(const hlo_module *module) {
  double bytes = 0;
  for (int i = 0; i < module->entry->param_count; i++) bytes += min_shape_bytes(&module->entry->params[i]->shape);
  return bytes;
}

void min_report_free(min_report *report) {
  hlo_module_free(report->module);
  min_release_all(report->inputs, report->input_count);
  report->module = NULL;
  report->inputs = NULL;
  report->input_count = 0;
}
