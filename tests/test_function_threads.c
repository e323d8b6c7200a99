/* Several threads calling one traced function at once (run under ThreadSanitizer by
 * `make tsan`): batch sizes vary per call, so threads race on traces, on adding entries, on
 * the symbolic entry's other bindings and on hits; every result is checked against a host
 * computation. On the reference backend the bindings run from the template, on the cpu
 * backend they bind the entry's executable (several threads binding, and running bound
 * executables, at once). */
#include <pthread.h>
#include <stdio.h>

#include "capture/cap.h"
#include "function_util.h"

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

int main(void) {
  rt = fu_open();
  RUN(test_threads);
  latch_close(rt);
  rt = fu_open();
  rt->backend = &rt_backend_cpu;
  RUN(test_threads);
  latch_close(rt);
  return TEST_REPORT();
}
