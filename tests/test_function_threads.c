/* Several threads calling one traced function at once (run under ThreadSanitizer by
 * `make tsan`): batch sizes vary per call, so threads race on traces, on adding entries, on
 * the symbolic entry's other bindings and on hits; every result is checked against a host
 * computation. On the reference backend the bindings run from the template, on the cpu
 * backend they bind the entry's executable (several threads binding, and running bound
 * executables, at once). Then the races of traced calls: a weight updated in place by many calls
 * at once, and threads that all miss on the same inputs at the same moment. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "capture/capture.h"
#include "function_util.h"
#include "runtime/cpu/cpu.h"

enum { THREADS = 4, CALLS = 40, K = 4, N = 3 };

static latch_runtime *rt;
static latch_function *fn;
static float weights[K * N];

/* out = relu(x @ w) * 2 + uniform noise * 0: the noise keeps a random op in the graph. */
static latch_status step(void *user, latch_tensor *const *in, int n, latch_tensor **out, int on) {
  (void)n, (void)on;
  latch_tensor *w = user;
  latch_tensor *h = latch_matmul(in[0], w), *r = latch_relu(h), *two = latch_scalar(rt, LATCH_F32, 2);
  latch_tensor *noise = latch_rand_uniform_like(r, 0, 0); /* low == high: always 0 */
  latch_tensor *d = latch_binary(LATCH_MUL, r, two);
  out[0] = latch_binary(LATCH_ADD, d, noise);
  latch_release(h);
  latch_release(r);
  latch_release(two);
  latch_release(noise);
  latch_release(d);
  return LATCH_OK;
}

static void *worker(void *arg) {
  int id = (int)(intptr_t)arg, bad = 0;
  for (int c = 0; c < CALLS; c++) {
    int64_t batch = 1 + (c * 7 + id * 3) % 9;
    float x[9 * K];
    for (int i = 0; i < batch * K; i++) x[i] = (float)((i * 13 + c + id) % 11) - 5.0f;
    latch_tensor *in = latch_from_host(rt, LATCH_F32, 2, FDIMS(batch, K), x), *out = NULL;
    if (latch_call(fn, &in, 1, NULL, 0, &out, 1) != LATCH_OK || latch_dim(out, 0) != batch) {
      bad++;
    } else {
      float got[9 * N];
      latch_read(out, got, sizeof(float) * (size_t)(batch * N));
      for (int b = 0; b < batch; b++)
        for (int j = 0; j < N; j++) {
          double want = 0;
          for (int k = 0; k < K; k++) want += (double)x[b * K + k] * weights[k * N + j];
          want = want > 0 ? 2 * want : 0;
          bad += fabs(got[b * N + j] - want) > 1e-4 * (1 + fabs(want));
        }
    }
    latch_release(out);
    latch_release(in);
  }
  return (void *)(intptr_t)bad;
}

static void test_threads(void) {
  for (int i = 0; i < K * N; i++) weights[i] = (float)(i % 5) * 0.25f - 0.5f;
  latch_tensor *w = latch_from_host(rt, LATCH_F32, 2, FDIMS(K, N), weights);
  latch_function_options o;
  latch_function_options_init(&o);
  fn = latch_function_new_step(rt, step, w, &o);
  pthread_t threads[THREADS];
  for (int t = 0; t < THREADS; t++) pthread_create(&threads[t], NULL, worker, (void *)(intptr_t)t);
  int bad = 0;
  for (int t = 0; t < THREADS; t++) {
    void *result;
    pthread_join(threads[t], &result);
    bad += (int)(intptr_t)result;
  }
  CHECK_EQ_INT(bad, 0);
  latch_function_stats s;
  latch_function_get_stats(fn, &s);
  CHECK_EQ_INT(s.calls, THREADS * CALLS);
  CHECK_EQ_INT(s.hits + s.traces, THREADS * CALLS);
  CHECK(s.hits > 0);
  CHECK(s.instantiations > 0);
  CHECK_EQ_INT(s.specializations, 0);
  printf("threads (%s): %llu calls, %llu traces, %llu hits, %llu entries, %llu bindings without compiling\n",
         rt->backend->name, (unsigned long long)s.calls, (unsigned long long)s.traces, (unsigned long long)s.hits,
         (unsigned long long)s.entries, (unsigned long long)s.instantiations);
  latch_function_free(fn);
  latch_release(w);
}

