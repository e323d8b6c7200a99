/* fork in a program using latch: a child of a process that compiled runs graphs with both
 * cache tiers (a fresh Redis connection of its own, the parent's left working), and nothing a
 * thread of the parent was doing at fork makes the child wait forever: a Redis command in
 * flight (the server paused under it) and a compile in flight (the child compiles that key
 * itself instead of waiting for a thread it does not have). Every child has a hang guard
 * (alarm): a child that would wait forever fails instead. Results are checked against values
 * worked out independently (remote_test_util.h). */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cache/cache.h"
#include "capture/capture.h"
#include "disk_test_util.h"
#include "runtime/runtime.h"
#include "redis_test_util.h"
#include "remote_test_util.h"
#include "test.h"

enum { HANG_GUARD_S = 120 };

/* The child's exit status; -1 when it did not exit (killed: a hang caught by its guard). */
static int wait_child(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void fork_after_compiling(void) {
  redis_server s;
  if (!redis_start(&s, NULL, NULL)) {
    CHECK_MSG(false, "redis-server did not start");
    return;
  }
  char url[160], dir[64], dir2[64];
  redis_url(&s, NULL, "unsigned=0", url, sizeof url);
  make_temp_dir(dir);
  make_temp_dir(dir2);
  latch_runtime *rt = open_rt(url, dir, "fork-secret");
  CHECK(rt && run_graph(rt, 0) == 0 && run_graph(rt, 1) == 0);
  latch_stats before = rt ? stats_of(rt) : (latch_stats){0};
  CHECK_EQ_INT((int)before.remote_writes, 2);
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    alarm(HANG_GUARD_S);
    /* graph 0 from the inherited memory table, graph 2 compiled and written to both tiers */
    int wrong = run_graph(rt, 0) + run_graph(rt, 2);
    latch_stats st = stats_of(rt);
    bool wrote = st.remote_writes == before.remote_writes + 1;
    latch_close(rt);
    _exit(wrong == 0 && wrote ? 0 : 1);
  }
  CHECK_EQ_INT(wait_child(pid), 0);
  /* the parent's own connection still answers */
  CHECK(rt && run_graph(rt, 3) == 0);
  CHECK(rt && stats_of(rt).remote_writes == before.remote_writes + 1);
  if (rt) latch_close(rt);
  /* what the child wrote is on the server: a process with an empty disk loads graph 2 */
  rt = open_rt(url, dir2, "fork-secret");
  CHECK(rt && run_graph(rt, 2) == 0);
  CHECK(rt && stats_of(rt).remote_loads == 1 && stats_of(rt).compiles == 0);
  if (rt) latch_close(rt);
  remove_tree(dir);
  remove_tree(dir2);
  redis_stop(&s);
}

/* ---- a Redis command in flight at fork ---- */

typedef struct busy {
  latch_runtime *rt;
  atomic_int wrong;
} busy;

static void *run_graph_5(void *arg) {
  busy *b = arg;
  atomic_store(&b->wrong, run_graph(b->rt, 5));
  return NULL;
}

static void fork_during_remote_call(void) {
  redis_server s;
  if (!redis_start(&s, NULL, NULL)) {
    CHECK_MSG(false, "redis-server did not start");
    return;
  }
  char url[160];
  redis_url(&s, NULL, "unsigned=0&timeout_ms=5000", url, sizeof url);
  latch_runtime *rt = open_rt(url, NULL, "fork-secret");
  CHECK(rt && run_graph(rt, 0) == 0); /* connected */
  redisContext *c = redis_client(&s, NULL);
  redisReply *r = c ? redisCommand(c, "CLIENT PAUSE 600 ALL") : NULL;
  CHECK(r && r->type == REDIS_REPLY_STATUS);
  if (r) freeReplyObject(r);
  busy b = {rt, 4};
  pthread_t thread;
  pthread_create(&thread, NULL, run_graph_5, &b);
  redis_sleep_ms(150); /* the thread's GET is waiting on the paused server, under the tier's lock */
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    alarm(HANG_GUARD_S);
    int wrong = run_graph(rt, 6);
    latch_stats st = stats_of(rt);
    _exit(wrong == 0 && st.remote_writes >= 1 ? 0 : 1);
  }
  CHECK_EQ_INT(wait_child(pid), 0);
  pthread_join(thread, NULL);
  CHECK_EQ_INT(atomic_load(&b.wrong), 0);
  CHECK(run_graph(rt, 7) == 0);
  if (c) redisFree(c);
  latch_close(rt);
  redis_stop(&s);
}

