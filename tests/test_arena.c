/* The module arena (hlo/arena.c): zeroed allocations are zero even where the block held
 * other bytes before, unzeroed ones come from the same blocks, 16-byte aligned and apart
 * from each other; a request larger than a block gets its own; a failed block allocation
 * sets the sticky failed flag and returns NULL. ASan checks every byte written is inside
 * what was handed out, and that hlo_arena_free frees it all. */
#include <stdint.h>
#include <string.h>

#include "hlo/hlo.h"
#include "test.h"

static bool all_bytes(const unsigned char *p, size_t n, unsigned char want) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != want) return false;
  return true;
}

static void test_zeroed_and_unzeroed(void) {
  hlo_arena arena;
  hlo_arena_init(&arena);
  unsigned char *a = hlo_arena_alloc_unzeroed(&arena, 40), *b = hlo_arena_alloc(&arena, 24);
  CHECK(a && b && (uintptr_t)a % 16 == 0 && (uintptr_t)b % 16 == 0);
  CHECK(b >= a + 40); /* apart: a's 40 bytes (rounded to 48) come first */
  CHECK(all_bytes(b, 24, 0));
  memset(a, 0xee, 40);
  memset(b, 0xdd, 24);
  CHECK(all_bytes(a, 40, 0xee) && all_bytes(b, 24, 0xdd));
  CHECK_EQ_INT((long long)arena.used_bytes, 48 + 32);
  hlo_arena_free(&arena);
  /* the freed block's bytes come back from malloc dirty: a zeroed allocation still is zero */
  for (int round = 0; round < 4; round++) {
    hlo_arena_init(&arena);
    unsigned char *dirty = hlo_arena_alloc_unzeroed(&arena, 4096);
    CHECK(dirty != NULL);
    if (dirty) memset(dirty, 0x5a, 4096);
    hlo_arena_free(&arena);
    hlo_arena_init(&arena);
    unsigned char *clean = hlo_arena_alloc(&arena, 4096);
    CHECK(clean && all_bytes(clean, 4096, 0));
    hlo_arena_free(&arena);
  }
}

static void test_big_and_failed(void) {
  hlo_arena arena;
  hlo_arena_init(&arena);
  unsigned char *small = hlo_arena_alloc_unzeroed(&arena, 16), *big = hlo_arena_alloc_unzeroed(&arena, 1 << 20);
  unsigned char *after = hlo_arena_alloc_unzeroed(&arena, 16);
  CHECK(small && big && after);
  if (big) memset(big, 1, 1 << 20); /* all of it is ours (ASan) */
  CHECK(after == small + 16);        /* the big one took a block of its own */
  CHECK(!arena.failed);
  hlo_alloc_test_fail(1, false);
  unsigned char *none = hlo_arena_alloc_unzeroed(&arena, 1 << 20);
  hlo_alloc_test_fail(0, false);
  CHECK(none == NULL && arena.failed);
  CHECK(hlo_arena_alloc_unzeroed(&arena, SIZE_MAX - 8) == NULL);
  hlo_arena_free(&arena);
  CHECK(!arena.failed && arena.used_bytes == 0);
}

int main(void) {
  RUN(test_zeroed_and_unzeroed);
  RUN(test_big_and_failed);
  return TEST_REPORT();
}
