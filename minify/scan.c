/* The accuracy scan: records the original run's values once and finds a small failing piece
 * of the module before anything else runs it whole.
 *
 * A whole-module accuracy check runs the reference evaluator twice (declared types and fp64)
 * over the whole module, and every large candidate did it again; on a training step that is
 * minutes per check. The scan instead walks the entry's instructions in order, in groups of
 * consecutive ops (1, 2, 4, ... up to MAX_GROUP_OPS, and at most MAX_GROUP_BYTES of values).
 * Each group becomes a module of its own: its operands from earlier groups are parameters fed
 * with their recorded values (declared for the backend and the declared reference, fp64 for
 * the fp64 reference, so both references are the original run's), and every value it hands
 * on, or that nothing uses, is an output. The reference evaluator runs the group twice with
 * an observer that records each value (record.c); the backend runs it in a child and is
 * compared with those two runs. The first group that fails is a failing module in its own
 * right: it becomes the current module, with every value of it recorded, and the other
 * strategies shrink it with checks that run the backend alone. Values no later group needs
 * are forgotten as the scan moves on.
 *
 * When no group fails (an error that needs many ops together), or the values to keep exceed
 * the budget, the scan gives up and the minifier checks the module whole, as before. */
#include <stdlib.h>
#include <string.h>

#include "minify_internal.h"
#include "runtime/reference/reference.h"

#define MAX_GROUP_OPS 256
#define MAX_GROUP_BYTES (1024.0 * 1024 * 1024)

typedef struct recorder {
  min_record *record;
  bool fp64, failed;
  double budget_bytes; /* 0: no limit */
  bool full;           /* the values passed the budget: no more are kept */
} recorder;

static void observe(void *context, const hlo_instr *instr, rt_value *value) {
  recorder *r = context;
  /* A tuple root the candidate builder made has a new name; its elements are recorded. */
  if (instr == instr->parent->root && instr->opcode == HLO_OP_TUPLE) return;
  if (r->full) return;
  if (r->budget_bytes > 0 && min_record_bytes(r->record) + min_value_bytes(value) > r->budget_bytes) {
    r->full = true;
    return;
  }
  if (!min_record_put(r->record, instr->name, r->fp64, value)) r->failed = true;
}

/* last[i]: the index of instruction i's last user (the root counts as using itself), -1
 * for none. */
static int *last_users(const hlo_comp *entry) {
  int n = entry->instr_count;
  int *last = hlo_malloc(sizeof(int) * (size_t)(n + 1));
  if (!last) return NULL;
  for (int i = 0; i < n; i++) last[i] = -1;
  for (int i = 0; i < n; i++)
    for (int k = 0; k < entry->instrs[i]->operand_count; k++) last[entry->instrs[i]->operands[k]->id] = i;
  last[entry->root->id] = n;
  return last;
}

/* The end (exclusive) of the group that starts at start with at most ops ops. */
static int group_end(const hlo_comp *entry, int start, int ops) {
  int end = start, taken = 0;
  double bytes = 0;
  while (end < entry->instr_count && taken < ops) {
    const hlo_instr *instr = entry->instrs[end];
    if (!min_is_leaf(instr)) {
      /* declared, fp64 and the backend's result */
      double more = 4 * min_shape_bytes(&instr->shape);
      if (taken > 0 && bytes + more > MAX_GROUP_BYTES) break;
      bytes += more;
      taken++;
    }
    end++;
  }
  return end;
}

typedef struct group {
  int start, end;
  min_disp *disp;
  int *outputs, output_count;
  rt_value **values; /* declared values of earlier ops, by id, borrowed from the record */
} group;

/* The plan of the group [start, end): earlier ops become parameters, its ops stay, and its
 * values used later (or by nothing) are the outputs. */
static void plan_group(const hlo_comp *entry, const int *last, const min_record *record, group *g) {
  g->output_count = 0;
  for (int i = 0; i < entry->instr_count; i++) {
    const hlo_instr *instr = entry->instrs[i];
    g->disp[i] = i < g->start && !min_is_leaf(instr) ? MIN_TO_PARAM : MIN_KEEP;
    g->values[i] = g->disp[i] == MIN_TO_PARAM ? min_record_get(record, instr->name, false) : NULL;
    if (i >= g->start && i < g->end && !min_is_leaf(instr) && (last[i] >= g->end || last[i] < 0))
      g->outputs[g->output_count++] = i;
  }
}

