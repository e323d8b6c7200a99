/* The reduction strategies (minify.h). Each builds plans over the current module's entry
 * instructions and hands them to min_try, which checks and, on success, adopts them. The
 * order of tries matters for the number of checks: the largest cuts come first. */
#include <stdlib.h>
#include <string.h>

#include "minify_internal.h"

typedef struct plan_buf {
  min_plan plan;
  min_disp *disp;
  int *outputs;
} plan_buf;

static bool plan_init(plan_buf *p, int n) {
  p->disp = hlo_calloc((size_t)n + 1, sizeof *p->disp);
  p->outputs = hlo_calloc((size_t)n + 1, sizeof *p->outputs);
  p->plan = (min_plan){p->disp, NULL, 0};
  return p->disp && p->outputs;
}

static void plan_free(plan_buf *p) {
  free(p->disp);
  free(p->outputs);
}

bool min_strategy_dce(min_ctx *ctx) {
  plan_buf p;
  bool won = plan_init(&p, ctx->module->entry->instr_count) && min_try(ctx, &p.plan, MIN_DCE);
  plan_free(&p);
  return won;
}

/* ---- truncate ---- */

/* The outputs of the prefix 0..k: its values no instruction of the prefix uses (leaves aside). */
static int prefix_outputs(const hlo_comp *entry, const int *first_user, int k, int *outputs) {
  int count = 0;
  for (int i = 0; i <= k; i++)
    if (!min_is_leaf(entry->instrs[i]) && first_user[i] > k) outputs[count++] = i;
  return count;
}

/* The index of the instruction called name in entry, or -1 (then the search starts over). */
static int find_by_name(const hlo_comp *entry, const char *name) {
  for (int i = 0; i < entry->instr_count; i++)
    if (strcmp(entry->instrs[i]->name, name) == 0) return i;
  return -1;
}

static int *first_users(const hlo_comp *entry) {
  int n = entry->instr_count;
  int *first = hlo_malloc(sizeof(int) * (size_t)(n + 1));
  if (!first) return NULL;
  for (int i = 0; i < n; i++) first[i] = n;
  for (int i = 0; i < n; i++)
    for (int k = 0; k < entry->instrs[i]->operand_count; k++) {
      int id = entry->instrs[i]->operands[k]->id;
      if (first[id] > i) first[id] = i;
    }
  return first;
}

/* Binary search for the shortest failing prefix, as hlo_bisect does: the prefix 0..k is
 * built with every value it leaves unused as an output, so it contains the culprit exactly
 * when k is at or past it, and the search takes about log2(n) checks. */
bool min_strategy_truncate(min_ctx *ctx) {
  bool won = false;
  int lo = -1; /* the prefix 0..lo is known not to fail */
  char lo_name[256] = "";
  while (!min_stopped(ctx)) {
    const hlo_comp *entry = ctx->module->entry;
    int n = entry->instr_count, hi = n - 1; /* the whole module fails */
    if (lo_name[0]) {
      lo = find_by_name(entry, lo_name);
      lo_name[0] = 0;
    }
    plan_buf p;
    int *first = first_users(entry);
    bool adopted = false;
    if (!first || !plan_init(&p, n)) {
      free(first);
      return won;
    }
    while (hi - lo > 1 && !min_stopped(ctx) && !adopted) {
      int mid = lo + (hi - lo) / 2;
      p.plan.outputs = p.outputs;
      p.plan.output_count = prefix_outputs(entry, first, mid, p.outputs);
      if (p.plan.output_count == 0) { /* parameters and constants alone: nothing to fail */
        lo = mid;
        continue;
      }
      if (lo >= 0) snprintf(lo_name, sizeof lo_name, "%s", entry->instrs[lo]->name);
      if (min_try(ctx, &p.plan, MIN_TRUNCATE)) adopted = won = true;
      else {
        lo = mid;
        lo_name[0] = 0;
      }
    }
    free(first);
    plan_free(&p);
    if (!adopted) break;
  }
  return won;
}

/* ---- outputs ---- */

/* The root tuple's elements as entry ids; 0 when the root is not a tuple. */
static int root_elements(const hlo_comp *entry, int *elements) {
  const hlo_instr *root = entry->root;
  if (root->opcode != HLO_OP_TUPLE) return 0;
  for (int i = 0; i < root->operand_count; i++) elements[i] = root->operands[i]->id;
  return root->operand_count;
}

