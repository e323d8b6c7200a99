/* A symbolic entry run in segments, when only a small part of its template has symbolic
 * sizes: a decoder step whose cache grows by one position every call has symbolic
 * concatenations and attention over the cache, a fifth of the nodes. Binding the whole
 * graph at each new size works out shapes, kernels and buffers for every instruction, and
 * loading a saved binding decodes and checks them all: 0.3-0.7 ms for gpt2's 4 layers, a
 * quarter of its step. In segments, the still parts are the same graphs at every binding,
 * compiled once per entry; the moved parts, small graphs found in the executable cache by
 * their keys like any other, are compiled at the entry's first run, and a later binding
 * binds each one's executable to its sizes (rt_backend.bind: shapes, kernels and buffers
 * for a few instructions, no passes), so a step at a new length compiles nothing. Where the
 * backend refuses a binding (a pass decision held only at the compiled sizes), that
 * segment compiles at those sizes.
 *
 * A node moves when one of its dims or slice bounds is symbolic, or one of its operands'
 * dims is. Each node goes to the first segment, at or after its operands', of its kind
 * (even segments still, odd ones moved), so a chain of still nodes stays in one segment and
 * values cross segments only where a moved part starts or ends (in a decoder, the heads'
 * queries, keys and values and the attention's result: a few KB). Every segment is a graph
 * of its own, instantiated at the call's sizes, so the split changes what runs where, never
 * what is computed.
 *
 * A segment's executable loaded from a cache tier whose first run fails is made again from
 * its graph and compiled afresh (cap_exe_compile_afresh: said once, the tiers' entry
 * replaced), and the call goes on from that segment. The failed one leaves the table but is
 * held until the plan is freed, since another thread may be running it (or, when it was a
 * moved segment's family, bindings made from it may still run). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "capture.h"
#include "minify/minify.h"

/* When segments pay: at most a quarter of the nodes move, at least LEAST_STILL stay (work
 * worth not redoing: a graph whose still part is its constants binds whole), and there are
 * at most MOST_SEGMENTS segments (running more would cost what binding saves). */
enum { MOVED_SHARE = 4, LEAST_STILL = 32, MOST_SEGMENTS = 64 };

typedef struct cap_segment {
  cache_entry *_Atomic exe; /* still segments: the entry's, made at its first run */
  /* still segments alike an earlier one: its place + 1, mixed into the key (own_key) */
  int own_key;
  /* moved segments: the first executable compiled or loaded for it, which later bindings
   * bind to their sizes (NULL until then; under the lock) */
  cache_entry *family;
  bool sorted;      /* args are in the executable's parameter order (set once, under the lock) */
  int arg_count, out_count;
  int *args; /* per parameter of exe: >= 0 the node an earlier segment made, < 0 call parameter -1 - arg */
  int *outs; /* per output of exe: the node it computes */
} cap_segment;

struct cap_segments {
  int count, node_count, moved_nodes;
  int *segment; /* per template node */
  cap_segment *items;
  pthread_mutex_t lock; /* over still_made, retired and replacing an executable */
  bool still_made;
  cache_entry **retired; /* executables whose first run failed, replaced */
  int retired_count;
};

static bool moved_segment(int g) { return g % 2 == 1; }

void cap_segments_fork_child(cap_segments *s) {
  if (s) pthread_mutex_init(&s->lock, NULL);
}

int cap_segments_count(const cap_segments *s) { return s->count; }

void cap_segments_describe(const cap_segments *s, char *out, size_t size) {
  int still = 0, moved = 0;
  for (int g = 0; g < s->count; g++)
    if (s->items[g].out_count) moved_segment(g) ? moved++ : still++;
  snprintf(out, size, "%d still, %d moved; %d of %d nodes move", still, moved, s->moved_nodes, s->node_count);
}

