/* The compile cache table. The design, from the reader's side in:
 *
 * Lookups. Entries live in a Concurrency Kit hash set (ck_hs, SPMC mode: any number of
 * readers alongside one writer). A reader enters an epoch section (ck_epoch), finds the entry
 * and increments its reference count, and leaves: no lock, no wait.
 *
 * Writers. Every change to the set (insert, evict, the set's own growth) happens under one
 * mutex, which is what ck_hs's single-writer design requires. The same mutex guards the list
 * of compiles in flight and the eviction bookkeeping; it is never held during a compile or
 * while a value is destroyed.
 *
 * Lifetime. An entry's count holds one reference for the table while the entry is in the set
 * and one per reference handed out. Evicting takes the entry out of the set at once, but
 * drops the table's reference only after an epoch grace period (ck_epoch_call): a reader may
 * have found the pointer just before the removal and not yet counted itself, and after the
 * grace period no reader can be in that window. So the count reaches zero only when no one can
 * find or holds the entry, and whoever drops it last destroys the value. Bucket arrays the set
 * replaces when it grows are freed after a grace period the same way.
 *
 * One compile per key. The first thread to miss a key records it in the in-flight list and
 * compiles without the lock; threads that miss the same key meanwhile wait on that record's
 * condition variable. The compiling thread inserts the value, counts one reference for each
 * waiter, and wakes them; on failure it hands them its diagnostic instead and caches nothing.
 *
 * Eviction, approximately least recently used. The table keeps a clock that advances once per
 * insert; an insert stamps its entry with the clock before advancing it, and a hit stamps its
 * entry with the current clock (writing only when the stamp changes, so a hot entry's line is
 * written once per insert, not once per hit). An entry hit since the last insert thus always
 * outranks the entry that insert added. When the table is full, an insert scans the entries for
 * the oldest stamp: O(capacity), on a path that has just paid for a compile.
 *
 * fork. A child has only the thread that forked: a compile another thread had in flight will
 * never finish there, and a reader's epoch section never ends. So fork waits for every
 * table's lock (held only for bookkeeping, never during a compile), and in the child the
 * in-flight list starts empty (a lookup of such a key compiles afresh instead of waiting for
 * a thread that is not there) and freeing the table runs its deferred frees without waiting
 * for grace periods that cannot end (pthread_atfork handlers, registered with the first
 * table). */
#include "cache.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ck_epoch.h>
#include <ck_hs.h>

/* ThreadSanitizer cannot see the synchronization inside libck (not instrumented, or inline
 * assembly), so the two edges the design relies on are told to it explicitly: a reader's
 * epoch section happens before anything a grace period later frees, and a thread's use of an
 * epoch record happens before the next owner's. These compile to nothing otherwise. */
#if defined(__SANITIZE_THREAD__)
#define TABLE_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TABLE_TSAN 1
#endif
#endif
#ifdef TABLE_TSAN
#include <sanitizer/tsan_interface.h>
#define TSAN_RELEASE(addr) __tsan_release(addr)
#define TSAN_ACQUIRE(addr) __tsan_acquire(addr)
#else
#define TSAN_RELEASE(addr) ((void)(addr))
#define TSAN_ACQUIRE(addr) ((void)(addr))
#endif

enum { CACHE_LINE = 64 };
#define MAX_CAPACITY ((size_t)1 << 26)

struct cache_entry {
  cache_key key; /* first: the set's callbacks read a key through entry and key pointers alike */
  atomic_uint published;          /* set with release once the fields below are written */
  atomic_long refs;               /* the table's while in the set, plus one per holder */
  atomic_uint_fast64_t last_used; /* the table clock at insert or latest hit */
  void *value;
  cache_destroy_fn destroy;       /* copied, so a release may outlive the table */
  cache_table *table;             /* for the grace-period callback */
  size_t slot;                    /* index in table->slots while in the set */
  ck_epoch_entry_t retire;
  cache_entry *next_reclaimed;
};

/* A compile in flight; lives in table->pending until done, freed by the last one to look. */
typedef struct pending {
  cache_key key;
  struct pending *next;
  pthread_cond_t done_cond;
  bool done;
  int waiters;
  cache_entry *entry; /* the result, with one reference counted per waiter; NULL on failure */
  hlo_diag diag;      /* the failure */
} pending;

