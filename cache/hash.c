/* Canonical hashing. Every hash is XXH3-128, seeded with CACHE_HASH_FORMAT, over a byte
 * string built by the put_* functions below. The byte string is the canonical form:
 *
 *   - integers are 8 bytes little-endian whatever the host, flags and tags 1 byte;
 *   - every variable-length field (strings, lists, data) is preceded by its length, every
 *     optional one by a presence byte, and attributes are (tag, value) pairs written only
 *     when not at their default: no two different field sequences serialize alike;
 *   - element types and opcodes are written by name, because their enums are sorted
 *     alphabetically and adding one would renumber the rest;
 *   - each hash starts with a domain byte ('I', 'C', 'M') so an instruction can never
 *     collide with a computation by construction.
 *
 * Change anything here and the pinned key in tests/test_hash.c changes: bump
 * CACHE_HASH_FORMAT so on-disk caches written by older builds stop matching. */
#include "cache.h"

#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

/* ---- the hasher: a byte sink in front of XXH3 ---- */

/* Fields go to a small buffer; most instructions fit in it whole and are hashed in one shot.
 * Longer inputs (big constants, huge operand lists) spill into XXH3's streaming state, which
 * gives the same digest however the input is split. That state comes from XXH3_createState:
 * its layout belongs to the shared library, and a stack copy would need XXH3_INITSTATE
 * before a seeded reset or it hashes with a stale secret. */
enum { HASHER_BUFFER = 512 };

typedef struct hasher {
  size_t len;
  XXH3_state_t *state; /* NULL until the buffer first fills */
  bool failed;         /* out of memory, sticky: the digest means nothing */
  unsigned char buf[HASHER_BUFFER];
} hasher;

static void flush(hasher *h) {
  if (!h->state && !h->failed) {
    h->state = XXH3_createState();
    if (h->state) XXH3_128bits_reset_withSeed(h->state, CACHE_HASH_FORMAT);
    else h->failed = true;
  }
  if (h->state) XXH3_128bits_update(h->state, h->buf, h->len);
  h->len = 0;
}

static void put_raw(hasher *h, const void *data, size_t size) {
  if (size == 0) return;
  if (h->len + size > HASHER_BUFFER) {
    flush(h);
    if (size > HASHER_BUFFER / 2) { /* big blobs (constants) bypass the buffer */
      if (h->state) XXH3_128bits_update(h->state, data, size);
      return;
    }
  }
  memcpy(h->buf + h->len, data, size);
  h->len += size;
}

/* Room for a small fixed-size field, written in place: most fields are 1 or 8 bytes, and a
 * memcpy call per field would cost more than the hashing. */
static unsigned char *reserve(hasher *h, size_t size) {
  if (h->len + size > HASHER_BUFFER) flush(h);
  unsigned char *out = h->buf + h->len;
  h->len += size;
  return out;
}

static void put_u8(hasher *h, unsigned value) { *reserve(h, 1) = (unsigned char)value; }

/* Little-endian bytes on every host; one store on the usual ones. */
static void put_int(hasher *h, int64_t value) {
  uint64_t bits = (uint64_t)value;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  bits = __builtin_bswap64(bits);
#endif
  memcpy(reserve(h, 8), &bits, 8);
}

static void hasher_start(hasher *h, char domain) {
  h->len = 0;
  h->state = NULL;
  h->failed = false;
  put_u8(h, (unsigned char)domain);
}

/* The digest; *failed set when memory ran out on the way. */
static cache_key hasher_finish(hasher *h, bool *failed) {
  XXH128_hash_t digest;
  if (h->failed) *failed = true;
  if (h->state) {
    XXH3_128bits_update(h->state, h->buf, h->len);
    digest = XXH3_128bits_digest(h->state);
    XXH3_freeState(h->state);
    h->state = NULL;
  } else {
    digest = XXH3_128bits_withSeed(h->buf, h->len, CACHE_HASH_FORMAT);
  }
  cache_key key = {digest.low64, digest.high64};
  return key;
}

/* ---- fields ---- */

static void put_str(hasher *h, const char *text) {
  if (!text) {
    put_u8(h, 0);
    return;
  }
  size_t len = strlen(text);
  put_u8(h, 1);
  put_int(h, (int64_t)len);
  put_raw(h, text, len);
}