void cap_segments_free(latch_runtime *rt, cap_segments *s) {
  if (!s) return;
  for (int g = 0; s->items && g < s->count; g++) {
    cache_entry *exe = atomic_load(&s->items[g].exe);
    if (exe) cache_table_release(rt->cache, exe);
    if (s->items[g].family) cache_table_release(rt->cache, s->items[g].family);
    free(s->items[g].args);
    free(s->items[g].outs);
  }
  for (int k = 0; k < s->retired_count; k++) cache_table_release(rt->cache, s->retired[k]);
  free(s->retired);
  free(s->items);
  free(s->segment);
  pthread_mutex_destroy(&s->lock);
  free(s);
}

void cap_segment_runs_free(latch_runtime *rt, cap_segment_run *runs, int count) {
  for (int g = 0; runs && g < count; g++) {
    cache_entry *exe = atomic_load(&runs[g].cached);
    if (exe) cache_table_release(rt->cache, exe);
    if (runs[g].owns_bound) runs[g].bound_by->destroy(runs[g].bound);
  }
  free(runs);
}

static bool symbolic(const guard_expr *exprs, int count) {
  for (int k = 0; k < count; k++)
    if (!guard_expr_is_const(&exprs[k], NULL)) return true;
  return false;
}

/* Numbers the segments; returns how many, or 0 when segments do not pay (a symbolic batch
 * moves every node: binding the whole graph is the better deal). */
static int number(const cap_entry *e, const bool *param_symbolic, int *segment, int *moved_nodes) {
  int count = 0, moved = 0;
  for (int i = 0; i < e->node_count; i++) {
    const cap_tmpl_node *t = &e->nodes[i];
    int bounds = t->attr_count < 4 ? t->attr_count : 4; /* a slice's symbolic start and stop */
    bool moves = symbolic(t->dims, t->rank) || (t->attr_exprs && symbolic(t->attr_exprs, bounds));
    int at = 0; /* the first segment its operands allow */
    for (int k = 0; k < t->operand_count; k++) {
      int o = t->operands[k];
      moves = moves || (o >= 0 ? symbolic(e->nodes[o].dims, e->nodes[o].rank) : param_symbolic[-1 - o]);
      if (o >= 0 && segment[o] > at) at = segment[o];
    }
    if (moved_segment(at) != moves) at++;
    segment[i] = at;
    if (at + 1 > count) count = at + 1;
    moved += moves;
  }
  *moved_nodes = moved;
  bool pays = moved > 0 && MOVED_SHARE * moved <= e->node_count && e->node_count - moved >= LEAST_STILL;
  return pays ? count : 0;
}

/* Appends v to list (of *count) unless it is there. */
static void add_once(int *list, int *count, int v) {
  for (int i = 0; i < *count; i++)
    if (list[i] == v) return;
  list[(*count)++] = v;
}

/* Each segment's outputs (nodes a later segment reads, and roots) and arguments (call
 * parameters and earlier nodes it reads), in template order. A segment the numbering left
 * empty (the first, when a moved node starts the graph) has neither and is skipped. */
static bool wire(const cap_entry *e, cap_segments *s) {
  int n = e->node_count;
  bool *crosses = hlo_calloc((size_t)n + 1, sizeof(bool));
  if (!crosses) return false;
  for (int r = 0; r < e->root_count; r++) crosses[e->roots[r]] = true;
  for (int i = 0; i < n; i++)
    for (int k = 0; k < e->nodes[i].operand_count; k++) {
      int o = e->nodes[i].operands[k];
      if (o >= 0 && s->segment[o] != s->segment[i]) crosses[o] = true;
    }
  bool ok = true;
  for (int g = 0; g < s->count && ok; g++) {
    cap_segment *seg = &s->items[g];
    int reads = 0, makes = 0;
    for (int i = 0; i < n; i++)
      if (s->segment[i] == g) reads += e->nodes[i].operand_count, makes += crosses[i];
    seg->args = hlo_malloc(sizeof(int) * ((size_t)reads + 1));
    seg->outs = hlo_malloc(sizeof(int) * ((size_t)makes + 1));
    if (!(ok = seg->args && seg->outs)) break;
    for (int i = 0; i < n; i++) {
      if (s->segment[i] != g) continue;
      if (crosses[i]) seg->outs[seg->out_count++] = i;
      for (int k = 0; k < e->nodes[i].operand_count; k++) {
        int o = e->nodes[i].operands[k];
        if (o < 0 || s->segment[o] != g) add_once(seg->args, &seg->arg_count, o);
      }
    }
  }
  free(crosses);
  return ok;
}

