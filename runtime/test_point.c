/* Test points (runtime.h): named places inside locked regions where a test's function runs
 * while the thread surely holds the lock, so that another thread of the test can fork right
 * then and the test can check what the child finds; and the place where a fork handler is
 * about to wait for such locks, so that the test's function knows fork has begun. One
 * function for the whole process, set by the test; none (the default) costs an atomic load
 * at each point. */
#include "runtime.h"

static _Atomic(rt_test_fn) test_fn;

void rt_test_point_set(rt_test_fn fn) { atomic_store(&test_fn, fn); }

void rt_test_at(rt_test_point point) {
  rt_test_fn fn = atomic_load_explicit(&test_fn, memory_order_acquire);
  if (fn) fn(point);
}
