/* torchvision squeezenet1_1: Fire modules (squeeze 1x1, expand 1x1 and 3x3, concatenated),
 * ceil-mode max pools, a 1x1 conv classifier averaged over the image. */
#include <stdio.h>
#include <stdlib.h>

#include "models.h"

typedef struct fire {
  bench_conv_w squeeze, expand1, expand3;
} fire;

typedef struct squeezenet {
  bench_store store;
  bench_conv_w first, classifier;
  fire fires[8];
} squeezenet;

static latch_tensor *fire_apply(latch_tensor *x, const fire *f) {
  latch_tensor *s = bench_conv(x, &f->squeeze);
  BENCH_THEN(s, latch_relu(s));
  latch_tensor *parts[2] = {bench_conv(s, &f->expand1), bench_conv(s, &f->expand3)};
  latch_release(s);
  for (int k = 0; k < 2; k++) BENCH_THEN(parts[k], latch_relu(parts[k])); /* each branch, as torchvision's Fire */
  latch_tensor *y = latch_concat(2, parts, 1);
  latch_release(parts[0]), latch_release(parts[1]);
  return y;
}

static latch_status squeezenet_step(void *model, latch_tensor *const *inputs, int input_count, latch_tensor **outputs,
                                    int output_count) {
  latch_status status = bench_check_io("squeezenet1_1", input_count, 1, outputs, output_count, 1);
  if (status != LATCH_OK) return status;
  squeezenet *m = model;
  latch_tensor *x = bench_conv(inputs[0], &m->first);
  BENCH_THEN(x, latch_relu(x));
  for (int i = 0; i < 8; i++) {
    if (i == 0 || i == 2 || i == 4) BENCH_THEN(x, bench_max_pool_ceil(x, 3, 2));
    BENCH_THEN(x, fire_apply(x, &m->fires[i]));
  }
  BENCH_THEN(x, bench_conv(x, &m->classifier));
  BENCH_THEN(x, latch_relu(x));
  BENCH_THEN(x, bench_adaptive_avg_pool(x, 1, 1));
  BENCH_THEN(x, bench_flatten(x));
  outputs[0] = x;
  return bench_step_result("squeezenet1_1", outputs, 1);
}

static void squeezenet_free(void *model) {
  squeezenet *m = model;
  bench_store_free(&m->store);
  free(m);
}

latch_status bench_squeezenet_create(latch_runtime *rt, const bench_config *config, bench_instance *out) {
  squeezenet *m = calloc(1, sizeof *m);
  if (!m) return bench_set_error("out of memory"), LATCH_ERR_INTERNAL;
  *out = (bench_instance){.model = m, .step = squeezenet_step, .destroy = squeezenet_free};
  bench_store *s = &m->store;
  bench_store_init(s, rt, config);
  m->first = bench_conv_make(s, "features.0", 3, 64, 3, 2, 0, 1, true);
  /* in, squeeze, expand (each branch), and the features index of each Fire */
  static const int fires[8][4] = {{64, 16, 64, 3},     {128, 16, 64, 4},    {128, 32, 128, 6},  {256, 32, 128, 7},
                                  {256, 48, 192, 9},   {384, 48, 192, 10},  {384, 64, 256, 11}, {512, 64, 256, 12}};
  char p[64];
  for (int i = 0; i < 8; i++) {
    snprintf(p, sizeof p, "features.%d.squeeze", fires[i][3]);
    m->fires[i].squeeze = bench_conv_make(s, p, fires[i][0], fires[i][1], 1, 1, 0, 1, true);
    snprintf(p, sizeof p, "features.%d.expand1x1", fires[i][3]);
    m->fires[i].expand1 = bench_conv_make(s, p, fires[i][1], fires[i][2], 1, 1, 0, 1, true);
    snprintf(p, sizeof p, "features.%d.expand3x3", fires[i][3]);
    m->fires[i].expand3 = bench_conv_make(s, p, fires[i][1], fires[i][2], 3, 1, 1, 1, true);
  }
  m->classifier = bench_conv_make(s, "classifier.1", 512, 1000, 1, 1, 0, 1, true);
  return bench_image_input(rt, config, out, 3);
}
