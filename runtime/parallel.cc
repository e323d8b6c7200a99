// rt_parallel_for over TBB. One task_arena sized from LATCH_THREADS is made on first use
// and kept: creating arenas per call would cost more than small loops take. An arena (not
// tbb::global_control) limits only latch's own loops, so a host program using TBB for
// itself keeps its settings.
#include "runtime.h"

#include <atomic>
#include <cstdlib>
#include <mutex>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

namespace {

std::atomic<int> requested_threads{0};

int threads_from_env() {
  const char *text = std::getenv("LATCH_THREADS");
  if (text && *text) {
    char *end = nullptr;
    long n = std::strtol(text, &end, 10);
    if (end && *end == '\0' && n >= 1 && n <= 1024) return static_cast<int>(n);
  }
  int requested = requested_threads.load();
  if (requested >= 1) return requested;
  return tbb::this_task_arena::max_concurrency();
}

std::once_flag arena_once;
tbb::task_arena *arena = nullptr;
int arena_threads = 1;

void make_arena() {
  arena_threads = threads_from_env();
  arena = new tbb::task_arena(arena_threads);
}

}  // namespace

extern "C" void rt_parallel_request_threads(int threads) {
  if (threads >= 1 && threads <= 1024) requested_threads.store(threads);
}

extern "C" int rt_parallel_threads(void) {
  std::call_once(arena_once, make_arena);
  return arena_threads;
}

#if defined(__SANITIZE_THREAD__)
// ThreadSanitizer cannot see the synchronization inside libtbb (it is not instrumented), so
// every handoff to a TBB worker would be reported as a race. Under TSan the same split runs
// on plain threads, whose create and join TSan understands: the kernels are still checked
// running in parallel.
#include <thread>
#include <vector>

static void split_over_threads(int64_t n, int64_t grain, void (*fn)(void *, int64_t, int64_t), void *ctx) {
  int64_t parts = n / grain;
  if (parts > rt_parallel_threads()) parts = rt_parallel_threads();
  std::vector<std::thread> threads;
  for (int64_t p = 1; p < parts; p++) threads.emplace_back(fn, ctx, n * p / parts, n * (p + 1) / parts);
  fn(ctx, 0, n / parts);
  for (auto &t : threads) t.join();
}
#endif

extern "C" void rt_parallel_for(int64_t n, int64_t grain, void (*fn)(void *, int64_t, int64_t),
                                void *ctx) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  if (n <= grain || rt_parallel_threads() <= 1) {
    fn(ctx, 0, n);
    return;
  }
#if defined(__SANITIZE_THREAD__)
  split_over_threads(n, grain, fn, ctx);
#else
  arena->execute([&] {
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, n, grain),
                      [&](const tbb::blocked_range<int64_t> &r) { fn(ctx, r.begin(), r.end()); });
  });
#endif
}
