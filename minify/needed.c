/* The ops the failure needs, one at a time, for failures that need several ops
 * together (two ops fused or laid out jointly), where cutting chunks (promote) keeps
 * failing on whichever of them a chunk holds.
 *
 * A candidate keeps a set S of ops: every other op S reads becomes a parameter, and the
 * values of S that no op of S uses are its outputs. With a failure that needs ops c1 < c2 <
 * ... (in instruction order), the smallest prefix P of the ops such that S = found + P
 * fails ends at the last needed op not yet found: a binary search finds it in log2(n)
 * checks, it joins found, and the search repeats below it until found alone fails. Each
 * round first tries found with the last op alone, and the first round's search starts by
 * dropping the last op alone (after truncation the last op is needed: a single culprit
 * costs one check, the last of several two). Failing probes are adopted as they come, so the
 * module shrinks during the search; ops are tracked by name. */
#include <stdlib.h>
#include <string.h>

#include "minify_internal.h"

#define MAX_FOUND 16

typedef struct needed {
  char *found[MAX_FOUND]; /* names (copies: adopted candidates replace the module) */
  int found_count;
  int *ops; /* ids of the current module's ops not found yet, in order */
  int op_count;
  bool *keep;
  min_disp *disp;
  int *outputs;
} needed;

static bool is_found(const needed *s, const char *name) {
  for (int i = 0; i < s->found_count; i++)
    if (strcmp(s->found[i], name) == 0) return true;
  return false;
}

/* An op a candidate can feed from a parameter instead. */
static bool promotable(const hlo_instr *instr) {
  return hlo_shape_is_array(&instr->shape) && hlo_dtype_is_computable(instr->shape.dtype) &&
         !hlo_shape_is_dynamic(&instr->shape);
}

/* The current module's ops not found yet; a tuple root is structure, not a suspect. */
static bool list_ops(needed *s, const hlo_comp *entry) {
  free(s->ops);
  s->ops = hlo_malloc(sizeof(int) * (size_t)(entry->instr_count + 1));
  if (!s->ops) return false;
  s->op_count = 0;
  for (int i = 0; i < entry->instr_count; i++) {
    const hlo_instr *instr = entry->instrs[i];
    if (min_is_leaf(instr) || (instr == entry->root && instr->opcode == HLO_OP_TUPLE) || is_found(s, instr->name))
      continue;
    s->ops[s->op_count++] = i;
  }
  return true;
}

/* Tries keeping found plus ops[0..prefix] (prefix -1: found alone) and, when extra >= 0,
 * ops[extra]; true when the candidate failed and was adopted. */
static bool try_keep(min_ctx *ctx, needed *s, int prefix, int extra) {
  const hlo_comp *entry = ctx->module->entry;
  int n = entry->instr_count;
  memset(s->keep, 0, sizeof *s->keep * (size_t)n);
  for (int i = 0; i <= prefix; i++) s->keep[s->ops[i]] = true;
  if (extra >= 0) s->keep[s->ops[extra]] = true;
  for (int i = 0; i < n; i++)
    if (is_found(s, entry->instrs[i]->name)) s->keep[i] = true;
  /* used[i]: an op of the set reads i, so i's value shows in its users' outputs; unless the
   * module returns i itself: an output stays an output (a user may hide an error). */
  bool *used = hlo_calloc((size_t)n + 1, sizeof *used);
  if (!used) return false;
  for (int i = 0; i < n; i++)
    for (int k = 0; s->keep[i] && k < entry->instrs[i]->operand_count; k++) used[entry->instrs[i]->operands[k]->id] = true;
  const hlo_instr *root = entry->root;
  used[root->id] = false;
  for (int k = 0; root->opcode == HLO_OP_TUPLE && k < root->operand_count; k++) used[root->operands[k]->id] = false;
  int outputs = 0;
  for (int i = 0; i < n; i++) {
    const hlo_instr *instr = entry->instrs[i];
    bool cut = !s->keep[i] && !min_is_leaf(instr) && promotable(instr);
    s->disp[i] = cut ? MIN_TO_PARAM : MIN_KEEP;
    if (s->keep[i] && !used[i]) s->outputs[outputs++] = i;
  }
  free(used);
  if (outputs == 0) return false;
  min_plan plan = {s->disp, s->outputs, outputs};
  return min_try(ctx, &plan, MIN_NEEDED);
}

/* The index in ops of the op called name; -1 when it is gone. */
static int index_of(const needed *s, const hlo_comp *entry, const char *name) {
  for (int i = 0; i < s->op_count; i++)
    if (strcmp(entry->instrs[s->ops[i]]->name, name) == 0) return i;
  return -1;
}

static int add_found(needed *s, const char *name) {
  if (s->found_count == MAX_FOUND || !(s->found[s->found_count] = hlo_strdup(name))) return -1;
  s->found_count++;
  return 0;
}

/* One round: adds the next needed op to found; 1 when found alone now fails (adopted), 0
 * to go on, -1 to stop. */
static int round_(min_ctx *ctx, needed *s) {
  if (!list_ops(s, ctx->module->entry) || s->op_count == 0) return -1;
  if (s->found_count > 0 && try_keep(ctx, s, -1, -1)) return 1;
  if (min_stopped(ctx) || !list_ops(s, ctx->module->entry)) return -1;
  int last = s->op_count - 1;
  char name[256], lo_name[256] = "";
  snprintf(name, sizeof name, "%s", ctx->module->entry->instrs[s->ops[last]]->name);
  /* found with the last op alone */
  if (last > 0 && try_keep(ctx, s, -1, last)) return add_found(s, name);
  /* found with ops[0..lo] passes (lo -1: not tried); found with ops[0..hi] fails */
  int lo = -1, hi = last;
  /* The first round's first probe drops the last op alone: after truncation it is needed,
   * and the search ends at once instead of halving down to it. */
  bool first = s->found_count == 0;
  while (hi - lo > 1 && !min_stopped(ctx)) {
    int mid = first ? hi - 1 : lo + (hi - lo) / 2;
    first = false;
    snprintf(name, sizeof name, "%s", ctx->module->entry->instrs[s->ops[mid]]->name);
    if (try_keep(ctx, s, mid, -1)) {
      /* the module is now found + ops[0..mid] (and any op they need that cannot be cut) */
      if (!list_ops(s, ctx->module->entry)) return -1;
      hi = index_of(s, ctx->module->entry, name);
      lo = lo_name[0] ? index_of(s, ctx->module->entry, lo_name) : -1;
      if (hi < 0) return -1;
    } else {
      lo = mid;
      snprintf(lo_name, sizeof lo_name, "%s", name);
    }
  }
  if (min_stopped(ctx)) return -1;
  return add_found(s, ctx->module->entry->instrs[s->ops[hi]]->name);
}

bool min_strategy_needed(min_ctx *ctx) {
  int n = ctx->module->entry->instr_count;
  needed s = {0};
  s.keep = hlo_calloc((size_t)n + 1, sizeof *s.keep);
  s.disp = hlo_calloc((size_t)n + 1, sizeof *s.disp);
  s.outputs = hlo_calloc((size_t)n + 1, sizeof *s.outputs);
  int wins = ctx->report->wins[MIN_NEEDED];
  int verdict = s.keep && s.disp && s.outputs ? 0 : -1;
  while (verdict == 0 && !min_stopped(ctx)) verdict = round_(ctx, &s);
  for (int i = 0; i < s.found_count; i++) free(s.found[i]);
  free(s.ops);
  free(s.keep);
  free(s.disp);
  free(s.outputs);
  return ctx->report->wins[MIN_NEEDED] > wins;
}
