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
#include "disk_test_util.h"
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

int main(void) {
  RUN(fork_after_compiling);
  RUN(fork_during_remote_call);
  RUN(fork_during_compile);
  return TEST_REPORT();
}
