/* torchvision vgg16 (configuration D, no batch norm): 13 3x3 convs in five stages with
 * 2x2 max pools, adaptive average pool to 7x7, three linear layers. */
#include <stdio.h>
#include <stdlib.h>

#include "models.h"

/* Channels per conv; 0 is a max pool. The features index advances by 2 per conv (conv,
 * ReLU) and by 1 per pool, as in torchvision's Sequential. */
static const int plan[] = {64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0};
#define PLAN_COUNT ((int)(sizeof plan / sizeof plan[0]))

typedef struct vgg {
  bench_store store;
  bench_conv_w conv[PLAN_COUNT];
  bench_linear_w fc[3];
} vgg;

static latch_status vgg_step(void *model, latch_tensor *const *inputs, int input_count, latch_tensor **outputs,
                             int output_count) {
  latch_status status = bench_check_io("vgg16", input_count, 1, outputs, output_count, 1);
  if (status != LATCH_OK) return status;
  vgg *m = model;
  latch_tensor *x = latch_retain(inputs[0]);
  for (int i = 0; i < PLAN_COUNT; i++) {
    if (plan[i] == 0) {
      BENCH_THEN(x, bench_max_pool(x, 2, 2, 0));
      continue;
    }
    BENCH_THEN(x, bench_conv(x, &m->conv[i]));
    BENCH_THEN(x, latch_relu(x));
  }
  BENCH_THEN(x, bench_adaptive_avg_pool(x, 7, 7));
  BENCH_THEN(x, bench_flatten(x));
  for (int i = 0; i < 3; i++) {
    BENCH_THEN(x, bench_linear(x, &m->fc[i]));
    if (i < 2) BENCH_THEN(x, latch_relu(x));
  }
  outputs[0] = x;
  return bench_step_result("vgg16", outputs, 1);
}

static void vgg_free(void *model) {
  vgg *m = model;
  bench_store_free(&m->store);
  free(m);
}

latch_status bench_vgg16_create(latch_runtime *rt, const bench_config *config, bench_instance *out) {
  vgg *m = calloc(1, sizeof *m);
  if (!m) return bench_set_error("out of memory"), LATCH_ERR_INTERNAL;
  *out = (bench_instance){.model = m, .step = vgg_step, .destroy = vgg_free};
  bench_store *s = &m->store;
  bench_store_init(s, rt, config);
  int64_t in = 3;
  char p[64];
  for (int i = 0, index = 0; i < PLAN_COUNT; i++) {
    if (plan[i] == 0) {
      index++;
      continue;
    }
    snprintf(p, sizeof p, "features.%d", index);
    m->conv[i] = bench_conv_make(s, p, in, plan[i], 3, 1, 1, 1, true);
    in = plan[i];
    index += 2;
  }
  int64_t wide = config->tiny ? 256 : 4096;
  m->fc[0] = bench_linear_make(s, "classifier.0", 512 * 7 * 7, wide, true);
  m->fc[1] = bench_linear_make(s, "classifier.3", wide, wide, true);
  m->fc[2] = bench_linear_make(s, "classifier.6", wide, 1000, true);
  return bench_image_input(rt, config, out, 3);
}
