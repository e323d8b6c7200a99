/* The bump allocator behind every module: 64 KiB blocks, big requests in blocks of their
 * own, zeroed memory, freed all at once. A failed block allocation returns NULL and leaves
 * the sticky failed flag for the module's owner to report. */
#include "hlo.h"

#include <stdlib.h>
#include <string.h>

struct hlo_arena_block {
  hlo_arena_block *next;
  size_t capacity;
  size_t offset;
  _Alignas(16) unsigned char data[];
};

enum { ARENA_BLOCK_BYTES = 64 * 1024 };

void hlo_arena_init(hlo_arena *arena) {
  arena->head = NULL;
  arena->used_bytes = 0;
  arena->failed = false;
}

void hlo_arena_free(hlo_arena *arena) {
  hlo_arena_block *block = arena->head;
  while (block) {
    hlo_arena_block *next = block->next;
    free(block);
    block = next;
  }
  arena->head = NULL;
  arena->used_bytes = 0;
  arena->failed = false;
}

/* size bytes (rounded up to 16), not zeroed; NULL with the failed flag set. */
static void *bump(hlo_arena *arena, size_t size) {
  if (size > SIZE_MAX - 15) {
    arena->failed = true;
    return NULL;
  }
  size = (size + 15) & ~(size_t)15;
  if (size == 0) size = 16;
  hlo_arena_block *block = arena->head;
  if (!block || block->capacity - block->offset < size) {
    size_t capacity = size > ARENA_BLOCK_BYTES / 4 ? size : ARENA_BLOCK_BYTES;
    block = capacity <= SIZE_MAX - sizeof(*block) ? hlo_malloc(sizeof(*block) + capacity) : NULL;
    if (!block) {
      arena->failed = true;
      return NULL;
    }
    block->capacity = capacity;
    block->offset = 0;
    /* A big one-off block goes behind the current head so the head keeps its free space. */
    if (arena->head && capacity != ARENA_BLOCK_BYTES) {
      block->next = arena->head->next;
      arena->head->next = block;
    } else {
      block->next = arena->head;
      arena->head = block;
    }
  }
  void *result = block->data + block->offset;
  block->offset += size;
  arena->used_bytes += size;
  return result;
}

void *hlo_arena_alloc(hlo_arena *arena, size_t size) {
  void *result = bump(arena, size);
  return result ? memset(result, 0, size) : NULL;
}

void *hlo_arena_alloc_unzeroed(hlo_arena *arena, size_t size) { return bump(arena, size); }

char *hlo_arena_strndup(hlo_arena *arena, const char *text, size_t len) {
  char *copy = hlo_arena_alloc_unzeroed(arena, len + 1);
  if (!copy) return NULL;
  memcpy(copy, text, len);
  copy[len] = 0;
  return copy;
}

char *hlo_arena_strdup(hlo_arena *arena, const char *text) {
  return hlo_arena_strndup(arena, text, strlen(text));
}

void *hlo_arena_memdup(hlo_arena *arena, const void *data, size_t size) {
  void *copy = hlo_arena_alloc(arena, size);
  if (copy && size) memcpy(copy, data, size);
  return copy;
}