static void put_ints(hasher *h, hlo_ints ints) {
  int count = ints.values && ints.count > 0 ? ints.count : 0;
  put_int(h, count);
  for (int i = 0; i < count; i++) put_int(h, ints.values[i]);
}

static void put_key(hasher *h, cache_key key) {
  put_int(h, (int64_t)key.lo);
  put_int(h, (int64_t)key.hi);
}

/* Ranks come from text and builders; a corrupt one must not send us past the arrays. */
static int clamp_rank(int rank) {
  return rank < 0 ? 0 : rank > HLO_MAX_RANK ? HLO_MAX_RANK : rank;
}

static void put_shape(hasher *h, const hlo_shape *shape) {
  put_str(h, hlo_dtype_name(shape->dtype));
  if (shape->dtype == HLO_TUPLE) {
    int count = shape->tuple && shape->tuple_count > 0 ? shape->tuple_count : 0;
    put_int(h, count);
    for (int i = 0; i < count; i++) put_shape(h, &shape->tuple[i]);
    return;
  }
  int rank = clamp_rank(shape->rank);
  put_int(h, rank);
  for (int i = 0; i < rank; i++) {
    put_int(h, shape->dims[i]);
    put_u8(h, shape->dim_kind[i]);
  }
  /* A layout written out as the default is the same program as no layout at all. */
  bool custom = shape->layout_extra != NULL;
  for (int i = 0; i < rank; i++)
    if (shape->minor_to_major[i] != rank - 1 - i) custom = true;
  put_u8(h, custom);
  if (custom) {
    for (int i = 0; i < rank; i++) put_int(h, shape->minor_to_major[i]);
    put_str(h, shape->layout_extra);
  }
}

/* Array bytes in little-endian element order, so a big-endian host hashes what a
 * little-endian one does. */
static void put_data(hasher *h, const hlo_shape *shape, const void *data) {
  int64_t size = data ? hlo_shape_bytes(shape) : 0;
  put_u8(h, data != NULL);
  put_int(h, size);
  if (size <= 0) return;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  size_t width = hlo_dtype_size(shape->dtype);
  const unsigned char *bytes = data;
  for (int64_t at = 0; at < size; at += (int64_t)width)
    for (size_t b = width; b-- > 0;) put_u8(h, bytes[at + (int64_t)b]);
#else
  put_raw(h, data, (size_t)size);
#endif
}

/* Elided constants ({...}) carry data the parser filled from their names; that data is what
 * a compiled program would embed, so it is hashed like any other. */
static void put_literal(hasher *h, const hlo_literal *literal) {
  put_u8(h, literal != NULL);
  if (!literal) return;
  put_shape(h, &literal->shape);
  put_u8(h, literal->elided);
  put_str(h, literal->raw_text);
  if (literal->shape.dtype == HLO_TUPLE) {
    int count = literal->shape.tuple_count > 0 ? literal->shape.tuple_count : 0;
    put_int(h, count);
    for (int i = 0; i < count; i++)
      put_literal(h, literal->elements ? &literal->elements[i] : NULL);
    return;
  }
  put_data(h, &literal->shape, literal->data);
}

static void put_window(hasher *h, const hlo_window *window) {
  int rank = clamp_rank(window->rank);
  put_int(h, rank);
  for (int i = 0; i < rank; i++) {
    const hlo_window_dim *d = &window->dims[i];
    put_int(h, d->size);
    put_int(h, d->stride);
    put_int(h, d->pad_low);
    put_int(h, d->pad_high);
    put_int(h, d->lhs_dilate);
    put_int(h, d->rhs_dilate);
    put_u8(h, d->reversal);
  }
}

static void put_conv(hasher *h, const hlo_conv_dims *conv) {
  int n = clamp_rank(conv->spatial_count);
  put_int(h, n);
  put_int(h, conv->input_batch);
  put_int(h, conv->input_feature);
  for (int i = 0; i < n; i++) put_int(h, conv->input_spatial[i]);
  put_int(h, conv->kernel_input_feature);
  put_int(h, conv->kernel_output_feature);
  for (int i = 0; i < n; i++) put_int(h, conv->kernel_spatial[i]);
  put_int(h, conv->output_batch);
  put_int(h, conv->output_feature);
  for (int i = 0; i < n; i++) put_int(h, conv->output_spatial[i]);
}