/* ---- a weight updated in place by concurrent calls ----
 * step: w += x; out = w * 1 (the value this call left). Calls of one function that update a
 * weight run one at a time, so with x = 1 every call sees a different w: the outputs are
 * exactly 1 .. THREADS * UPDATES (no lost or repeated update) and w ends at their count. */

enum { UPDATES = 25, WIDTH = 4 };

typedef struct race {
  latch_function *fn;
  latch_tensor *weight;
  pthread_barrier_t start;
  float seen[THREADS * UPDATES]; /* each call's output, element 0 */
  int bad[THREADS];
} race;

static latch_status add_into_weight(void *user, latch_tensor *const *in, int n, latch_tensor **out, int on) {
  (void)n, (void)on;
  race *r = user;
  latch_tensor *sum = latch_binary(LATCH_ADD, r->weight, in[0]), *one = latch_scalar(rt, LATCH_F32, 1);
  latch_status status = latch_assign(r->weight, sum);
  out[0] = latch_binary(LATCH_MUL, r->weight, one);
  latch_release(sum);
  latch_release(one);
  return status;
}

typedef struct worker_arg {
  race *race;
  int id;
} worker_arg;

static void *update_worker(void *arg) {
  worker_arg *a = arg;
  race *r = a->race;
  float ones[WIDTH] = {1, 1, 1, 1};
  pthread_barrier_wait(&r->start); /* the first call of every thread at once: they race the trace */
  for (int c = 0; c < UPDATES; c++) {
    latch_tensor *x = latch_from_host(rt, LATCH_F32, 1, FDIMS(WIDTH), ones), *out = NULL;
    float got[WIDTH] = {0};
    if (latch_call(r->fn, &x, 1, NULL, 0, &out, 1) != LATCH_OK || latch_read(out, got, sizeof got) != LATCH_OK) {
      r->bad[a->id]++;
    } else {
      for (int k = 1; k < WIDTH; k++) r->bad[a->id] += got[k] != got[0]; /* one update, not parts of two */
      r->seen[a->id * UPDATES + c] = got[0];
    }
    latch_release(out);
    latch_release(x);
  }
  return NULL;
}

