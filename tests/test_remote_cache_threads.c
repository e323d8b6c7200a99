/* The remote tier shared by the threads of one runtime (its one connection is used under a
 * lock): 8 threads run the same 6 graphs in turn, against a private redis-server, then the
 * server is killed and they go on. Every output is right; each graph is compiled once by the
 * first runtime and loaded from Redis by the second; TSan (make tsan) checks the locking. */
#include <pthread.h>

#include "redis_test_util.h"
#include "remote_test_util.h"
#include "test.h"

enum { THREADS = 8, GRAPHS = 6 };

typedef struct worker {
  latch_runtime *rt;
  int first, wrong;
} worker;

static void *work(void *arg) {
  worker *w = arg;
  for (int i = 0; i < GRAPHS; i++) w->wrong += run_graph(w->rt, (w->first + i) % GRAPHS);
  return NULL;
}

/* All threads on rt at once; the wrong outputs in all. */
static int run_threads(latch_runtime *rt) {
  pthread_t threads[THREADS];
  worker workers[THREADS];
  for (int t = 0; t < THREADS; t++) {
    workers[t] = (worker){rt, t, 0};
    pthread_create(&threads[t], NULL, work, &workers[t]);
  }
  int wrong = 0;
  for (int t = 0; t < THREADS; t++) {
    pthread_join(threads[t], NULL);
    wrong += workers[t].wrong;
  }
  return wrong;
}

static void threads_share_the_tier(void) {
  redis_server s;
  if (!redis_start(&s, NULL, NULL)) {
    CHECK_MSG(false, "redis-server did not start");
    return;
  }
  char url[128];
  redis_url(&s, NULL, "timeout_ms=200", url, sizeof url);
  latch_runtime *rt = open_rt(url, NULL, NULL);
  CHECK(rt != NULL);
  if (!rt) return;
  CHECK_EQ_INT(run_threads(rt), 0);
  latch_stats st = stats_of(rt);
  CHECK_EQ_INT((int)st.compiles, GRAPHS);
  CHECK_EQ_INT((int)st.remote_writes, GRAPHS);
  latch_close(rt);

  rt = open_rt(url, NULL, NULL);
  if (!rt) return;
  CHECK_EQ_INT(run_threads(rt), 0);
  st = stats_of(rt);
  CHECK_EQ_INT((int)st.compiles, 0);
  CHECK_EQ_INT((int)st.remote_loads, GRAPHS);
  latch_close(rt);

  redis_signal(&s, SIGKILL); /* and with the server gone, a fresh runtime still gets it right */
  rt = open_rt(url, NULL, NULL);
  if (!rt) return;
  CHECK_EQ_INT(run_threads(rt), 0);
  CHECK_EQ_INT((int)stats_of(rt).compiles, GRAPHS);
  latch_close(rt);
  redis_stop(&s);
}

int main(void) {
  RUN(threads_share_the_tier);
  return TEST_REPORT();
}