static void put_dot(hasher *h, const hlo_dot_dims *dot) {
  put_ints(h, dot->lhs_batch);
  put_ints(h, dot->lhs_contracting);
  put_ints(h, dot->rhs_batch);
  put_ints(h, dot->rhs_contracting);
}

static void put_gather(hasher *h, const hlo_gather_dims *g) {
  put_ints(h, g->offset_dims);
  put_ints(h, g->collapsed_slice_dims);
  put_ints(h, g->start_index_map);
  put_ints(h, g->operand_batching_dims);
  put_ints(h, g->start_indices_batching_dims);
  put_int(h, g->index_vector_dim);
  put_u8(h, g->indices_are_sorted);
}

static void put_scatter(hasher *h, const hlo_scatter_dims *s) {
  put_ints(h, s->update_window_dims);
  put_ints(h, s->inserted_window_dims);
  put_ints(h, s->scatter_dims_to_operand_dims);
  put_ints(h, s->input_batching_dims);
  put_ints(h, s->scatter_indices_batching_dims);
  put_int(h, s->index_vector_dim);
  put_u8(h, s->indices_are_sorted);
  put_u8(h, s->unique_indices);
}

static void put_padding(hasher *h, const hlo_padding *padding) {
  int rank = clamp_rank(padding->rank);
  put_int(h, rank);
  for (int i = 0; i < rank; i++) {
    put_int(h, padding->low[i]);
    put_int(h, padding->high[i]);
    put_int(h, padding->interior[i]);
  }
}

/* ---- raw attributes ---- */

typedef enum raw_rule { RAW_KEEP, RAW_DROP, RAW_COUNT } raw_rule;

/* What a verbatim attribute contributes. Debug information is dropped because it cannot
 * change results; called-computation attributes are dropped because the computations
 * themselves are hashed through instr->called (their names must not leak in); control
 * predecessors name instructions, so only how many there are is kept. Everything else,
 * backend_config, sharding and frontend_attributes included, is kept verbatim: a key that
 * misses is slow, a key that wrongly hits gives wrong answers. */
static raw_rule raw_attr_rule(const char *name) {
  static const char *const dropped[] = {
      "metadata", "origin", "statistics",
      "to_apply", "calls", "condition", "body", "select", "scatter",
      "true_computation", "false_computation", "branch_computations", "called_computations",
  };
  for (size_t i = 0; i < sizeof dropped / sizeof dropped[0]; i++)
    if (strcmp(name, dropped[i]) == 0) return RAW_DROP;
  if (strcmp(name, "control-predecessors") == 0) return RAW_COUNT;
  return RAW_KEEP;
}

/* Names in a "{%a, %b}" list: the commas plus one, or zero for "{}". */
static int64_t count_list_items(const char *value) {
  int64_t items = 0;
  bool any = false;
  for (const char *c = value; *c; c++) {
    if (*c == ',') items++;
    else if (*c != '{' && *c != '}' && *c != ' ') any = true;
  }
  return any ? items + 1 : 0;
}

static int raw_attr_order(const hlo_raw_attr *a, const hlo_raw_attr *b) {
  int order = strcmp(a->name, b->name);
  if (order) return order;
  return strcmp(a->value ? a->value : "", b->value ? b->value : "");
}

/* Sorted by name, so the text's attribute order (printer versus XLA) cannot matter. With a
 * tag, writes nothing at all when no attribute is kept (metadata alone is no attribute). */
static void put_raw_attrs(hasher *h, int tag, int count, const hlo_raw_attr *attrs) {
  enum { INLINE_ATTRS = 32 };
  const hlo_raw_attr *inline_sorted[INLINE_ATTRS];
  const hlo_raw_attr **sorted = inline_sorted;
  if (!attrs || count < 0) count = 0;
  if (count > INLINE_ATTRS) {
    sorted = hlo_malloc(sizeof *sorted * (size_t)count);
    if (!sorted) {
      h->failed = true;
      return;
    }
  }
  int kept = 0;
  for (int i = 0; i < count; i++) {
    if (!attrs[i].name || raw_attr_rule(attrs[i].name) == RAW_DROP) continue;
    int at = kept++;
    while (at > 0 && raw_attr_order(sorted[at - 1], &attrs[i]) > 0) {
      sorted[at] = sorted[at - 1];
      at--;
    }
    sorted[at] = &attrs[i];
  }
  if (tag && kept) put_u8(h, (unsigned)tag);
  if (!tag || kept) put_int(h, kept);
  for (int i = 0; i < kept; i++) {
    put_str(h, sorted[i]->name);
    if (raw_attr_rule(sorted[i]->name) == RAW_COUNT)
      put_int(h, count_list_items(sorted[i]->value ? sorted[i]->value : ""));
    else
      put_str(h, sorted[i]->value);
  }
  if (sorted != inline_sorted) free(sorted);
}

