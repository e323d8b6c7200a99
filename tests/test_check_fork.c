/* LATCH_CHECK in a process whose threads already ran: the check forks a child, and a child
 * that starts a parallel region of the size its parent used waits forever for threads fork
 * did not copy (GNU libgomp). A convolution graph runs first on two threads (oneDNN keeps
 * what it built for them), then a second graph with the same convolution is checked: the
 * check must answer (no hang counted as a failure) and the values must be the convolution's,
 * worked out here in fp64. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "latch.h"
#include "test.h"

enum { C = 16, H = 24, W = 24, O = 16, K = 3 };

static float x_data[C * H * W], w_data[O * C * K * K];

/* conv(x, w) at (o, i, j), stride 1, no padding, in fp64. */
static double conv_at(int o, int i, int j) {
  double sum = 0;
  for (int c = 0; c < C; c++)
    for (int a = 0; a < K; a++)
      for (int b = 0; b < K; b++)
        sum += (double)x_data[(c * H + i + a) * W + j + b] * (double)w_data[((o * C + c) * K + a) * K + b];
  return sum;
}

static latch_tensor *conv(latch_runtime *rt) {
  int64_t xd[4] = {1, C, H, W}, wd[4] = {O, C, K, K};
  latch_tensor *x = latch_from_host(rt, LATCH_F32, 4, xd, x_data), *w = latch_from_host(rt, LATCH_F32, 4, wd, w_data);
  latch_tensor *y = latch_conv2d(x, w, NULL);
  latch_release(x), latch_release(w);
  return y;
}

static void test_check_after_threads(void) {
  for (int i = 0; i < C * H * W; i++) x_data[i] = (float)((i * 7 % 13) - 6) / 8;
  for (int i = 0; i < O * C * K * K; i++) w_data[i] = (float)((i * 5 % 11) - 5) / 16;
  char dir[] = "/tmp/latch-check-fork-XXXXXX";
  if (!mkdtemp(dir)) return;
  latch_options options;
  latch_options_init(&options);
  options.backend = "cpu";
  options.threads = 2;
  options.check = "accuracy";
  options.check_timeout = 60;
  options.cache = "memory";
  options.repro_dir = dir;
  latch_runtime *rt = latch_open(&options);
  CHECK_MSG(rt != NULL, "%s", latch_last_error());
  if (!rt) return;
  enum { OH = H - K + 1, OW = W - K + 1 };
  static float y1[O * OH * OW], y2[O * OH * OW];
  /* the first graph: checked before any thread ran, then run here on two threads */
  latch_tensor *a = conv(rt), *r = latch_relu(a);
  CHECK(latch_read(r, y1, sizeof y1) == LATCH_OK);
  latch_release(a), latch_release(r);
  /* the second: the same convolution plus one, checked in a child of a threaded process */
  latch_tensor *b = conv(rt), *one = latch_scalar(rt, LATCH_F32, 1), *s = latch_binary(LATCH_ADD, b, one);
  CHECK(latch_read(s, y2, sizeof y2) == LATCH_OK);
  latch_release(b), latch_release(one), latch_release(s);
  latch_stats stats;
  latch_get_stats(rt, &stats);
  CHECK_EQ_INT(stats.check_failures, 0);
  double worst = 0;
  for (int o = 0; o < O; o++)
    for (int i = 0; i < OH; i++)
      for (int j = 0; j < OW; j++) {
        double want = conv_at(o, i, j), at = (o * OH + i) * OW + j;
        double e1 = fabs(y1[(int)at] - (want > 0 ? want : 0)), e2 = fabs(y2[(int)at] - (want + 1));
        worst = fmax(worst, fmax(e1, e2));
      }
  CHECK_MSG(worst < 1e-4, "largest error %g", worst);
  latch_close(rt);
  char command[128];
  snprintf(command, sizeof command, "rm -rf '%s'", dir);
  if (system(command) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

int main(void) {
  unsetenv("LATCH_BACKEND");
  RUN(test_check_after_threads);
  return TEST_REPORT();
}
