/* The failure's signature: what makes a candidate's failure the one the user was given, so
 * that minifying never slips from one bug to another.
 *
 * Compile and execute errors, crashes and hangs compare by outcome (min_outcome_same: kind,
 * status, op, message class, signal). An accuracy failure is about a value: the original
 * module fails on an output, and the signature's culprit starts as that output's
 * instruction. Candidates keep the names of the instructions they are cut from, so a
 * candidate's failing output can be found in the original: it is the same failure when it is
 * the culprit or a value the culprit is computed from (its cone), since a wrong value there
 * is what makes the culprit wrong. When such a candidate is adopted, the culprit moves back
 * to that output: the signature narrows towards the first op whose value differs, and a
 * failure elsewhere (another output, an op that feeds nothing the user saw fail) never
 * matches. */
#include <stdlib.h>
#include <string.h>

#include "minify_internal.h"

static const hlo_module *sorting; /* qsort has no context argument */

static int by_name(const void *a, const void *b) {
  const hlo_comp *entry = sorting->entry;
  return strcmp(entry->instrs[*(const int *)a]->name, entry->instrs[*(const int *)b]->name);
}

/* The original entry instruction named name, or -1. */
static int find_name(const min_signature *sig, const char *name) {
  const hlo_comp *entry = sig->original->entry;
  int lo = 0, hi = entry->instr_count - 1;
  while (lo <= hi) {
    int mid = lo + (hi - lo) / 2;
    int id = sig->by_name[mid];
    int c = strcmp(entry->instrs[id]->name, name);
    if (c == 0) return id;
    if (c < 0) lo = mid + 1;
    else hi = mid - 1;
  }
  return -1;
}

/* cone[i]: whether the culprit's value depends on original instruction i (itself included). */
static void fill_cone(min_signature *sig) {
  const hlo_comp *entry = sig->original->entry;
  memset(sig->cone, 0, sizeof *sig->cone * (size_t)(entry->instr_count + 1));
  if (sig->culprit < 0) return;
  sig->cone[sig->culprit] = true;
  /* Operands come before their users: one sweep back from the culprit. */
  for (int i = sig->culprit; i >= 0; i--) {
    if (!sig->cone[i]) continue;
    const hlo_instr *instr = entry->instrs[i];
    for (int k = 0; k < instr->operand_count; k++) sig->cone[instr->operands[k]->id] = true;
  }
}

/* The instruction of module's root element index (the root itself when it is no tuple). */
static const hlo_instr *output_instr(const hlo_module *module, int index) {
  const hlo_instr *root = module->entry->root;
  if (root->opcode != HLO_OP_TUPLE) return index == 0 ? root : NULL;
  return index < root->operand_count ? root->operands[index] : NULL;
}

bool min_signature_init(min_signature *sig, const hlo_module *original, const min_outcome *failure, bool any) {
  memset(sig, 0, sizeof *sig);
  sig->original = original;
  sig->failure = *failure;
  sig->any = any;
  sig->culprit = -1;
  int n = original->entry->instr_count;
  sig->by_name = hlo_malloc(sizeof(int) * (size_t)(n + 1));
  sig->cone = hlo_calloc((size_t)n + 1, sizeof *sig->cone);
  if (!sig->by_name || !sig->cone) {
    min_signature_free(sig);
    return false;
  }
  for (int i = 0; i < n; i++) sig->by_name[i] = i;
  sorting = original;
  qsort(sig->by_name, (size_t)n, sizeof(int), by_name);
  if (failure->kind == MIN_ACCURACY && failure->failed_count > 0) {
    const hlo_instr *out = output_instr(original, failure->failed[0]);
    sig->output = failure->failed[0];
    sig->culprit = out ? out->id : -1;
  }
  fill_cone(sig);
  return true;
}

void min_signature_free(min_signature *sig) {
  free(sig->by_name);
  free(sig->cone);
  sig->by_name = NULL;
  sig->cone = NULL;
}

int min_signature_match(const min_signature *sig, const hlo_module *candidate, const min_outcome *got) {
  if (got->kind == MIN_PASS || got->kind == MIN_CHECK_ERROR) return MIN_NO_MATCH;
  if (sig->any) return MIN_MATCH;
  if (!min_outcome_same(&sig->failure, got)) return MIN_NO_MATCH;
  if (got->kind != MIN_ACCURACY || sig->culprit < 0) return MIN_MATCH;
  int best = MIN_NO_MATCH;
  for (int k = 0; k < got->failed_count; k++) {
    const hlo_instr *out = output_instr(candidate, got->failed[k]);
    int id = out ? find_name(sig, out->name) : -1;
    if (id >= 0 && sig->cone[id] && (best < 0 || id < best)) best = id;
  }
  return best;
}

bool min_signature_still(const min_signature *sig, int match) {
  if (match == MIN_NO_MATCH) return false;
  return match < 0 || sig->culprit < 0 || sig->cone[match];
}

void min_signature_narrow(min_signature *sig, int match) {
  if (match < 0 || match == sig->culprit || !sig->cone[match]) return;
  sig->culprit = match;
  fill_cone(sig);
}

const char *min_signature_culprit(const min_signature *sig) {
  return sig->culprit >= 0 ? sig->original->entry->instrs[sig->culprit]->name : NULL;
}
