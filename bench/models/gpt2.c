/* GPT-2-like decoders (Hugging Face GPT2Model naming, Conv1D weights stored [in, out],
 * pre-norm layers). gpt2 (4 layers of 256, 4 heads) and gpt2_small_gen (GPT-2 small: 12 of
 * 768, 12 heads, 50,257 tokens) run one decoder step, LM head tied to the token embedding:
 * the new token attends to a KV cache that grows by one position per step (concat of the
 * new key and value), so every step has new shapes. The cache starts with S seeded positions
 * (with --weights, from past.<layer>.key.npy and past.<layer>.value.npy, [B, heads, S, d], as
 * bench/torch_zoo.py exports them). It is carried state: inputs 1..2L are each layer's keys
 * then values, outputs 1..2L the grown ones. gpt2_small runs GPT-2 small over a whole
 * sequence of S token ids, each position attending to itself and the ones before (a causal
 * mask made in the step from two iotas); its output is the last hidden state [B, S, 768]. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "models.h"

#define GPT2_MAX_LAYERS 12
#define GPT2_POSITIONS 1024

typedef struct gpt2_layer {
  bench_ln_w ln1, ln2;
  latch_tensor *attn_w, *attn_b, *proj_w, *proj_b, *fc_w, *fc_b, *out_w, *out_b;
} gpt2_layer;

typedef struct gpt2 {
  bench_store store;
  int64_t hidden, heads, vocab;
  latch_tensor *wte, *wpe, *wte_t; /* wte_t: the tied LM head, transposed once (steps only) */
  int layer_count;
  gpt2_layer layers[GPT2_MAX_LAYERS];
  bench_ln_w ln_f;
} gpt2;

/* Conv1D: x @ w + b with w [in, out]. */
static latch_tensor *conv1d(latch_tensor *x, latch_tensor *w, latch_tensor *b) {
  latch_tensor *y = latch_matmul(x, w);
  BENCH_THEN(y, latch_binary(LATCH_ADD, y, b));
  return y;
}

/* softmax(q k^T / sqrt(d)) v with position i attending to keys 0..i only: scores above the
 * diagonal set to -inf before the softmax (q, k, v [B, heads, S, d]). */
static latch_tensor *causal_attention(latch_runtime *rt, latch_tensor *q, latch_tensor *k, latch_tensor *v) {
  int64_t s = latch_dim(q, 2);
  latch_tensor *kt = latch_permute(k, (const int[]){0, 1, 3, 2});
  latch_tensor *scores = latch_matmul(q, kt);
  latch_release(kt);
  latch_tensor *scale = latch_scalar(rt, LATCH_F32, 1 / sqrt((double)latch_dim(q, -1)));
  BENCH_THEN(scores, latch_binary(LATCH_MUL, scores, scale));
  latch_release(scale);
  /* [S, S], broadcast over the batch and heads (no batch size in the graph's constants, so
   * a traced step stays symbolic in it). */
  const int64_t dims[2] = {s, s};
  latch_tensor *row = latch_iota(rt, LATCH_I64, 2, dims, 0), *col = latch_iota(rt, LATCH_I64, 2, dims, 1);
  latch_tensor *above = latch_compare(LATCH_GT, col, row); /* ops take NULL and give NULL: errors pass on */
  latch_release(row);
  latch_release(col);
  latch_tensor *low = latch_scalar(rt, LATCH_F32, -INFINITY);
  latch_tensor *masked = latch_where(above, low, scores);
  latch_release(above);
  latch_release(low);
  latch_release(scores);
  BENCH_THEN(masked, latch_softmax(masked, -1));
  latch_tensor *y = latch_matmul(masked, v);
  latch_release(masked);
  return y;
}

/* past: [B, heads, T, d] keys and values (NULL for a whole causal sequence); *keys and
 * *values get them grown by this token. */
static latch_tensor *layer_apply(latch_runtime *rt, latch_tensor *x, const gpt2_layer *l, int64_t hidden, int64_t heads,
                                 latch_tensor *past_k, latch_tensor *past_v, latch_tensor **keys, latch_tensor **values) {
  latch_tensor *a = bench_ln(x, &l->ln1);
  BENCH_THEN(a, conv1d(a, l->attn_w, l->attn_b));
  latch_tensor *qkv[3];
  for (int i = 0; i < 3; i++) {
    qkv[i] = latch_slice(a, 2, i * hidden, (i + 1) * hidden, 1);
    BENCH_THEN(qkv[i], bench_split_heads(qkv[i], heads));
  }
  latch_release(a);
  if (past_k) {
    latch_tensor *k[2] = {past_k, qkv[1]}, *v[2] = {past_v, qkv[2]};
    *keys = latch_concat(2, k, 2);
    *values = latch_concat(2, v, 2);
    a = bench_attention(rt, qkv[0], *keys, *values);
  } else {
    a = causal_attention(rt, qkv[0], qkv[1], qkv[2]);
  }
  for (int i = 0; i < 3; i++) latch_release(qkv[i]);
  BENCH_THEN(a, bench_merge_heads(a));
  BENCH_THEN(a, conv1d(a, l->proj_w, l->proj_b));
  BENCH_THEN(a, latch_binary(LATCH_ADD, a, x));
  latch_tensor *f = bench_ln(a, &l->ln2);
  BENCH_THEN(f, conv1d(f, l->fc_w, l->fc_b));
  BENCH_THEN(f, latch_gelu(f, true));
  BENCH_THEN(f, conv1d(f, l->out_w, l->out_b));
  BENCH_THEN(f, latch_binary(LATCH_ADD, f, a));
  latch_release(a);
  return f;
}

