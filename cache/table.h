/* The in-memory compile cache: cache_key -> compiled value, shared by every thread.
 *
 * A hit is lock-free and costs a few tens of nanoseconds. On a miss the first thread compiles
 * while the others asking for the same key wait for its result, so a key is compiled once
 * however many threads race for it; a failed compile is reported to every waiter and not
 * cached, so the next call tries again. The table holds at most `capacity` values and evicts
 * the least recently used (approximately) to make room.
 *
 * Values are opaque: the table calls the destroy function given at creation when the last
 * reference to an evicted (or, at cache_table_free, remaining) value goes away. Every entry
 * handed out is a counted reference: release it with cache_table_release when done, and the
 * value stays valid until then even if it is evicted meanwhile. */
#ifndef CACHE_TABLE_H
#define CACHE_TABLE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cache/hash.h"
#include "hlo/diag.h"

typedef struct cache_table cache_table;
typedef struct cache_entry cache_entry; /* a held reference to one cached value */

/* Produces the value for a key, or returns NULL with diag set. Called with no lock held; it
 * must not ask the same table for the key it is compiling (it would wait for itself). */
typedef void *(*cache_compile_fn)(void *ctx, hlo_diag *diag);
/* Frees a value. Called with no lock held, from whichever thread drops the last reference. */
typedef void (*cache_destroy_fn)(void *value);

typedef struct cache_stats {
  uint64_t hits;             /* lookups that found the key */
  uint64_t misses;           /* lookups that did not, including those that then waited */
  uint64_t waits;            /* misses that waited for another thread's compile */
  uint64_t compiles;         /* calls to a compile function */
  uint64_t compile_failures; /* compiles that returned no value */
  uint64_t compile_ns;       /* total time inside compile functions */
  uint64_t evictions;
  uint64_t entries;          /* values in the table now */
  uint64_t capacity;
} cache_stats;

/* capacity: the most values kept, >= 1. NULL with diag on bad arguments or no memory. */
cache_table *cache_table_new(size_t capacity, cache_destroy_fn destroy, hlo_diag *diag);
/* Destroys the values no one holds; held ones are destroyed at their release. No other
 * thread may be inside a cache_table_* call on this table. */
void cache_table_free(cache_table *table);

/* The entry for key with a reference taken, or NULL on a miss. Never blocks. */
cache_entry *cache_table_get(cache_table *table, cache_key key);

/* The entry for key, compiling it with compile(ctx, diag) on a miss (see above). NULL with
 * diag set when the compile failed, here or in the thread this call waited for. was_hit
 * (optional) is true when the value was already cached: false for the compiling thread and
 * for threads that waited for it. */
cache_entry *cache_table_get_or_compile(cache_table *table, cache_key key,
                                        cache_compile_fn compile, void *ctx, hlo_diag *diag,
                                        bool *was_hit);

/* Drops a reference from get or get_or_compile; NULL is ignored. */
void cache_table_release(cache_table *table, cache_entry *entry);

void *cache_entry_value(const cache_entry *entry);
cache_key cache_entry_key(const cache_entry *entry);

void cache_table_stats(cache_table *table, cache_stats *stats);

#endif
