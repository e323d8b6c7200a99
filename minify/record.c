/* The record of the original run's values (minify_internal.h): an open-addressing table from
 * instruction names to their declared and fp64 values. */
#include "minify_internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct entry {
  char *name; /* NULL: empty slot; "" (TOMBSTONE): a dropped entry */
  rt_value *values[2];
} entry;

struct min_record {
  entry *slots;
  int capacity, used; /* used counts live entries and tombstones */
  double bytes;
};

static char tombstone[] = "";

static uint64_t hash_name(const char *name) {
  uint64_t h = 1469598103934665603ull;
  for (const char *p = name; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
  return h;
}

/* The slot holding name, or the empty slot where it would go; NULL only in a full table. */
static entry *find(const min_record *record, const char *name) {
  if (record->capacity == 0) return NULL;
  uint64_t mask = (uint64_t)record->capacity - 1;
  entry *reuse = NULL;
  for (uint64_t i = hash_name(name) & mask, probes = 0; probes < (uint64_t)record->capacity; i = (i + 1) & mask, probes++) {
    entry *e = &record->slots[i];
    if (!e->name) return reuse ? reuse : e;
    if (e->name == tombstone) {
      if (!reuse) reuse = e;
    } else if (strcmp(e->name, name) == 0) {
      return e;
    }
  }
  return reuse;
}

static bool grow(min_record *record) {
  int capacity = record->capacity ? record->capacity * 2 : 1024;
  entry *old = record->slots;
  int old_capacity = record->capacity;
  record->slots = hlo_calloc((size_t)capacity, sizeof *record->slots);
  if (!record->slots) {
    record->slots = old;
    return false;
  }
  record->capacity = capacity;
  record->used = 0;
  for (int i = 0; i < old_capacity; i++) {
    if (!old[i].name || old[i].name == tombstone) continue;
    *find(record, old[i].name) = old[i];
    record->used++;
  }
  free(old);
  return true;
}

min_record *min_record_new(void) {
  return hlo_calloc(1, sizeof(min_record));
}

void min_record_free(min_record *record) {
  if (!record) return;
  for (int i = 0; i < record->capacity; i++) {
    entry *e = &record->slots[i];
    if (!e->name || e->name == tombstone) continue;
    rt_value_release(e->values[0]);
    rt_value_release(e->values[1]);
    free(e->name);
  }
  free(record->slots);
  free(record);
}

bool min_record_put(min_record *record, const char *name, bool fp64, rt_value *value) {
  if ((record->used + 1) * 2 > record->capacity && !grow(record)) return false;
  entry *e = find(record, name);
  if (!e) return false;
  if (!e->name || e->name == tombstone) {
    char *copy = hlo_strdup(name);
    if (!copy) return false;
    if (!e->name) record->used++;
    *e = (entry){copy, {NULL, NULL}};
  }
  if (e->values[fp64]) return true;
  e->values[fp64] = rt_value_retain(value);
  record->bytes += min_value_bytes(value);
  return true;
}

rt_value *min_record_get(const min_record *record, const char *name, bool fp64) {
  entry *e = find(record, name);
  return e && e->name && e->name != tombstone ? e->values[fp64] : NULL;
}

void min_record_drop(min_record *record, const char *name) {
  entry *e = find(record, name);
  if (!e || !e->name || e->name == tombstone) return;
  for (int k = 0; k < 2; k++) {
    record->bytes -= min_value_bytes(e->values[k]);
    rt_value_release(e->values[k]);
  }
  free(e->name);
  *e = (entry){tombstone, {NULL, NULL}};
}

double min_record_bytes(const min_record *record) {
  return record->bytes;
}

/* instr's recorded value, or for a tuple one built from its operands'; a new reference. */
static rt_value *value_of(const min_record *record, const hlo_instr *instr, bool fp64) {
  rt_value *known = min_record_get(record, instr->name, fp64);
  if (known) return rt_value_retain(known);
  if (instr->opcode != HLO_OP_TUPLE) return NULL;
  rt_value *tuple = hlo_calloc(1, sizeof *tuple);
  rt_value **elements = hlo_calloc((size_t)instr->operand_count + 1, sizeof *elements);
  bool ok = tuple && elements;
  for (int i = 0; ok && i < instr->operand_count; i++) ok = (elements[i] = value_of(record, instr->operands[i], fp64));
  if (!ok) {
    for (int i = 0; elements && i < instr->operand_count; i++) rt_value_release(elements[i]);
    free(elements);
    free(tuple);
    return NULL;
  }
  tuple->refcount = 1;
  tuple->shape.dtype = HLO_TUPLE;
  tuple->tuple_count = instr->operand_count;
  tuple->tuple = elements;
  return tuple;
}

bool min_record_refs(const min_record *record, const hlo_module *module, min_refs *refs) {
  refs->declared = value_of(record, module->entry->root, false);
  refs->fp64 = value_of(record, module->entry->root, true);
  if (refs->declared && refs->fp64) return true;
  min_refs_release(refs);
  return false;
}

void min_refs_release(min_refs *refs) {
  rt_value_release((rt_value *)refs->declared);
  rt_value_release((rt_value *)refs->fp64);
  refs->declared = refs->fp64 = NULL;
}
