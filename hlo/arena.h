/* A bump allocator: a module and everything in it live in one arena and die together. */
#ifndef HLO_ARENA_H
#define HLO_ARENA_H
#include <stddef.h>

typedef struct hlo_arena_block hlo_arena_block;
typedef struct hlo_arena {
  hlo_arena_block *head;
  size_t used_bytes;
} hlo_arena;

void hlo_arena_init(hlo_arena *arena);
void hlo_arena_free(hlo_arena *arena);
/* Zeroed, 16-byte aligned memory. Aborts only when malloc itself fails. */
void *hlo_arena_alloc(hlo_arena *arena, size_t size);
char *hlo_arena_strndup(hlo_arena *arena, const char *text, size_t len);
char *hlo_arena_strdup(hlo_arena *arena, const char *text);
void *hlo_arena_memdup(hlo_arena *arena, const void *data, size_t size);

#endif
