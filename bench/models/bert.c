/* A BERT encoder (Hugging Face BertModel's state_dict naming, no pooler): token, position
 * and token-type embeddings with layer norm, then post-norm layers of multi-head
 * self-attention and a GELU feed-forward. The output is the last hidden state [B, S, H]. */
#include <stdio.h>
#include <stdlib.h>

#include "models.h"

typedef struct bert_layer {
  bench_linear_w q, k, v, attn_out, inter, out;
  bench_ln_w attn_ln, out_ln;
} bert_layer;

typedef struct bert {
  bench_store store;
  int64_t hidden, heads, vocab;
  latch_tensor *words, *positions, *types;
  bench_ln_w ln;
  int layer_count;
  bert_layer layers[12];
  latch_tensor *position_ids, *type_ids; /* constants of the model: [S] iota and zeros */
} bert;

static latch_tensor *layer_apply(latch_runtime *rt, latch_tensor *x, const bert_layer *l, int64_t heads) {
  latch_tensor *qkv[3];
  const bench_linear_w *w[3] = {&l->q, &l->k, &l->v};
  for (int i = 0; i < 3; i++) {
    qkv[i] = bench_linear(x, w[i]);
    BENCH_THEN(qkv[i], bench_split_heads(qkv[i], heads));
  }
  latch_tensor *a = bench_attention(rt, qkv[0], qkv[1], qkv[2]);
  for (int i = 0; i < 3; i++) latch_release(qkv[i]);
  BENCH_THEN(a, bench_merge_heads(a));
  BENCH_THEN(a, bench_linear(a, &l->attn_out));
  BENCH_THEN(a, latch_binary(LATCH_ADD, a, x));
  BENCH_THEN(a, bench_ln(a, &l->attn_ln));
  latch_tensor *f = bench_linear(a, &l->inter);
  BENCH_THEN(f, latch_gelu(f, false));
  BENCH_THEN(f, bench_linear(f, &l->out));
  BENCH_THEN(f, latch_binary(LATCH_ADD, f, a));
  latch_release(a);
  BENCH_THEN(f, bench_ln(f, &l->out_ln));
  return f;
}

static latch_status bert_step(void *model, latch_tensor *const *inputs, int input_count, latch_tensor **outputs,
                              int output_count) {
  latch_status status = bench_check_io("bert", input_count, 1, outputs, output_count, 1);
  if (status != LATCH_OK) return status;
  bert *m = model;
  latch_tensor *x = latch_embedding(m->words, inputs[0]);
  latch_tensor *p = latch_embedding(m->positions, m->position_ids);
  BENCH_THEN(x, latch_binary(LATCH_ADD, x, p));
  latch_release(p);
  p = latch_embedding(m->types, m->type_ids);
  BENCH_THEN(x, latch_binary(LATCH_ADD, x, p));
  latch_release(p);
  BENCH_THEN(x, bench_ln(x, &m->ln));
  for (int i = 0; i < m->layer_count; i++) BENCH_THEN(x, layer_apply(m->store.rt, x, &m->layers[i], m->heads));
  outputs[0] = x;
  return bench_step_result("bert", outputs, 1);
}

static void bert_free(void *model) {
  bert *m = model;
  bench_store_free(&m->store);
  free(m);
}

static latch_status create(latch_runtime *rt, const bench_config *config, bench_instance *out, int layers,
                           int64_t hidden, int64_t heads, int64_t vocab) {
  bert *m = calloc(1, sizeof *m);
  if (!m) return bench_set_error("out of memory"), LATCH_ERR_INTERNAL;
  *out = (bench_instance){.model = m, .step = bert_step, .destroy = bert_free, .output_count = 1, .output_name = "hidden"};
  out->batch = config->batch;
  out->size = config->size;
  bench_store *s = &m->store;
  bench_store_init(s, rt, config);
  m->hidden = hidden, m->heads = heads, m->vocab = vocab, m->layer_count = layers;
  if (config->size > 512) return bench_set_error("bert: sequence length %d is over 512 positions", config->size), LATCH_ERR_INPUT;
  m->words = bench_param(s, "embeddings.word_embeddings.weight", 2, BENCH_DIMS(vocab, hidden), BENCH_INIT_NORMAL, 0.02);
  m->positions = bench_param(s, "embeddings.position_embeddings.weight", 2, BENCH_DIMS(512, hidden), BENCH_INIT_NORMAL, 0.02);
  m->types = bench_param(s, "embeddings.token_type_embeddings.weight", 2, BENCH_DIMS(2, hidden), BENCH_INIT_NORMAL, 0.02);
  m->ln = bench_ln_make(s, "embeddings.LayerNorm", hidden, 1e-12);
  char p[96];
  for (int i = 0; i < layers; i++) {
    bert_layer *l = &m->layers[i];
#define BERT_LINEAR(field, name, in, outd)                          \
  snprintf(p, sizeof p, "encoder.layer.%d.%s", i, name);            \
  l->field = bench_linear_make(s, p, in, outd, true)
    BERT_LINEAR(q, "attention.self.query", hidden, hidden);
    BERT_LINEAR(k, "attention.self.key", hidden, hidden);
    BERT_LINEAR(v, "attention.self.value", hidden, hidden);
    BERT_LINEAR(attn_out, "attention.output.dense", hidden, hidden);
    BERT_LINEAR(inter, "intermediate.dense", hidden, 4 * hidden);
    BERT_LINEAR(out, "output.dense", 4 * hidden, hidden);
#undef BERT_LINEAR
    snprintf(p, sizeof p, "encoder.layer.%d.attention.output.LayerNorm", i);
    l->attn_ln = bench_ln_make(s, p, hidden, 1e-12);
    snprintf(p, sizeof p, "encoder.layer.%d.output.LayerNorm", i);
    l->out_ln = bench_ln_make(s, p, hidden, 1e-12);
  }
  if (s->status != LATCH_OK) return s->status;
  int64_t seq = config->size;
  m->position_ids = bench_keep(s, latch_iota(rt, LATCH_I64, 1, BENCH_DIMS(seq), 0));
  m->type_ids = bench_keep(s, latch_zeros(rt, LATCH_I64, 1, BENCH_DIMS(seq)));
  if (s->status != LATCH_OK || !latch_data(m->position_ids) || !latch_data(m->type_ids))
    return s->status ? s->status : bench_fail_tensor("bert", m->position_ids);
  out->inputs[0] = bench_input(rt, config, LATCH_I64, 2, BENCH_DIMS(config->batch, seq), 0, (double)vocab, config->seed + 1);
  out->input_count = out->inputs[0] ? 1 : 0;
  return out->inputs[0] ? LATCH_OK : LATCH_ERR_INPUT;
}

latch_status bench_bert_small_create(latch_runtime *rt, const bench_config *config, bench_instance *out) {
  return create(rt, config, out, 4, 256, 4, 8192);
}

latch_status bench_bert_base_create(latch_runtime *rt, const bench_config *config, bench_instance *out) {
  return create(rt, config, out, config->tiny ? 2 : 12, 768, 12, 30522);
}
