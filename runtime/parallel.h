/* The parallel-for behind the cpu backend's kernels: a C face over TBB (parallel.cc). */
#ifndef RT_PARALLEL_H
#define RT_PARALLEL_H
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Calls fn(ctx, begin, end) over disjoint ranges covering [0, n), each about grain items or
 * more, possibly on several threads at once; returns when all are done. n <= grain runs
 * inline on the caller's thread, so small work never pays for a task. Thread count: the
 * LATCH_THREADS environment variable when set (read once), else every core. */
void rt_parallel_for(int64_t n, int64_t grain, void (*fn)(void *ctx, int64_t begin, int64_t end),
                     void *ctx);
/* Asks for this many threads when LATCH_THREADS is not set. The count is process-wide and
 * fixed by the first parallel loop, so only a request made before it counts. */
void rt_parallel_request_threads(int threads);
/* The threads rt_parallel_for may use. */
int rt_parallel_threads(void);

#ifdef __cplusplus
}
#endif
#endif
