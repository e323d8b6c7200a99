/* The two cache levels together, as capture/ will stack them: the in-memory table in front,
 * whose compile function goes to the disk cache, whose compile goes to the backend. Threads
 * racing on the same keys compile each key once in the first process and not at all in the
 * next one (a fresh table: a new process as far as the cache can tell), and everyone gets the
 * right value. Runs under `make tsan` (its name has "thread" in it). */
#include <pthread.h>
#include <stdatomic.h>

#include "cache/cache.h"
#include "disk_test_util.h"
#include "test.h"

static const char *const FP = "backend=test/1 latch=0 arch=x cpu= options=";
enum { THREADS = 8, KEYS = 6 };

static atomic_int compiles, loads;

typedef struct value {
  uint64_t id;
} value;

static void value_destroy(void *v) {
  free(v);
}

/* the backend: "compiles" key i into a value holding i */
static void *backend_compile(void *ctx, hlo_diag *diag) {
  (void)diag;
  atomic_fetch_add(&compiles, 1);
  value *v = malloc(sizeof *v);
  v->id = *(const uint64_t *)ctx;
  return v;
}

static hlo_status backend_serialize(void *ctx, const void *v, void **bytes, size_t *len, hlo_diag *diag) {
  (void)ctx, (void)diag;
  *bytes = malloc(sizeof(value));
  memcpy(*bytes, v, sizeof(value));
  *len = sizeof(value);
  return HLO_OK;
}

static void *backend_deserialize(void *ctx, const void *bytes, size_t len, hlo_diag *diag) {
  (void)ctx;
  if (len != sizeof(value)) {
    hlo_diag_set(diag, HLO_ERR_INPUT, "bad length");
    return NULL;
  }
  atomic_fetch_add(&loads, 1);
  value *v = malloc(sizeof *v);
  memcpy(v, bytes, sizeof *v);
  return v;
}

/* the table's compile function: the disk level */
typedef struct lookup {
  cache_disk *disk;
  uint64_t id;
} lookup;

static void *through_disk(void *ctx, hlo_diag *diag) {
  lookup *l = ctx;
  cache_codec codec = {&l->id, backend_compile, backend_serialize, backend_deserialize, NULL};
  return cache_disk_get_or_compile(l->disk, test_key(l->id), FP, &codec, NULL, NULL, diag);
}

typedef struct worker {
  cache_table *table;
  cache_disk *disk;
  int index;
  int wrong;
} worker;

static void *work(void *arg) {
  worker *w = arg;
  for (int round = 0; round < 20; round++) {
    for (int k = 0; k < KEYS; k++) {
      lookup l = {w->disk, (uint64_t)((k + w->index) % KEYS)};
      hlo_diag diag;
      hlo_diag_clear(&diag);
      cache_entry *e = cache_table_get_or_compile(w->table, test_key(l.id), through_disk, &l, &diag, NULL);
      const value *v = e ? cache_entry_value(e) : NULL;
      w->wrong += !v || v->id != l.id;
      cache_table_release(w->table, e);
    }
  }
  return NULL;
}

/* One "process": a fresh table over the directory, THREADS threads racing. */
static void one_process(const char *dir) {
  hlo_diag diag;
  hlo_diag_clear(&diag);
  cache_table *table = cache_table_new(64, value_destroy, &diag);
  cache_disk *disk = cache_disk_open(dir, 1 << 20, NULL, &diag);
  CHECK(table && disk);
  if (!table || !disk) return;
  pthread_t threads[THREADS];
  worker workers[THREADS];
  for (int t = 0; t < THREADS; t++) {
    workers[t] = (worker){table, disk, t, 0};
    pthread_create(&threads[t], NULL, work, &workers[t]);
  }
  for (int t = 0; t < THREADS; t++) {
    pthread_join(threads[t], NULL);
    CHECK_EQ_INT(workers[t].wrong, 0);
  }
  cache_disk_stats s;
  cache_disk_get_stats(disk, &s);
  CHECK_EQ_INT(s.corrupt, 0);
  CHECK_EQ_INT(s.hits + s.misses, KEYS); /* the table in front asks the disk once per key */
  cache_disk_close(disk);
  cache_table_free(table);
}

static void two_levels(void) {
  char dir[64];
  make_temp_dir(dir);
  one_process(dir);
  CHECK_EQ_INT(atomic_load(&compiles), KEYS); /* cold: each key compiled once */
  CHECK_EQ_INT(atomic_load(&loads), 0);
  one_process(dir);
  CHECK_EQ_INT(atomic_load(&compiles), KEYS); /* warm: nothing compiled */
  CHECK_EQ_INT(atomic_load(&loads), KEYS);
  remove_tree(dir);
}

int main(void) {
  unsetenv("LATCH_CACHE_TEST_FAULT");
  unsetenv("LATCH_CACHE_TEST_WRITE_DELAY_MS");
  RUN(two_levels);
  return TEST_REPORT();
}