/* ---- a compile in flight at fork ---- */

static atomic_int compile_started;

static void *slow_compile(void *ctx, hlo_diag *diag) {
  (void)diag;
  atomic_store(&compile_started, 1);
  if (ctx) redis_sleep_ms(800);
  return strdup("value");
}

typedef struct compiling {
  cache_table *table;
  bool ok;
} compiling;

static const cache_key in_flight_key = {.lo = 7, .hi = 9};

static void *compile_in_thread(void *arg) {
  compiling *c = arg;
  hlo_diag diag;
  hlo_diag_clear(&diag);
  cache_entry *e = cache_table_get_or_compile(c->table, in_flight_key, slow_compile, (void *)1, &diag, NULL);
  c->ok = e && strcmp(cache_entry_value(e), "value") == 0;
  cache_table_release(c->table, e);
  return NULL;
}

static void fork_during_compile(void) {
  hlo_diag diag;
  hlo_diag_clear(&diag);
  cache_table *table = cache_table_new(8, free, &diag);
  CHECK(table != NULL);
  if (!table) return;
  compiling c = {table, false};
  atomic_store(&compile_started, 0);
  pthread_t thread;
  pthread_create(&thread, NULL, compile_in_thread, &c);
  while (!atomic_load(&compile_started)) redis_sleep_ms(2);
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    alarm(HANG_GUARD_S);
    bool hit = true;
    cache_entry *e = cache_table_get_or_compile(table, in_flight_key, slow_compile, NULL, &diag, &hit);
    bool ok = e && strcmp(cache_entry_value(e), "value") == 0 && !hit;
    cache_table_release(table, e);
    cache_table_free(table);
    _exit(ok ? 0 : 1);
  }
  CHECK_EQ_INT(wait_child(pid), 0);
  pthread_join(thread, NULL);
  CHECK(c.ok);
  cache_stats st;
  cache_table_stats(table, &st);
  CHECK_EQ_INT((int)st.compiles, 1); /* the child's compile is the child's */
  cache_table_free(table);
}

/* ---- a traced function's compile in flight at fork ---- */

typedef struct traced_graph {
  latch_runtime *rt;
  int g;
} traced_graph;

/* relu(x * (g + 2) - 1): remote_test_util.h's graph g, traced. */
static latch_status graph_fn(void *user, latch_tensor *const *inputs, int input_count, latch_tensor **outputs,
                             int output_count) {
  (void)input_count, (void)output_count;
  const traced_graph *t = user;
  latch_runtime *rt = t->rt;
  int g = t->g;
  latch_tensor *k = latch_scalar(rt, LATCH_F32, g + 2), *one = latch_scalar(rt, LATCH_F32, 1);
  latch_tensor *a = latch_binary(LATCH_MUL, inputs[0], k), *b = latch_binary(LATCH_SUB, a, one);
  outputs[0] = latch_relu(b);
  latch_release(k), latch_release(one), latch_release(a), latch_release(b);
  return outputs[0] ? LATCH_OK : LATCH_ERR_INTERNAL;
}

/* One call of f on xs; the wrong values (4 when the call failed). */
static int call_graph(latch_runtime *rt, latch_function *f, int g) {
  int64_t dims[1] = {4};
  latch_tensor *x = latch_from_host(rt, LATCH_F32, 1, dims, xs), *y = NULL;
  float out[4];
  int wrong = 4;
  if (latch_call(f, &x, 1, NULL, 0, &y, 1) == LATCH_OK && latch_read(y, out, sizeof out) == LATCH_OK) {
    wrong = 0;
    for (int i = 0; i < 4; i++) wrong += out[i] != expected(g, i);
  }
  latch_release(x);
  latch_release(y);
  return wrong;
}

