/* The compile cache table: hits, misses, eviction, statistics, and the concurrency promises:
 * one compile per key under racing threads, failures reported to waiters and retried, values
 * kept alive while referenced. Runs under `make tsan` and `make sanitize`. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "cache/cache.h"
#include "test.h"

/* ---- values: counted, and poisoned when destroyed so a use after free shows ---- */

enum { VALUE_MAGIC = 0x5eed };

typedef struct value {
  int magic;
  int id;
} value;

static atomic_int values_made, values_destroyed;

static value *value_new(int id) {
  value *v = malloc(sizeof *v);
  v->magic = VALUE_MAGIC;
  v->id = id;
  atomic_fetch_add(&values_made, 1);
  return v;
}

static void value_destroy(void *p) {
  value *v = p;
  v->magic = 0;
  free(v);
  atomic_fetch_add(&values_destroyed, 1);
}

static bool value_is(const cache_entry *entry, int id) {
  const value *v = entry ? cache_entry_value(entry) : NULL;
  return v && v->magic == VALUE_MAGIC && v->id == id;
}

static cache_key key_of(int id) {
  cache_key key = {(uint64_t)id * 0x9e3779b97f4a7c15u + 1, (uint64_t)id};
  return key;
}

/* ---- compile functions ---- */

enum { MAX_KEYS = 256 };

typedef struct job {
  int id;
  int sleep_us;
  bool fail;
  atomic_int *calls; /* per key */
  /* For the waiter test: hold the compile until this many threads wait on it. */
  cache_table *table;
  uint64_t wait_for_waits;
} job;

static void *compile_job(void *ctx, hlo_diag *diag) {
  job *j = ctx;
  if (j->calls) atomic_fetch_add(&j->calls[j->id], 1);
  if (j->sleep_us) usleep((useconds_t)j->sleep_us);
  if (j->wait_for_waits) {
    cache_stats stats;
    for (int tries = 0; tries < 10000; tries++) {
      cache_table_stats(j->table, &stats);
      if (stats.waits >= j->wait_for_waits) break;
      usleep(500);
    }
  }
  if (j->fail) {
    hlo_diag_set(diag, HLO_ERR_UNSUPPORTED, "boom %d", j->id);
    return NULL;
  }
  return value_new(j->id);
}

static cache_entry *get_or_compile(cache_table *table, job *j, hlo_diag *diag, bool *was_hit) {
  return cache_table_get_or_compile(table, key_of(j->id), compile_job, j, diag, was_hit);
}

/* ---- single thread ---- */

static void test_hit_miss_stats(void) {
  atomic_int calls[MAX_KEYS] = {0};
  hlo_diag diag = {0};
  cache_table *table = cache_table_new(4, value_destroy, &diag);
  CHECK(table != NULL);

  CHECK(cache_table_get(table, key_of(1)) == NULL);
  job j = {.id = 1, .calls = calls};
  bool hit = true;
  cache_entry *first = get_or_compile(table, &j, &diag, &hit);
  CHECK(value_is(first, 1));
  CHECK(!hit);
  CHECK(cache_key_equal(cache_entry_key(first), key_of(1)));
  cache_entry *second = get_or_compile(table, &j, &diag, &hit);
  CHECK(hit);
  CHECK(second == first);
  cache_entry *third = cache_table_get(table, key_of(1));
  CHECK(third == first);
  CHECK_EQ_INT(atomic_load(&calls[1]), 1);
  cache_table_release(table, first);
  cache_table_release(table, second);
  cache_table_release(table, third);
  CHECK(diag.status == HLO_OK);

  cache_stats stats;
  cache_table_stats(table, &stats);
  CHECK_EQ_INT(stats.hits, 2);
  CHECK_EQ_INT(stats.misses, 2);
  CHECK_EQ_INT(stats.compiles, 1);
  CHECK_EQ_INT(stats.compile_failures, 0);
  CHECK_EQ_INT(stats.entries, 1);
  CHECK_EQ_INT(stats.capacity, 4);
  CHECK_EQ_INT(stats.evictions, 0);
  cache_table_free(table);

  hlo_diag bad = {0};
  CHECK(cache_table_new(0, value_destroy, &bad) == NULL);
  CHECK(bad.status == HLO_ERR_INPUT);
}

static void test_compile_time_counted(void) {
  cache_table *table = cache_table_new(4, value_destroy, NULL);
  job j = {.id = 7, .sleep_us = 2000};
  cache_table_release(table, get_or_compile(table, &j, NULL, NULL));
  cache_stats stats;
  cache_table_stats(table, &stats);
  CHECK_MSG(stats.compile_ns >= 2000000, "compile_ns %llu", (unsigned long long)stats.compile_ns);
  cache_table_free(table);
}