/* ---- instructions ---- */

/* Attribute fields are written as (tag, value) pairs, only when not at their default, in tag
 * order, closed by ATTR_END. Every field of hlo_instr is considered for every opcode, not just
 * the fields the opcode uses, so a field an opcode starts using can never be left out of its
 * key by accident; and a field added to hlo_instr later leaves existing keys alone as long as
 * it sits at its default. Tags are part of the canonical form: never renumber them. */
enum attr_tag {
  ATTR_END = 0, ATTR_PARAMETER_NUMBER, ATTR_INDEX, ATTR_DIMENSIONS, ATTR_SLICE_STARTS,
  ATTR_SLICE_LIMITS, ATTR_SLICE_STRIDES, ATTR_PADDING, ATTR_WINDOW, ATTR_CONV,
  ATTR_FEATURE_GROUPS, ATTR_BATCH_GROUPS, ATTR_DOT, ATTR_GATHER, ATTR_GATHER_SLICE_SIZES,
  ATTR_SCATTER, ATTR_DIRECTION, ATTR_COMPARE_TYPE, ATTR_EPSILON, ATTR_IS_STABLE,
  ATTR_RNG_ALGORITHM, ATTR_RNG_DISTRIBUTION, ATTR_EXPONENT_BITS, ATTR_MANTISSA_BITS,
  ATTR_LITERAL, ATTR_CUSTOM_CALL_TARGET, ATTR_FUSION_KIND, ATTR_IS_COMPOSITE,
  ATTR_COMPOSITE_NAME, ATTR_RAW,
};

static void tag_int(hasher *h, enum attr_tag tag, int64_t value, int64_t default_value) {
  if (value == default_value) return;
  put_u8(h, tag);
  put_int(h, value);
}

static void tag_ints(hasher *h, enum attr_tag tag, hlo_ints ints) {
  if (!ints.values || ints.count <= 0) return;
  put_u8(h, tag);
  put_ints(h, ints);
}

static void tag_str(hasher *h, enum attr_tag tag, const char *text) {
  if (!text) return;
  put_u8(h, tag);
  put_str(h, text);
}

static void put_attributes(hasher *h, const hlo_instr *instr) {
  tag_int(h, ATTR_PARAMETER_NUMBER, instr->parameter_number, 0);
  tag_int(h, ATTR_INDEX, instr->index, 0);
  tag_ints(h, ATTR_DIMENSIONS, instr->dimensions);
  tag_ints(h, ATTR_SLICE_STARTS, instr->slice_starts);
  tag_ints(h, ATTR_SLICE_LIMITS, instr->slice_limits);
  tag_ints(h, ATTR_SLICE_STRIDES, instr->slice_strides);
  if (instr->padding) put_u8(h, ATTR_PADDING), put_padding(h, instr->padding);
  if (instr->window) put_u8(h, ATTR_WINDOW), put_window(h, instr->window);
  if (instr->conv) put_u8(h, ATTR_CONV), put_conv(h, instr->conv);
  tag_int(h, ATTR_FEATURE_GROUPS, instr->feature_group_count, 1);
  tag_int(h, ATTR_BATCH_GROUPS, instr->batch_group_count, 1);
  if (instr->dot) put_u8(h, ATTR_DOT), put_dot(h, instr->dot);
  if (instr->gather) put_u8(h, ATTR_GATHER), put_gather(h, instr->gather);
  tag_ints(h, ATTR_GATHER_SLICE_SIZES, instr->gather_slice_sizes);
  if (instr->scatter) put_u8(h, ATTR_SCATTER), put_scatter(h, instr->scatter);
  tag_int(h, ATTR_DIRECTION, instr->direction, HLO_DIR_NONE);
  tag_int(h, ATTR_COMPARE_TYPE, instr->compare_type, HLO_CMP_DEFAULT);
  uint64_t epsilon_bits; /* bits, not value: -0.0 and NaN payloads are distinct programs */
  memcpy(&epsilon_bits, &instr->epsilon, sizeof epsilon_bits);
  tag_int(h, ATTR_EPSILON, (int64_t)epsilon_bits, 0);
  tag_int(h, ATTR_IS_STABLE, instr->is_stable, 0);
  tag_int(h, ATTR_RNG_ALGORITHM, instr->rng_algorithm, HLO_RNG_DEFAULT);
  tag_int(h, ATTR_RNG_DISTRIBUTION, instr->rng_distribution, HLO_RNG_UNIFORM);
  tag_int(h, ATTR_EXPONENT_BITS, instr->exponent_bits, 0);
  tag_int(h, ATTR_MANTISSA_BITS, instr->mantissa_bits, 0);
  if (instr->literal) put_u8(h, ATTR_LITERAL), put_literal(h, instr->literal);
  tag_str(h, ATTR_CUSTOM_CALL_TARGET, instr->custom_call_target);
  tag_str(h, ATTR_FUSION_KIND, instr->fusion_kind);
  tag_int(h, ATTR_IS_COMPOSITE, instr->is_composite, 0);
  tag_str(h, ATTR_COMPOSITE_NAME, instr->composite_name);
  put_raw_attrs(h, ATTR_RAW, instr->raw_attr_count, instr->raw_attrs);
  put_u8(h, ATTR_END);
}