typedef struct calling {
  latch_runtime *rt;
  latch_function *f;
  atomic_int wrong;
} calling;

enum { TRACED = 3 };

static void *call_in_thread(void *arg) {
  calling *c = arg;
  atomic_store(&c->wrong, call_graph(c->rt, c->f, TRACED));
  return NULL;
}

/* A thread's latch_call traces and compiles (its save to the disk cache held up halfway by
 * the test hook, so the fork surely lands inside the compile step, with the function's call
 * lock held) while the main thread forks: the child calls the same function and gets the
 * right values, neither waiting for the thread it does not have nor finding the lock taken;
 * the parent's call finishes as if nothing happened. */
static void fork_during_traced_compile(void) {
  char dir[64];
  make_temp_dir(dir);
  latch_options options;
  latch_options_init(&options);
  options.backend = "reference";
  options.cache = "disk";
  options.cache_dir = dir;
  options.test_cache_write_delay_ms = "800";
  latch_runtime *rt = latch_open(&options);
  CHECK(rt != NULL);
  if (!rt) return;
  latch_function_options fo;
  latch_function_options_init(&fo);
  traced_graph t = {rt, TRACED};
  latch_function *f = latch_function_new_step(rt, graph_fn, &t, &fo);
  CHECK(f != NULL);
  calling c = {rt, f, 4};
  pthread_t thread;
  pthread_create(&thread, NULL, call_in_thread, &c);
  while (count_files(dir, CACHE_DISK_TEMP_PREFIX) < 1) redis_sleep_ms(2); /* the save has begun */
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    alarm(HANG_GUARD_S);
    int wrong = call_graph(rt, f, TRACED) + call_graph(rt, f, TRACED);
    _exit(wrong == 0 ? 0 : 1);
  }
  CHECK_EQ_INT(wait_child(pid), 0);
  pthread_join(thread, NULL);
  CHECK_EQ_INT(atomic_load(&c.wrong), 0);
  CHECK_EQ_INT(call_graph(rt, f, TRACED), 0);
  latch_function_stats st;
  latch_function_get_stats(f, &st);
  CHECK_EQ_INT((int)st.traces, 1); /* the parent traced once: the child's trace was its own */
  latch_function_free(f);
  latch_close(rt);
  remove_tree(dir);
}

/* ---- the runtime's repro lock ---- */

typedef struct holding {
  latch_runtime *rt;
  atomic_bool held;
} holding;

/* Holds the runtime's repro lock a moment, as a thread noting a repro does. */
static void *hold_repro_lock(void *arg) {
  holding *h = arg;
  pthread_mutex_lock(&h->rt->repro_lock);
  atomic_store(&h->held, true);
  redis_sleep_ms(200);
  pthread_mutex_unlock(&h->rt->repro_lock);
  return NULL;
}

/* A thread holds the repro lock while the main thread forks: the child's latch_last_repro
 * finds it free (fork waited for it) and answers "" (no repro made), as the parent does. */
static void fork_while_repro_lock_held(void) {
  latch_options options;
  latch_options_init(&options);
  options.backend = "reference";
  options.cache = "off";
  latch_runtime *rt = latch_open(&options);
  CHECK(rt != NULL);
  if (!rt) return;
  holding h = {rt, false};
  pthread_t thread;
  pthread_create(&thread, NULL, hold_repro_lock, &h);
  while (!atomic_load(&h.held)) redis_sleep_ms(1);
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    alarm(HANG_GUARD_S);
    _exit(strcmp(latch_last_repro(rt), "") == 0 ? 0 : 1);
  }
  CHECK_EQ_INT(wait_child(pid), 0);
  pthread_join(thread, NULL);
  CHECK_STR(latch_last_repro(rt), "");
  latch_close(rt);
}

