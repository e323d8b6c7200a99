/* rt_parallel_for over OpenMP, the process's one pool of worker threads.
 *
 * Why OpenMP and not a pool of latch's own: oneDNN, which runs the cpu backend's
 * convolutions, is built on OpenMP in Debian (libgomp), and libgomp's threads spin for a
 * while after each parallel region. A second pool beside them (TBB's, before) fought them
 * for the cores: at OpenMP's default wait policy resnet50 at 224x224 and batch 1 ran 4x
 * slower than with OMP_WAIT_POLICY=PASSIVE on a shared 2-core machine. One pool has nobody
 * to fight: the threads that spin are the ones the next loop uses.
 *
 * The thread count is process-wide, fixed by the first loop (rt_parallel_threads).
 * libgomp's pool does not survive fork: a child that starts a parallel region after its
 * parent used one waits for threads that were not copied. The minifier and LATCH_CHECK run
 * candidates in forked children, so a child runs every loop on its own thread, and
 * OpenMP's thread count, by which oneDNN sizes its primitives, is one (atfork handler
 * below), as PyTorch does after fork. */
#include "runtime.h"

#include <omp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

static atomic_int requested_threads;
static pthread_once_t threads_once = PTHREAD_ONCE_INIT;
static int pool_threads = 1;
static atomic_bool in_forked_child;

static void mark_forked_child(void) {
  atomic_store(&in_forked_child, true);
  /* For OpenMP's users other than these loops too (oneDNN sizes its primitives' teams by
   * omp_get_max_threads when it makes them, and runs them at that size): one thread. */
  omp_set_num_threads(1);
}

/* The last request (latch_options.threads, LATCH_THREADS read above runtime/), else a thread
 * per core. */
static void choose_threads(void) {
  int threads = atomic_load(&requested_threads);
  if (threads < 1) threads = omp_get_num_procs();
  pool_threads = threads < 1 ? 1 : threads;
  pthread_atfork(NULL, NULL, mark_forked_child);
}

void rt_parallel_request_threads(int threads) {
  if (threads >= 1 && threads <= 1024) atomic_store(&requested_threads, threads);
}

int rt_parallel_threads(void) {
  pthread_once(&threads_once, choose_threads);
  return atomic_load(&in_forked_child) ? 1 : pool_threads;
}

#if defined(__SANITIZE_THREAD__)
/* ThreadSanitizer cannot see libgomp's synchronization (it is not instrumented), so every
 * handoff to a pool thread would be reported as a race. Under TSan the same split runs on
 * plain threads, whose create and join TSan understands: the kernels are still checked
 * running in parallel. */
typedef struct split_part {
  void (*fn)(void *, int64_t, int64_t);
  void *ctx;
  int64_t begin, end;
} split_part;

static void *run_part(void *arg) {
  split_part *part = arg;
  part->fn(part->ctx, part->begin, part->end);
  return NULL;
}

static void split(int64_t n, int64_t parts, void (*fn)(void *, int64_t, int64_t), void *ctx) {
  split_part part[64];
  pthread_t thread[64];
  bool started[64] = {false};
  if (parts > 64) parts = 64;
  for (int64_t p = 1; p < parts; p++) {
    part[p] = (split_part){fn, ctx, n * p / parts, n * (p + 1) / parts};
    started[p] = pthread_create(&thread[p], NULL, run_part, &part[p]) == 0;
    if (!started[p]) run_part(&part[p]);
  }
  fn(ctx, 0, n / parts);
  for (int64_t p = 1; p < parts; p++)
    if (started[p]) pthread_join(thread[p], NULL);
}
#else
/* Chunks of at least grain items, a few per thread so uneven ones even out; any thread
 * takes the next chunk (dynamic schedule), as TBB's partitioner did. */
static void split(int64_t n, int64_t parts, void (*fn)(void *, int64_t, int64_t), void *ctx) {
  int threads = rt_parallel_threads();
  int64_t max_chunks = (int64_t)threads * 4;
  int64_t count = parts < max_chunks ? parts : max_chunks;
  int team = count < threads ? (int)count : threads;
#pragma omp parallel for num_threads(team) schedule(dynamic, 1)
  for (int64_t c = 0; c < count; c++) fn(ctx, n * c / count, n * (c + 1) / count);
}
#endif

void rt_parallel_for(int64_t n, int64_t grain, void (*fn)(void *ctx, int64_t begin, int64_t end), void *ctx) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  int threads = rt_parallel_threads();
  if (n <= grain || threads <= 1 || omp_in_parallel()) {
    fn(ctx, 0, n);
    return;
  }
  int64_t parts = n / grain;
#if defined(__SANITIZE_THREAD__)
  if (parts > threads) parts = threads;
#endif
  split(n, parts, fn, ctx);
}