struct cache_table {
  /* Read by every lookup. */
  ck_hs_t set;
  atomic_uint_fast64_t clock;
  size_t capacity;
  cache_destroy_fn destroy;

  /* The writer's: guarded by lock. */
  pthread_mutex_t lock;
  ck_epoch_record_t *writer; /* defers frees; used only under lock */
  cache_entry **slots;       /* the entries in the set, for the eviction scan */
  size_t count;
  size_t removals; /* since the set last dropped its tombstones */
  pending *pending;
  cache_entry *reclaimed; /* grace period over: the table's references are to be dropped */
  struct cache_table *next_open, *prev_open; /* every table, for fork (under open_lock) */

  /* Counters, on their own cache line so counting a hit does not evict the fields above
   * from other cores' caches. */
  _Alignas(CACHE_LINE) struct {
    atomic_uint_fast64_t hits, misses, waits, compiles, failures, compile_ns, evictions;
    atomic_uint_fast64_t entries;
  } stats;
};

static void bump(atomic_uint_fast64_t *counter, uint64_t amount) {
  atomic_fetch_add_explicit(counter, amount, memory_order_relaxed);
}

/* ---- fork ---- */

static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;
static cache_table *open_tables;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
static atomic_bool forked_child; /* this process is a child forked after a table existed */

static void fork_prepare(void) {
  pthread_mutex_lock(&open_lock);
  for (cache_table *t = open_tables; t; t = t->next_open) pthread_mutex_lock(&t->lock);
}

static void fork_parent(void) {
  for (cache_table *t = open_tables; t; t = t->next_open) pthread_mutex_unlock(&t->lock);
  pthread_mutex_unlock(&open_lock);
}

/* The in-flight records are left to leak: their compiling threads and waiters are the
 * parent's. */
static void fork_child(void) {
  atomic_store(&forked_child, true);
  for (cache_table *t = open_tables; t; t = t->next_open) {
    t->pending = NULL;
    pthread_mutex_unlock(&t->lock);
  }
  pthread_mutex_unlock(&open_lock);
}

static void fork_setup(void) {
  pthread_atfork(fork_prepare, fork_parent, fork_child);
}

static void list_open(cache_table *table) {
  pthread_once(&fork_once, fork_setup);
  pthread_mutex_lock(&open_lock);
  table->next_open = open_tables;
  if (open_tables) open_tables->prev_open = table;
  open_tables = table;
  pthread_mutex_unlock(&open_lock);
}

static void unlist_open(cache_table *table) {
  pthread_mutex_lock(&open_lock);
  if (table->prev_open) table->prev_open->next_open = table->next_open;
  else open_tables = table->next_open;
  if (table->next_open) table->next_open->prev_open = table->prev_open;
  pthread_mutex_unlock(&open_lock);
}

/* ---- epoch records ---- */

/* One epoch domain serves every table, so a thread needs one record however many tables it
 * reads; it finds it through a thread-local pointer and gives it back at thread exit. Records
 * are never freed (ck_epoch keeps them listed): a released one is recycled by the next thread
 * or table that needs one. */
static ck_epoch_t epoch_domain;
static pthread_once_t epoch_once = PTHREAD_ONCE_INIT;
static pthread_key_t epoch_key;
static bool epoch_key_ok;
static _Thread_local ck_epoch_record_t *thread_record;

static void record_release(ck_epoch_record_t *record) {
  TSAN_RELEASE(record);
  ck_epoch_unregister(record);
}

static void thread_exit(void *record) {
  thread_record = NULL;
  record_release(record);
}

static void epoch_setup(void) {
  ck_epoch_init(&epoch_domain);
  epoch_key_ok = pthread_key_create(&epoch_key, thread_exit) == 0;
}

