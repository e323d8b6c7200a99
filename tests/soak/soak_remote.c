/* `make soak` part two (opt-in, SOAK_SECONDS): the compile cache's tiers under a fleet's
 * churn. A private redis-server; PROCESSES processes at once, each in rounds for the set time:
 * a runtime with an empty disk cache of its own and the Redis tier (signed entries, a short
 * lease), a helper thread running graphs beside the main one, GRAPHS graphs run in a random
 * order (most loaded from Redis, the first of each compiled once by the fleet), and, every
 * round, a fork while the helper thread is running: the child runs graphs on the inherited
 * runtime (its own Redis connection) and exits with how many were wrong. Every output is
 * checked against values worked out here. At the end every graph's entry must be on the
 * server and valid ("nothing lost"), and each process's RSS and open files from its second
 * quarter to its end must stay flat. Exits 1 on any wrong value, error, loss or growth.
 *
 *   build/soak_remote [SECONDS [PROCESSES]]   (defaults 60 and 3) */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <latch.h>

#include "soak_util.h"

#include "../redis_test_util.h"

enum { GRAPHS = 24, N = 16 };

static double seconds = 60;
static int processes = 3;
static char url[256];

/* Graph g: tanh(x * (g + 1) / 8 - 1) on x = 0..N-1, N values; the wrong ones (N when it
 * failed). Expected values in double, compared within 1e-5. */
static int run_graph(latch_runtime *rt, int g) {
  float xs[N], out[N];
  for (int i = 0; i < N; i++) xs[i] = (float)i;
  int64_t dims[1] = {N};
  latch_tensor *x = latch_from_host(rt, LATCH_F32, 1, dims, xs);
  latch_tensor *k = latch_scalar(rt, LATCH_F32, (double)(g + 1) / 8), *one = latch_scalar(rt, LATCH_F32, 1);
  latch_tensor *a = latch_binary(LATCH_MUL, x, k), *b = latch_binary(LATCH_SUB, a, one), *y = latch_unary(LATCH_TANH, b);
  int wrong = N;
  if (latch_read(y, out, sizeof out) == LATCH_OK) {
    wrong = 0;
    for (int i = 0; i < N; i++) wrong += fabs(out[i] - tanh(i * (g + 1) / 8.0 - 1)) > 1e-5;
  }
  latch_tensor *all[] = {x, k, one, a, b, y};
  for (int i = 0; i < 6; i++) latch_release(all[i]);
  return wrong;
}

/* A runtime on both tiers: a disk cache in dir, the fleet's Redis with signed entries. */
static latch_runtime *open_tiers(const char *dir) {
  latch_options o;
  latch_options_init(&o);
  o.cache = "disk";
  o.cache_dir = dir;
  o.cache_url = url;
  o.cache_secret = "soak-secret";
  return latch_open(&o);
}

typedef struct helper {
  latch_runtime *rt;
  unsigned seed;
  atomic_bool stop;
  atomic_int wrong, runs;
} helper;

static void *help(void *arg) {
  helper *h = arg;
  while (!atomic_load(&h->stop)) {
    atomic_fetch_add(&h->wrong, run_graph(h->rt, (int)(rand_r(&h->seed) % GRAPHS)));
    atomic_fetch_add(&h->runs, 1);
  }
  return NULL;
}

/* A child of a runtime in use: a few graphs on it, then exits with how many were wrong. */
static int forked_child(latch_runtime *rt, unsigned seed) {
  alarm(120); /* a child that would wait forever fails instead */
  int wrong = 0;
  for (int i = 0; i < 4; i++) wrong += run_graph(rt, (int)(rand_r(&seed) % GRAPHS));
  return wrong > 100 ? 100 : wrong;
}

typedef struct totals {
  long rounds, runs, forks, wrong, compiles, remote_loads;
} totals;

/* One round: a fresh disk cache, the graphs in a random order, a fork with the helper busy. */
static void round_once(const char *base, int round, unsigned *seed, totals *t) {
  char dir[256];
  snprintf(dir, sizeof dir, "%s/p%d-r%d", base, (int)getpid(), round);
  latch_runtime *rt = open_tiers(dir);
  if (!rt) {
    fprintf(stderr, "soak_remote: latch_open: %s\n", latch_last_error());
    t->wrong += N;
    return;
  }
  helper h = {.rt = rt, .seed = *seed + 1};
  pthread_t thread;
  pthread_create(&thread, NULL, help, &h);
  for (int i = 0; i < GRAPHS; i++) {
    t->wrong += run_graph(rt, (int)(rand_r(seed) % GRAPHS));
    t->runs++;
    if (i == GRAPHS / 2) {
      fflush(NULL);
      pid_t pid = fork();
      if (pid == 0) _exit(forked_child(rt, *seed));
      int status = 0;
      while (waitpid(pid, &status, 0) < 0) {
      }
      t->forks++;
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "soak_remote: a forked child ended with status %d\n", status);
        t->wrong += WIFEXITED(status) ? WEXITSTATUS(status) : N;
      }
    }
  }
  atomic_store(&h.stop, true);
  pthread_join(thread, NULL);
  t->wrong += atomic_load(&h.wrong);
  t->runs += atomic_load(&h.runs);
  latch_stats s;
  latch_get_stats(rt, &s);
  t->compiles += (long)s.compiles;
  t->remote_loads += (long)s.remote_loads;
  latch_close(rt);
  char command[300];
  snprintf(command, sizeof command, "rm -rf '%s'", dir);
  if (system(command) != 0) fprintf(stderr, "soak_remote: could not remove %s\n", dir);
  t->rounds++;
}