/* Stand-ins where the IR is broken (a missing operand, a forward reference, a call cycle).
 * They keep hashing total and deterministic; the verifier reports the actual problem. */
static cache_key marker_key(const char *what) {
  hasher h;
  hasher_start(&h, 'X');
  put_str(&h, what);
  bool failed = false; /* a short string stays in the buffer: nothing to allocate */
  return hasher_finish(&h, &failed);
}

/* Counts that tolerate a NULL array, so a half-built instruction cannot crash a hash. */
static int operand_count(const hlo_instr *instr) {
  return instr->operands && instr->operand_count > 0 ? instr->operand_count : 0;
}

static int called_count(const hlo_instr *instr) {
  return instr->called && instr->called_count > 0 ? instr->called_count : 0;
}

/* operand_keys may be NULL only if the caller had none to give. */
static cache_key hash_instr(const hlo_instr *instr, const cache_key *called_keys,
                            const cache_key *operand_keys, bool *failed) {
  hasher h;
  hasher_start(&h, 'I');
  put_str(&h, hlo_opcode_name(instr->opcode));
  put_shape(&h, &instr->shape);
  put_attributes(&h, instr);
  int called = called_count(instr);
  put_int(&h, called);
  for (int i = 0; i < called; i++) put_key(&h, called_keys[i]);
  int operands = operand_count(instr);
  put_int(&h, operands);
  for (int i = 0; i < operands; i++)
    put_key(&h, operand_keys ? operand_keys[i] : marker_key("missing operand key"));
  return hasher_finish(&h, failed);
}

/* ---- computations ---- */

/* State for one hashing call: every computation's key, memoized by comp->id so a callee
 * shared by many callers is hashed once, plus scratch arrays reused across computations. */
typedef struct hash_ctx {
  const hlo_module *module;
  cache_key *comp_keys;
  unsigned char *comp_state; /* 0 not seen, 1 being hashed (on the stack), 2 done */
  cache_key *instr_keys;
  unsigned char *used;
  int instr_capacity;
  cache_key *scratch; /* operand and called keys of one instruction */
  int scratch_capacity;
  bool failed; /* out of memory: every key since is a stand-in */
} hash_ctx;

/* Grows *items to size bytes; false (ctx->failed set, *items as it was) when memory runs out. */
static bool ctx_grow(hash_ctx *ctx, void *items, size_t size) {
  void *old;
  memcpy(&old, items, sizeof old);
  void *grown = hlo_realloc(old, size ? size : 1);
  if (!grown) {
    ctx->failed = true;
    return false;
  }
  memcpy(items, &grown, sizeof grown);
  return true;
}

static void ctx_init(hash_ctx *ctx, const hlo_module *module) {
  memset(ctx, 0, sizeof *ctx);
  ctx->module = module;
  size_t count = module && module->comp_count > 0 ? (size_t)module->comp_count : 0;
  ctx_grow(ctx, &ctx->comp_keys, sizeof(cache_key) * count);
  ctx->comp_state = hlo_calloc(count + 1, 1);
  if (!ctx->comp_state) ctx->failed = true;
}

