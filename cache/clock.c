/* The cache layer's clock: seconds on the monotonic clock, for compile and load times, the
 * remote tier's rest after failures and its bounded waits. */
#include <time.h>

#include "cache.h"

double cache_now_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}