static ck_epoch_record_t *record_acquire(void) {
  pthread_once(&epoch_once, epoch_setup);
  ck_epoch_record_t *record = ck_epoch_recycle(&epoch_domain, NULL);
  if (record) {
    TSAN_ACQUIRE(record);
    return record;
  }
  size_t size = (sizeof *record + CACHE_LINE - 1) / CACHE_LINE * CACHE_LINE;
  record = hlo_aligned_alloc(CACHE_LINE, size); /* ck_epoch_record_t is cache-line aligned */
  if (!record) return NULL;
  memset(record, 0, size);
  ck_epoch_register(&epoch_domain, record, NULL);
  return record;
}

static ck_epoch_record_t *reader_record(void) {
  if (thread_record) return thread_record;
  ck_epoch_record_t *record = record_acquire();
  if (!record) return NULL;
  if (epoch_key_ok) pthread_setspecific(epoch_key, record);
  thread_record = record;
  return record;
}

/* ---- the set's callbacks ---- */

/* Keys are already uniform hashes: the low half is the bucket hash. */
static unsigned long key_hash(const cache_key *key) { return (unsigned long)key->lo; }

static unsigned long set_hash(const void *object, unsigned long seed) {
  (void)seed;
  return key_hash(object);
}

/* stored is an entry in the set; probe is a key or an entry, both starting with a key. */
static bool set_compare(const void *stored, const void *probe) {
  const cache_entry *entry = stored;
  /* Pairs with the release in insert(): a reader can meet an entry the moment it is put. */
  if (!atomic_load_explicit(&entry->published, memory_order_acquire)) return false;
  return cache_key_equal(entry->key, *(const cache_key *)probe);
}

/* ck_hs allocates its bucket arrays here. When it grows it asks to free the old array
 * "deferred", since readers may still be probing it. Its free callback has no context
 * argument, so the table whose writer is running is found through a thread-local set while
 * that writer holds the lock (only writers call ck_hs functions that free). Each array gets
 * a header holding the epoch entry that defers its free. */
enum { BLOCK_HEADER = CACHE_LINE };
static _Thread_local cache_table *writing_table;

static void *set_malloc(size_t size) {
  char *block = hlo_calloc(1, BLOCK_HEADER + size);
  return block ? block + BLOCK_HEADER : NULL;
}

static void set_block_reclaim(ck_epoch_entry_t *retire) {
  TSAN_ACQUIRE(&epoch_domain);
  free(retire); /* the epoch entry is at the start of the block */
}

static void set_free(void *memory, size_t size, bool defer) {
  (void)size;
  if (!memory) return;
  ck_epoch_entry_t *block = (ck_epoch_entry_t *)((char *)memory - BLOCK_HEADER);
  if (!defer) free(block);
  else if (writing_table) ck_epoch_call(writing_table->writer, block, set_block_reclaim);
  /* else: cannot happen; leaking beats freeing under a reader */
}

static struct ck_malloc set_allocator = {.malloc = set_malloc, .free = set_free};

/* ---- entries ---- */

static cache_entry *entry_new(cache_table *table, cache_key key, void *value) {
  cache_entry *entry = hlo_calloc(1, sizeof *entry);
  if (!entry) return NULL;
  entry->key = key;
  entry->value = value;
  entry->destroy = table->destroy;
  entry->table = table;
  return entry;
}

static void entry_unref(cache_entry *entry) {
  if (atomic_fetch_sub_explicit(&entry->refs, 1, memory_order_acq_rel) != 1) return;
  if (entry->destroy) entry->destroy(entry->value);
  free(entry);
}

/* Grace period over for an evicted entry: no reader can still reach it through the set.
 * Runs under the lock (from ck_epoch_poll); the reference is dropped after unlocking. */
static void entry_retired(ck_epoch_entry_t *retire) {
  cache_entry *entry = (cache_entry *)((char *)retire - offsetof(cache_entry, retire));
  TSAN_ACQUIRE(&epoch_domain);
  entry->next_reclaimed = entry->table->reclaimed;
  entry->table->reclaimed = entry;
}

/* ---- the writer ---- */

static void writer_lock(cache_table *table) {
  pthread_mutex_lock(&table->lock);
  writing_table = table;
}

/* Unlocks after collecting entries whose grace period has ended, then drops the table's
 * references to them: destroying a value may be slow and must not hold up other writers. */