static void ctx_free(hash_ctx *ctx) {
  free(ctx->comp_keys);
  free(ctx->comp_state);
  free(ctx->instr_keys);
  free(ctx->used);
  free(ctx->scratch);
}

/* Room for count keys; ctx->failed set when memory runs out. */
static cache_key *ctx_scratch(hash_ctx *ctx, int count) {
  if (count > ctx->scratch_capacity) {
    if (!ctx_grow(ctx, &ctx->scratch, sizeof(cache_key) * (size_t)count)) return NULL;
    ctx->scratch_capacity = count;
  }
  return ctx->scratch;
}

/* comp->id indexes the memo only if the module really holds comp there. */
static bool comp_registered(const hash_ctx *ctx, const hlo_comp *comp) {
  return comp && ctx->module && comp->module == ctx->module && comp->id >= 0 &&
         comp->id < ctx->module->comp_count && ctx->module->comps[comp->id] == comp;
}

/* A callee's key, which comp_walk guarantees is done (or on the stack, for recursion). */
static cache_key callee_key(const hash_ctx *ctx, const hlo_comp *callee) {
  if (!comp_registered(ctx, callee)) return marker_key("foreign computation");
  if (ctx->comp_state[callee->id] != 2) return marker_key("recursive call");
  return ctx->comp_keys[callee->id];
}

static cache_key operand_key(const hash_ctx *ctx, const hlo_comp *comp, int user,
                             const hlo_instr *operand) {
  if (!operand) return marker_key("missing operand");
  if (operand->parent != comp || operand->id < 0 || operand->id >= user ||
      comp->instrs[operand->id] != operand)
    return marker_key("operand out of order");
  return ctx->instr_keys[operand->id];
}

/* Hashes one computation whose callees are all done: one forward pass, since instrs are
 * topologically ordered, then parameters, root and unused instructions. */
static cache_key hash_comp_body(hash_ctx *ctx, const hlo_comp *comp) {
  int count = comp->instr_count > 0 ? comp->instr_count : 0;
  if (count > ctx->instr_capacity) {
    if (!ctx_grow(ctx, &ctx->instr_keys, sizeof(cache_key) * (size_t)count) ||
        !ctx_grow(ctx, &ctx->used, (size_t)count))
      return marker_key("out of memory");
    ctx->instr_capacity = count;
  }
  if (count) memset(ctx->used, 0, (size_t)count);
  for (int i = 0; i < count; i++) {
    const hlo_instr *instr = comp->instrs[i];
    int operands = operand_count(instr);
    int called = called_count(instr);
    cache_key *keys = ctx_scratch(ctx, operands + called);
    if (ctx->failed) return marker_key("out of memory");
    for (int c = 0; c < called; c++) keys[c] = callee_key(ctx, instr->called[c]);
    for (int o = 0; o < operands; o++) {
      const hlo_instr *operand = instr->operands[o];
      keys[called + o] = operand_key(ctx, comp, i, operand);
      if (operand && operand->parent == comp && operand->id >= 0 && operand->id < count)
        ctx->used[operand->id] = 1;
    }
    ctx->instr_keys[i] = hash_instr(instr, keys, keys + called, &ctx->failed);
  }

  hasher h;
  hasher_start(&h, 'C');
  int params = comp->params && comp->param_count > 0 ? comp->param_count : 0;
  put_int(&h, params);
  for (int p = 0; p < params; p++) {
    const hlo_instr *param = comp->params[p];
    put_key(&h, param ? operand_key(ctx, comp, count, param) : marker_key("missing parameter"));
  }
  const hlo_instr *root = comp->root;
  put_key(&h, root ? operand_key(ctx, comp, count, root) : marker_key("no root"));
  /* Instructions nothing uses: normally dead code, but a dead send or outfeed still acts. */
  int unused = 0;
  for (int i = 0; i < count; i++)
    if (!ctx->used[i] && comp->instrs[i] != root && comp->instrs[i]->opcode != HLO_OP_PARAMETER)
      unused++;
  put_int(&h, unused);
  for (int i = 0; i < count; i++)
    if (!ctx->used[i] && comp->instrs[i] != root && comp->instrs[i]->opcode != HLO_OP_PARAMETER)
      put_key(&h, ctx->instr_keys[i]);
  return hasher_finish(&h, &ctx->failed);
}