static latch_status gpt2_step(void *model, latch_tensor *const *inputs, int input_count, latch_tensor **outputs,
                              int output_count) {
  gpt2 *m = model;
  int layers = m->layer_count;
  latch_status status = bench_check_io("gpt2", input_count, 1 + 2 * layers, outputs, output_count, 1 + 2 * layers);
  if (status != LATCH_OK) return status;
  /* The position is the cache's length, read as a size (latch_size_of), and the batch is
   * inferred (-1): a traced step keeps both symbolic instead of tracing per step. */
  latch_size at = latch_size_of(inputs[1], 2), next = latch_size_add(at, latch_size_const(1));
  if (latch_size_compare(LATCH_GT, next, latch_size_const(GPT2_POSITIONS)))
    return bench_set_error("gpt2: the cache is full (%d positions)", GPT2_POSITIONS), LATCH_ERR_INPUT;
  latch_tensor *x = latch_embedding(m->wte, inputs[0]); /* [B, 1, D] */
  latch_tensor *p = latch_slice_sized(m->wpe, 0, at, next, 1);
  BENCH_THEN(x, latch_binary(LATCH_ADD, x, p));
  latch_release(p);
  for (int i = 0; i < layers; i++)
    BENCH_THEN(x, layer_apply(m->store.rt, x, &m->layers[i], m->hidden, m->heads, inputs[1 + i], inputs[1 + layers + i],
                              &outputs[1 + i], &outputs[1 + layers + i]));
  BENCH_THEN(x, bench_ln(x, &m->ln_f));
  BENCH_THEN(x, latch_matmul(x, m->wte_t));
  BENCH_THEN(x, latch_reshape(x, 2, BENCH_DIMS(-1, m->vocab)));
  outputs[0] = x;
  return bench_step_result("gpt2", outputs, 1 + 2 * layers);
}

/* gpt2_small's step: token ids [B, S] -> the last hidden state [B, S, D]. */
static latch_status sequence_step(void *model, latch_tensor *const *inputs, int input_count, latch_tensor **outputs,
                                  int output_count) {
  latch_status status = bench_check_io("gpt2_small", input_count, 1, outputs, output_count, 1);
  if (status != LATCH_OK) return status;
  gpt2 *m = model;
  int64_t s = latch_dim(inputs[0], 1);
  latch_tensor *x = latch_embedding(m->wte, inputs[0]); /* [B, S, D] */
  latch_tensor *p = latch_slice(m->wpe, 0, 0, s, 1);
  BENCH_THEN(x, latch_binary(LATCH_ADD, x, p));
  latch_release(p);
  for (int i = 0; i < m->layer_count; i++)
    BENCH_THEN(x, layer_apply(m->store.rt, x, &m->layers[i], m->hidden, m->heads, NULL, NULL, NULL, NULL));
  BENCH_THEN(x, bench_ln(x, &m->ln_f));
  outputs[0] = x;
  return bench_step_result("gpt2_small", outputs, 1);
}

static void gpt2_free(void *model) {
  gpt2 *m = model;
  bench_store_free(&m->store);
  free(m);
}