static void test_lru_eviction(void) {
  int made = atomic_load(&values_made), destroyed = atomic_load(&values_destroyed);
  cache_table *table = cache_table_new(2, value_destroy, NULL);
  job a = {.id = 1}, b = {.id = 2}, c = {.id = 3};
  cache_table_release(table, get_or_compile(table, &a, NULL, NULL));
  cache_table_release(table, get_or_compile(table, &b, NULL, NULL));
  cache_table_release(table, cache_table_get(table, key_of(1))); /* a is now newer than b */
  cache_table_release(table, get_or_compile(table, &c, NULL, NULL));

  cache_entry *entry = cache_table_get(table, key_of(2));
  CHECK(entry == NULL);
  entry = cache_table_get(table, key_of(1));
  CHECK(value_is(entry, 1));
  cache_table_release(table, entry);
  entry = cache_table_get(table, key_of(3));
  CHECK(value_is(entry, 3));
  cache_table_release(table, entry);

  cache_stats stats;
  cache_table_stats(table, &stats);
  CHECK_EQ_INT(stats.evictions, 1);
  CHECK_EQ_INT(stats.entries, 2);
  cache_table_free(table);
  CHECK_EQ_INT(atomic_load(&values_made) - made, 3);
  CHECK_EQ_INT(atomic_load(&values_destroyed) - destroyed, 3);
}

/* A held value outlives its eviction, many evictions later, and even the table. */
static void test_held_value_survives(void) {
  int destroyed = atomic_load(&values_destroyed);
  cache_table *table = cache_table_new(1, value_destroy, NULL);
  job a = {.id = 1};
  cache_entry *held = get_or_compile(table, &a, NULL, NULL);
  for (int i = 2; i < 40; i++) {
    job other = {.id = i};
    cache_table_release(table, get_or_compile(table, &other, NULL, NULL));
    CHECK(value_is(held, 1));
  }
  CHECK(cache_table_get(table, key_of(1)) == NULL);
  cache_entry *last = cache_table_get(table, key_of(39));
  CHECK(value_is(last, 39));
  cache_table_free(table);
  CHECK(value_is(held, 1));
  CHECK(value_is(last, 39));
  int before = atomic_load(&values_destroyed);
  cache_table_release(NULL, held);
  cache_table_release(NULL, last);
  CHECK_EQ_INT(atomic_load(&values_destroyed) - before, 2);
  CHECK_EQ_INT(atomic_load(&values_destroyed) - destroyed, 39);
}

/* A removed entry: gone from lookups at once, its value alive while held and destroyed at the
 * last release (each exactly once), the next lookup compiling afresh. */
static void test_remove(void) {
  atomic_int calls[MAX_KEYS] = {0};
  int destroyed = atomic_load(&values_destroyed);
  cache_table *table = cache_table_new(4, value_destroy, NULL);
  job a = {.id = 3, .calls = calls};
  cache_entry *held = get_or_compile(table, &a, NULL, NULL);
  CHECK(cache_table_remove(table, held));
  CHECK(!cache_table_remove(table, held)); /* already gone */
  CHECK(cache_table_get(table, key_of(3)) == NULL);
  CHECK(value_is(held, 3));
  cache_entry *fresh = get_or_compile(table, &a, NULL, NULL);
  CHECK(fresh != held && value_is(fresh, 3));
  CHECK_EQ_INT(atomic_load(&calls[3]), 2);
  cache_table_release(table, held);
  CHECK(value_is(fresh, 3));
  cache_table_release(table, fresh);
  cache_table_free(table);
  CHECK_EQ_INT(atomic_load(&values_destroyed) - destroyed, 2);
}

static void test_failure_not_cached(void) {
  atomic_int calls[MAX_KEYS] = {0};
  cache_table *table = cache_table_new(4, value_destroy, NULL);
  job failing = {.id = 5, .fail = true, .calls = calls};
  hlo_diag diag = {0};
  CHECK(get_or_compile(table, &failing, &diag, NULL) == NULL);
  CHECK(diag.status == HLO_ERR_UNSUPPORTED);
  CHECK_STR(diag.message, "boom 5");
  CHECK(cache_table_get(table, key_of(5)) == NULL);

  job working = {.id = 5, .calls = calls};
  hlo_diag_clear(&diag);
  cache_entry *entry = get_or_compile(table, &working, &diag, NULL);
  CHECK(value_is(entry, 5));
  CHECK(diag.status == HLO_OK);
  CHECK_EQ_INT(atomic_load(&calls[5]), 2);
  cache_table_release(table, entry);

  cache_stats stats;
  cache_table_stats(table, &stats);
  CHECK_EQ_INT(stats.compiles, 2);
  CHECK_EQ_INT(stats.compile_failures, 1);
  cache_table_free(table);
}