cap_segments *cap_segments_plan(const cap_entry *e, const bool *param_symbolic) {
  cap_segments *s = hlo_calloc(1, sizeof *s);
  if (!s) return NULL;
  pthread_mutex_init(&s->lock, NULL);
  s->node_count = e->node_count;
  s->segment = hlo_calloc((size_t)e->node_count + 1, sizeof(int));
  if (s->segment) s->count = number(e, param_symbolic, s->segment, &s->moved_nodes);
  if (s->count > 0 && s->count <= MOST_SEGMENTS && (s->items = hlo_calloc((size_t)s->count, sizeof *s->items)) &&
      wire(e, s))
    return s;
  cap_segments_free(NULL, s); /* no executables yet */
  return NULL;
}

/* The nodes of one kind of segment (moved or still) at a binding, each reading its own
 * segment's nodes and stand-ins for the rest: leaves[p] for call parameter p, cuts[o] for
 * node o of another segment. */
typedef struct made_nodes {
  cap_node **nodes, **cuts, **leaves;
} made_nodes;

static void made_free(const cap_entry *e, made_nodes *made) {
  for (int i = 0; i < e->node_count; i++) {
    if (made->nodes) cap_node_release(made->nodes[i]);
    if (made->cuts) cap_node_release(made->cuts[i]);
  }
  for (int p = 0; made->leaves && p < e->param_count; p++) cap_node_release(made->leaves[p]);
  free(made->nodes);
  free(made->cuts);
  free(made->leaves);
}

static cap_node *operand_for(const cap_entry *e, const cap_segments *s, const int64_t *bindings, made_nodes *made,
                             int i, int o) {
  if (o < 0) return made->leaves[-1 - o];
  if (s->segment[o] == s->segment[i]) return made->nodes[o];
  if (!made->cuts[o]) {
    int64_t dims[HLO_MAX_RANK];
    if (!cap_tmpl_dims(&e->nodes[o], bindings, dims)) return NULL;
    made->cuts[o] = cap_node_stand_in(e->nodes[o].dtype, e->nodes[o].rank, dims);
  }
  return made->cuts[o];
}

static bool make_node(const cap_entry *e, const cap_segments *s, const int64_t *bindings, made_nodes *made, int i) {
  const cap_tmpl_node *t = &e->nodes[i];
  cap_node *operands[16], **list = operands;
  if (t->operand_count > 16 && !(list = hlo_malloc(sizeof(cap_node *) * (size_t)t->operand_count))) return false;
  bool ok = true;
  for (int k = 0; k < t->operand_count && ok; k++)
    ok = (list[k] = operand_for(e, s, bindings, made, i, t->operands[k])) != NULL;
  if (ok) made->nodes[i] = cap_tmpl_instantiate(t, list, bindings);
  if (list != operands) free(list);
  return made->nodes[i] != NULL;
}

static bool make_nodes(const cap_entry *e, const cap_segments *s, const int64_t *bindings, cap_node *const *params,
                       bool moved, made_nodes *made) {
  made->nodes = hlo_calloc((size_t)e->node_count + 1, sizeof(cap_node *));
  made->cuts = hlo_calloc((size_t)e->node_count + 1, sizeof(cap_node *));
  made->leaves = hlo_calloc((size_t)e->param_count + 1, sizeof(cap_node *));
  if (!made->nodes || !made->cuts || !made->leaves) return false;
  for (int p = 0; p < e->param_count; p++)
    if (!(made->leaves[p] = cap_node_stand_in(params[p]->dtype, params[p]->rank, params[p]->dims))) return false;
  for (int i = 0; i < e->node_count; i++)
    if (moved_segment(s->segment[i]) == moved && !make_node(e, s, bindings, made, i)) return false;
  return true;
}