/* Hashes comp and, first, everything it calls, with an explicit stack instead of recursion:
 * call chains are usually short but nothing bounds them. Each frame remembers where its
 * scan for unhashed callees stopped, so the walk is linear in the number of call sites. */
typedef struct comp_frame {
  const hlo_comp *comp;
  int instr, called;
} comp_frame;

static cache_key comp_walk(hash_ctx *ctx, const hlo_comp *start) {
  if (ctx->failed) return marker_key("out of memory");
  if (!comp_registered(ctx, start)) return marker_key("foreign computation");
  if (ctx->comp_state[start->id] == 2) return ctx->comp_keys[start->id];
  int capacity = ctx->module->comp_count + 1;
  comp_frame *stack = NULL;
  if (!ctx_grow(ctx, &stack, sizeof(comp_frame) * (size_t)capacity)) return marker_key("out of memory");
  int depth = 0;
  stack[0] = (comp_frame){start, 0, 0};
  ctx->comp_state[start->id] = 1;
  while (depth >= 0) {
    comp_frame *frame = &stack[depth];
    const hlo_comp *pushed = NULL;
    while (!pushed && frame->instr < frame->comp->instr_count) {
      const hlo_instr *instr = frame->comp->instrs[frame->instr];
      if (frame->called >= called_count(instr)) {
        frame->instr++;
        frame->called = 0;
        continue;
      }
      const hlo_comp *callee = instr->called[frame->called++];
      if (comp_registered(ctx, callee) && ctx->comp_state[callee->id] == 0) pushed = callee;
    }
    if (pushed) {
      ctx->comp_state[pushed->id] = 1;
      stack[++depth] = (comp_frame){pushed, 0, 0};
      continue;
    }
    ctx->comp_keys[frame->comp->id] = hash_comp_body(ctx, frame->comp);
    ctx->comp_state[frame->comp->id] = 2;
    depth--;
  }
  free(stack);
  return ctx->comp_keys[start->id];
}

/* ---- public ---- */

bool cache_hash_instr(const hlo_instr *instr, const cache_key *operand_keys, cache_key *key) {
  bool failed = false;
  int called = called_count(instr);
  if (called == 0) { /* capture's common case */
    *key = hash_instr(instr, NULL, operand_keys, &failed);
    return !failed;
  }
  const hlo_module *module = NULL;
  if (instr->parent) module = instr->parent->module;
  else if (instr->called[0]) module = instr->called[0]->module;
  hash_ctx ctx;
  ctx_init(&ctx, module);
  cache_key *called_keys = NULL;
  if (ctx_grow(&ctx, &called_keys, sizeof(cache_key) * (size_t)called)) {
    for (int c = 0; c < called; c++) {
      comp_walk(&ctx, instr->called[c]);
      called_keys[c] = ctx.failed ? marker_key("out of memory") : callee_key(&ctx, instr->called[c]);
    }
    *key = hash_instr(instr, called_keys, operand_keys, &ctx.failed);
  }
  free(called_keys);
  failed = ctx.failed;
  ctx_free(&ctx);
  return !failed;
}

bool cache_hash_comp(const hlo_comp *comp, cache_key *key) {
  hash_ctx ctx;
  ctx_init(&ctx, comp->module);
  *key = comp_walk(&ctx, comp);
  bool failed = ctx.failed;
  ctx_free(&ctx);
  return !failed;
}

bool cache_hash_module(const hlo_module *module, cache_key *key) {
  hash_ctx ctx;
  ctx_init(&ctx, module);
  cache_key entry = module->entry ? comp_walk(&ctx, module->entry) : marker_key("no entry");
  bool failed = ctx.failed;
  ctx_free(&ctx);

  hasher h;
  hasher_start(&h, 'M');
  put_key(&h, entry);
  put_raw_attrs(&h, 0, module->raw_attr_count, module->raw_attrs);
  *key = hasher_finish(&h, &failed);
  return !failed;
}

void cache_key_hex(cache_key key, char out[33]) {
  static const char digits[] = "0123456789abcdef";
  for (int i = 0; i < 16; i++) {
    out[i] = digits[(key.hi >> (60 - 4 * i)) & 15];
    out[16 + i] = digits[(key.lo >> (60 - 4 * i)) & 15];
  }
  out[32] = 0;
}
