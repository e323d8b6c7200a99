/* Cutting a graph: the walk from the roots that finds the pending nodes to compute and the
 * READY leaves they read, and the graph's key.
 *
 * The key is XXH3-128 over the lowering's format (CAP_LOWERING_FORMAT), the backend's name
 * and version, the roots' node hashes and the walk's event stream. Node hashes already cover every op, attribute and shape below the
 * roots, unfolded as trees; what they cannot tell apart is how that tree is cut and shared:
 * two different leaves of one shape hash alike (x + y versus x + x), and a node made from
 * an operand that was pending then but is READY now is a parameter now. So the walk records
 * one 32-bit event per edge it follows: a new pending node, a new leaf (the next parameter
 * number), a repeated leaf (its parameter number) or a repeated node (its post-order index).
 * Equal keys then mean equal functions from parameters to outputs, and the only hashing a
 * sync does is over the roots' hashes and these events (4 bytes per edge). */
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "capture.h"
#include "hlo/hlo.h"

enum {
  EV_NEW_NODE = 0xFFFFFFFFu,
  EV_NEW_LEAF = 0xFFFFFFFEu,
  EV_LEAF = 0x80000000u, /* | parameter number */
};

static atomic_uint_fast64_t walk_counter = 1;

/* READY leaves may be shared with other threads, so their walk state lives in this
 * open-addressed table rather than in the node. */
typedef struct cap_leaf_map {
  size_t mask;
  cap_node **keys;
  int *values;
} leaf_map;

static bool grow_push(void **array, int *capacity, int count, size_t size) {
  if (count < *capacity) return true;
  int next = *capacity ? *capacity * 2 : 16;
  void *grown = hlo_realloc(*array, (size_t)next * size);
  if (!grown) return false;
  *array = grown;
  *capacity = next;
  return true;
}

static size_t ptr_hash(const void *p) {
  uint64_t x = (uint64_t)(uintptr_t)p;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdu;
  x ^= x >> 33;
  return (size_t)x;
}

static bool leaf_map_grow(leaf_map *map) {
  size_t old_size = map->keys ? map->mask + 1 : 0, size = old_size ? old_size * 2 : 16;
  cap_node **keys = hlo_calloc(size, sizeof *keys);
  int *values = hlo_malloc(size * sizeof *values);
  if (!keys || !values) {
    free(keys);
    free(values);
    return false;
  }
  for (size_t i = 0; i < old_size; i++) {
    if (!map->keys[i]) continue;
    size_t at = ptr_hash(map->keys[i]) & (size - 1);
    while (keys[at]) at = (at + 1) & (size - 1);
    keys[at] = map->keys[i];
    values[at] = map->values[i];
  }
  free(map->keys);
  free(map->values);
  map->keys = keys;
  map->values = values;
  map->mask = size - 1;
  return true;
}

/* The slot for node: found (keys[slot] == node) or free. */
static size_t leaf_map_slot(const leaf_map *map, const cap_node *node) {
  size_t at = ptr_hash(node) & map->mask;
  while (map->keys[at] && map->keys[at] != node) at = (at + 1) & map->mask;
  return at;
}

typedef struct walker {
  cap_graph *g;
  uint64_t walk;
  leaf_map leaves;
  int node_cap, param_cap, event_cap, root_cap;
  struct frame {
    cap_node *node;
    int next;
  } * stack;
  int stack_count, stack_cap;
} walker;

static bool event(walker *w, uint32_t code) {
  if (!grow_push((void **)&w->g->events, &w->event_cap, w->g->event_count, sizeof(uint32_t))) return false;
  w->g->events[w->g->event_count++] = code;
  return true;
}

/* Visits the edge to node: records its event and, for a new pending node, pushes it. */
static bool visit(walker *w, cap_node *node) {
  cap_graph *g = w->g;
  if (node->state != CAP_PENDING) {
    if (!w->leaves.keys || (size_t)g->param_count * 2 >= w->leaves.mask + 1)
      if (!leaf_map_grow(&w->leaves)) return false;
    size_t slot = leaf_map_slot(&w->leaves, node);
    if (w->leaves.keys[slot]) return event(w, EV_LEAF | (uint32_t)w->leaves.values[slot]);
    if (!grow_push((void **)&g->params, &w->param_cap, g->param_count, sizeof(cap_node *))) return false;
    w->leaves.keys[slot] = node;
    w->leaves.values[slot] = g->param_count;
    g->params[g->param_count++] = node;
    return event(w, EV_NEW_LEAF);
  }
  if (node->walk == w->walk) return event(w, (uint32_t)node->walk_index);
  node->walk = w->walk;
  node->walk_index = -1; /* on the stack */
  if (!grow_push((void **)&w->stack, &w->stack_cap, w->stack_count, sizeof *w->stack)) return false;
  w->stack[w->stack_count++] = (struct frame){node, 0};
  return event(w, EV_NEW_NODE);
}

