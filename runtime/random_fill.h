/* Deterministic inputs from a seed, so a run can be repeated anywhere without input files.
 *
 * The same seed gives the same bytes on every machine: the generator is splitmix64 and
 * every value is made from integers with exact arithmetic, never from libm. Each parameter
 * has its own stream (seed and parameter number), so adding a parameter leaves the others'
 * values alone; tuple elements get sub-streams the same way.
 *
 *   floats (f16 bf16 f32 f64): uniform in [-1, 1), on a grid fine enough for the type and
 *                              coarse enough that every value is exact in it
 *   integers:                  uniform in [0, 8): small enough to index most dims
 *   pred:                      true or false with equal odds
 *
 * Dynamic dims get their bound ([<=N] is filled with N elements); unbounded ([?]) get 1. */
#ifndef RT_RANDOM_FILL_H
#define RT_RANDOM_FILL_H
#include <stdint.h>

#include "hlo/diag.h"
#include "value.h"

/* Fills an array value in place from stream. */
void rt_random_fill(rt_value *value, uint64_t seed, uint64_t stream);
/* A new value of shape (tuples element-wise, a token as an empty tuple) filled from the
 * stream; NULL with an error for types that are not computable or when memory runs out. */
rt_value *rt_random_value(const hlo_shape *shape, uint64_t seed, uint64_t stream, hlo_diag *diag);
/* splitmix64's output function, exposed for tests and derived seeds. */
uint64_t rt_mix64(uint64_t x);

#endif