static const cap_node *leaf_of(const made_nodes *made, int arg) {
  return arg < 0 ? made->leaves[-1 - arg] : made->cuts[arg];
}

/* A still segment whose graph is an earlier one's (a decoder's layers: the same products,
 * other weights) gets an executable of its own, keyed by its graph's key and its place. One
 * executable run for every layer in turn would make its kept results (weights converted to
 * bf16, reordered for oneDNN: computed once per weight version) again at every run, each
 * layer's weights replacing the last's: a bf16 step spent most of its time converting its
 * weights. */
static cache_key own_key(cache_key key, int place) {
  uint64_t words[3] = {key.lo, key.hi, (uint64_t)place};
  XXH128_hash_t h = XXH3_128bits_withSeed(words, sizeof words, 0x5e6);
  return (cache_key){h.low64, h.high64};
}

/* Collects a segment's graph into *g (the caller frees it). The first time its arguments
 * are put in the graph's parameter order (the walk's, which follows from the template, not
 * the sizes); later, that order is checked. false when memory ran out or the graph did not
 * come out as wired (a latch bug: the caller binds the whole graph instead), g then freed.
 * Under the segments' lock. */
static bool collect_segment(latch_runtime *rt, const made_nodes *made, cap_segment *seg, cap_graph *g) {
  bool sort_args = !seg->sorted;
  enum { FEW = 32 };
  cap_node *root_buffer[FEW], **roots = root_buffer;
  int sorted_buffer[FEW], *sorted = sorted_buffer;
  if (seg->out_count > FEW) roots = hlo_malloc(sizeof(cap_node *) * (size_t)seg->out_count);
  if (seg->arg_count > FEW) sorted = hlo_malloc(sizeof(int) * (size_t)seg->arg_count);
  bool ok = roots && sorted;
  for (int r = 0; ok && r < seg->out_count; r++) roots[r] = made->nodes[seg->outs[r]];
  bool collected = ok && cap_graph_collect(g, rt->backend, seg->out_count, roots, NULL) == LATCH_OK;
  ok = collected && g->root_count == seg->out_count && g->param_count == seg->arg_count;
  for (int r = 0; ok && r < g->root_count; r++) ok = g->roots[r] == roots[r];
  for (int k = 0; ok && k < g->param_count; k++) { /* argument k of the executable */
    int found = -1;
    for (int a = 0; a < seg->arg_count && found < 0; a++)
      if (leaf_of(made, seg->args[a]) == g->params[k]) found = a;
    ok = sort_args ? found >= 0 : found == k;
    if (ok) sorted[k] = seg->args[found];
  }
  if (ok && sort_args) memcpy(seg->args, sorted, sizeof(int) * (size_t)seg->arg_count);
  seg->sorted = seg->sorted || ok;
  if (ok && seg->own_key) g->key = own_key(g->key, seg->own_key);
  if (collected && !ok) cap_graph_free(g);
  if (roots != root_buffer) free(roots);
  if (sorted != sorted_buffer) free(sorted);
  return ok;
}

/* Collects a segment's graph and finds its executable (*exe), or with failure (why the one
 * loaded for it failed its first run) compiles it afresh. false with *status set when the
 * compile failed, and without when the graph did not come out as wired. Under the
 * segments' lock. */
static bool compile_segment(latch_runtime *rt, const made_nodes *made, cap_segment *seg, const char *failure,
                            cache_entry **exe, bool *compiled, latch_status *status) {
  cap_graph g;
  if (!collect_segment(rt, made, seg, &g)) return false;
  bool made_now = failure != NULL;
  *exe = failure ? cap_exe_compile_afresh(rt, &g, NULL, failure, status) : cap_graph_executable(rt, &g, &made_now, status);
  *compiled = *compiled || made_now;
  cap_graph_free(&g);
  return *exe != NULL;
}