/* A compile that "succeeds" without a value is a failure with a message, not a crash. */
static void *compile_nothing(void *ctx, hlo_diag *diag) {
  (void)ctx, (void)diag;
  return NULL;
}

static void test_failure_without_message(void) {
  cache_table *table = cache_table_new(4, value_destroy, NULL);
  hlo_diag diag = {0};
  CHECK(cache_table_get_or_compile(table, key_of(1), compile_nothing, NULL, &diag, NULL) == NULL);
  CHECK(diag.status == HLO_ERR_INTERNAL);
  hlo_diag_clear(&diag);
  CHECK(cache_table_get_or_compile(table, key_of(1), NULL, NULL, &diag, NULL) == NULL);
  CHECK(diag.status == HLO_ERR_INPUT);
  cache_table_free(table);
}

/* ---- threads ---- */

enum { THREADS = 8, KEYS = 64, ROUNDS = 20 };

typedef struct hammer {
  cache_table *table;
  pthread_barrier_t *start;
  atomic_int *calls;
  int thread, keys, rounds, sleep_us;
  int wrong, failed, hits;
} hammer;

/* Every thread walks all keys; even threads forward, odd ones backward, so most keys are
 * missed by several threads at once. Each checks it got the value for the key it asked. */
static void *hammer_thread(void *arg) {
  hammer *h = arg;
  pthread_barrier_wait(h->start);
  for (int round = 0; round < h->rounds; round++) {
    for (int k = 0; k < h->keys; k++) {
      int id = h->thread % 2 ? h->keys - 1 - k : k;
      job j = {.id = id, .sleep_us = h->sleep_us, .calls = h->calls};
      hlo_diag diag = {0};
      bool hit = false;
      cache_entry *entry = get_or_compile(h->table, &j, &diag, &hit);
      if (!entry) h->failed++;
      else if (!value_is(entry, id)) h->wrong++;
      h->hits += hit;
      cache_table_release(h->table, entry);
    }
  }
  return NULL;
}

static void run_hammer(cache_table *table, atomic_int *calls, int keys, int rounds,
                       int sleep_us, hammer *threads) {
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, THREADS);
  pthread_t ids[THREADS];
  for (int t = 0; t < THREADS; t++) {
    threads[t] = (hammer){.table = table, .start = &start, .calls = calls, .thread = t,
                          .keys = keys, .rounds = rounds, .sleep_us = sleep_us};
    pthread_create(&ids[t], NULL, hammer_thread, &threads[t]);
  }
  for (int t = 0; t < THREADS; t++) pthread_join(ids[t], NULL);
  pthread_barrier_destroy(&start);
}

static void test_threads_one_compile_per_key(void) {
  static atomic_int calls[MAX_KEYS];
  for (int k = 0; k < MAX_KEYS; k++) atomic_store(&calls[k], 0);
  int made = atomic_load(&values_made), destroyed = atomic_load(&values_destroyed);
  cache_table *table = cache_table_new(128, value_destroy, NULL);
  hammer threads[THREADS];
  run_hammer(table, calls, KEYS, ROUNDS, 1000, threads);

  int wrong = 0, failed = 0;
  for (int t = 0; t < THREADS; t++) wrong += threads[t].wrong, failed += threads[t].failed;
  CHECK_EQ_INT(wrong, 0);
  CHECK_EQ_INT(failed, 0);
  int not_once = 0;
  for (int k = 0; k < KEYS; k++) not_once += atomic_load(&calls[k]) != 1;
  CHECK_EQ_INT(not_once, 0);

  cache_stats stats;
  cache_table_stats(table, &stats);
  CHECK_EQ_INT(stats.compiles, KEYS);
  CHECK_EQ_INT(stats.entries, KEYS);
  CHECK_EQ_INT(stats.evictions, 0);
  CHECK_EQ_INT(stats.hits + stats.misses, THREADS * KEYS * ROUNDS);
  CHECK_EQ_INT(stats.misses - stats.waits, KEYS); /* the misses that compiled */
  cache_table_free(table);
  CHECK_EQ_INT(atomic_load(&values_made) - made, KEYS);
  CHECK_EQ_INT(atomic_load(&values_destroyed) - destroyed, KEYS);
}