/* Iterative post-order: a chain of thousands of ops must not need thousands of C frames. */
static bool walk_from(walker *w, cap_node *root) {
  if (!visit(w, root)) return false;
  while (w->stack_count) {
    struct frame *top = &w->stack[w->stack_count - 1];
    if (top->next < top->node->operand_count) {
      cap_node *operand = top->node->operands[top->next++];
      if (!visit(w, operand)) return false;
      continue;
    }
    cap_node *done = top->node;
    w->stack_count--;
    cap_graph *g = w->g;
    if (!grow_push((void **)&g->nodes, &w->node_cap, g->node_count, sizeof(cap_node *))) return false;
    done->walk_index = g->node_count;
    g->nodes[g->node_count++] = done;
  }
  return true;
}

latch_status cap_graph_collect(cap_graph *g, const rt_backend *backend, int count, cap_node *const *roots,
                               cap_node *const *alias_of) {
  memset(g, 0, sizeof *g);
  g->backend = backend;
  walker w;
  memset(&w, 0, sizeof w);
  w.g = g;
  w.walk = atomic_fetch_add(&walk_counter, 1);
  bool ok = true;
  g->roots = hlo_malloc(sizeof(cap_node *) * (size_t)(count ? count : 1));
  g->aliases = hlo_malloc(sizeof(cap_alias) * (size_t)(count ? count : 1));
  if (!g->roots || !g->aliases) ok = false;
  for (int i = 0; ok && i < count; i++) {
    cap_node *root = roots[i];
    if (!root || root->state != CAP_PENDING) continue;
    bool seen = false; /* the same node under two handles is one output */
    for (int k = 0; k < g->root_count && !seen; k++) seen = g->roots[k] == root;
    if (seen) continue;
    ok = walk_from(&w, root);
    g->roots[g->root_count] = root;
    cap_node *target = alias_of ? alias_of[i] : NULL;
    if (ok && target && target->state == CAP_READY && w.leaves.keys) {
      size_t slot = leaf_map_slot(&w.leaves, target);
      if (w.leaves.keys[slot]) g->aliases[g->alias_count++] = (cap_alias){g->root_count, w.leaves.values[slot]};
    }
    g->root_count++;
  }
  free(w.stack);
  g->leaves = hlo_malloc(sizeof *g->leaves);
  if (g->leaves)
    *g->leaves = w.leaves;
  else {
    free(w.leaves.keys);
    free(w.leaves.values);
    ok = false;
  }
  if (!ok) {
    cap_graph_free(g);
    cap_set_error("sync: out of memory walking the graph");
    return LATCH_ERR_INTERNAL;
  }
  /* The key. Everything is small and fixed-width, written little-endian as node.c does. */
  XXH3_state_t *state = XXH3_createState();
  if (!state) {
    cap_graph_free(g);
    cap_set_error("sync: out of memory");
    return LATCH_ERR_INTERNAL;
  }
  XXH3_128bits_reset_withSeed(state, CAP_HASH_FORMAT);
  XXH3_128bits_update(state, "G", 1);
  uint32_t lowering = CAP_LOWERING_FORMAT;
  XXH3_128bits_update(state, &lowering, sizeof lowering);
  XXH3_128bits_update(state, backend->name, strlen(backend->name) + 1);
  XXH3_128bits_update(state, backend->version, strlen(backend->version) + 1);
  uint64_t header[3] = {(uint64_t)g->root_count, (uint64_t)g->event_count, (uint64_t)g->alias_count};
  XXH3_128bits_update(state, header, sizeof header);
  for (int i = 0; i < g->root_count; i++) {
    uint64_t k[2] = {g->roots[i]->hash.lo, g->roots[i]->hash.hi};
    XXH3_128bits_update(state, k, sizeof k);
  }
  XXH3_128bits_update(state, g->events, sizeof(uint32_t) * (size_t)g->event_count);
  for (int i = 0; i < g->alias_count; i++) {
    uint64_t a[2] = {(uint64_t)g->aliases[i].output, (uint64_t)g->aliases[i].param};
    XXH3_128bits_update(state, a, sizeof a);
  }
  XXH128_hash_t h = XXH3_128bits_digest(state);
  XXH3_freeState(state);
  g->key = (cache_key){h.low64, h.high64};
  return LATCH_OK;
}

