/* Nodes: allocation, reference counting and the incremental hash. This is the per-op hot
 * path of tracing, so a node is one allocation (node_pool.c) and its hash one XXH3 call over a buffer
 * built in place. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <xxhash.h>

#include "capture.h"

static _Thread_local cap_ctx thread_ctx;

cap_ctx *cap_ctx_current(void) { return &thread_ctx; }

uint64_t cap_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

cap_node *cap_node_new(cap_op op, int sub, int operand_count, cap_node *const *operands, int attr_count) {
  cap_node *node = cap_pool_node(attr_count);
  if (!node) return NULL;
  /* Not memset whole: dims and attrs are filled by the caller, and zeroing ~200 bytes per
   * op shows up in the trace cost. The fields read before that are set here. */
  atomic_init(&node->refs, 1);
  node->op = (uint16_t)op;
  node->sub = (uint16_t)sub;
  node->dtype = HLO_INVALID;
  node->rank = 0;
  node->state = CAP_PENDING;
  node->reported = 0;
  atomic_init(&node->data_hash_known, false);
  node->operand_count = operand_count;
  node->attr_count = attr_count;
  node->scalar[0] = node->scalar[1] = 0;
  node->value = NULL;
  node->error = NULL;
  node->walk = 0;
  node->walk_index = -1;
  node->trace_id = 0;
  node->trace_sym = -1;
  node->operands = node->inline_operands;
  if (operand_count > CAP_INLINE_OPERANDS) {
    node->operands = hlo_malloc(sizeof(cap_node *) * (size_t)operand_count);
    if (!node->operands) {
      cap_pool_free_node(node);
      return NULL;
    }
  }
  for (int i = 0; i < operand_count; i++) node->operands[i] = cap_node_retain(operands[i]);
  return node;
}

/* Little-endian on every host, so keys agree across machines. */
static unsigned char *put64(unsigned char *p, uint64_t v) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  v = __builtin_bswap64(v);
#endif
  memcpy(p, &v, 8);
  return p + 8;
}

static cache_key digest(const unsigned char *buf, size_t len) {
  XXH128_hash_t h = XXH3_128bits_withSeed(buf, len, CAP_HASH_FORMAT);
  cache_key key = {h.low64, h.high64};
  return key;
}

cache_key cap_data_hash(hlo_dtype dtype, int rank, const int64_t *dims) {
  unsigned char buf[8 + 8 * HLO_MAX_RANK], *p = buf;
  memset(buf, 0, 8);
  p[0] = 'D';
  p[1] = (unsigned char)dtype;
  p[2] = (unsigned char)rank;
  p += 8;
  for (int i = 0; i < rank; i++) p = put64(p, (uint64_t)dims[i]);
  return digest(buf, (size_t)(p - buf));
}

cache_key cap_operand_hash(const cap_node *node) {
  if (node->state != CAP_READY) return node->hash;
  cap_node *n = (cap_node *)node; /* data_hash is a cache, filled by whoever reads first */
  if (atomic_load_explicit(&n->data_hash_known, memory_order_acquire))
    return (cache_key){atomic_load_explicit(&n->data_hash[0], memory_order_relaxed),
                       atomic_load_explicit(&n->data_hash[1], memory_order_relaxed)};
  cache_key key = cap_data_hash((hlo_dtype)n->dtype, n->rank, n->dims);
  atomic_store_explicit(&n->data_hash[0], key.lo, memory_order_relaxed);
  atomic_store_explicit(&n->data_hash[1], key.hi, memory_order_relaxed);
  atomic_store_explicit(&n->data_hash_known, true, memory_order_release);
  return key;
}

/* Little-endian words on every host (a no-op on the usual ones). */
static inline uint64_t le64(uint64_t v) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  v = __builtin_bswap64(v);
#endif
  return v;
}

/* The canonical form, as 64-bit words: a header (op, sub, dtype, rank, counts), dims,
 * attrs, the scalars' bits and the operands' hashes. hlo_dtype numbers are stable within
 * a CAP_HASH_FORMAT. Built in place as words because this runs once per traced op. */
