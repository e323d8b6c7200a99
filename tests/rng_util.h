/* A seeded generator for the randomized tests: the same seed gives the same graphs and
 * values on every machine, so a failure names a seed that reproduces it. */
#ifndef LATCH_RNG_UTIL_H
#define LATCH_RNG_UTIL_H
#include <stdbool.h>
#include <stdint.h>

#include "runtime/runtime.h"

typedef struct rng {
  uint64_t state;
} rng;

static inline uint64_t next(rng *r) {
  r->state += 0x9e3779b97f4a7c15u;
  return rt_mix64(r->state);
}
/* Uniform in [0, n); 0 when n <= 0. */
static inline int pick(rng *r, int n) { return n <= 0 ? 0 : (int)(next(r) % (uint64_t)n); }
static inline bool chance(rng *r, int percent) { return pick(r, 100) < percent; }

#endif