/* The segment's family bound to g's sizes, or NULL: no family yet, LATCH_CHECK on (every
 * new executable is compiled, so its first run is checked), or the backend refuses
 * (LATCH_LOG=recompiles says why). */
static rt_executable *bind_family(latch_runtime *rt, const cap_segment *seg, const cap_graph *g) {
  cap_exe *family = seg->family ? cache_entry_value(seg->family) : NULL;
  if (!family || !family->backend->bind || rt->check_mode != MIN_MODE_OFF) return NULL;
  hlo_diag diag = {0};
  hlo_module *module = cap_graph_lower(g, &diag);
  rt_executable *bound = module ? family->backend->bind(family->exe, module, &diag) : NULL;
  hlo_module_free(module);
  if (!bound && (rt->log & CAP_LOG_RECOMPILES))
    fprintf(stderr, "latch: recompile: a moved segment cannot bind its executable to these sizes (%s), so it compiles them\n",
            diag.message);
  return bound;
}

/* What runs moved segment at (runs[at]) at this binding: the bound executable of an earlier
 * segment with the same graph (keys[] holds the earlier ones' keys), the segment's family
 * bound, or else the graph's executable from the cache or compiled, which becomes the
 * family if the segment has none. Under the segments' lock. */
static bool make_moved_segment(latch_runtime *rt, const made_nodes *made, cap_segments *s, int at,
                               cap_segment_run *runs, cache_key *keys, bool *compiled, latch_status *status) {
  cap_segment *seg = &s->items[at];
  cap_segment_run *run = &runs[at];
  cap_graph g;
  if (!collect_segment(rt, made, seg, &g)) return false;
  keys[at] = g.key;
  for (int k = 1; k < at && !run->bound; k += 2)
    if (runs[k].bound && cache_key_equal(keys[k], g.key)) run->bound = runs[k].bound, run->bound_by = runs[k].bound_by;
  if (!run->bound && (run->bound = bind_family(rt, seg, &g))) {
    run->bound_by = ((cap_exe *)cache_entry_value(seg->family))->backend;
    run->owns_bound = true;
  }
  cache_entry *exe = NULL;
  if (!run->bound) {
    bool made_now = false;
    exe = cap_graph_executable(rt, &g, &made_now, status);
    *compiled = *compiled || made_now;
    if (exe && !seg->family) seg->family = cache_table_get(rt->cache, g.key);
    if (exe) atomic_store(&run->cached, exe);
  }
  cap_graph_free(&g);
  return run->bound || exe;
}

/* Still segment at's executable, from the cache or compiled; keys[] gets its graph's key,
 * and holds the earlier still ones' (own_key). Under the segments' lock. */
static bool make_still_segment(latch_runtime *rt, const made_nodes *made, cap_segments *s, int at, cache_key *keys,
                               bool *compiled, latch_status *status) {
  cap_segment *seg = &s->items[at];
  cap_graph g;
  if (!collect_segment(rt, made, seg, &g)) return false;
  keys[at] = g.key;
  for (int k = 0; k < at && !seg->own_key; k += 2)
    if (s->items[k].out_count && cache_key_equal(keys[k], g.key)) seg->own_key = at + 1;
  if (seg->own_key) g.key = own_key(g.key, seg->own_key);
  bool made_now = false;
  cache_entry *exe = cap_graph_executable(rt, &g, &made_now, status);
  *compiled = *compiled || made_now;
  if (exe) atomic_store(&seg->exe, exe);
  cap_graph_free(&g);
  return exe != NULL;
}

/* The still segments' executables, made at the entry's first run: their graphs are the same
 * at every binding. */
