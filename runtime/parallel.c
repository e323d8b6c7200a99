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
 * candidates in forked children, and embedders fork too, so a child splits its loops over
 * threads of its own, as many as its parent's pool (the same count, so the same plans and
 * the same cache fingerprint), each started and joined per loop; OpenMP's thread count, by
 * which oneDNN sizes its primitives, is one there, on every thread (atfork handler below),
 * as PyTorch does after fork. */
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
  return pool_threads;
}

int rt_parallel_openmp_threads(void) {
  return atomic_load(&in_forked_child) ? 1 : rt_parallel_threads();
}

/* The split on plain threads, started and joined here: in a forked child, and under
 * ThreadSanitizer, which cannot see libgomp's synchronization (it is not instrumented) and
 * would report every handoff to a pool thread as a race, while it understands create and
 * join: the kernels are still checked running in parallel. */
typedef struct split_part {
  void (*fn)(void *, int64_t, int64_t);
  void *ctx;
  int64_t begin, end;
} split_part;

static _Thread_local bool in_split; /* inside a part: a nested loop runs inline */

static void *run_part(void *arg) {
  split_part *part = arg;
  in_split = true;
  omp_set_num_threads(1); /* a oneDNN call inside starts no team of its own */
  part->fn(part->ctx, part->begin, part->end);
  return NULL;
}

static void split_threads(int64_t n, int64_t parts, void (*fn)(void *, int64_t, int64_t), void *ctx) {
  int threads = rt_parallel_threads();
  if (parts > threads) parts = threads;
  split_part part[64];
  pthread_t thread[64];
  bool started[64] = {false};
  if (parts > 64) parts = 64;
  in_split = true;
  for (int64_t p = 1; p < parts; p++) {
    part[p] = (split_part){fn, ctx, n * p / parts, n * (p + 1) / parts};
    started[p] = pthread_create(&thread[p], NULL, run_part, &part[p]) == 0;
    if (!started[p]) fn(ctx, part[p].begin, part[p].end);
  }
  fn(ctx, 0, n / parts);
  for (int64_t p = 1; p < parts; p++)
    if (started[p]) pthread_join(thread[p], NULL);
  in_split = false;
}

#if !defined(__SANITIZE_THREAD__)
/* Chunks of at least grain items, a few per thread so uneven ones even out; any thread
 * takes the next chunk (dynamic schedule), as TBB's partitioner did. */
static void split_openmp(int64_t n, int64_t parts, void (*fn)(void *, int64_t, int64_t), void *ctx) {
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
  if (n <= grain || threads <= 1 || omp_in_parallel() || in_split) {
    fn(ctx, 0, n);
    return;
  }
  int64_t parts = n / grain;
#if defined(__SANITIZE_THREAD__)
  split_threads(n, parts, fn, ctx);
#else
  if (atomic_load(&in_forked_child)) split_threads(n, parts, fn, ctx);
  else split_openmp(n, parts, fn, ctx);
#endif
}
