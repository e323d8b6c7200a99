/* torchvision alexnet: five convs with ReLU and three 3x3/2 max pools, adaptive average
 * pool to 6x6, three linear layers (dropout is the identity at inference). */
#include <stdlib.h>

#include "models.h"

typedef struct alexnet {
  bench_store store;
  bench_conv_w conv[5];
  bench_linear_w fc[3];
} alexnet;

static latch_status alexnet_step(void *model, latch_tensor *const *inputs, int input_count, latch_tensor **outputs,
                                 int output_count) {
  latch_status status = bench_check_io("alexnet", input_count, 1, outputs, output_count, 1);
  if (status != LATCH_OK) return status;
  alexnet *m = model;
  latch_tensor *x = latch_retain(inputs[0]);
  for (int i = 0; i < 5; i++) {
    BENCH_THEN(x, bench_conv(x, &m->conv[i]));
    BENCH_THEN(x, latch_relu(x));
    if (i == 0 || i == 1 || i == 4) BENCH_THEN(x, bench_max_pool(x, 3, 2, 0));
  }
  BENCH_THEN(x, bench_adaptive_avg_pool(x, 6, 6));
  BENCH_THEN(x, bench_flatten(x));
  for (int i = 0; i < 3; i++) {
    BENCH_THEN(x, bench_linear(x, &m->fc[i]));
    if (i < 2) BENCH_THEN(x, latch_relu(x));
  }
  outputs[0] = x;
  return bench_step_result("alexnet", outputs, 1);
}

static void alexnet_free(void *model) {
  alexnet *m = model;
  bench_store_free(&m->store);
  free(m);
}

latch_status bench_alexnet_create(latch_runtime *rt, const bench_config *config, bench_instance *out) {
  alexnet *m = calloc(1, sizeof *m);
  if (!m) return bench_set_error("out of memory"), LATCH_ERR_INTERNAL;
  *out = (bench_instance){.model = m, .step = alexnet_step, .destroy = alexnet_free};
  bench_store *s = &m->store;
  bench_store_init(s, rt, config);
  m->conv[0] = bench_conv_make(s, "features.0", 3, 64, 11, 4, 2, 1, true);
  m->conv[1] = bench_conv_make(s, "features.3", 64, 192, 5, 1, 2, 1, true);
  m->conv[2] = bench_conv_make(s, "features.6", 192, 384, 3, 1, 1, 1, true);
  m->conv[3] = bench_conv_make(s, "features.8", 384, 256, 3, 1, 1, 1, true);
  m->conv[4] = bench_conv_make(s, "features.10", 256, 256, 3, 1, 1, 1, true);
  int64_t wide = config->tiny ? 256 : 4096;
  m->fc[0] = bench_linear_make(s, "classifier.1", 256 * 6 * 6, wide, true);
  m->fc[1] = bench_linear_make(s, "classifier.4", wide, wide, true);
  m->fc[2] = bench_linear_make(s, "classifier.6", wide, 1000, true);
  return bench_image_input(rt, config, out, 3);
}
