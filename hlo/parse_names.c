/* Name lookup for the parser: instructions by name within a computation, computations by
 * name within a module. Open addressing keeps it one allocation and cache friendly; the
 * table doubles at half full so probes stay short. */
#include <stdlib.h>
#include <string.h>

#include "parse_internal.h"

uint64_t hlo_names_hash(const char *key, size_t len) {
  uint64_t hash = 0xcbf29ce484222325u; /* FNV-1a */
  for (size_t i = 0; i < len; i++) {
    hash ^= (unsigned char)key[i];
    hash *= 0x100000001b3u;
  }
  return hash;
}

void hlo_names_init(hlo_name_map *map) {
  map->slots = NULL;
  map->mask = 0;
  map->count = 0;
}

void hlo_names_free(hlo_name_map *map) {
  free(map->slots);
  hlo_names_init(map);
}

static hlo_name_slot *find(const hlo_name_map *map, const char *key, size_t len, uint64_t hash) {
  size_t i = (size_t)hash & map->mask;
  for (;;) {
    hlo_name_slot *slot = &map->slots[i];
    if (!slot->key) return slot;
    if (slot->hash == hash && slot->len == len && memcmp(slot->key, key, len) == 0) return slot;
    i = (i + 1) & map->mask;
  }
}

void *hlo_names_get(const hlo_name_map *map, const char *key, size_t len) {
  if (!map->slots) return NULL;
  hlo_name_slot *slot = find(map, key, len, hlo_names_hash(key, len));
  return slot->key ? slot->value : NULL;
}

/* False, the table as it was, when memory runs out. */
static bool grow(hlo_name_map *map) {
  size_t capacity = map->slots ? (map->mask + 1) * 2 : 64;
  hlo_name_slot *old = map->slots;
  size_t old_capacity = old ? map->mask + 1 : 0;
  hlo_name_slot *slots = hlo_calloc(capacity, sizeof *map->slots);
  if (!slots) return false;
  map->slots = slots;
  map->mask = capacity - 1;
  for (size_t i = 0; i < old_capacity; i++)
    if (old[i].key) *find(map, old[i].key, old[i].len, old[i].hash) = old[i];
  free(old);
  return true;
}

void *hlo_names_put(hlo_name_map *map, const char *key, size_t len, void *value) {
  if ((!map->slots || (map->count + 1) * 2 > map->mask + 1) && !grow(map)) return NULL;
  uint64_t hash = hlo_names_hash(key, len);
  hlo_name_slot *slot = find(map, key, len, hash);
  if (slot->key) return slot->value;
  slot->key = key;
  slot->len = len;
  slot->hash = hash;
  slot->value = value;
  map->count++;
  return value;
}