static int compare_floats(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

static void test_weight_updates(void) {
  static race r;
  memset(&r, 0, sizeof r);
  float zeros[WIDTH] = {0};
  r.weight = latch_from_host(rt, LATCH_F32, 1, FDIMS(WIDTH), zeros);
  r.fn = latch_function_new_step(rt, add_into_weight, &r, NULL);
  pthread_barrier_init(&r.start, NULL, THREADS);
  pthread_t threads[THREADS];
  worker_arg args[THREADS];
  for (int t = 0; t < THREADS; t++) {
    args[t] = (worker_arg){&r, t};
    pthread_create(&threads[t], NULL, update_worker, &args[t]);
  }
  for (int t = 0; t < THREADS; t++) pthread_join(threads[t], NULL);
  pthread_barrier_destroy(&r.start);
  int bad = 0;
  for (int t = 0; t < THREADS; t++) bad += r.bad[t];
  CHECK_EQ_INT(bad, 0);
  qsort(r.seen, THREADS * UPDATES, sizeof(float), compare_floats);
  int out_of_place = 0;
  for (int k = 0; k < THREADS * UPDATES; k++) out_of_place += r.seen[k] != (float)(k + 1);
  CHECK_EQ_INT(out_of_place, 0);
  double *w = fu_read(r.weight);
  CHECK(w != NULL);
  for (int k = 0; w && k < WIDTH; k++) CHECK_EQ_INT(w[k], THREADS * UPDATES);
  free(w);
  latch_function_stats s;
  latch_function_get_stats(r.fn, &s);
  CHECK_EQ_INT(s.traces, 1);
  CHECK_EQ_INT(s.entries, 1);
  CHECK_EQ_INT(s.hits, THREADS * UPDATES - 1);
  latch_function_free(r.fn);
  latch_release(r.weight);
}

/* ---- threads missing at once ----
 * A fresh function, every thread's first call at the same moment with the same shape: one
 * trace, one entry, the other calls hit it. Rounds on fresh functions give the threads
 * several chances to overlap; the function updates no weight, so hits share the lock. */

enum { ROUNDS = 8 };

typedef struct miss_race {
  latch_function *fn;
  latch_tensor *weight; /* 0.5 each */
  pthread_barrier_t start;
  int bad[THREADS];
} miss_race;

static latch_status scale_and_shift(void *user, latch_tensor *const *in, int n, latch_tensor **out, int on) {
  (void)n, (void)on;
  miss_race *m = user;
  latch_tensor *scaled = latch_binary(LATCH_MUL, in[0], m->weight), *one = latch_scalar(rt, LATCH_F32, 1);
  out[0] = latch_binary(LATCH_ADD, scaled, one);
  latch_release(scaled);
  latch_release(one);
  return LATCH_OK;
}

typedef struct miss_arg {
  miss_race *race;
  int id;
} miss_arg;

static void *miss_worker(void *arg) {
  miss_arg *a = arg;
  miss_race *m = a->race;
  float x[WIDTH], got[WIDTH];
  for (int k = 0; k < WIDTH; k++) x[k] = (float)(a->id * WIDTH + k);
  latch_tensor *in = latch_from_host(rt, LATCH_F32, 1, FDIMS(WIDTH), x), *out = NULL;
  pthread_barrier_wait(&m->start);
  if (latch_call(m->fn, &in, 1, NULL, 0, &out, 1) != LATCH_OK || latch_read(out, got, sizeof got) != LATCH_OK)
    m->bad[a->id]++;
  else
    for (int k = 0; k < WIDTH; k++) m->bad[a->id] += got[k] != x[k] * 0.5f + 1;
  latch_release(out);
  latch_release(in);
  return NULL;
}

static void test_missing_at_once(void) {
  float halves[WIDTH] = {0.5f, 0.5f, 0.5f, 0.5f};
  for (int round = 0; round < ROUNDS; round++) {
    static miss_race m;
    memset(&m, 0, sizeof m);
    m.weight = latch_from_host(rt, LATCH_F32, 1, FDIMS(WIDTH), halves);
    m.fn = latch_function_new_step(rt, scale_and_shift, &m, NULL);
    pthread_barrier_init(&m.start, NULL, THREADS);
    pthread_t threads[THREADS];
    miss_arg args[THREADS];
    for (int t = 0; t < THREADS; t++) {
      args[t] = (miss_arg){&m, t};
      pthread_create(&threads[t], NULL, miss_worker, &args[t]);
    }
    for (int t = 0; t < THREADS; t++) pthread_join(threads[t], NULL);
    pthread_barrier_destroy(&m.start);
    int bad = 0;
    for (int t = 0; t < THREADS; t++) bad += m.bad[t];
    CHECK_EQ_INT(bad, 0);
    latch_function_stats s;
    latch_function_get_stats(m.fn, &s);
    CHECK_EQ_INT(s.calls, THREADS);
    CHECK_EQ_INT(s.traces, 1);
    CHECK_EQ_INT(s.entries, 1);
    CHECK_EQ_INT(s.hits, THREADS - 1);
    latch_function_free(m.fn);
    latch_release(m.weight);
  }
}

/* The cpu backend with the disk cache: the threads bind and save bindings at once, then a
 * second runtime's threads load them at once (and bind and save the sizes the first runtime
 * did not reach). */
static void test_threads_with_disk(void) {
  char dir[] = "/tmp/latch-function-threads-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  latch_stats runs[2];
  for (int r = 0; r < 2; r++) {
    rt = fu_open_disk(dir);
    CHECK(rt != NULL);
    if (!rt) return;
    test_threads();
    latch_get_stats(rt, &runs[r]);
    latch_close(rt);
  }
  rt = NULL;
  latch_stats first = runs[0], second = runs[1];
  CHECK(first.disk_writes > 2); /* the compiled entries and bindings */
  CHECK(second.disk_loads > 2);
  CHECK_EQ_INT(second.compiles, 0);
  printf("threads with the disk cache: %llu entries written, then %llu loaded\n",
         (unsigned long long)first.disk_writes, (unsigned long long)second.disk_loads);
  char command[128];
  snprintf(command, sizeof command, "rm -rf %s", dir);
  CHECK(system(command) == 0);
}

int main(void) {
  rt = fu_open();
  RUN(test_threads);
  RUN(test_weight_updates);
  RUN(test_missing_at_once);
  latch_close(rt);
  rt = fu_open();
  rt->backend = &rt_backend_cpu;
  RUN(test_threads);
  latch_close(rt);
  RUN(test_threads_with_disk);
  return TEST_REPORT();
}