/* The weights, under GPT2Model's keys. */
static latch_status load(gpt2 *m, bench_store *s) {
  int64_t d = m->hidden, vocab = m->vocab;
  m->wte = bench_param(s, "wte.weight", 2, BENCH_DIMS(vocab, d), BENCH_INIT_NORMAL, 0.02);
  m->wpe = bench_param(s, "wpe.weight", 2, BENCH_DIMS(GPT2_POSITIONS, d), BENCH_INIT_NORMAL, 0.01);
  char p[96];
  for (int i = 0; i < m->layer_count; i++) {
    gpt2_layer *l = &m->layers[i];
    snprintf(p, sizeof p, "h.%d.ln_1", i);
    l->ln1 = bench_ln_make(s, p, d, 1e-5);
    snprintf(p, sizeof p, "h.%d.ln_2", i);
    l->ln2 = bench_ln_make(s, p, d, 1e-5);
    l->attn_w = bench_paramf(s, 2, BENCH_DIMS(d, 3 * d), BENCH_INIT_NORMAL, 0.02, "h.%d.attn.c_attn.weight", i);
    l->attn_b = bench_paramf(s, 1, BENCH_DIMS(3 * d), BENCH_INIT_CONST, 0, "h.%d.attn.c_attn.bias", i);
    l->proj_w = bench_paramf(s, 2, BENCH_DIMS(d, d), BENCH_INIT_NORMAL, 0.02, "h.%d.attn.c_proj.weight", i);
    l->proj_b = bench_paramf(s, 1, BENCH_DIMS(d), BENCH_INIT_CONST, 0, "h.%d.attn.c_proj.bias", i);
    l->fc_w = bench_paramf(s, 2, BENCH_DIMS(d, 4 * d), BENCH_INIT_NORMAL, 0.02, "h.%d.mlp.c_fc.weight", i);
    l->fc_b = bench_paramf(s, 1, BENCH_DIMS(4 * d), BENCH_INIT_CONST, 0, "h.%d.mlp.c_fc.bias", i);
    l->out_w = bench_paramf(s, 2, BENCH_DIMS(4 * d, d), BENCH_INIT_NORMAL, 0.02, "h.%d.mlp.c_proj.weight", i);
    l->out_b = bench_paramf(s, 1, BENCH_DIMS(d), BENCH_INIT_CONST, 0, "h.%d.mlp.c_proj.bias", i);
  }
  m->ln_f = bench_ln_make(s, "ln_f", d, 1e-5);
  return s->status;
}

static latch_status create(latch_runtime *rt, const bench_config *config, bench_instance *out, int layers, int64_t d,
                           int64_t heads, int64_t vocab, bool sequence) {
  gpt2 *m = calloc(1, sizeof *m);
  if (!m) return bench_set_error("out of memory"), LATCH_ERR_INTERNAL;
  *out = (bench_instance){.model = m, .step = sequence ? sequence_step : gpt2_step, .destroy = gpt2_free};
  out->batch = config->batch, out->size = config->size, out->output_name = sequence ? "hidden" : "logits";
  out->output_count = sequence ? 1 : 1 + 2 * layers, out->carry = sequence ? 0 : 2 * layers;
  bench_store *s = &m->store;
  bench_store_init(s, rt, config);
  int64_t batch = config->batch;
  m->hidden = d, m->heads = heads, m->vocab = vocab, m->layer_count = layers;
  if (load(m, s) != LATCH_OK) return s->status;
  if (config->size < 1 || config->size >= GPT2_POSITIONS)
    return bench_set_error("gpt2: context length %d must be in [1, %d)", config->size, GPT2_POSITIONS), LATCH_ERR_INPUT;
  if (sequence) {
    out->inputs[0] = bench_input(rt, config, LATCH_I64, 2, BENCH_DIMS(batch, config->size), 0, (double)vocab, config->seed + 1);
    out->input_count = out->inputs[0] ? 1 : 0;
    return out->inputs[0] ? LATCH_OK : LATCH_ERR_INPUT;
  }
  m->wte_t = bench_keep(s, latch_permute(m->wte, (const int[]){1, 0}));
  if (s->status == LATCH_OK && !latch_data(m->wte_t)) return bench_fail_tensor("gpt2", m->wte_t);
  if (s->status != LATCH_OK) return s->status;
  /* The prompt's keys and values, as a prefill would have left them. */
  out->inputs[0] = bench_input(rt, config, LATCH_I64, 2, BENCH_DIMS(batch, 1), 0, (double)vocab, config->seed + 1);
  if (!out->inputs[0]) return LATCH_ERR_INPUT;
  out->input_count = 1;
  const int64_t cache[4] = {batch, heads, config->size, d / heads};
  for (int i = 0; i < 2 * layers; i++) {
    /* The store owns what it loads; the step's inputs take their own reference. */
    latch_tensor *past = bench_paramf(s, 4, cache, BENCH_INIT_NORMAL, 1, "past.%d.%s", i % layers,
                                      i < layers ? "key" : "value");
    if (!past) return s->status;
    out->inputs[out->input_count++] = latch_retain(past);
  }
  return LATCH_OK;
}

latch_status bench_gpt2_create(latch_runtime *rt, const bench_config *config, bench_instance *out) {
  return create(rt, config, out, 4, 256, 4, 2048, false);
}

latch_status bench_gpt2_small_create(latch_runtime *rt, const bench_config *config, bench_instance *out) {
  return create(rt, config, out, config->tiny ? 2 : 12, 768, 12, 50257, true);
}

latch_status bench_gpt2_small_gen_create(latch_runtime *rt, const bench_config *config, bench_instance *out) {
  return create(rt, config, out, config->tiny ? 2 : 12, 768, 12, 50257, false);
}