int cap_graph_param_of(const cap_graph *g, const cap_node *node) {
  if (!g->leaves || !g->leaves->keys) return -1;
  size_t slot = leaf_map_slot(g->leaves, node);
  return g->leaves->keys[slot] ? g->leaves->values[slot] : -1;
}

void cap_graph_free(cap_graph *g) {
  free(g->roots);
  free(g->params);
  free(g->nodes);
  free(g->aliases);
  free(g->events);
  if (g->leaves) {
    free(g->leaves->keys);
    free(g->leaves->values);
    free(g->leaves);
  }
  memset(g, 0, sizeof *g);
}

hlo_module *cap_graph_lower(const cap_graph *g, hlo_diag *diag) {
  hlo_module *module = hlo_module_new("latch_graph");
  if (!module) {
    hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory");
    return NULL;
  }
  hlo_comp *entry = hlo_build_computation(module, "main", true);
  hlo_instr **params = hlo_malloc(sizeof(hlo_instr *) * (size_t)(g->param_count + 1));
  hlo_instr **lowered = hlo_malloc(sizeof(hlo_instr *) * (size_t)(g->node_count + 1));
  hlo_instr **outputs = hlo_malloc(sizeof(hlo_instr *) * (size_t)(g->root_count + 1));
  enum { MANY = 64 };
  hlo_instr *operand_buffer[MANY];
  bool ok = entry && params && lowered && outputs;
  if (!ok) hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory lowering the graph");
  for (int i = 0; ok && i < g->param_count; i++) {
    hlo_shape shape = cap_node_shape(g->params[i]);
    ok = (params[i] = hlo_build_parameter(entry, i, &shape, NULL, diag)) != NULL;
  }
  /* Operands are found through their walk index (pending) or the leaf order (READY). */
  for (int i = 0; ok && i < g->node_count; i++) {
    const cap_node *node = g->nodes[i];
    hlo_instr **operands = operand_buffer;
    if (node->operand_count > MANY) operands = hlo_malloc(sizeof(hlo_instr *) * (size_t)node->operand_count);
    if (!(ok = operands != NULL)) {
      hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory lowering the graph");
      break;
    }
    for (int k = 0; ok && k < node->operand_count; k++) {
      const cap_node *operand = node->operands[k];
      if (operand->state == CAP_PENDING) {
        operands[k] = lowered[operand->walk_index];
      } else {
        size_t slot = g->leaves->keys ? leaf_map_slot(g->leaves, operand) : 0;
        operands[k] = g->leaves->keys && g->leaves->keys[slot] ? params[g->leaves->values[slot]] : NULL;
      }
      ok = operands[k] != NULL;
    }
    if (ok)
      ok = (lowered[i] = cap_lower_node(entry, node, operands, diag)) != NULL;
    else
      hlo_diag_set(diag, HLO_ERR_INTERNAL, "lowering: an operand was not lowered");
    if (operands != operand_buffer) free(operands);
  }
  for (int i = 0; ok && i < g->root_count; i++) outputs[i] = lowered[g->roots[i]->walk_index];
  hlo_instr *root = ok ? hlo_build_tuple(entry, g->root_count, outputs, diag) : NULL;
  ok = root && hlo_comp_set_root(entry, root, diag) == HLO_OK;
  if (ok && g->alias_count) {
    hlo_strbuf sb;
    hlo_sb_init(&sb);
    hlo_sb_puts(&sb, "{ ");
    for (int i = 0; i < g->alias_count; i++)
      hlo_sb_printf(&sb, "%s{%d}: (%d, {}, may-alias)", i ? ", " : "", g->aliases[i].output, g->aliases[i].param);
    hlo_sb_puts(&sb, " }");
    char *text = hlo_sb_take(&sb);
    hlo_raw_attr *alias = hlo_arena_alloc(&module->arena, sizeof(hlo_raw_attr));
    const char *value = text ? hlo_arena_strdup(&module->arena, text) : NULL;
    if (alias && value) {
      alias->name = "input_output_alias";
      alias->value = value;
      module->raw_attrs = alias;
      module->raw_attr_count = 1;
    } else {
      module->arena.failed = true; /* reported just below */
    }
    free(text);
  }
  if (ok) ok = hlo_module_check_memory(module, "lowering the graph", diag) == HLO_OK;
  if (ok) ok = hlo_module_sort(module, diag);
  free(params);
  free(lowered);
  free(outputs);
  if (!ok) {
    hlo_module_free(module);
    return NULL;
  }
  return module;
}
