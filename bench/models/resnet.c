/* torchvision resnet18 (BasicBlock [2, 2, 2, 2]) and resnet50 (Bottleneck [3, 4, 6, 3],
 * stride on the 3x3 conv as torchvision's v1.5), batch norm in inference form. */
#include <stdio.h>
#include <stdlib.h>

#include "models.h"

typedef struct block {
  bench_conv_w conv[3];
  bench_bn_w bn[3];
  bool down;
  bench_conv_w down_conv;
  bench_bn_w down_bn;
} block;

typedef struct resnet {
  bench_store store;
  const char *name;
  bool bottleneck;
  bench_conv_w conv1;
  bench_bn_w bn1;
  int block_count;
  block blocks[16];
  bench_linear_w fc;
} resnet;

static latch_tensor *block_apply(latch_tensor *x, const block *b, bool bottleneck) {
  int convs = bottleneck ? 3 : 2;
  latch_tensor *y = latch_retain(x);
  for (int i = 0; i < convs; i++)
    BENCH_THEN(y, bench_conv_bn(y, &b->conv[i], &b->bn[i], i + 1 < convs ? BENCH_RELU : BENCH_NONE));
  latch_tensor *skip = b->down ? bench_conv_bn(x, &b->down_conv, &b->down_bn, BENCH_NONE) : latch_retain(x);
  BENCH_THEN(y, latch_binary(LATCH_ADD, y, skip));
  latch_release(skip);
  BENCH_THEN(y, latch_relu(y));
  return y;
}

static latch_status resnet_step(void *model, latch_tensor *const *inputs, int input_count, latch_tensor **outputs,
                                int output_count) {
  resnet *m = model;
  latch_status status = bench_check_io(m->name, input_count, 1, outputs, output_count, 1);
  if (status != LATCH_OK) return status;
  latch_tensor *x = bench_conv_bn(inputs[0], &m->conv1, &m->bn1, BENCH_RELU);
  BENCH_THEN(x, bench_max_pool(x, 3, 2, 1));
  for (int i = 0; i < m->block_count; i++) BENCH_THEN(x, block_apply(x, &m->blocks[i], m->bottleneck));
  BENCH_THEN(x, bench_adaptive_avg_pool(x, 1, 1));
  BENCH_THEN(x, bench_flatten(x));
  BENCH_THEN(x, bench_linear(x, &m->fc));
  outputs[0] = x;
  return bench_step_result(m->name, outputs, 1);
}

static void resnet_free(void *model) {
  resnet *m = model;
  bench_store_free(&m->store);
  free(m);
}

static latch_status create(latch_runtime *rt, const bench_config *config, bench_instance *out, bool bottleneck) {
  resnet *m = calloc(1, sizeof *m);
  if (!m) return bench_set_error("out of memory"), LATCH_ERR_INTERNAL;
  *out = (bench_instance){.model = m, .step = resnet_step, .destroy = resnet_free};
  bench_store *s = &m->store;
  bench_store_init(s, rt, config);
  m->name = bottleneck ? "resnet50" : "resnet18";
  m->bottleneck = bottleneck;
  m->conv1 = bench_conv_make(s, "conv1", 3, 64, 7, 2, 3, 1, false);
  m->bn1 = bench_bn_make(s, "bn1", 64);
  static const int counts18[4] = {2, 2, 2, 2}, counts50[4] = {3, 4, 6, 3};
  const int *counts = bottleneck ? counts50 : counts18;
  int expansion = bottleneck ? 4 : 1;
  int64_t in = 64;
  for (int layer = 0; layer < 4; layer++) {
    int64_t width = 64 << layer, out_channels = width * expansion;
    for (int i = 0; i < counts[layer]; i++) {
      block *b = &m->blocks[m->block_count++];
      int64_t stride = layer > 0 && i == 0 ? 2 : 1;
      char p[64];
      for (int c = 0; c < (bottleneck ? 3 : 2); c++) {
        snprintf(p, sizeof p, "layer%d.%d.conv%d", layer + 1, i, c + 1);
        if (bottleneck) {
          int64_t cin = c == 0 ? in : width, cout = c == 2 ? out_channels : width;
          b->conv[c] = bench_conv_make(s, p, cin, cout, c == 1 ? 3 : 1, c == 1 ? stride : 1, c == 1 ? 1 : 0, 1, false);
        } else {
          b->conv[c] = bench_conv_make(s, p, c == 0 ? in : width, width, 3, c == 0 ? stride : 1, 1, 1, false);
        }
        snprintf(p, sizeof p, "layer%d.%d.bn%d", layer + 1, i, c + 1);
        b->bn[c] = bench_bn_make(s, p, bottleneck && c == 2 ? out_channels : width);
      }
      if (stride != 1 || in != out_channels) {
        b->down = true;
        snprintf(p, sizeof p, "layer%d.%d.downsample.0", layer + 1, i);
        b->down_conv = bench_conv_make(s, p, in, out_channels, 1, stride, 0, 1, false);
        snprintf(p, sizeof p, "layer%d.%d.downsample.1", layer + 1, i);
        b->down_bn = bench_bn_make(s, p, out_channels);
      }
      in = out_channels;
    }
  }
  m->fc = bench_linear_make(s, "fc", in, 1000, true);
  return bench_image_input(rt, config, out, 3);
}

latch_status bench_resnet18_create(latch_runtime *rt, const bench_config *config, bench_instance *out) {
  return create(rt, config, out, false);
}

latch_status bench_resnet50_create(latch_runtime *rt, const bench_config *config, bench_instance *out) {
  return create(rt, config, out, true);
}