/* One pass of output removal; true when a candidate was adopted. */
static bool outputs_pass(min_ctx *ctx) {
  const hlo_comp *entry = ctx->module->entry;
  int n = entry->instr_count;
  int *elements = hlo_malloc(sizeof(int) * (size_t)(entry->root->operand_count + 1));
  plan_buf p;
  bool won = false;
  if (!elements || !plan_init(&p, n)) {
    free(elements);
    return false;
  }
  int m = root_elements(entry, elements);
  p.plan.outputs = p.outputs;
  /* The last output alone first: after truncation it is the one that made the prefix fail. */
  if (m >= 1) {
    p.outputs[0] = elements[m - 1];
    p.plan.output_count = 1;
    won = min_try(ctx, &p.plan, MIN_OUTPUTS);
  }
  for (int g = m / 2; g >= 1 && !won && !min_stopped(ctx); g /= 2) {
    for (int start = 0; start < m && !won && !min_stopped(ctx); start += g) {
      int count = 0;
      for (int i = 0; i < m; i++)
        if (i < start || i >= start + g) p.outputs[count++] = elements[i];
      if (count == 0) continue;
      p.plan.output_count = count;
      won = min_try(ctx, &p.plan, MIN_OUTPUTS);
    }
  }
  free(elements);
  plan_free(&p);
  return won;
}

bool min_strategy_outputs(min_ctx *ctx) {
  bool won = false;
  while (!min_stopped(ctx) && outputs_pass(ctx)) won = true;
  return won;
}

/* ---- promote and constant ---- */

/* Constants hold the value in the HLO text: keep them small enough to read. */
#define MAX_CONSTANT_ELEMENTS 1024

/* Instructions that may be cut: ops with an array value (not the outputs themselves, which
 * would make the failure trivially disappear or move). */
static int cuttable(const hlo_comp *entry, min_disp disp, int *ids) {
  int count = 0;
  const hlo_instr *root = entry->root;
  for (int i = 0; i < entry->instr_count; i++) {
    const hlo_instr *instr = entry->instrs[i];
    if (min_is_leaf(instr) || instr == root || !hlo_shape_is_array(&instr->shape) ||
        !hlo_dtype_is_computable(instr->shape.dtype) || hlo_shape_is_dynamic(&instr->shape))
      continue;
    bool output = false;
    for (int k = 0; root->opcode == HLO_OP_TUPLE && k < root->operand_count; k++) output |= root->operands[k] == instr;
    if (output) continue;
    if (disp == MIN_TO_CONST && hlo_shape_elements(&instr->shape) > MAX_CONSTANT_ELEMENTS) continue;
    ids[count++] = i;
  }
  return count;
}

/* Delta debugging over the cuttable instructions: chunks of g from the smallest power of
 * two covering all of them (everything at once: one check when the root alone is the
 * culprit) down to 1; after an adopted cut the chunk size stays. */
bool min_strategy_promote(min_ctx *ctx, min_disp disp) {
  min_strategy strategy = disp == MIN_TO_PARAM ? MIN_PROMOTE : MIN_CONSTANT;
  bool won = false;
  int g = 0;
  while (!min_stopped(ctx)) {
    const hlo_comp *entry = ctx->module->entry;
    int n = entry->instr_count;
    int *ids = hlo_malloc(sizeof(int) * (size_t)(n + 1));
    plan_buf p;
    if (!ids || !plan_init(&p, n)) {
      free(ids);
      return won;
    }
    int c = cuttable(entry, disp, ids);
    int top = 1;
    while (top < c) top *= 2;
    if (g == 0 || g > top) g = top;
    bool adopted = false;
    while (c > 0 && g >= 1 && !adopted && !min_stopped(ctx)) {
      for (int start = 0; start < c && !adopted && !min_stopped(ctx); start += g) {
        memset(p.disp, 0, sizeof *p.disp * (size_t)n);
        for (int i = start; i < start + g && i < c; i++) p.disp[ids[i]] = disp;
        adopted = min_try(ctx, &p.plan, strategy);
      }
      if (!adopted) g /= 2;
    }
    free(ids);
    plan_free(&p);
    if (!adopted) break;
    won = true;
  }
  return won;
}