/* The candidate's inputs for the fp64 run: promoted parameters get their recorded fp64
 * values; the original's own parameters their inputs. New references. */
static rt_value **fp64_inputs(const hlo_module *candidate, rt_value *const *inputs, const min_record *record) {
  const hlo_comp *entry = candidate->entry;
  rt_value **out = hlo_calloc((size_t)entry->param_count + 1, sizeof *out);
  if (!out) return NULL;
  for (int i = 0; i < entry->param_count; i++) {
    rt_value *fp64 = min_record_get(record, entry->params[i]->name, true);
    out[i] = rt_value_retain(fp64 ? fp64 : inputs[i]);
  }
  return out;
}

/* Runs the references of the group's candidate, recording every value; refs gets its outputs.
 * Values recorded already (by the whole module's run) are used as they are. */
static bool run_references(min_ctx *ctx, const hlo_module *candidate, rt_value **inputs, int count, min_refs *refs) {
  if (min_record_refs(ctx->record, candidate, refs)) return true;
  rt_value **wide = fp64_inputs(candidate, inputs, ctx->record);
  if (!wide) return false;
  recorder r = {ctx->record, false, false, 0, false};
  rt_eval_options declared = {.fp64 = false, .observe = observe, .observe_context = &r};
  rt_value *result[2] = {NULL, NULL};
  hlo_diag diag;
  hlo_diag_clear(&diag);
  bool ok = rt_evaluate(candidate, inputs, count, &declared, &result[0], &diag) == HLO_OK;
  r.fp64 = true;
  rt_eval_options fp64 = {.fp64 = true, .observe = observe, .observe_context = &r};
  ok = ok && rt_evaluate(candidate, wide, count, &fp64, &result[1], &diag) == HLO_OK && !r.failed;
  min_release_all(wide, count);
  if (!ok) {
    min_progress(ctx, "scan: the reference evaluator cannot run a group (%s); checking the module whole",
                 r.failed ? "out of memory" : diag.message);
    rt_value_release(result[0]);
    rt_value_release(result[1]);
    return false;
  }
  refs->declared = result[0];
  refs->fp64 = result[1];
  return true;
}

/* Checks one group; 1 when it fails (and became the current module), 0 when it passes, -1
 * when the scan cannot go on. */
static int check_group(min_ctx *ctx, const hlo_module *original, rt_value *const *inputs, group *g) {
  if (g->output_count == 0) return 0;
  min_plan plan = {g->disp, g->outputs, g->output_count};
  rt_value **cin = NULL;
  int count = 0;
  hlo_diag diag;
  hlo_diag_clear(&diag);
  hlo_module *candidate = min_build(original, inputs, g->values, &plan, &cin, &count, &diag);
  if (!candidate) {
    min_progress(ctx, "scan: skipped an invalid group: %s", diag.message);
    return -1;
  }
  min_refs refs;
  int verdict = -1;
  int match = MIN_NO_MATCH;
  if (run_references(ctx, candidate, cin, count, &refs)) {
    min_outcome outcome;
    min_predicate predicate = min_budgeted(ctx);
    if (min_check_refs(&predicate, candidate, cin, count, &refs, &outcome, ctx->diag) != HLO_OK) {
      ctx->error = ctx->diag->status;
    } else {
      ctx->report->checks++;
      /* A group that crashes, hangs or fails to compile fails; only another way than the
       * module, so it is neither the culprit nor a pass. */
      match = min_judge(ctx, candidate, &outcome);
      verdict = match != MIN_NO_MATCH;
      char how[1400] = "pass";
      if (verdict) snprintf(how, sizeof how, "fail on their own");
      else if (outcome.kind != MIN_PASS) {
        snprintf(how, sizeof how, "fail another way than the module: ");
        min_outcome_describe(&outcome, how + strlen(how), (int)(sizeof how - strlen(how)));
      }
      min_progress(ctx, "scan: instructions %d..%d (%d ops) %s", g->start, g->end - 1, min_count_ops(candidate), how);
    }
    min_refs_release(&refs);
  }
  if (verdict == 1) {
    ctx->report->wins[MIN_SCAN]++;
    min_signature_narrow(&ctx->sig, match);
    return min_set_current(ctx, candidate, cin, count) ? 1 : -1;
  }
  hlo_module_free(candidate);
  min_release_all(cin, count);
  return verdict;
}

