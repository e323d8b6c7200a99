/* Per-thread caches of freed nodes and handles. Tracing allocates a node and a handle per
 * op and a training step frees as many; recycling them through a thread-local list instead
 * of malloc/free is a fair share of the per-op budget. An object goes back to the list of
 * the thread that frees it (any thread may); each list is bounded, and drained when its
 * thread exits or closes a runtime. Nodes with more attributes than POOL_ATTRS (pads,
 * permutes of high rank) bypass the cache. */
#include <pthread.h>
#include <stdlib.h>

#include "capture.h"

/* Under AddressSanitizer recycled memory would hide use-after-free bugs: no caching there. */
#if defined(__SANITIZE_ADDRESS__)
enum { POOL_MAX = 0 };
#else
enum { POOL_MAX = 4096 };
#endif

typedef struct free_item {
  struct free_item *next;
} free_item;

typedef struct pool {
  free_item *nodes, *handles;
  int node_count, handle_count;
  bool registered;
} pool;

static _Thread_local pool thread_pool;
static pthread_key_t pool_key;
static pthread_once_t pool_once = PTHREAD_ONCE_INIT;

static void drain(pool *p) {
  while (p->nodes) {
    free_item *item = p->nodes;
    p->nodes = item->next;
    free(item);
  }
  while (p->handles) {
    free_item *item = p->handles;
    p->handles = item->next;
    free(item);
  }
  p->node_count = p->handle_count = 0;
}

static void drain_at_exit(void *arg) { drain(arg); }
static void make_key(void) { pthread_key_create(&pool_key, drain_at_exit); }

/* The key's destructor runs at thread exit only for threads that set a value. */
static pool *current(void) {
  pool *p = &thread_pool;
  if (!p->registered) {
    pthread_once(&pool_once, make_key);
    pthread_setspecific(pool_key, p);
    p->registered = true;
  }
  return p;
}

static size_t node_size(int attr_count) { return sizeof(cap_node) + sizeof(int64_t) * (size_t)attr_count; }

cap_node *cap_pool_node(int attr_count) {
  if (attr_count > CAP_POOL_ATTRS) return hlo_malloc(node_size(attr_count));
  pool *p = &thread_pool;
  if (p->nodes) {
    free_item *item = p->nodes;
    p->nodes = item->next;
    p->node_count--;
    return (cap_node *)item;
  }
  return hlo_malloc(node_size(CAP_POOL_ATTRS));
}

void cap_pool_free_node(cap_node *node) {
  if (node->attr_count > CAP_POOL_ATTRS) {
    free(node);
    return;
  }
  pool *p = current();
  if (p->node_count >= POOL_MAX) {
    free(node);
    return;
  }
  free_item *item = (free_item *)node;
  item->next = p->nodes;
  p->nodes = item;
  p->node_count++;
}

latch_tensor *cap_pool_handle(void) {
  pool *p = &thread_pool;
  if (p->handles) {
    free_item *item = p->handles;
    p->handles = item->next;
    p->handle_count--;
    return (latch_tensor *)item;
  }
  return hlo_malloc(sizeof(latch_tensor));
}

void cap_pool_free_handle(latch_tensor *t) {
  pool *p = current();
  if (p->handle_count >= POOL_MAX) {
    free(t);
    return;
  }
  free_item *item = (free_item *)t;
  item->next = p->handles;
  p->handles = item;
  p->handle_count++;
}

void cap_pool_drain(void) { drain(&thread_pool); }