static void writer_unlock(cache_table *table) {
  ck_epoch_poll(table->writer);
  cache_entry *reclaimed = table->reclaimed;
  table->reclaimed = NULL;
  writing_table = NULL;
  pthread_mutex_unlock(&table->lock);
  while (reclaimed) {
    cache_entry *next = reclaimed->next_reclaimed;
    entry_unref(reclaimed);
    reclaimed = next;
  }
}

static void unlist(cache_table *table, cache_entry *entry) {
  ck_hs_remove(&table->set, key_hash(&entry->key), &entry->key);
  cache_entry *last = table->slots[--table->count];
  table->slots[entry->slot] = last;
  last->slot = entry->slot;
  atomic_store_explicit(&table->stats.entries, table->count, memory_order_relaxed);
  ck_epoch_call(table->writer, &entry->retire, entry_retired);
  /* Removal leaves tombstones that lengthen every probe for a missing key; a rebuild (a
   * fresh bucket array, the old one freed after a grace period) clears them. */
  if (++table->removals > table->capacity) {
    table->removals = 0;
    ck_hs_rebuild(&table->set);
  }
}

static void evict_oldest(cache_table *table) {
  size_t oldest = 0;
  uint_fast64_t oldest_stamp = UINT_FAST64_MAX;
  for (size_t i = 0; i < table->count; i++) {
    uint_fast64_t stamp = atomic_load_explicit(&table->slots[i]->last_used, memory_order_relaxed);
    if (stamp < oldest_stamp) {
      oldest_stamp = stamp;
      oldest = i;
    }
  }
  unlist(table, table->slots[oldest]);
  bump(&table->stats.evictions, 1);
}

/* Publishes entry (whose references are already counted, the table's included). False when
 * the set could not grow: the entry is then simply not cached. */
static bool insert(cache_table *table, cache_entry *entry) {
  if (table->count >= table->capacity) evict_oldest(table);
  uint_fast64_t now = atomic_load_explicit(&table->clock, memory_order_relaxed);
  atomic_store_explicit(&entry->last_used, now, memory_order_relaxed);
  atomic_store_explicit(&table->clock, now + 1, memory_order_relaxed);
  atomic_store_explicit(&entry->published, 1, memory_order_release);
  if (!ck_hs_put(&table->set, key_hash(&entry->key), entry)) return false;
  entry->slot = table->count;
  table->slots[table->count++] = entry;
  atomic_store_explicit(&table->stats.entries, table->count, memory_order_relaxed);
  return true;
}

/* ---- lookups ---- */

static void note_hit(cache_table *table, cache_entry *entry) {
  uint_fast64_t now = atomic_load_explicit(&table->clock, memory_order_relaxed);
  if (atomic_load_explicit(&entry->last_used, memory_order_relaxed) != now)
    atomic_store_explicit(&entry->last_used, now, memory_order_relaxed);
  bump(&table->stats.hits, 1);
}

/* Under the lock no entry in the set can be reclaimed, so no epoch section is needed. */
static cache_entry *find_locked(cache_table *table, cache_key key) {
  cache_entry *entry = ck_hs_get(&table->set, key_hash(&key), &key);
  if (entry) atomic_fetch_add_explicit(&entry->refs, 1, memory_order_relaxed);
  return entry;
}

/* Finding the entry and counting the reference happen in one epoch section, so a concurrent
 * eviction cannot drop the table's reference in between. */
static cache_entry *find(cache_table *table, cache_key key) {
  ck_epoch_record_t *record = reader_record();
  if (!record) { /* no memory for a record: take the slow, locked road */
    writer_lock(table);
    cache_entry *entry = find_locked(table, key);
    writer_unlock(table);
    return entry;
  }
  ck_epoch_begin(record, NULL);
  cache_entry *entry = ck_hs_get(&table->set, key_hash(&key), &key);
  if (entry) atomic_fetch_add_explicit(&entry->refs, 1, memory_order_relaxed);
  TSAN_RELEASE(&epoch_domain);
  ck_epoch_end(record, NULL);
  return entry;
}

cache_entry *cache_table_get(cache_table *table, cache_key key) {
  cache_entry *entry = find(table, key);
  if (entry) note_hit(table, entry);
  else bump(&table->stats.misses, 1);
  return entry;
}