/* Capacity 8 under 64 keys: constant eviction while other threads hold and read values. */
static void test_threads_eviction(void) {
  static atomic_int calls[MAX_KEYS];
  for (int k = 0; k < MAX_KEYS; k++) atomic_store(&calls[k], 0);
  int made = atomic_load(&values_made), destroyed = atomic_load(&values_destroyed);
  cache_table *table = cache_table_new(8, value_destroy, NULL);
  hammer threads[THREADS];
  run_hammer(table, calls, KEYS, 10, 0, threads);

  int wrong = 0, failed = 0;
  for (int t = 0; t < THREADS; t++) wrong += threads[t].wrong, failed += threads[t].failed;
  CHECK_EQ_INT(wrong, 0);
  CHECK_EQ_INT(failed, 0);
  cache_stats stats;
  cache_table_stats(table, &stats);
  CHECK(stats.evictions > 0);
  CHECK(stats.entries <= 8);
  CHECK_EQ_INT(stats.compiles, stats.entries + stats.evictions);
  cache_table_free(table);
  CHECK_EQ_INT(atomic_load(&values_made) - made, atomic_load(&values_destroyed) - destroyed);
}

typedef struct failer {
  cache_table *table;
  job *j;
  pthread_barrier_t *start;
  cache_entry *entry;
  hlo_diag diag;
} failer;

static void *failer_thread(void *arg) {
  failer *f = arg;
  pthread_barrier_wait(f->start);
  f->entry = get_or_compile(f->table, f->j, &f->diag, NULL);
  return NULL;
}

/* The compile holds until every other thread waits on it, then fails: all of them get the
 * failure, none of them compiles, and the next call compiles afresh. */
static void test_threads_failure_reported_to_waiters(void) {
  atomic_int calls[MAX_KEYS] = {0};
  cache_table *table = cache_table_new(8, value_destroy, NULL);
  job failing = {.id = 9, .fail = true, .calls = calls, .table = table,
                 .wait_for_waits = THREADS - 1};
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, THREADS);
  failer f[THREADS];
  pthread_t ids[THREADS];
  for (int t = 0; t < THREADS; t++) {
    f[t] = (failer){.table = table, .j = &failing, .start = &start};
    pthread_create(&ids[t], NULL, failer_thread, &f[t]);
  }
  for (int t = 0; t < THREADS; t++) pthread_join(ids[t], NULL);
  pthread_barrier_destroy(&start);

  int got_failure = 0;
  for (int t = 0; t < THREADS; t++)
    got_failure += !f[t].entry && f[t].diag.status == HLO_ERR_UNSUPPORTED &&
                   strcmp(f[t].diag.message, "boom 9") == 0;
  CHECK_EQ_INT(got_failure, THREADS);
  CHECK_EQ_INT(atomic_load(&calls[9]), 1);
  cache_stats stats;
  cache_table_stats(table, &stats);
  CHECK_EQ_INT(stats.waits, THREADS - 1);
  CHECK_EQ_INT(stats.compile_failures, 1);
  CHECK_EQ_INT(stats.entries, 0);

  job working = {.id = 9, .calls = calls};
  cache_entry *entry = get_or_compile(table, &working, NULL, NULL);
  CHECK(value_is(entry, 9));
  CHECK_EQ_INT(atomic_load(&calls[9]), 2);
  cache_table_release(table, entry);
  cache_table_free(table);
}

/* ---- speed ---- */

static double seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Not a pass/fail check (sanitizers slow it tenfold): prints what a hit costs. */
static void test_hit_speed(void) {
  cache_table *table = cache_table_new(64, value_destroy, NULL);
  for (int i = 0; i < 64; i++) {
    job j = {.id = i};
    cache_table_release(table, get_or_compile(table, &j, NULL, NULL));
  }
  enum { N = 1000000 };
  double start = seconds();
  int found = 0;
  for (int i = 0; i < N; i++) {
    cache_entry *entry = cache_table_get(table, key_of(i & 63));
    found += entry != NULL;
    cache_table_release(table, entry);
  }
  double took = seconds() - start;
  CHECK_EQ_INT(found, N);
  printf("cache_table_get + release, hit: %.1f ns\n", took * 1e9 / N);
  cache_table_free(table);
}

int main(void) {
  RUN(test_hit_miss_stats);
  RUN(test_compile_time_counted);
  RUN(test_lru_eviction);
  RUN(test_held_value_survives);
  RUN(test_remove);
  RUN(test_failure_not_cached);
  RUN(test_failure_without_message);
  RUN(test_threads_one_compile_per_key);
  RUN(test_threads_eviction);
  RUN(test_threads_failure_reported_to_waiters);
  RUN(test_hit_speed);
  CHECK_EQ_INT(atomic_load(&values_made), atomic_load(&values_destroyed));
  return TEST_REPORT();
}