static bool make_still(latch_runtime *rt, const cap_entry *e, cap_segments *s, const int64_t *bindings,
                       cap_node *const *params, bool *compiled, latch_status *status) {
  pthread_mutex_lock(&s->lock);
  bool ok = s->still_made;
  if (!ok) {
    made_nodes made = {0};
    cache_key *keys = hlo_calloc((size_t)s->count, sizeof *keys);
    ok = keys && make_nodes(e, s, bindings, params, false, &made);
    for (int g = 0; ok && g < s->count; g++)
      if (!moved_segment(g) && s->items[g].out_count) ok = make_still_segment(rt, &made, s, g, keys, compiled, status);
    made_free(e, &made);
    free(keys);
    s->still_made = ok;
  }
  pthread_mutex_unlock(&s->lock);
  return ok;
}

cap_segment_run *cap_segments_bind(latch_runtime *rt, const cap_entry *e, const int64_t *bindings,
                                   cap_node *const *params, bool *compiled, latch_status *status) {
  cap_segments *s = e->segments;
  *compiled = false;
  if (!make_still(rt, e, s, bindings, params, compiled, status)) return NULL;
  cap_segment_run *runs = hlo_calloc((size_t)s->count, sizeof *runs); /* all NULL */
  cache_key *keys = hlo_calloc((size_t)s->count, sizeof *keys);
  made_nodes made = {0};
  bool ok = runs && keys && make_nodes(e, s, bindings, params, true, &made);
  pthread_mutex_lock(&s->lock); /* (a compile under it: calls with new sizes compile one at a time) */
  for (int g = 0; ok && g < s->count; g++)
    if (moved_segment(g) && s->items[g].out_count) ok = make_moved_segment(rt, &made, s, g, runs, keys, compiled, status);
  pthread_mutex_unlock(&s->lock);
  made_free(e, &made);
  free(keys);
  if (ok) return runs;
  cap_segment_runs_free(rt, runs, s->count);
  return NULL;
}

/* Segment g's executable exe, loaded from a cache tier (or rank 0), failed its first run:
 * its graph made again at bindings and compiled afresh, put in slot in exe's place (unless
 * another thread did so first) and exe retired. The executable to run now, or NULL with
 * *status. */
static cache_entry *recompile_segment(latch_runtime *rt, const cap_entry *e, int g, cache_entry *_Atomic *slot,
                                      cache_entry *exe, const int64_t *bindings, cap_node *const *params,
                                      latch_status *status) {
  cap_segments *s = e->segments;
  char failure[sizeof ((hlo_diag *)0)->message];
  snprintf(failure, sizeof failure, "%s", latch_last_error());
  pthread_mutex_lock(&s->lock);
  cache_entry *now = atomic_load(slot), *fresh = NULL, **grown = NULL;
  if (now == exe) {
    made_nodes made = {0};
    bool compiled = false;
    bool ok = (grown = hlo_realloc(s->retired, sizeof *grown * ((size_t)s->retired_count + 2))) != NULL;
    if (grown) s->retired = grown;
    ok = ok && make_nodes(e, s, bindings, params, moved_segment(g), &made);
    if (ok) cache_table_remove(rt->cache, exe); /* false when a racing lookup took it out first */
    ok = ok && compile_segment(rt, &made, &s->items[g], failure, &fresh, &compiled, status);
    made_free(e, &made);
    if (ok) {
      s->retired[s->retired_count++] = exe; /* the slot's reference, kept */
      atomic_store(slot, fresh);
      if (s->items[g].family == exe) { /* later bindings bind the fresh one */
        s->retired[s->retired_count++] = exe;
        s->items[g].family = cache_table_get(rt->cache, cache_entry_key(fresh));
      }
    } else if (*status == LATCH_OK) {
      cap_set_error("call: out of memory, or a segment that did not come out as wired, compiling a segment afresh");
      *status = LATCH_ERR_INTERNAL;
    }
    now = ok ? fresh : NULL;
  }
  pthread_mutex_unlock(&s->lock);
  return now;
}