bool cap_node_hash(const cap_node *node, cache_key *key) {
  enum { SMALL = 128 };
  size_t words = 2 + (size_t)node->rank + (size_t)node->attr_count + 2 + 2 * (size_t)node->operand_count;
  uint64_t small[SMALL];
  uint64_t *w = words <= SMALL ? small : hlo_malloc(sizeof(uint64_t) * words);
  if (!w) return false;
  size_t k = 0;
  w[k++] = le64((uint64_t)'N' | (uint64_t)node->op << 8 | (uint64_t)node->sub << 24 | (uint64_t)node->dtype << 40 |
                (uint64_t)node->rank << 48);
  w[k++] = le64((uint64_t)node->operand_count << 32 | (uint32_t)node->attr_count);
  for (int i = 0; i < node->rank; i++) w[k++] = le64((uint64_t)node->dims[i]);
  for (int i = 0; i < node->attr_count; i++) w[k++] = le64((uint64_t)node->attrs[i]);
  uint64_t bits[2];
  memcpy(bits, node->scalar, sizeof bits);
  w[k++] = le64(bits[0]);
  w[k++] = le64(bits[1]);
  for (int i = 0; i < node->operand_count; i++) {
    cache_key h = cap_operand_hash(node->operands[i]);
    w[k++] = le64(h.lo);
    w[k++] = le64(h.hi);
  }
  *key = digest((const unsigned char *)w, k * sizeof(uint64_t));
  if (w != small) free(w);
  return true;
}

bool cap_node_finish(cap_node *node) { return cap_node_hash(node, &node->hash); }

cap_node *cap_node_retain(cap_node *node) {
  if (node) atomic_fetch_add_explicit(&node->refs, 1, memory_order_relaxed);
  return node;
}

/* Iterative, so that dropping the last handle of a long chain of pending ops cannot
 * overflow the stack: nodes to free are chained through their (released) value field. */
static void push_dead(cap_node *node, cap_node **stack) {
  if (node->value) rt_value_release(node->value);
  node->value = (rt_value *)*stack;
  *stack = node;
}

void cap_node_release(cap_node *node) {
  if (!node || atomic_fetch_sub_explicit(&node->refs, 1, memory_order_acq_rel) != 1) return;
  cap_node *stack = NULL;
  push_dead(node, &stack);
  while (stack) {
    cap_node *dead = stack;
    stack = (cap_node *)dead->value;
    for (int i = 0; i < dead->operand_count; i++) {
      cap_node *operand = dead->operands[i];
      if (operand && atomic_fetch_sub_explicit(&operand->refs, 1, memory_order_acq_rel) == 1)
        push_dead(operand, &stack);
    }
    if (dead->operands != dead->inline_operands) free(dead->operands);
    free(dead->error);
    cap_pool_free_node(dead);
  }
}

void cap_node_set_value(cap_node *node, rt_value *value) {
  node->value = value;
  for (int i = 0; i < node->operand_count; i++) cap_node_release(node->operands[i]);
  if (node->operands != node->inline_operands) free(node->operands);
  node->operands = node->inline_operands;
  node->operand_count = 0;
  /* Release ordering: a thread that later sees READY (through a handle passed to it)
   * sees the value too. */
  atomic_thread_fence(memory_order_release);
  node->state = CAP_READY;
}

cap_node *cap_node_stand_in(uint8_t dtype, int rank, const int64_t *dims) {
  cap_node *node = cap_node_new(CAP_DATA, 0, 0, NULL, 0);
  if (!node) return NULL;
  node->dtype = dtype;
  node->rank = (uint8_t)rank;
  memcpy(node->dims, dims, sizeof(int64_t) * (size_t)rank);
  cap_node_set_value(node, NULL);
  return node;
}

cap_node *cap_node_data(rt_value *value) {
  cap_node *node = cap_node_new(CAP_DATA, 0, 0, NULL, 0);
  if (!node) {
    rt_value_release(value);
    return NULL;
  }
  node->dtype = (uint8_t)value->shape.dtype;
  node->rank = (uint8_t)value->shape.rank;
  memcpy(node->dims, value->shape.dims, sizeof(int64_t) * (size_t)value->shape.rank);
  cap_node_set_value(node, value);
  node->hash = (cache_key){0, 0}; /* never read: users of a READY node see cap_operand_hash */
  return node;
}

cap_node *cap_node_error(const char *format, ...) {
  cap_node *node = cap_node_new(CAP_DATA, 0, 0, NULL, 0);
  if (!node) return NULL;
  char message[1024];
  va_list ap;
  va_start(ap, format);
  vsnprintf(message, sizeof message, format, ap);
  va_end(ap);
  node->error = hlo_strdup(message);
  if (!node->error) {
    cap_node_release(node);
    return NULL;
  }
  node->state = CAP_ERROR;
  node->hash = cap_data_hash(HLO_INVALID, 0, NULL);
  return node;
}

hlo_shape cap_node_shape(const cap_node *node) {
  return hlo_shape_make((hlo_dtype)node->dtype, node->rank, node->dims);
}

const char *cap_node_shape_str(const cap_node *node, char *buffer, int size) {
  hlo_shape shape = cap_node_shape(node);
  return hlo_shape_str(&shape, buffer, size);
}
