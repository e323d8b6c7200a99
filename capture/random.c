/* Random numbers as a graph op. The values are a counter-based hash of (element index,
 * stream, seed), computed by the graph itself from a seed that is a graph input, so a
 * cached executable draws fresh numbers whenever it is given a fresh seed: the trace-once
 * path feeds the call's seed on every hit (function.c). The hash is murmur3's 32-bit
 * finalizer applied twice, in u32 arithmetic that every backend has. */
#include <string.h>

#include "hlo/hlo.h"
#include "capture.h"
#include "runtime/runtime.h"

/* The seed as graph data: u32[2] {low half, high half}. */
cap_node *cap_seed_node(uint64_t seed) {
  int64_t two = 2;
  rt_value *value = rt_value_new_array(HLO_U32, 1, &two);
  if (!value) return NULL;
  uint32_t halves[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
  memcpy(value->data, halves, sizeof halves);
  return cap_node_data(value);
}

latch_tensor *latch_rand_uniform_like(latch_tensor *like, double low, double high) {
  latch_tensor *bad = cap_poisoned("rand_uniform_like", 1, &like);
  if (bad) return bad;
  cap_ctx *ctx = cap_ctx_current();
  latch_runtime *rt = like->rt;
  hlo_dtype dtype = hlo_dtype_is_float((hlo_dtype)like->node->dtype) ? (hlo_dtype)like->node->dtype : HLO_F32;
  cap_node *seed;
  int stream = 0;
  if (ctx->trace) {
    /* One seed input per trace; each op of the call draws its own stream of it. */
    if (!ctx->trace->seed) ctx->trace->seed = cap_seed_node(ctx->call_seed);
    seed = cap_node_retain(ctx->trace->seed);
    stream = ctx->rng_stream++;
  } else if (ctx->call_seeded) {
    seed = cap_seed_node(ctx->call_seed);
    stream = ctx->rng_stream++;
  } else {
    seed = cap_seed_node(rt_mix64(atomic_fetch_add(&rt->rng_counter, 1) + 0x5EEDu));
  }
  if (!seed) return cap_wrap(rt, NULL);
  cap_node *node = cap_node_new(CAP_RNG_UNIFORM, 0, 1, &seed, 1);
  cap_node_release(seed);
  if (!node) return cap_wrap(rt, NULL);
  node->dtype = (uint8_t)dtype;
  node->rank = like->node->rank;
  memcpy(node->dims, like->node->dims, sizeof(int64_t) * like->node->rank);
  node->attrs[0] = stream;
  node->scalar[0] = low;
  node->scalar[1] = high;
  ctx->trace_like = like->node; /* the symbolic dims of the result are like's */
  latch_tensor *out = cap_traced(rt, node);
  ctx->trace_like = NULL;
  return out;
}

latch_tensor *latch_dropout(latch_tensor *x, double p) {
  latch_tensor *bad = cap_poisoned("dropout", 1, &x);
  if (bad) return bad;
  if (!(p >= 0 && p <= 1)) return cap_error(x->rt, "dropout: p = %g is not in [0, 1]", p);
  if (p == 0) return latch_retain(x);
  latch_dtype dtype = latch_tensor_dtype(x);
  latch_tensor *zero = latch_scalar(x->rt, dtype, 0);
  if (p == 1) {
    latch_tensor *out = latch_binary(LATCH_MUL, x, zero);
    latch_release(zero);
    return out;
  }
  latch_tensor *u = latch_rand_uniform_like(x, 0, 1);
  latch_tensor *threshold = latch_scalar(x->rt, latch_tensor_dtype(u), p);
  latch_tensor *keep = latch_compare(LATCH_GE, u, threshold);
  latch_tensor *factor = latch_scalar(x->rt, dtype, 1.0 / (1.0 - p));
  latch_tensor *scaled = latch_binary(LATCH_MUL, x, factor);
  latch_tensor *out = latch_where(keep, scaled, zero);
  latch_release(u);
  latch_release(threshold);
  latch_release(keep);
  latch_release(factor);
  latch_release(scaled);
  latch_release(zero);
  return out;
}

/* ---- lowering ---- */

typedef struct rng_builder {
  hlo_comp *comp;
  int64_t n;
  hlo_diag *diag;
} rng_builder;

static hlo_instr *u32(rng_builder *b, uint32_t v) {
  hlo_instr *s = hlo_build_constant_scalar(b->comp, HLO_U32, (double)v, b->diag);
  return s ? hlo_build_broadcast(b->comp, s, 1, &b->n, NULL, b->diag) : NULL;
}

static hlo_instr *op(rng_builder *b, hlo_opcode code, hlo_instr *x, hlo_instr *y) {
  return x && y ? hlo_build_binary(b->comp, code, x, y, b->diag) : NULL;
}

static hlo_instr *fmix32(rng_builder *b, hlo_instr *x) {
  x = op(b, HLO_OP_XOR, x, op(b, HLO_OP_SHIFT_RIGHT_LOGICAL, x, u32(b, 16)));
  x = op(b, HLO_OP_MULTIPLY, x, u32(b, 0x85ebca6bu));
  x = op(b, HLO_OP_XOR, x, op(b, HLO_OP_SHIFT_RIGHT_LOGICAL, x, u32(b, 13)));
  x = op(b, HLO_OP_MULTIPLY, x, u32(b, 0xc2b2ae35u));
  return op(b, HLO_OP_XOR, x, op(b, HLO_OP_SHIFT_RIGHT_LOGICAL, x, u32(b, 16)));
}

/* Element i of the seed, broadcast to [n]. */
static hlo_instr *seed_half(rng_builder *b, hlo_instr *seed, int64_t i) {
  int64_t start = i, limit = i + 1, stride = 1;
  hlo_instr *one = hlo_build_slice(b->comp, seed, &start, &limit, &stride, b->diag);
  hlo_instr *scalar = one ? hlo_build_reshape(b->comp, one, 0, NULL, b->diag) : NULL;
  return scalar ? hlo_build_broadcast(b->comp, scalar, 1, &b->n, NULL, b->diag) : NULL;
}

hlo_instr *cap_lower_rng(hlo_comp *comp, const cap_node *node, hlo_instr *seed, hlo_diag *diag) {
  int64_t n = 1;
  for (int i = 0; i < node->rank; i++) n *= node->dims[i];
  if (n > (int64_t)UINT32_MAX) {
    hlo_diag_set(diag, HLO_ERR_UNSUPPORTED, "rand_uniform_like: more than 2^32 elements");
    return NULL;
  }
  rng_builder b = {comp, n, diag};
  uint32_t stream = (uint32_t)node->attrs[0] * 0x9E3779B9u + 0x7F4A7C15u;
  hlo_instr *x = hlo_build_iota(comp, HLO_U32, 1, &n, 0, diag);
  x = op(&b, HLO_OP_ADD, op(&b, HLO_OP_MULTIPLY, x, u32(&b, 0x9E3779B1u)), u32(&b, stream));
  x = fmix32(&b, op(&b, HLO_OP_XOR, x, seed_half(&b, seed, 0)));
  x = fmix32(&b, op(&b, HLO_OP_XOR, x, seed_half(&b, seed, 1)));
  /* The top 24 bits as a float in [0, 1): exact in f32. */
  hlo_dtype dtype = (hlo_dtype)node->dtype, work = dtype == HLO_F64 ? HLO_F64 : HLO_F32;
  x = op(&b, HLO_OP_SHIFT_RIGHT_LOGICAL, x, u32(&b, 8));
  x = x ? hlo_build_convert(comp, x, work, diag) : NULL;
  hlo_instr *scale = hlo_build_constant_scalar(comp, work, (node->scalar[1] - node->scalar[0]) * 0x1p-24, diag);
  hlo_instr *low = hlo_build_constant_scalar(comp, work, node->scalar[0], diag);
  if (!x || !scale || !low) return NULL;
  x = op(&b, HLO_OP_ADD, op(&b, HLO_OP_MULTIPLY, x, hlo_build_broadcast(comp, scale, 1, &n, NULL, diag)),
         hlo_build_broadcast(comp, low, 1, &n, NULL, diag));
  x = cap_lower_convert(comp, x, dtype, diag);
  return x ? hlo_build_reshape(comp, x, node->rank, node->dims, diag) : NULL;
}
