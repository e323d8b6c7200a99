/* Eight threads trace and sync their own programs on one runtime: an MLP over weights
 * shared by all of them, on inputs of their own, in two batch sizes (so two graphs), plus
 * an in-place update of a tensor of their own. Each checks its results against the same
 * arithmetic done on the host; the runtime must have compiled each graph once. Built by
 * `make tsan` too (the file name contains "thread"). */
#include <pthread.h>
#include <stdio.h>

#include "latch.h"
#include "test.h"

enum { THREADS = 8, STEPS = 10, IN = 8, HIDDEN = 16, OUT = 4 };

static latch_runtime *rt;
static latch_tensor *w1, *w2; /* shared, synced before the threads start */
static float w1_host[IN * HIDDEN], w2_host[HIDDEN * OUT];

typedef struct job {
  int id;
  int failures, runs;
  char first_failure[256];
} job;

static void fail(job *j, const char *what) {
  if (!j->failures++) snprintf(j->first_failure, sizeof j->first_failure, "%s: %s", what, latch_last_error());
}

/* softmax(relu(x w1) w2) row by row, in double. */
static void reference(const double *x, int batch, double *out) {
  for (int b = 0; b < batch; b++) {
    double h[HIDDEN], z[OUT], max = -1e300, sum = 0;
    for (int j = 0; j < HIDDEN; j++) {
      double acc = 0;
      for (int i = 0; i < IN; i++) acc += x[b * IN + i] * w1_host[i * HIDDEN + j];
      h[j] = acc > 0 ? acc : 0;
    }
    for (int k = 0; k < OUT; k++) {
      z[k] = 0;
      for (int j = 0; j < HIDDEN; j++) z[k] += h[j] * w2_host[j * OUT + k];
      if (z[k] > max) max = z[k];
    }
    for (int k = 0; k < OUT; k++) sum += exp(z[k] - max);
    for (int k = 0; k < OUT; k++) out[b * OUT + k] = exp(z[k] - max) / sum;
  }
}

static void *worker(void *arg) {
  job *j = arg;
  int batch = j->id % 2 ? 3 : 5;
  float zero = 0;
  latch_tensor *counter = latch_from_host(rt, LATCH_F32, 1, (int64_t[]){1}, &zero);
  for (int step = 0; step < STEPS; step++) {
    int64_t dims[2] = {batch, IN};
    latch_tensor *x = latch_rand_uniform(rt, LATCH_F32, 2, dims, -1, 1, (uint64_t)(j->id * 1000 + step));
    latch_tensor *h = latch_matmul(x, w1);
    latch_tensor *r = latch_relu(h);
    latch_tensor *z = latch_matmul(r, w2);
    latch_tensor *y = latch_softmax(z, -1);
    latch_tensor *one = latch_ones(rt, LATCH_F32, 1, (int64_t[]){1});
    latch_tensor *next = latch_binary(LATCH_ADD, counter, one);
    if (latch_assign(counter, next) != LATCH_OK) fail(j, "assign");
    latch_release(h), latch_release(r), latch_release(z), latch_release(one), latch_release(next);
    if (latch_sync(rt) != LATCH_OK) fail(j, "sync");
    double xv[5 * IN], got[5 * OUT], want[5 * OUT], count = -1;
    if (latch_read_f64(x, xv, batch * IN) != LATCH_OK || latch_read_f64(y, got, batch * OUT) != LATCH_OK ||
        latch_read_f64(counter, &count, 1) != LATCH_OK)
      fail(j, "read");
    reference(xv, batch, want);
    for (int i = 0; i < batch * OUT; i++)
      if (fabs(got[i] - want[i]) > 1e-5) {
        fail(j, "value");
        break;
      }
    if (count != step + 1) fail(j, "in-place counter");
    j->runs++;
    latch_release(x), latch_release(y);
  }
  latch_release(counter);
  return NULL;
}

int main(void) {
  latch_options options;
  latch_options_init(&options);
  options.backend = "reference";
  rt = latch_open(&options);
  if (!rt) return 1;
  for (int i = 0; i < IN * HIDDEN; i++) w1_host[i] = (float)((i * 37 % 17) - 8) / 8.0f;
  for (int i = 0; i < HIDDEN * OUT; i++) w2_host[i] = (float)((i * 11 % 13) - 6) / 6.0f;
  w1 = latch_from_host(rt, LATCH_F32, 2, (int64_t[]){IN, HIDDEN}, w1_host);
  w2 = latch_from_host(rt, LATCH_F32, 2, (int64_t[]){HIDDEN, OUT}, w2_host);
  pthread_t threads[THREADS];
  job jobs[THREADS] = {{0}};
  for (int i = 0; i < THREADS; i++) {
    jobs[i].id = i;
    CHECK(pthread_create(&threads[i], NULL, worker, &jobs[i]) == 0);
  }
  for (int i = 0; i < THREADS; i++) pthread_join(threads[i], NULL);
  for (int i = 0; i < THREADS; i++) {
    CHECK_MSG(jobs[i].failures == 0, "thread %d: %d failures, first: %s", i, jobs[i].failures, jobs[i].first_failure);
    CHECK_EQ_INT(jobs[i].runs, STEPS);
  }
  latch_stats stats;
  latch_get_stats(rt, &stats);
  CHECK_EQ_INT(stats.syncs, THREADS * STEPS);
  CHECK_EQ_INT(stats.compiles, 2); /* one graph per batch size, shared by four threads each */
  CHECK_EQ_INT(stats.cache_hits + stats.cache_misses, THREADS * STEPS);
  CHECK(stats.cache_hits >= THREADS * STEPS - 2 * THREADS); /* at most every thread's first sync misses */
  latch_release(w1), latch_release(w2);
  latch_close(rt);
  return TEST_REPORT();
}