/* Runs exe as segment seg: its arguments from params and values, its outputs into values. */
static latch_status run_segment(latch_runtime *rt, const cap_segment *seg, const cap_exe *exe,
                                rt_value *const *params, rt_value **values) {
  enum { FEW = 32 };
  rt_value *arg_buffer[FEW], *out_buffer[FEW], **args = arg_buffer, **outs = out_buffer;
  if (seg->arg_count > FEW) args = hlo_malloc(sizeof(rt_value *) * (size_t)seg->arg_count);
  if (seg->out_count > FEW) outs = hlo_malloc(sizeof(rt_value *) * (size_t)seg->out_count);
  latch_status status = LATCH_OK;
  if (!args || !outs) {
    status = LATCH_ERR_INTERNAL;
    cap_set_error("call: out of memory");
  }
  for (int a = 0; status == LATCH_OK && a < seg->arg_count; a++)
    args[a] = seg->args[a] < 0 ? params[-1 - seg->args[a]] : values[seg->args[a]];
  if (status == LATCH_OK) status = cap_exe_run(rt, exe, args, outs);
  for (int o = 0; status == LATCH_OK && o < seg->out_count; o++) values[seg->outs[o]] = outs[o];
  if (args != arg_buffer) free(args);
  if (outs != out_buffer) free(outs);
  return status;
}

/* Runs a moved segment's bound executable (made here, never loaded: nothing on trial). */
static latch_status run_bound(latch_runtime *rt, const cap_segment *seg, const cap_segment_run *run,
                              rt_value *const *params, rt_value **values) {
  cap_exe shell;
  memset(&shell, 0, sizeof shell);
  shell.backend = run->bound_by;
  shell.exe = run->bound;
  shell.param_count = seg->arg_count;
  shell.output_count = seg->out_count;
  return run_segment(rt, seg, &shell, params, values);
}

latch_status cap_segments_run(latch_runtime *rt, const cap_entry *e, cap_segment_run *moved,
                              const int64_t *bindings, cap_node *const *param_nodes, rt_value *const *params,
                              cap_node **results) {
  cap_segments *s = e->segments;
  rt_value **values = hlo_calloc((size_t)s->node_count + 1, sizeof(rt_value *));
  latch_status status = values ? LATCH_OK : LATCH_ERR_INTERNAL;
  if (!values) cap_set_error("call: out of memory");
  for (int g = 0; g < s->count && status == LATCH_OK; g++) {
    cap_segment *seg = &s->items[g];
    if (!seg->out_count) continue;
    if (moved_segment(g) && moved[g].bound) {
      status = run_bound(rt, seg, &moved[g], params, values);
      continue;
    }
    cache_entry *_Atomic *slot = moved_segment(g) ? &moved[g].cached : &seg->exe;
    cache_entry *exe = atomic_load_explicit(slot, memory_order_acquire);
    bool trial = atomic_load(&((cap_exe *)cache_entry_value(exe))->on_trial);
    unsigned mark = trial ? cap_first_run_mark(rt) : 0;
    status = run_segment(rt, seg, cache_entry_value(exe), params, values);
    if (status != LATCH_OK && trial && cap_first_run_in_step(rt, cache_entry_key(exe), mark) &&
        (exe = recompile_segment(rt, e, g, slot, exe, bindings, param_nodes, &status)))
      status = run_segment(rt, seg, cache_entry_value(exe), params, values);
    cap_exe *ran = exe ? cache_entry_value(exe) : NULL;
    if (status == LATCH_OK && atomic_load_explicit(&ran->on_trial, memory_order_relaxed))
      atomic_store(&ran->on_trial, false);
  }
  for (int r = 0; status == LATCH_OK && r < e->root_count; r++)
    if (!(results[r] = cap_node_data(rt_value_retain(values[e->roots[r]])))) {
      status = LATCH_ERR_INTERNAL;
      cap_set_error("call: out of memory");
    }
  for (int i = 0; values && i < s->node_count; i++) rt_value_release(values[i]);
  free(values);
  return status;
}