/* ---- the thread count in a child ---- */

enum { POOL = 3, N = 48 };

typedef struct seen {
  pthread_mutex_t lock;
  pthread_t ids[64];
  int count;
} seen;

/* Notes the thread running this part; a short sleep keeps parts overlapping. */
static void note_thread(void *ctx, int64_t begin, int64_t end) {
  (void)begin, (void)end;
  seen *s = ctx;
  pthread_mutex_lock(&s->lock);
  bool known = false;
  for (int i = 0; i < s->count; i++) known = known || pthread_equal(s->ids[i], pthread_self());
  if (!known && s->count < 64) s->ids[s->count++] = pthread_self();
  pthread_mutex_unlock(&s->lock);
  redis_sleep_ms(20);
}

/* The distinct threads one parallel loop of six parts ran on. */
static int threads_used(void) {
  seen s = {.lock = PTHREAD_MUTEX_INITIALIZER};
  rt_parallel_for(6, 1, note_thread, &s);
  return s.count;
}

/* a (N x N) times b (N x N) on the cpu backend, a[i][k] = i % 7 - 3, b[k][j] = (k + 2j) % 5 - 2:
 * small integers, so every sum is exact in f32 and is worked out here in integers. The wrong
 * values (N * N when it failed). */
static int matmul_wrong(void) {
  static float a[N * N], b[N * N], out[N * N];
  for (int i = 0; i < N; i++)
    for (int k = 0; k < N; k++) a[i * N + k] = (float)(i % 7 - 3), b[i * N + k] = (float)((i + 2 * k) % 5 - 2);
  latch_options options;
  latch_options_init(&options);
  options.backend = "cpu";
  latch_runtime *rt = latch_open(&options);
  int64_t dims[2] = {N, N};
  latch_tensor *x = rt ? latch_from_host(rt, LATCH_F32, 2, dims, a) : NULL;
  latch_tensor *w = rt ? latch_from_host(rt, LATCH_F32, 2, dims, b) : NULL;
  latch_tensor *y = rt ? latch_matmul(x, w) : NULL;
  int wrong = N * N;
  if (y && latch_read(y, out, sizeof out) == LATCH_OK) {
    wrong = 0;
    for (int i = 0; i < N; i++)
      for (int j = 0; j < N; j++) {
        long sum = 0;
        for (int k = 0; k < N; k++) sum += (long)(i % 7 - 3) * ((k + 2 * j) % 5 - 2);
        wrong += out[i * N + j] != (float)sum;
      }
  }
  latch_release(x), latch_release(w), latch_release(y);
  latch_close(rt);
  return wrong;
}

/* A child of a process whose OpenMP pool ran keeps the parent's thread count: its loops run
 * on that many threads of its own (not libgomp's pool, which fork does not copy), and a
 * product through oneDNN and latch's loops answers with the right values. */
static void child_keeps_thread_count(void) {
  CHECK_EQ_INT(rt_parallel_threads(), POOL);
  threads_used();                  /* OpenMP's pool has run */
  CHECK_EQ_INT(matmul_wrong(), 0); /* and oneDNN's team */
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    alarm(HANG_GUARD_S);
    int threads = rt_parallel_threads(), used = threads_used(), wrong = matmul_wrong();
    if (threads != POOL || used != POOL || wrong)
      fprintf(stderr, "child: %d threads, a loop ran on %d, %d wrong values\n", threads, used, wrong);
    _exit(threads == POOL && used == POOL && wrong == 0 ? 0 : 1);
  }
  CHECK_EQ_INT(wait_child(pid), 0);
}

int main(void) {
  rt_parallel_request_threads(POOL); /* before the first loop fixes the count */
  RUN(child_keeps_thread_count);
  RUN(fork_after_compiling);
  RUN(fork_during_remote_call);
  RUN(fork_during_compile);
  RUN(fork_during_traced_compile);
  RUN(fork_while_repro_lock_held);
  return TEST_REPORT();
}
