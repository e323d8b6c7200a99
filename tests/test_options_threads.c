/* latch_options.threads reaches the cpu backend's parallel loops when LATCH_THREADS is not
 * set: the first runtime's request fixes the process-wide count. */
#include <stdlib.h>

#include "latch.h"
#include "runtime/runtime.h"
#include "test.h"

static void test_threads_option(void) {
  unsetenv("LATCH_THREADS");
  latch_options options;
  CHECK(latch_options_init(&options) == LATCH_OK);
  options.threads = 1;
  options.backend = "cpu";
  latch_runtime *rt = latch_open(&options);
  CHECK(rt != NULL);
  if (!rt) return;
  int64_t dims[1] = {1 << 16};
  latch_tensor *x = latch_ones(rt, LATCH_F32, 1, dims), *y = latch_binary(LATCH_ADD, x, x);
  double sum = 0;
  latch_tensor *s = latch_reduce(LATCH_SUM, y, 0, NULL, false);
  CHECK(latch_read_f64(s, &sum, 1) == LATCH_OK);
  CHECK_NEAR(sum, 2.0 * (1 << 16), 0);
  CHECK_EQ_INT(rt_parallel_threads(), 1);
  latch_release(x), latch_release(y), latch_release(s);
  latch_close(rt);
}

int main(void) {
  RUN(test_threads_option);
  return TEST_REPORT();
}
