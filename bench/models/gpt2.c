/* One decoder step of a GPT-2-like model (Hugging Face GPT2Model naming, Conv1D weights
 * stored [in, out], LM head tied to the token embedding): the new token attends to a KV
 * cache that grows by one position per step (concat of the new key and value), so every
 * step has new shapes. The cache starts with S seeded positions (with --weights, from
 * past.<layer>.key.npy and past.<layer>.value.npy, [B, heads, S, d], as bench/torch_zoo.py
 * exports them). It is carried state: inputs 1..8 are each layer's keys then values,
 * outputs 1..8 the grown ones. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "models.h"

#define GPT2_LAYERS 4
#define GPT2_POSITIONS 1024

typedef struct gpt2_layer {
  bench_ln_w ln1, ln2;
  latch_tensor *attn_w, *attn_b, *proj_w, *proj_b, *fc_w, *fc_b, *out_w, *out_b;
} gpt2_layer;

typedef struct gpt2 {
  bench_store store;
  int64_t hidden, heads, vocab;
  latch_tensor *wte, *wpe, *wte_t; /* wte_t: the tied LM head, transposed once */
  gpt2_layer layers[GPT2_LAYERS];
  bench_ln_w ln_f;
} gpt2;

/* Conv1D: x @ w + b with w [in, out]. */
static latch_tensor *conv1d(latch_tensor *x, latch_tensor *w, latch_tensor *b) {
  latch_tensor *y = latch_matmul(x, w);
  BENCH_THEN(y, latch_binary(LATCH_ADD, y, b));
  return y;
}

/* past: [B, heads, T, d] keys and values; *keys and *values get them grown by this token. */
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
  latch_tensor *k[2] = {past_k, qkv[1]}, *v[2] = {past_v, qkv[2]};
  *keys = latch_concat(2, k, 2);
  *values = latch_concat(2, v, 2);
  a = bench_attention(rt, qkv[0], *keys, *values);
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
  latch_status status = bench_check_io("gpt2", input_count, 1 + 2 * GPT2_LAYERS, outputs, output_count, 1 + 2 * GPT2_LAYERS);
  if (status != LATCH_OK) return status;
  gpt2 *m = model;
  /* The position is the cache's length, read as a size (latch_size_of), and the batch is
   * inferred (-1): a traced step keeps both symbolic instead of tracing per step. */
  latch_size at = latch_size_of(inputs[1], 2), next = latch_size_add(at, latch_size_const(1));
  if (latch_size_compare(LATCH_GT, next, latch_size_const(GPT2_POSITIONS)))
    return bench_set_error("gpt2: the cache is full (%d positions)", GPT2_POSITIONS), LATCH_ERR_INPUT;
  latch_tensor *x = latch_embedding(m->wte, inputs[0]); /* [B, 1, D] */
  latch_tensor *p = latch_slice_sized(m->wpe, 0, at, next, 1);
  BENCH_THEN(x, latch_binary(LATCH_ADD, x, p));
  latch_release(p);
  for (int i = 0; i < GPT2_LAYERS; i++)
    BENCH_THEN(x, layer_apply(m->store.rt, x, &m->layers[i], m->hidden, m->heads, inputs[1 + i],
                              inputs[1 + GPT2_LAYERS + i], &outputs[1 + i], &outputs[1 + GPT2_LAYERS + i]));
  BENCH_THEN(x, bench_ln(x, &m->ln_f));
  BENCH_THEN(x, latch_matmul(x, m->wte_t));
  BENCH_THEN(x, latch_reshape(x, 2, BENCH_DIMS(-1, m->vocab)));
  outputs[0] = x;
  return bench_step_result("gpt2", outputs, 1 + 2 * GPT2_LAYERS);
}

static void gpt2_free(void *model) {
  gpt2 *m = model;
  bench_store_free(&m->store);
  free(m);
}

latch_status bench_gpt2_create(latch_runtime *rt, const bench_config *config, bench_instance *out) {
  gpt2 *m = calloc(1, sizeof *m);
  if (!m) return bench_set_error("out of memory"), LATCH_ERR_INTERNAL;
  *out = (bench_instance){.model = m, .step = gpt2_step, .destroy = gpt2_free};
  out->batch = config->batch, out->size = config->size, out->output_name = "logits";
  out->output_count = 1 + 2 * GPT2_LAYERS, out->carry = 2 * GPT2_LAYERS;
  bench_store *s = &m->store;
  bench_store_init(s, rt, config);
  int64_t d = 256, heads = 4, vocab = 2048, batch = config->batch;
  m->hidden = d, m->heads = heads, m->vocab = vocab;
  m->wte = bench_param(s, "wte.weight", 2, BENCH_DIMS(vocab, d), BENCH_INIT_NORMAL, 0.02);
  m->wpe = bench_param(s, "wpe.weight", 2, BENCH_DIMS(GPT2_POSITIONS, d), BENCH_INIT_NORMAL, 0.01);
  char p[96];
  for (int i = 0; i < GPT2_LAYERS; i++) {
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
  if (s->status == LATCH_OK) m->wte_t = bench_keep(s, latch_permute(m->wte, (const int[]){1, 0}));
  if (s->status == LATCH_OK && !latch_data(m->wte_t)) return bench_fail_tensor("gpt2", m->wte_t);
  if (s->status != LATCH_OK) return s->status;
  if (config->size < 1 || config->size >= GPT2_POSITIONS)
    return bench_set_error("gpt2: context length %d must be in [1, %d)", config->size, GPT2_POSITIONS), LATCH_ERR_INPUT;
  /* The prompt's keys and values, as a prefill would have left them. */
  out->inputs[0] = bench_input(rt, config, LATCH_I64, 2, BENCH_DIMS(batch, 1), 0, (double)vocab, config->seed + 1);
  if (!out->inputs[0]) return LATCH_ERR_INPUT;
  out->input_count = 1;
  const int64_t cache[4] = {batch, heads, config->size, d / heads};
  for (int i = 0; i < 2 * GPT2_LAYERS; i++) {
    /* The store owns what it loads; the step's inputs take their own reference. */
    latch_tensor *past = bench_paramf(s, 4, cache, BENCH_INIT_NORMAL, 1, "past.%d.%s", i % GPT2_LAYERS,
                                      i < GPT2_LAYERS ? "key" : "value");
    if (!past) return s->status;
    out->inputs[out->input_count++] = latch_retain(past);
  }
  return LATCH_OK;
}
