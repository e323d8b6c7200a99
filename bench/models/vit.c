/* A vision transformer with torchvision's vit_b_16 naming: a strided conv cuts 16x16
 * patches, a class token and learned position embeddings are added, then pre-norm layers
 * of multi-head self-attention (one packed in_proj) and a GELU MLP; the class token's
 * final layer norm feeds the head. vit_tiny is the same with 4 layers of width 192. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "models.h"

typedef struct vit_layer {
  bench_ln_w ln1, ln2;
  bench_linear_w in_proj, out_proj, mlp1, mlp2;
} vit_layer;

typedef struct vit {
  bench_store store;
  int64_t hidden, heads;
  bench_conv_w patch;
  latch_tensor *class_token, *positions;
  int layer_count;
  vit_layer layers[12];
  bench_ln_w ln;
  bench_linear_w head;
} vit;

static latch_tensor *layer_apply(latch_runtime *rt, latch_tensor *x, const vit_layer *l, int64_t hidden, int64_t heads) {
  latch_tensor *a = bench_ln(x, &l->ln1);
  BENCH_THEN(a, bench_linear(a, &l->in_proj));
  latch_tensor *qkv[3];
  for (int i = 0; i < 3; i++) {
    qkv[i] = latch_slice(a, 2, i * hidden, (i + 1) * hidden, 1);
    BENCH_THEN(qkv[i], bench_split_heads(qkv[i], heads));
  }
  latch_release(a);
  a = bench_attention(rt, qkv[0], qkv[1], qkv[2]);
  for (int i = 0; i < 3; i++) latch_release(qkv[i]);
  BENCH_THEN(a, bench_merge_heads(a));
  BENCH_THEN(a, bench_linear(a, &l->out_proj));
  BENCH_THEN(a, latch_binary(LATCH_ADD, a, x));
  latch_tensor *f = bench_ln(a, &l->ln2);
  BENCH_THEN(f, bench_linear(f, &l->mlp1));
  BENCH_THEN(f, latch_gelu(f, false));
  BENCH_THEN(f, bench_linear(f, &l->mlp2));
  BENCH_THEN(f, latch_binary(LATCH_ADD, f, a));
  latch_release(a);
  return f;
}

static latch_status vit_step(void *model, latch_tensor *const *inputs, int input_count, latch_tensor **outputs,
                             int output_count) {
  latch_status status = bench_check_io("vit", input_count, 1, outputs, output_count, 1);
  if (status != LATCH_OK) return status;
  vit *m = model;
  /* The batch is never read (reshapes infer it, the class token takes it from a slice),
   * so a traced step keeps it symbolic. */
  latch_tensor *x = bench_conv(inputs[0], &m->patch);
  int64_t patches = latch_dim(x, 2) * latch_dim(x, 3);
  BENCH_THEN(x, latch_reshape(x, 3, BENCH_DIMS(-1, m->hidden, patches)));
  BENCH_THEN(x, latch_permute(x, (const int[]){0, 2, 1}));
  latch_tensor *first = latch_slice(x, 1, 0, 1, 1), *zero = latch_scalar(m->store.rt, LATCH_F32, 0);
  latch_tensor *token = latch_binary(LATCH_MUL, first, zero); /* [B, 1, hidden] of zeros */
  latch_release(first), latch_release(zero);
  BENCH_THEN(token, latch_binary(LATCH_ADD, token, m->class_token));
  latch_tensor *parts[2] = {token, x};
  x = latch_concat(2, parts, 1);
  latch_release(parts[0]), latch_release(parts[1]);
  BENCH_THEN(x, latch_binary(LATCH_ADD, x, m->positions));
  for (int i = 0; i < m->layer_count; i++) BENCH_THEN(x, layer_apply(m->store.rt, x, &m->layers[i], m->hidden, m->heads));
  BENCH_THEN(x, bench_ln(x, &m->ln));
  BENCH_THEN(x, latch_slice(x, 1, 0, 1, 1));
  BENCH_THEN(x, latch_reshape(x, 2, BENCH_DIMS(-1, m->hidden)));
  BENCH_THEN(x, bench_linear(x, &m->head));
  outputs[0] = x;
  return bench_step_result("vit", outputs, 1);
}