/* ---- compiles ---- */

static pending *find_pending(cache_table *table, cache_key key) {
  for (pending *p = table->pending; p; p = p->next)
    if (cache_key_equal(p->key, key)) return p;
  return NULL;
}

static void unlink_pending(cache_table *table, pending *p) {
  pending **link = &table->pending;
  while (*link != p) link = &(*link)->next;
  *link = p->next;
}

static void free_pending(pending *p) {
  pthread_cond_destroy(&p->done_cond);
  free(p);
}

static void report(hlo_diag *diag, const hlo_diag *failure) {
  hlo_diag_set(diag, failure->status, "%s", failure->message);
}

/* Called with the lock held; returns with it released. */
static cache_entry *wait_for(cache_table *table, pending *p, hlo_diag *diag) {
  bump(&table->stats.waits, 1);
  p->waiters++;
  while (!p->done) pthread_cond_wait(&p->done_cond, &table->lock);
  cache_entry *entry = p->entry; /* our reference was counted when the compile finished */
  if (!entry) report(diag, &p->diag);
  if (--p->waiters == 0) free_pending(p);
  writer_unlock(table);
  return entry;
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Called without the lock, p already listed as in flight. */
static cache_entry *compile_and_publish(cache_table *table, pending *p,
                                        cache_compile_fn compile, void *ctx, hlo_diag *diag) {
  hlo_diag failure;
  hlo_diag_clear(&failure);
  uint64_t start = now_ns();
  void *value = compile(ctx, &failure);
  bump(&table->stats.compile_ns, now_ns() - start);
  bump(&table->stats.compiles, 1);
  cache_entry *entry = NULL;
  if (value) {
    entry = entry_new(table, p->key, value);
    if (!entry) {
      if (table->destroy) table->destroy(value);
      hlo_diag_set(&failure, HLO_ERR_INTERNAL, "out of memory caching a compiled value");
    }
  } else if (failure.status == HLO_OK) {
    hlo_diag_set(&failure, HLO_ERR_INTERNAL, "compile returned no value and no error");
  }
  if (!entry) bump(&table->stats.failures, 1);

  writer_lock(table);
  unlink_pending(table, p);
  if (entry) {
    /* Ours, each waiter's, and the table's; the last given back if it cannot be cached. */
    atomic_store_explicit(&entry->refs, 2 + p->waiters, memory_order_relaxed);
    if (!insert(table, entry)) atomic_fetch_sub_explicit(&entry->refs, 1, memory_order_relaxed);
  }
  p->entry = entry;
  p->diag = failure;
  p->done = true;
  pthread_cond_broadcast(&p->done_cond);
  if (p->waiters == 0) free_pending(p);
  writer_unlock(table);
  if (!entry) report(diag, &failure);
  return entry;
}

cache_entry *cache_table_get_or_compile(cache_table *table, cache_key key,
                                        cache_compile_fn compile, void *ctx, hlo_diag *diag,
                                        bool *was_hit) {
  if (was_hit) *was_hit = false;
  cache_entry *entry = find(table, key);
  if (entry) {
    note_hit(table, entry);
    if (was_hit) *was_hit = true;
    return entry;
  }
  if (!compile) {
    bump(&table->stats.misses, 1);
    hlo_diag_set(diag, HLO_ERR_INPUT, "cache_table_get_or_compile: no compile function");
    return NULL;
  }

  writer_lock(table);
  entry = find_locked(table, key); /* inserted between our lookup and the lock */
  if (entry) {
    note_hit(table, entry);
    writer_unlock(table);
    if (was_hit) *was_hit = true;
    return entry;
  }
  bump(&table->stats.misses, 1);
  pending *p = find_pending(table, key);
  if (p) return wait_for(table, p, diag);
  p = hlo_calloc(1, sizeof *p);
  if (!p || pthread_cond_init(&p->done_cond, NULL) != 0) {
    writer_unlock(table);
    free(p);
    hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory starting a compile");
    return NULL;
  }
  p->key = key;
  p->next = table->pending;
  table->pending = p;
  writer_unlock(table);
  return compile_and_publish(table, p, compile, ctx, diag);
}

void cache_table_release(cache_table *table, cache_entry *entry) {
  (void)table; /* the entry carries all it needs, so a release may follow cache_table_free */
  if (entry) entry_unref(entry);
}

bool cache_table_remove(cache_table *table, cache_entry *entry) {
  writer_lock(table);
  bool there = ck_hs_get(&table->set, key_hash(&entry->key), &entry->key) == entry; /* no reference taken */
  if (there) unlist(table, entry);
  writer_unlock(table);
  return there;
}

void *cache_entry_value(const cache_entry *entry) { return entry->value; }
cache_key cache_entry_key(const cache_entry *entry) { return entry->key; }

/* ---- the table ---- */

cache_table *cache_table_new(size_t capacity, cache_destroy_fn destroy, hlo_diag *diag) {
  if (capacity < 1 || capacity > MAX_CAPACITY) {
    hlo_diag_set(diag, HLO_ERR_INPUT, "cache table capacity %zu is not in [1, %zu]", capacity,
                 MAX_CAPACITY);
    return NULL;
  }
  size_t size = (sizeof(cache_table) + CACHE_LINE - 1) / CACHE_LINE * CACHE_LINE;
  cache_table *table = hlo_aligned_alloc(CACHE_LINE, size);
  if (!table) goto no_memory;
  memset(table, 0, size);
  table->capacity = capacity;
  table->destroy = destroy;
  table->slots = hlo_calloc(capacity, sizeof *table->slots);
  table->writer = record_acquire();
  if (!table->slots || !table->writer) goto no_memory;
  /* Twice the capacity plus slack: ck_hs grows once more than half full, and growing under
   * readers costs an extra array until the grace period ends. */
  if (!ck_hs_init(&table->set, CK_HS_MODE_OBJECT | CK_HS_MODE_SPMC, set_hash, set_compare,
                  &set_allocator, 2 * capacity + 16, 0))
    goto no_memory;
  if (pthread_mutex_init(&table->lock, NULL) != 0) {
    ck_hs_destroy(&table->set);
    goto no_memory;
  }
  list_open(table);
  return table;

no_memory:
  if (table) {
    if (table->writer) record_release(table->writer);
    free(table->slots);
    free(table);
  }
  hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory creating a cache table");
  return NULL;
}

void cache_table_free(cache_table *table) {
  if (!table) return;
  unlist_open(table);
  writer_lock(table);
  /* Wait out the grace periods of everything evicted, so the callbacks run now. In a forked
   * child the parent's other threads' records look active forever; no reader can be in a
   * section while the table is freed, so the callbacks run at once. */
  if (atomic_load(&forked_child)) ck_epoch_reclaim(table->writer);
  else ck_epoch_barrier(table->writer);
  for (size_t i = 0; i < table->count; i++) {
    table->slots[i]->next_reclaimed = table->reclaimed;
    table->reclaimed = table->slots[i];
  }
  table->count = 0;
  ck_hs_destroy(&table->set);
  writer_unlock(table); /* drops the table's references: unheld values are destroyed */
  record_release(table->writer);
  pthread_mutex_destroy(&table->lock);
  free(table->slots);
  free(table);
}

void cache_table_stats(cache_table *table, cache_stats *stats) {
  stats->hits = atomic_load_explicit(&table->stats.hits, memory_order_relaxed);
  stats->misses = atomic_load_explicit(&table->stats.misses, memory_order_relaxed);
  stats->waits = atomic_load_explicit(&table->stats.waits, memory_order_relaxed);
  stats->compiles = atomic_load_explicit(&table->stats.compiles, memory_order_relaxed);
  stats->compile_failures = atomic_load_explicit(&table->stats.failures, memory_order_relaxed);
  stats->compile_ns = atomic_load_explicit(&table->stats.compile_ns, memory_order_relaxed);
  stats->evictions = atomic_load_explicit(&table->stats.evictions, memory_order_relaxed);
  stats->entries = atomic_load_explicit(&table->stats.entries, memory_order_relaxed);
  stats->capacity = table->capacity;
}