static int process(const char *base, int index) {
  unsigned seed = (unsigned)(getpid() * 7919 + index);
  totals t = {0};
  double start = soak_now_s(), rss_quarter = 0;
  int fds_quarter = 0;
  bool sampled = false;
  for (int round = 0; soak_now_s() - start < seconds; round++) {
    round_once(base, round, &seed, &t);
    if (!sampled && soak_now_s() - start >= seconds / 4) {
      sampled = true;
      rss_quarter = soak_rss_mb();
      fds_quarter = soak_open_files();
    }
  }
  double rss_end = soak_rss_mb();
  int fds_end = soak_open_files();
  printf("soak_remote: pid %d: %ld rounds, %ld graph runs, %ld forks; %ld compiles, %ld remote loads; RSS %.1f MB at a "
         "quarter, %.1f MB at the end; open files %d, %d; %ld wrong\n", (int)getpid(), t.rounds, t.runs, t.forks,
         t.compiles, t.remote_loads, rss_quarter, rss_end, fds_quarter, fds_end, t.wrong);
  int status = t.wrong ? 1 : 0;
  if (sampled && rss_end - rss_quarter > fmax(8, rss_quarter / 4)) {
    fprintf(stderr, "soak_remote: pid %d: RSS grew from %.1f to %.1f MB\n", (int)getpid(), rss_quarter, rss_end);
    status = 1;
  }
  if (sampled && fds_end > fds_quarter) {
    fprintf(stderr, "soak_remote: pid %d: open files grew from %d to %d\n", (int)getpid(), fds_quarter, fds_end);
    status = 1;
  }
  return status;
}

/* Every graph's entry is on the server: a runtime with an empty disk loads each from Redis
 * and compiles none. */
static int nothing_lost(const char *base) {
  char dir[256];
  snprintf(dir, sizeof dir, "%s/final", base);
  latch_runtime *rt = open_tiers(dir);
  if (!rt) return 1;
  int wrong = 0;
  for (int g = 0; g < GRAPHS; g++) wrong += run_graph(rt, g);
  latch_stats s;
  latch_get_stats(rt, &s);
  latch_close(rt);
  printf("soak_remote: a fresh process: %llu of %d graphs loaded from Redis, %llu compiled, %d wrong values\n",
         (unsigned long long)s.remote_loads, GRAPHS, (unsigned long long)s.compiles, wrong);
  return wrong || s.compiles != 0 || s.remote_loads != GRAPHS;
}

int main(int argc, char **argv) {
  if (argc > 1) seconds = atof(argv[1]);
  if (argc > 2) processes = atoi(argv[2]);
  if (!(seconds > 0) || processes < 1 || processes > 32) {
    fprintf(stderr, "usage: soak_remote [SECONDS > 0 [PROCESSES 1..32]]\n");
    return 2;
  }
  redis_server server;
  if (!redis_start(&server, NULL, NULL)) return 1;
  snprintf(url, sizeof url, "redis://127.0.0.1:%d/0?namespace=soak&lease_ms=2000&wait_ms=5000", server.port);
  char base[] = "/tmp/latch-soak-remote-XXXXXX";
  if (!mkdtemp(base)) return 1;
  fflush(NULL);
  pid_t pids[32];
  for (int p = 0; p < processes; p++)
    if ((pids[p] = fork()) == 0) {
      int status = process(base, p);
      fflush(NULL);
      _exit(status);
    }
  int worst = 0;
  for (int p = 0; p < processes; p++) {
    int status = 0;
    waitpid(pids[p], &status, 0);
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (code > worst) worst = code;
  }
  if (nothing_lost(base) && !worst) worst = 1;
  redis_stop(&server);
  char command[128];
  snprintf(command, sizeof command, "rm -rf '%s'", base);
  if (system(command) != 0) fprintf(stderr, "soak_remote: could not remove %s\n", base);
  printf("soak_remote: %s\n", worst ? "FAILED" : "passed");
  return worst;
}