static void vit_free(void *model) {
  vit *m = model;
  bench_store_free(&m->store);
  free(m);
}

static latch_status create(latch_runtime *rt, const bench_config *config, bench_instance *out, int layers,
                           int64_t hidden, int64_t heads, int64_t mlp) {
  vit *m = calloc(1, sizeof *m);
  if (!m) return bench_set_error("out of memory"), LATCH_ERR_INTERNAL;
  *out = (bench_instance){.model = m, .step = vit_step, .destroy = vit_free};
  bench_store *s = &m->store;
  bench_store_init(s, rt, config);
  if (config->size < 16 || config->size % 16)
    return bench_set_error("vit: image size %d is not a positive multiple of the patch size 16", config->size),
           LATCH_ERR_INPUT;
  m->hidden = hidden, m->heads = heads, m->layer_count = layers;
  int64_t seq = (int64_t)(config->size / 16) * (config->size / 16) + 1;
  m->patch = bench_conv_make(s, "conv_proj", 3, hidden, 16, 16, 0, 1, true);
  m->class_token = bench_param(s, "class_token", 3, BENCH_DIMS(1, 1, hidden), BENCH_INIT_NORMAL, 0.02);
  m->positions = bench_param(s, "encoder.pos_embedding", 3, BENCH_DIMS(1, seq, hidden), BENCH_INIT_NORMAL, 0.02);
  char p[96];
  for (int i = 0; i < layers; i++) {
    vit_layer *l = &m->layers[i];
    snprintf(p, sizeof p, "encoder.layers.encoder_layer_%d.ln_1", i);
    l->ln1 = bench_ln_make(s, p, hidden, 1e-6);
    snprintf(p, sizeof p, "encoder.layers.encoder_layer_%d.ln_2", i);
    l->ln2 = bench_ln_make(s, p, hidden, 1e-6);
    /* nn.MultiheadAttention's packed projection: in_proj_weight [3D, D], not a .weight key */
    snprintf(p, sizeof p, "encoder.layers.encoder_layer_%d.self_attention.in_proj_weight", i);
    l->in_proj.weight = bench_param(s, p, 2, BENCH_DIMS(3 * hidden, hidden), BENCH_INIT_UNIFORM, sqrt(3.0 / (double)hidden));
    snprintf(p, sizeof p, "encoder.layers.encoder_layer_%d.self_attention.in_proj_bias", i);
    l->in_proj.bias = bench_param(s, p, 1, BENCH_DIMS(3 * hidden), BENCH_INIT_CONST, 0);
    bench_linear_pack(s, &l->in_proj);
    snprintf(p, sizeof p, "encoder.layers.encoder_layer_%d.self_attention.out_proj", i);
    l->out_proj = bench_linear_make(s, p, hidden, hidden, true);
    snprintf(p, sizeof p, "encoder.layers.encoder_layer_%d.mlp.0", i);
    l->mlp1 = bench_linear_make(s, p, hidden, mlp, true);
    snprintf(p, sizeof p, "encoder.layers.encoder_layer_%d.mlp.3", i);
    l->mlp2 = bench_linear_make(s, p, mlp, hidden, true);
  }
  m->ln = bench_ln_make(s, "encoder.ln", hidden, 1e-6);
  m->head = bench_linear_make(s, "heads.head", hidden, 1000, true);
  return bench_image_input(rt, config, out, 3);
}

latch_status bench_vit_tiny_create(latch_runtime *rt, const bench_config *config, bench_instance *out) {
  return create(rt, config, out, 4, 192, 3, 768);
}

latch_status bench_vit_b_16_create(latch_runtime *rt, const bench_config *config, bench_instance *out) {
  return create(rt, config, out, config->tiny ? 2 : 12, 768, 12, 3072);
}
