/* The one allocation path of the library: every layer allocates through the hlo_ wrappers
 * below (as Lua's lmem.c is its one path), so a failure is a NULL every caller turns into a
 * status, and tests can make the Nth allocation fail (as SQLite's test_malloc.c does) to
 * walk every out-of-memory path.
 *
 * The test hook is compiled in, not read from the environment: hlo_alloc_test_fail arms it,
 * and while it is off an allocation costs one relaxed atomic load more than malloc. The
 * count is process-wide and atomic, so it stays exact when the cpu backend's threads
 * allocate too (though which thread draws the Nth is then theirs to race for). */
#include "hlo.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static atomic_long fail_at;      /* the allocation number that fails; 0 = none */
static atomic_bool fail_after;   /* every allocation after fail_at fails too */
static atomic_long counted;      /* allocations since the hook was last armed */
static atomic_long failures;     /* allocations the hook failed since then */

/* Whether the hook fails this allocation. */
static bool injected(void) {
  long at = atomic_load_explicit(&fail_at, memory_order_relaxed);
  if (at <= 0) return false;
  long number = atomic_fetch_add_explicit(&counted, 1, memory_order_relaxed) + 1;
  bool fail = number == at || (number > at && atomic_load_explicit(&fail_after, memory_order_relaxed));
  if (fail) atomic_fetch_add_explicit(&failures, 1, memory_order_relaxed);
  return fail;
}

void *hlo_malloc(size_t size) {
  if (injected()) return NULL;
  return malloc(size);
}

void *hlo_calloc(size_t count, size_t size) {
  if (injected()) return NULL;
  return calloc(count, size);
}

void *hlo_realloc(void *items, size_t size) {
  if (injected()) return NULL;
  return realloc(items, size);
}

void *hlo_aligned_alloc(size_t alignment, size_t size) {
  if (injected()) return NULL;
  return aligned_alloc(alignment, size);
}

char *hlo_strdup(const char *text) {
  size_t len = strlen(text) + 1;
  char *copy = hlo_malloc(len);
  if (copy) memcpy(copy, text, len);
  return copy;
}

void hlo_alloc_test_fail(long nth, bool every_after) {
  atomic_store(&fail_at, 0);
  atomic_store(&counted, 0);
  atomic_store(&failures, 0);
  atomic_store(&fail_after, every_after);
  atomic_store(&fail_at, nth > 0 ? nth : 0);
}

long hlo_alloc_test_count(void) { return atomic_load(&counted); }

long hlo_alloc_test_failures(void) { return atomic_load(&failures); }
