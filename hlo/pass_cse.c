/* Common-subexpression elimination. An instruction's identity is its printed form without
 * its name: "shape opcode(operands), attributes". The printer already writes every
 * attribute that matters (and the uninterpreted ones verbatim), so two instructions that
 * print alike compute alike; a hand-written field comparison would be a second list of
 * attributes to keep in sync. Operands print by name, and names are unique, so after the
 * operands themselves are merged, equal text means equal operands. A 64-bit FNV-1a hash of
 * the text indexes an open-addressing table; equal hashes are confirmed on the text. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hlo.h"

enum { MAX_CONSTANT_ELEMENTS = 256 }; /* larger constants are rarely duplicated; printing them costs */

static bool mergeable(const hlo_instr *instr) {
  switch (instr->opcode) {
    case HLO_OP_PARAMETER: case HLO_OP_RNG: case HLO_OP_RNG_BIT_GENERATOR:
    case HLO_OP_RNG_GET_AND_UPDATE_STATE: case HLO_OP_CUSTOM_CALL: case HLO_OP_INFEED:
    case HLO_OP_OUTFEED: case HLO_OP_SEND: case HLO_OP_SEND_DONE: case HLO_OP_RECV:
    case HLO_OP_RECV_DONE: case HLO_OP_AFTER_ALL: case HLO_OP_WHILE: case HLO_OP_CONDITIONAL:
    case HLO_OP_CALL: case HLO_OP_FUSION: case HLO_OP_OPTIMIZATION_BARRIER:
    case HLO_OP_ADD_DEPENDENCY: case HLO_OP_DOMAIN: case HLO_OP_ALL_GATHER:
    case HLO_OP_ALL_GATHER_DONE: case HLO_OP_ALL_GATHER_START: case HLO_OP_ALL_REDUCE:
    case HLO_OP_ALL_REDUCE_DONE: case HLO_OP_ALL_REDUCE_START: case HLO_OP_ALL_TO_ALL:
    case HLO_OP_ASYNC_DONE: case HLO_OP_ASYNC_START: case HLO_OP_ASYNC_UPDATE:
    case HLO_OP_COLLECTIVE_BROADCAST: case HLO_OP_COLLECTIVE_PERMUTE:
    case HLO_OP_COLLECTIVE_PERMUTE_DONE: case HLO_OP_COLLECTIVE_PERMUTE_START:
    case HLO_OP_COPY_DONE: case HLO_OP_COPY_START: case HLO_OP_RAGGED_ALL_TO_ALL:
    case HLO_OP_REDUCE_SCATTER: case HLO_OP_REPLICA_ID: case HLO_OP_PARTITION_ID:
    case HLO_OP_SET_DIMENSION_SIZE: case HLO_OP_STOCHASTIC_CONVERT:
      return false;
    case HLO_OP_CONSTANT:
      return hlo_shape_elements(&instr->shape) <= MAX_CONSTANT_ELEMENTS;
    default:
      return true;
  }
}

static uint64_t fnv1a(const char *text) {
  uint64_t h = 0xcbf29ce484222325u;
  for (; *text; text++) h = (h ^ (unsigned char)*text) * 0x100000001b3u;
  return h;
}

/* The printed instruction after "%name = ". */
static char *key_of(const hlo_instr *instr) {
  hlo_strbuf sb;
  hlo_sb_init(&sb);
  hlo_print_instr(&sb, instr);
  char *text = hlo_sb_take(&sb);
  if (!text) return NULL;
  char *body = strstr(text, " = ");
  if (body) memmove(text, body + 3, strlen(body + 3) + 1);
  return text;
}

typedef struct entry {
  uint64_t hash;
  char *key;
  hlo_instr *instr;
} entry;

static int cse_comp(hlo_comp *comp) {
  int count = comp->instr_count;
  if (count == 0) return 0;
  size_t cap = 16;
  while (cap < (size_t)count * 2) cap *= 2;
  entry *table = hlo_calloc(cap, sizeof *table);
  hlo_instr **replacement = hlo_calloc((size_t)count, sizeof *replacement);
  if (!table || !replacement) {
    free(table);
    free(replacement);
    return 0;
  }
  int merged = 0;
  for (int i = 0; i < count; i++) {
    hlo_instr *instr = comp->instrs[i];
    for (int k = 0; k < instr->operand_count; k++) {
      hlo_instr *operand = instr->operands[k];
      if (operand && operand->parent == comp && replacement[operand->id])
        instr->operands[k] = replacement[operand->id];
    }
    if (!mergeable(instr)) continue;
    char *key = key_of(instr);
    if (!key) continue;
    uint64_t hash = fnv1a(key);
    size_t slot = (size_t)hash & (cap - 1);
    while (table[slot].key && (table[slot].hash != hash || strcmp(table[slot].key, key) != 0))
      slot = (slot + 1) & (cap - 1);
    if (table[slot].key && !hlo_choice("cse", instr->name)) {
      free(key); /* refused: kept apart from its twin */
    } else if (table[slot].key) {
      replacement[i] = table[slot].instr;
      merged++;
      free(key);
    } else {
      table[slot] = (entry){hash, key, instr};
    }
  }
  if (comp->root && replacement[comp->root->id]) comp->root = replacement[comp->root->id];
  for (size_t s = 0; s < cap; s++) free(table[s].key);
  free(table);
  free(replacement);
  return merged;
}

int hlo_pass_cse(hlo_module *module) {
  int merged = 0;
  for (int c = 0; c < module->comp_count; c++) merged += cse_comp(module->comps[c]);
  return merged;
}
