#include "hlo.h"

#include <stdio.h>
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
}

void *hlo_arena_alloc(hlo_arena *arena, size_t size) {
  size = (size + 15) & ~(size_t)15;
  if (size == 0) size = 16;
  hlo_arena_block *block = arena->head;
  if (!block || block->capacity - block->offset < size) {
    size_t capacity = size > ARENA_BLOCK_BYTES / 4 ? size : ARENA_BLOCK_BYTES;
    block = malloc(sizeof(*block) + capacity);
    if (!block) {
      fprintf(stderr, "latch: out of memory allocating %zu bytes\n", capacity);
      abort();
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
  memset(result, 0, size);
  return result;
}

char *hlo_arena_strndup(hlo_arena *arena, const char *text, size_t len) {
  char *copy = hlo_arena_alloc(arena, len + 1);
  memcpy(copy, text, len);
  copy[len] = 0;
  return copy;
}

char *hlo_arena_strdup(hlo_arena *arena, const char *text) {
  return hlo_arena_strndup(arena, text, strlen(text));
}

void *hlo_arena_memdup(hlo_arena *arena, const void *data, size_t size) {
  void *copy = hlo_arena_alloc(arena, size);
  if (size) memcpy(copy, data, size);
  return copy;
}