/* Forgets the values no instruction at or after end needs. */
static void forget(min_record *record, const hlo_comp *entry, const int *last, int end) {
  for (int i = 0; i < end; i++)
    if (last[i] < end && !min_is_leaf(entry->instrs[i])) min_record_drop(record, entry->instrs[i]->name);
}

bool min_scan_accuracy(min_ctx *ctx, double budget_bytes) {
  const hlo_module *original = ctx->module;
  const hlo_comp *entry = original->entry;
  int n = entry->instr_count;
  if (!ctx->record) ctx->record = min_record_new();
  group g = {0};
  g.disp = hlo_calloc((size_t)n + 1, sizeof *g.disp);
  g.outputs = hlo_calloc((size_t)n + 1, sizeof *g.outputs);
  g.values = hlo_calloc((size_t)n + 1, sizeof *g.values);
  int *last = last_users(entry);
  /* The original stays alive while the scan builds from it: the current module's slot is
   * only replaced when a group fails. */
  rt_value **inputs = ctx->inputs;
  int verdict = ctx->record && g.disp && g.outputs && g.values && last ? 0 : -1;
  for (int ops = 1; verdict == 0 && g.end < n && !min_stopped(ctx);) {
    g.start = g.end;
    g.end = group_end(entry, g.start, ops);
    plan_group(entry, last, ctx->record, &g);
    verdict = check_group(ctx, original, inputs, &g);
    if (verdict != 0) break;
    forget(ctx->record, entry, last, g.end);
    if (min_record_bytes(ctx->record) > budget_bytes) {
      min_progress(ctx, "scan: the values to keep exceed %.0f MB; checking the module whole", budget_bytes / 1e6);
      verdict = -1;
    }
    ops = ops * 2 > MAX_GROUP_OPS ? MAX_GROUP_OPS : ops * 2;
  }
  free(g.disp);
  free(g.outputs);
  free(g.values);
  free(last);
  if (verdict != 1) {
    /* The whole module stays current: what is still recorded of it serves its candidates. */
    min_progress(ctx, "scan: no group fails on its own the way the module does; shrinking the module whole");
  }
  return verdict == 1;
}

bool min_record_whole(min_ctx *ctx, double budget_bytes, min_refs *refs) {
  ctx->record = min_record_new();
  if (!ctx->record) return false;
  recorder r = {ctx->record, false, false, budget_bytes, false};
  rt_eval_options declared = {.fp64 = false, .observe = observe, .observe_context = &r};
  rt_eval_options fp64 = {.fp64 = true, .observe = observe, .observe_context = &r};
  rt_value *result[2] = {NULL, NULL};
  hlo_diag diag;
  hlo_diag_clear(&diag);
  bool ok = rt_evaluate(ctx->module, ctx->inputs, ctx->input_count, &declared, &result[0], &diag) == HLO_OK;
  r.fp64 = true;
  ok = ok && rt_evaluate(ctx->module, ctx->inputs, ctx->input_count, &fp64, &result[1], &diag) == HLO_OK;
  if (!ok || r.failed || r.full) { /* no record: the scan and the checks record as they go */
    if (r.full) min_progress(ctx, "the module's values exceed %.0f MB; recording them group by group", budget_bytes / 1e6);
    min_record_free(ctx->record);
    ctx->record = NULL;
  }
  if (!ok) {
    rt_value_release(result[0]);
    rt_value_release(result[1]);
    return false;
  }
  refs->declared = result[0];
  refs->fp64 = result[1];
  return true;
}
