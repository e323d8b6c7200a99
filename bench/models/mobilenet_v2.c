/* torchvision mobilenet_v2: inverted residual blocks with ReLU6, depthwise 3x3 convs, a
 * linear bottleneck, 1280 features, one linear classifier. */
#include <stdio.h>
#include <stdlib.h>

#include "models.h"

typedef struct inverted {
  int conv_count; /* 2 without the expansion conv, else 3 */
  bench_conv_w conv[3];
  bench_bn_w bn[3];
  bool residual;
} inverted;

typedef struct mobilenet {
  bench_store store;
  bench_conv_w first_conv, last_conv;
  bench_bn_w first_bn, last_bn;
  int block_count;
  inverted blocks[17];
  bench_linear_w classifier;
} mobilenet;

static latch_status mobilenet_step(void *model, latch_tensor *const *inputs, int input_count, latch_tensor **outputs,
                                   int output_count) {
  latch_status status = bench_check_io("mobilenet_v2", input_count, 1, outputs, output_count, 1);
  if (status != LATCH_OK) return status;
  mobilenet *m = model;
  latch_tensor *x = bench_conv_bn(inputs[0], &m->first_conv, &m->first_bn, BENCH_RELU6);
  for (int i = 0; i < m->block_count; i++) {
    const inverted *b = &m->blocks[i];
    latch_tensor *y = latch_retain(x);
    for (int c = 0; c < b->conv_count; c++)
      BENCH_THEN(y, bench_conv_bn(y, &b->conv[c], &b->bn[c], c + 1 < b->conv_count ? BENCH_RELU6 : BENCH_NONE));
    if (b->residual) BENCH_THEN(y, latch_binary(LATCH_ADD, y, x));
    latch_release(x);
    x = y;
  }
  BENCH_THEN(x, bench_conv_bn(x, &m->last_conv, &m->last_bn, BENCH_RELU6));
  BENCH_THEN(x, bench_adaptive_avg_pool(x, 1, 1));
  BENCH_THEN(x, bench_flatten(x));
  BENCH_THEN(x, bench_linear(x, &m->classifier));
  outputs[0] = x;
  return bench_step_result("mobilenet_v2", outputs, 1);
}

static void mobilenet_free(void *model) {
  mobilenet *m = model;
  bench_store_free(&m->store);
  free(m);
}

latch_status bench_mobilenet_v2_create(latch_runtime *rt, const bench_config *config, bench_instance *out) {
  mobilenet *m = calloc(1, sizeof *m);
  if (!m) return bench_set_error("out of memory"), LATCH_ERR_INTERNAL;
  *out = (bench_instance){.model = m, .step = mobilenet_step, .destroy = mobilenet_free};
  bench_store *s = &m->store;
  bench_store_init(s, rt, config);
  m->first_conv = bench_conv_make(s, "features.0.0", 3, 32, 3, 2, 1, 1, false);
  m->first_bn = bench_bn_make(s, "features.0.1", 32);
  /* expansion t, output channels c, repeats n, first stride s */
  static const int settings[7][4] = {{1, 16, 1, 1}, {6, 24, 2, 2}, {6, 32, 3, 2}, {6, 64, 4, 2},
                                     {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
  int64_t in = 32;
  int feature = 1;
  char p[64];
  for (int g = 0; g < 7; g++) {
    for (int r = 0; r < settings[g][2]; r++, feature++) {
      inverted *b = &m->blocks[m->block_count++];
      int64_t out_c = settings[g][1], stride = r == 0 ? settings[g][3] : 1, hidden = in * settings[g][0];
      int c = 0;
      if (settings[g][0] != 1) {
        snprintf(p, sizeof p, "features.%d.conv.0.0", feature);
        b->conv[c] = bench_conv_make(s, p, in, hidden, 1, 1, 0, 1, false);
        snprintf(p, sizeof p, "features.%d.conv.0.1", feature);
        b->bn[c++] = bench_bn_make(s, p, hidden);
      }
      snprintf(p, sizeof p, "features.%d.conv.%d.0", feature, c);
      b->conv[c] = bench_conv_make(s, p, hidden, hidden, 3, stride, 1, hidden, false);
      snprintf(p, sizeof p, "features.%d.conv.%d.1", feature, c);
      b->bn[c] = bench_bn_make(s, p, hidden);
      c++;
      /* the linear projection: its conv and batch norm are siblings, not a nested block */
      snprintf(p, sizeof p, "features.%d.conv.%d", feature, c);
      b->conv[c] = bench_conv_make(s, p, hidden, out_c, 1, 1, 0, 1, false);
      snprintf(p, sizeof p, "features.%d.conv.%d", feature, c + 1);
      b->bn[c] = bench_bn_make(s, p, out_c);
      b->conv_count = c + 1;
      b->residual = stride == 1 && in == out_c;
      in = out_c;
    }
  }
  m->last_conv = bench_conv_make(s, "features.18.0", in, 1280, 1, 1, 0, 1, false);
  m->last_bn = bench_bn_make(s, "features.18.1", 1280);
  m->classifier = bench_linear_make(s, "classifier.1", 1280, 1000, true);
  return bench_image_input(rt, config, out, 3);
}
