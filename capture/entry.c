/* A traced function's cache entries: built from a finished trace, checked against a call,
 * and run on a call without the frontend function. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "hlo/hlo.h"
#include "minify/minify.h"

/* ---- building ---- */

static int find_input(const cap_trace *trace, const cap_node *node) {
  for (int i = 0; i < trace->input_count; i++)
    if (trace->input_nodes[i] == node) return i;
  return -1;
}

static int find_caller(const cap_trace *trace, const latch_tensor *handle) {
  for (int i = 0; i < trace->input_count; i++)
    if (trace->callers[i] == handle) return i;
  return -1;
}

static int find_captured(const cap_trace *trace, const cap_node *node) {
  for (int i = 0; i < trace->captured_count; i++)
    if (trace->captured[i].node == node) return i;
  return -1;
}

/* Where a READY node the trace read comes from on a later call. */
static cap_src source_of(const cap_trace *trace, cap_node *node) {
  int i = find_input(trace, node);
  if (i >= 0) return (cap_src){CAP_SRC_INPUT, i, NULL};
  if (node == trace->seed) return (cap_src){CAP_SRC_SEED, 0, NULL};
  i = find_captured(trace, node);
  if (i >= 0) return (cap_src){CAP_SRC_CAPTURED, i, NULL};
  return (cap_src){CAP_SRC_CONST, 0, cap_node_retain(node)};
}

/* A handle the function assigned to: its new value is pending and alias_of holds the old. */
static bool assigned(const latch_tensor *h, const cap_node *before) {
  return h->node != before && h->node->state == CAP_PENDING;
}

/* A weight the function assigned, written back as itself. One passed as an input too is
 * written back as that input: the guards make it the same handle on every call. */
static bool updated_weight(const cap_trace *trace, int c) {
  return find_caller(trace, trace->captured[c].handle) < 0 &&
         assigned(trace->captured[c].handle, trace->captured[c].node);
}

static bool build_template(cap_entry *e, cap_trace *trace, const cap_graph *g) {
  e->node_count = g->node_count;
  e->nodes = hlo_calloc((size_t)g->node_count + 1, sizeof *e->nodes);
  e->roots = hlo_malloc(sizeof(int) * ((size_t)g->root_count + 1));
  if (!e->nodes || !e->roots) return false;
  for (int r = 0; r < g->root_count; r++) e->roots[r] = g->roots[r]->walk_index;
  for (int i = 0; i < g->node_count; i++) {
    const cap_node *n = g->nodes[i];
    cap_tmpl_node *t = &e->nodes[i];
    *t = (cap_tmpl_node){.op = n->op, .sub = n->sub, .dtype = n->dtype, .rank = n->rank,
                         .operand_count = n->operand_count, .attr_count = n->attr_count};
    memcpy(t->scalar, n->scalar, sizeof t->scalar);
    t->operands = hlo_malloc(sizeof(int) * ((size_t)n->operand_count + 1));
    t->attrs = hlo_malloc(sizeof(int64_t) * ((size_t)n->attr_count + 1));
    t->dims = hlo_malloc(sizeof(guard_expr) * ((size_t)n->rank + 1));
    if (!t->operands || !t->attrs || !t->dims) return false;
    if (n->attr_count) memcpy(t->attrs, n->attrs, sizeof(int64_t) * (size_t)n->attr_count);
    cap_trace_node_dims(trace, n, t->dims);
    guard_expr attrs[4];
    if (cap_trace_node_attrs(trace, n, attrs)) {
      if (!(t->attr_exprs = hlo_malloc(sizeof attrs))) return false;
      memcpy(t->attr_exprs, attrs, sizeof attrs);
    }
    for (int k = 0; k < n->operand_count; k++) {
      const cap_node *operand = n->operands[k];
      if (operand->state == CAP_PENDING) {
        t->operands[k] = operand->walk_index;
        continue;
      }
      int p = 0;
      while (p < g->param_count && g->params[p] != operand) p++;
      if (p == g->param_count) return false;
      t->operands[k] = -1 - p;
    }
  }
  return true;
}

/* The entry run in segments (segments.c), or NULL: which parameters have symbolic dims
 * decides with the template. */
static cap_segments *plan_segments(const cap_entry *e, cap_trace *trace, const cap_graph *g) {
  bool *param_symbolic = hlo_calloc((size_t)g->param_count + 1, sizeof(bool));
  if (!param_symbolic) return NULL;
  for (int p = 0; p < g->param_count; p++) {
    guard_expr dims[HLO_MAX_RANK];
    cap_trace_node_dims(trace, g->params[p], dims);
    for (int d = 0; d < g->params[p]->rank; d++) param_symbolic[p] |= !guard_expr_is_const(&dims[d], NULL);
  }
  cap_segments *s = cap_segments_plan(e, param_symbolic);
  free(param_symbolic);
  return s;
}

/* An entry being built from a finished trace: the trace, the function's outputs, and the
 * graph cut from them. */
typedef struct entry_build {
  cap_trace *trace;
  latch_tensor *const *outputs;
  int output_count;
  cap_entry *e;
  cap_graph g;
} entry_build;

/* Cuts the graph: its roots are the outputs, then the new values of assigned inputs and
 * weights (each with the old value it is written back to). */
static latch_status collect_graph(entry_build *b) {
  cap_trace *trace = b->trace;
  int handle_count = b->output_count + trace->input_count + trace->captured_count, count = 0;
  cap_node **roots = hlo_malloc(sizeof(cap_node *) * ((size_t)handle_count + 1));
  cap_node **alias_of = hlo_malloc(sizeof(cap_node *) * ((size_t)handle_count + 1));
  latch_status status = LATCH_ERR_INTERNAL;
  if (!roots || !alias_of) {
    cap_set_error("call: out of memory");
    goto done;
  }
  for (int j = 0; j < b->output_count; j++) {
    roots[count] = b->outputs[j]->node;
    alias_of[count++] = NULL;
  }
  for (int i = 0; i < trace->input_count; i++)
    if (assigned(trace->inputs[i], trace->input_nodes[i])) {
      roots[count] = trace->inputs[i]->node;
      alias_of[count++] = trace->inputs[i]->alias_of;
    }
  for (int c = 0; c < trace->captured_count; c++)
    if (updated_weight(trace, c)) {
      roots[count] = trace->captured[c].handle->node;
      alias_of[count++] = trace->captured[c].handle->alias_of;
    }
  status = cap_graph_collect(&b->g, trace->rt->backend, count, roots, alias_of);
done:
  free(roots);
  free(alias_of);
  return status;
}

/* The guard program and the entry's arrays, sized by the graph and the trace. */
static bool allocate_entry(entry_build *b, cap_node ***first_params) {
  cap_entry *e = b->e;
  const cap_trace *trace = b->trace;
  hlo_diag diag = {0};
  e->program = guard_program_compile(trace->guards, &diag);
  if (!e->program) {
    cap_set_error("call: %s", diag.message);
    return false;
  }
  size_t inputs = (size_t)trace->input_count + 1;
  e->symbol_count = guard_program_symbol_count(e->program);
  e->param_count = b->g.param_count;
  e->root_count = b->g.root_count;
  e->output_count = b->output_count;
  e->input_count = trace->input_count;
  e->params = hlo_calloc((size_t)b->g.param_count + 1, sizeof *e->params);
  e->outputs = hlo_calloc((size_t)b->output_count + 1, sizeof *e->outputs);
  e->aliases = hlo_calloc((size_t)b->g.root_count + 1, sizeof *e->aliases);
  e->captured = hlo_calloc((size_t)trace->captured_count + 1, sizeof *e->captured);
  e->hint_bindings = hlo_calloc((size_t)e->symbol_count + 1, sizeof(int64_t));
  e->dtypes = hlo_calloc(inputs, 1);
  e->ranks = hlo_calloc(inputs, 1);
  e->dims = hlo_calloc(inputs, sizeof *e->dims);
  e->same_data_as = hlo_calloc(inputs, sizeof(int));
  e->same_handle_as = hlo_calloc(inputs, sizeof(int));
  *first_params = hlo_malloc(sizeof(cap_node *) * ((size_t)b->g.param_count + 1));
  return e->params && e->outputs && e->aliases && e->captured && e->hint_bindings && e->dtypes && e->ranks &&
         e->dims && e->same_data_as && e->same_handle_as && *first_params;
}

/* What a later call checks of its inputs and weights: their dtypes and dims as traced, and
 * how they share handles and data. */
static void note_inputs(entry_build *b) {
  cap_entry *e = b->e;
  const cap_trace *trace = b->trace;
  for (int c = 0; c < trace->captured_count; c++) {
    cap_entry_captured *k = &e->captured[c];
    const cap_node *n = trace->captured[c].node;
    k->handle = latch_retain(trace->captured[c].handle);
    k->dtype = n->dtype;
    k->rank = n->rank;
    memcpy(k->dims, n->dims, sizeof(int64_t) * n->rank);
    k->passed_as = find_caller(trace, trace->captured[c].handle);
    k->shares_data_with = find_input(trace, n);
    e->captured_count = c + 1;
  }
  for (int i = 0; i < trace->input_count; i++) {
    const cap_node *n = trace->input_nodes[i];
    e->dtypes[i] = n->dtype;
    e->ranks[i] = n->rank;
    memcpy(e->dims[i], n->dims, sizeof(int64_t) * n->rank);
    e->same_data_as[i] = find_input(trace, n);
    e->same_handle_as[i] = find_caller(trace, trace->callers[i]);
  }
}

/* The root computing node, or root_count when none does. */
static int root_of(const cap_graph *g, const cap_node *node) {
  int r = 0;
  while (r < g->root_count && g->roots[r] != node) r++;
  return r;
}

/* Where each graph parameter and each output comes from on a later call, and which root
 * goes back to which input or weight. */
static void note_sources(entry_build *b, cap_node **first_params) {
  cap_entry *e = b->e;
  const cap_trace *trace = b->trace;
  for (int p = 0; p < b->g.param_count; p++) {
    e->params[p] = source_of(trace, b->g.params[p]);
    first_params[p] = b->g.params[p];
  }
  for (int j = 0; j < b->output_count; j++) {
    latch_tensor *out = b->outputs[j];
    if (out->node->state == CAP_PENDING) {
      e->outputs[j] = (cap_src){CAP_SRC_ROOT, root_of(&b->g, out->node), NULL};
      continue;
    }
    /* An output the function did not compute: an input, a weight or its own data. */
    int i = -1, c = -1;
    for (int k = 0; k < trace->input_count && i < 0; k++)
      if (trace->inputs[k] == out) i = k;
    for (int k = 0; k < trace->captured_count && c < 0; k++)
      if (trace->captured[k].handle == out) c = k;
    if (i >= 0) e->outputs[j] = (cap_src){CAP_SRC_INPUT, i, NULL};
    else if (c >= 0) e->outputs[j] = (cap_src){CAP_SRC_CAPTURED, c, NULL};
    else e->outputs[j] = (cap_src){CAP_SRC_CONST, 0, cap_node_retain(out->node)};
  }
  for (int i = 0; i < trace->input_count; i++)
    if (assigned(trace->inputs[i], trace->input_nodes[i])) {
      e->aliases[e->alias_count].root = root_of(&b->g, trace->inputs[i]->node);
      e->aliases[e->alias_count++].target = (cap_src){CAP_SRC_INPUT, i, NULL};
    }
  for (int c = 0; c < trace->captured_count; c++)
    if (updated_weight(trace, c)) {
      e->aliases[e->alias_count].root = root_of(&b->g, trace->captured[c].handle->node);
      e->aliases[e->alias_count++].target = (cap_src){CAP_SRC_CAPTURED, c, NULL};
    }
}

/* A trace with symbolic dims keeps its graph as a template (and, on a backend that cannot
 * run a module directly, perhaps a plan of segments). */
static bool keep_template(entry_build *b) {
  cap_entry *e = b->e;
  if (!b->trace->symbolic || guard_program_symbol_count(e->program) == 0) return true;
  if (!build_template(e, b->trace, &b->g)) {
    cap_set_error("call: out of memory keeping the trace");
    return false;
  }
  if (!b->trace->rt->backend->execute_module) e->segments = plan_segments(e, b->trace, &b->g);
  return true;
}

/* A loaded executable may fail its first run, and the graph is gone by then: its module is
 * kept for a compile afresh (call_execute). Out of memory only costs that recovery. */
static void keep_source(cap_entry *e, const cap_graph *g) {
  hlo_diag unused = {0};
  e->source = cap_graph_lower(g, &unused);
}

cap_entry *cap_entry_build(cap_trace *trace, latch_tensor *const *outputs, int output_count,
                           cap_node ***first_params, bool *compiled, latch_status *status) {
  latch_runtime *rt = trace->rt;
  *first_params = NULL;
  *compiled = false;
  entry_build b = {.trace = trace, .outputs = outputs, .output_count = output_count};
  if (!(b.e = hlo_calloc(1, sizeof *b.e))) {
    cap_set_error("call: out of memory");
    *status = LATCH_ERR_INTERNAL;
    return NULL;
  }
  pthread_mutex_init(&b.e->spec_lock, NULL);
  *status = collect_graph(&b);
  if (*status != LATCH_OK) {
    cap_entry_free(rt, b.e);
    return NULL;
  }
  bool ok = allocate_entry(&b, first_params);
  if (ok) note_inputs(&b);
  if (ok) note_sources(&b, *first_params);
  ok = ok && keep_template(&b);
  if (ok && b.g.root_count && !b.e->segments) { /* segments: made at the first run, in specialize */
    b.e->cached = cap_graph_executable(rt, &b.g, compiled, status);
    ok = b.e->cached != NULL;
  }
  if (ok && b.e->cached && atomic_load(&((cap_exe *)cache_entry_value(b.e->cached))->on_trial))
    keep_source(b.e, &b.g);
  cap_graph_free(&b.g);
  if (!ok) {
    if (*status == LATCH_OK) *status = LATCH_ERR_INTERNAL;
    free(*first_params);
    *first_params = NULL;
    cap_entry_free(rt, b.e);
    return NULL;
  }
  return b.e;
}

void cap_entry_free(latch_runtime *rt, cap_entry *e) {
  if (!e) return;
  guard_program_free(e->program);
  cap_bindings_free(rt, e); /* bound executables share the entry's executable: they go first */
  if (e->cached) cache_table_release(rt->cache, e->cached);
  hlo_module_free(e->source);
  cap_segments_free(rt, e->segments);
  for (int p = 0; e->params && p < e->param_count; p++) cap_node_release(e->params[p].node);
  for (int j = 0; e->outputs && j < e->output_count; j++) cap_node_release(e->outputs[j].node);
  for (int c = 0; c < e->captured_count; c++) latch_release(e->captured[c].handle);
  for (int i = 0; e->nodes && i < e->node_count; i++) {
    free(e->nodes[i].operands);
    free(e->nodes[i].attrs);
    free(e->nodes[i].dims);
    free(e->nodes[i].attr_exprs);
  }
  pthread_mutex_destroy(&e->spec_lock);
  free(e->nodes);
  free(e->roots);
  free(e->params);
  free(e->outputs);
  free(e->aliases);
  free(e->captured);
  free(e->same_data_as);
  free(e->same_handle_as);
  free(e->hint_bindings);
  free(e->dtypes);
  free(e->ranks);
  free(e->dims);
  free(e);
}

/* ---- checking ---- */

bool cap_entry_check(const cap_entry *e, const guard_tensor *inputs, latch_tensor *const *handles, int input_count,
                     const guard_static *statics, int static_count, int64_t *bindings, guard_failure *why) {
  if (!guard_program_check(e->program, inputs, input_count, statics, static_count, bindings, why)) return false;
  for (int c = 0; c < e->captured_count; c++) {
    const cap_entry_captured *k = &e->captured[c];
    const cap_node *n = k->handle->node;
    if (n->dtype != k->dtype || n->rank != k->rank || memcmp(n->dims, k->dims, sizeof(int64_t) * n->rank)) {
      if (why) {
        *why = (guard_failure){.check = -1, .input = -1, .dim = -1};
        snprintf(why->message, sizeof why->message, "a tensor the function reads (not an input) changed shape");
      }
      return false;
    }
  }
  /* A weight passed as an input is that input in the graph: it must be passed so again,
   * and one that was not must not be now. Sharing data through other handles matters
   * only to an entry that updates something in place (a write through one is seen
   * through the other), as for inputs below. */
  bool exact = e->alias_count > 0;
  for (int c = 0; c < e->captured_count; c++) {
    const cap_entry_captured *k = &e->captured[c];
    int passed_as = -1, shares_data_with = -1;
    for (int i = input_count - 1; i >= 0; i--) {
      if (handles[i] == k->handle) passed_as = i;
      if (handles[i]->node == k->handle->node) shares_data_with = i;
    }
    if (passed_as != k->passed_as || (exact && shares_data_with != k->shares_data_with)) {
      if (why) {
        *why = (guard_failure){.check = -1, .input = -1, .dim = -1};
        snprintf(why->message, sizeof why->message,
                 "a tensor the function reads (not an input) is passed as an input, or shares an input's data, "
                 "unlike when traced");
      }
      return false;
    }
  }
  /* Inputs that were one tensor must still be. Inputs that were distinct may be one now
   * unless the entry updates something in place: then a write through one would be seen
   * through the other, which the trace did not do. */
  for (int i = 0; i < input_count; i++) {
    int data = e->same_data_as[i], handle = e->same_handle_as[i];
    bool same = handles[i]->node == handles[data]->node && (!exact || handles[i] == handles[handle]);
    for (int j = 0; same && exact && j < data; j++) same = handles[j]->node != handles[i]->node;
    for (int j = 0; same && exact && j < handle; j++) same = handles[j] != handles[i];
    if (!same) {
      if (why) {
        *why = (guard_failure){.check = -1, .input = i, .dim = -1};
        snprintf(why->message, sizeof why->message, "input %d shares its tensor with other inputs unlike when traced", i);
      }
      return false;
    }
  }
  return true;
}

/* ---- running ---- */

/* The node a parameter reads on this call; a weight still pending is computed first. */
static cap_node *param_node(latch_runtime *rt, const cap_entry *e, const cap_src *src, latch_tensor *const *inputs,
                            cap_node *seed) {
  switch (src->kind) {
  case CAP_SRC_INPUT: return inputs[src->index]->node;
  case CAP_SRC_CONST: return src->node;
  case CAP_SRC_SEED: return seed;
  case CAP_SRC_CAPTURED: {
    latch_tensor *h = e->captured[src->index].handle;
    cap_node *n = h->node;
    if (n->state == CAP_PENDING && cap_sync_nodes(rt, 1, &n, &h) != LATCH_OK) return NULL;
    return h->node->state == CAP_READY ? h->node : NULL;
  }
  case CAP_SRC_ROOT: break;
  }
  return NULL;
}

/* The handle's value becomes fresh: written into its buffer when nothing else can see that
 * buffer (so latch_data pointers stay valid), else the handle moves to the new node. */
static void store(latch_tensor *h, cap_node *fresh) {
  if (h->alias_of) { /* the trace's own pending assignment */
    cap_node *pending = h->node;
    h->node = h->alias_of;
    h->alias_of = NULL;
    cap_node_release(pending);
    cap_list_remove(h);
  }
  cap_node *old = h->node;
  if (old->state == CAP_READY && atomic_load(&old->refs) == 1 && old->value->refcount == 1 &&
      old->value != fresh->value && old->dtype == fresh->dtype && old->rank == fresh->rank &&
      !memcmp(old->dims, fresh->dims, sizeof(int64_t) * old->rank)) {
    memcpy(old->value->data, fresh->value->data, (size_t)hlo_shape_bytes(&old->value->shape));
    rt_value_touch(old->value);
    return;
  }
  h->node = cap_node_retain(fresh);
  cap_node_release(old);
  cap_list_remove(h);
}

static bool same_bindings(const int64_t *a, const int64_t *b, int n) {
  return n == 0 || memcmp(a, b, sizeof(int64_t) * (size_t)n) == 0;
}

/* The entry's executable bound to module (the template at this call's sizes), or NULL when
 * its backend cannot bind or refuses these sizes (the caller then compiles). Under
 * LATCH_CHECK every binding is compiled, so that each new executable's first compile and
 * execution are checked (in a child process; against the fp64 reference at its own sizes
 * under accuracy). */
static rt_executable *bind_entry(const latch_runtime *rt, const cap_entry *e, const hlo_module *module,
                                 const rt_backend **by) {
  cap_exe *compiled = e->cached ? cache_entry_value(e->cached) : NULL;
  if (!compiled || !compiled->backend->bind || rt->check_mode != MIN_MODE_OFF) return NULL;
  hlo_diag diag = {0};
  *by = compiled->backend;
  rt_executable *bound = compiled->backend->bind(compiled->exe, module, &diag);
  if (!bound && (rt->log & CAP_LOG_RECOMPILES))
    fprintf(stderr, "latch: recompile: %s cannot bind its executable to these sizes (%s), so it compiles them\n",
            module->name, diag.message);
  return bound;
}

/* A binding loaded from disk shares the entry's executable's kept buffers, as one bound
 * from it does (the weights another size reordered, an arena already faulted in). */
static void share_buffers(cap_entry *e, rt_executable *loaded, const rt_backend *backend) {
  cap_exe *compiled = e->cached ? cache_entry_value(e->cached) : NULL;
  if (compiled && compiled->backend == backend && backend->share_buffers)
    backend->share_buffers(loaded, compiled->exe);
}

bool cap_tmpl_dims(const cap_tmpl_node *t, const int64_t *bindings, int64_t *dims) {
  for (int d = 0; d < t->rank; d++)
    if (!guard_expr_eval(&t->dims[d], bindings, &dims[d]) || dims[d] < 0) return false;
  return true;
}

cap_node *cap_tmpl_instantiate(const cap_tmpl_node *t, cap_node *const *operands, const int64_t *bindings) {
  cap_node *n = cap_node_new((cap_op)t->op, t->sub, t->operand_count, operands, t->attr_count);
  if (!n) return NULL;
  n->dtype = t->dtype;
  n->rank = t->rank;
  bool ok = cap_tmpl_dims(t, bindings, n->dims);
  if (t->attr_count) memcpy(n->attrs, t->attrs, sizeof(int64_t) * (size_t)t->attr_count);
  for (int k = 0; ok && t->attr_exprs && k < t->attr_count && k < 4; k++)
    ok = guard_expr_eval(&t->attr_exprs[k], bindings, &n->attrs[k]);
  memcpy(n->scalar, t->scalar, sizeof n->scalar);
  if (ok && cap_node_finish(n)) return n;
  cap_node_release(n);
  return NULL;
}

/* Keeps spec for bindings (copied) in the entry; NULL with the error set when memory runs out. */
static cap_kept *keep_spec(latch_runtime *rt, cap_entry *e, cap_spec *spec, const int64_t *bindings,
                           latch_status *status) {
  spec->bindings = (int64_t *)bindings; /* copied by cap_bindings_keep */
  cap_kept *kept = cap_bindings_keep(rt, e, spec);
  if (!kept) {
    cap_set_error("call: out of memory");
    *status = LATCH_ERR_INTERNAL;
  }
  return kept;
}

/* An entry run in segments: the moved segments' executables at bindings. NULL with *status
 * LATCH_OK when a segment did not compile (the whole graph runs instead). */
static cap_kept *specialize_segments(latch_runtime *rt, cap_entry *e, const int64_t *bindings,
                                     cap_node *const *params, cap_run_kind *kind, latch_status *status) {
  bool compiled = false;
  cap_spec segmented = {.segment_count = cap_segments_count(e->segments)};
  segmented.segment_runs = cap_segments_bind(rt, e, bindings, params, &compiled, status);
  if (!segmented.segment_runs) {
    *status = LATCH_OK;
    return NULL;
  }
  *kind = compiled ? CAP_RUN_SPECIALIZED : CAP_RUN_INSTANTIATED;
  return keep_spec(rt, e, &segmented, bindings, status);
}

/* The template at bindings: made[] its nodes, over proxies[], stand-ins for the parameters
 * (compiling needs their shapes only, and one distinct leaf per parameter even when this
 * call passes one tensor twice). False when memory runs out or a size overflows. */
static bool instantiate_template(const cap_entry *e, const int64_t *bindings, cap_node *const *params,
                                 cap_node **made, cap_node **proxies) {
  for (int p = 0; p < e->param_count; p++)
    if (!(proxies[p] = cap_node_stand_in(params[p]->dtype, params[p]->rank, params[p]->dims))) return false;
  bool ok = true;
  for (int i = 0; ok && i < e->node_count; i++) {
    const cap_tmpl_node *t = &e->nodes[i];
    cap_node *operands[16], **list = operands;
    if (t->operand_count > 16 && !(list = hlo_malloc(sizeof(cap_node *) * (size_t)t->operand_count))) return false;
    for (int k = 0; k < t->operand_count; k++)
      list[k] = t->operands[k] >= 0 ? made[t->operands[k]] : proxies[-1 - t->operands[k]];
    ok = (made[i] = cap_tmpl_instantiate(t, list, bindings)) != NULL;
    if (list != operands) free(list);
  }
  return ok;
}

/* What runs g, the template instantiated: its module on a backend that runs modules; else
 * the entry's executable bound to it (an earlier process's binding from the disk cache, or
 * bound now and saved), or failing that a compile of g. With failure (why what a cache tier
 * gave for g failed its first run), made afresh: bound now and saved over the disk's
 * binding, or compiled afresh and put in the tiers in place of their entry. */
static void spec_of_graph(latch_runtime *rt, cap_entry *e, const cap_graph *g, const char *failure, cap_spec *spec,
                          cap_run_kind *kind, latch_status *status) {
  hlo_diag diag = {0};
  *kind = CAP_RUN_INSTANTIATED;
  if (rt->backend->execute_module) {
    spec->module = cap_graph_lower(g, &diag);
    if (spec->module && hlo_verify_module(spec->module, &diag) != HLO_OK) {
      hlo_module_free(spec->module);
      spec->module = NULL;
    }
    if (!spec->module) cap_set_error("call: instantiating a symbolic trace: %s", diag.message);
    return;
  }
  if (failure) cap_first_run_warn("binding", g->key, failure, "binding it afresh and saving it in its place");
  spec->bound = failure ? NULL : cap_graph_load_binding(rt, g);
  spec->bound_by = g->backend;
  spec->loaded = spec->bound != NULL;
  if (spec->bound) {
    share_buffers(e, spec->bound, g->backend);
  } else {
    hlo_module *module = cap_graph_lower(g, &diag);
    spec->bound = module ? bind_entry(rt, e, module, &spec->bound_by) : NULL;
    hlo_module_free(module);
    if (spec->bound) cap_graph_save_binding(rt, g, spec->bound);
  }
  if (!spec->bound) {
    bool compiled = false;
    spec->cached = cap_graph_executable(rt, g, &compiled, status);
    cap_exe *exe = spec->cached ? cache_entry_value(spec->cached) : NULL;
    if (failure && exe && atomic_load(&exe->on_trial)) spec->cached = cap_exe_recompile(rt, g, NULL, spec->cached, status);
    *kind = CAP_RUN_SPECIALIZED;
  }
}

/* Whether g reads exactly the stand-ins, in order, and computes as many roots as the entry. */
static bool same_graph(const cap_entry *e, const cap_graph *g, cap_node *const *proxies) {
  bool same = g->param_count == e->param_count && g->root_count == e->root_count;
  for (int p = 0; same && p < g->param_count; p++) same = g->params[p] == proxies[p];
  return same;
}

/* What runs a binding the trace did not see. The template is instantiated with this call's
 * sizes (nodes, then HLO through the usual lowering); a backend that can run a module
 * without compiling it (execute_module) runs that module, one that can bind its compiled
 * executable to other sizes (bind) loads the binding an earlier process saved in the disk
 * cache or binds it (and saves it), and the rest compile it like any graph, keyed in the
 * shared cache. Either way the result is kept per binding. */
static cap_kept *specialize(latch_runtime *rt, cap_entry *e, const int64_t *bindings, cap_node *const *params,
                            const char *failure, cap_run_kind *kind, latch_status *status) {
  cap_kept *found = failure ? NULL : cap_bindings_find(e, bindings);
  if (found) return found;
  if (e->segments && !failure) {
    cap_kept *kept = specialize_segments(rt, e, bindings, params, kind, status);
    if (kept || *status != LATCH_OK) return kept;
  }
  cap_node **made = hlo_calloc((size_t)e->node_count + 1, sizeof *made);
  cap_node **roots = hlo_malloc(sizeof(cap_node *) * ((size_t)e->root_count + 1));
  cap_node **proxies = hlo_calloc((size_t)e->param_count + 1, sizeof *proxies);
  cap_spec spec = {0};
  cap_graph g;
  bool ok = made && roots && proxies && instantiate_template(e, bindings, params, made, proxies);
  if (!ok) cap_set_error("call: out of memory, or a size overflowed, instantiating a symbolic trace");
  for (int r = 0; ok && r < e->root_count; r++) roots[r] = made[e->roots[r]];
  if (ok && cap_graph_collect(&g, rt->backend, e->root_count, roots, NULL) == LATCH_OK) {
    if (same_graph(e, &g, proxies)) spec_of_graph(rt, e, &g, failure, &spec, kind, status);
    else cap_set_error("call: a symbolic trace did not instantiate to the same graph (a latch bug)");
    cap_graph_free(&g);
  }
  for (int i = 0; made && i < e->node_count; i++) cap_node_release(made[i]);
  for (int p = 0; proxies && p < e->param_count; p++) cap_node_release(proxies[p]);
  free(proxies);
  free(made);
  free(roots);
  if (!spec.cached && !spec.module && !spec.bound) {
    if (*status == LATCH_OK) *status = LATCH_ERR_INTERNAL;
    return NULL;
  }
  return keep_spec(rt, e, &spec, bindings, status);
}

/* One call's run of an entry: the graph's parameters, private shells around their values,
 * and the roots computed. Arrays of few elements live here, so a call allocates nothing. */
enum { CALL_FEW = 16 };
typedef struct entry_call {
  latch_runtime *rt;
  cap_entry *e;
  latch_tensor *const *inputs;
  const int64_t *bindings;
  cap_node *seed_node, **params, *param_buffer[CALL_FEW];
  rt_value **views, *view_buffer[CALL_FEW], *shells, shell_buffer[CALL_FEW];
  cap_node **roots, *root_buffer[CALL_FEW];
  cap_kept *held; /* the binding run, kept from being dropped while it runs */
} entry_call;

/* Not a zeroed struct: the shells' buffer alone is kilobytes, and a hit should not clear them. */
static latch_status call_open(entry_call *c, latch_runtime *rt, cap_entry *e, latch_tensor *const *inputs) {
  int n = e->param_count;
  c->rt = rt, c->e = e, c->inputs = inputs, c->bindings = NULL, c->seed_node = NULL, c->held = NULL;
  c->roots = e->root_count > CALL_FEW ? hlo_calloc((size_t)e->root_count, sizeof(cap_node *)) : c->root_buffer;
  if (c->roots) memset(c->roots, 0, sizeof(cap_node *) * (size_t)e->root_count);
  c->params = n > CALL_FEW ? hlo_malloc(sizeof(cap_node *) * (size_t)n) : c->param_buffer;
  c->shells = n > CALL_FEW ? hlo_malloc(sizeof(rt_value) * (size_t)n) : c->shell_buffer;
  c->views = n > CALL_FEW ? hlo_malloc(sizeof(rt_value *) * (size_t)n) : c->view_buffer;
  if (!c->params || !c->shells || !c->views || !c->roots) {
    cap_set_error("call: out of memory");
    return LATCH_ERR_INTERNAL;
  }
  return LATCH_OK;
}

static void call_close(entry_call *c) {
  cap_bindings_release(c->rt, c->held);
  for (int r = 0; c->roots && r < c->e->root_count; r++) cap_node_release(c->roots[r]);
  cap_node_release(c->seed_node);
  if (c->params != c->param_buffer) free(c->params);
  if (c->shells != c->shell_buffer) free(c->shells);
  if (c->views != c->view_buffer) free(c->views);
  if (c->roots != c->root_buffer) free(c->roots);
}

/* The parameter nodes (first_params: the trace's first run; else from their sources), and
 * private shells around their shared data: the backend's retains and releases touch this
 * call's memory only (as in sync.c), and nothing is allocated for them. */
static latch_status call_params(entry_call *c, uint64_t seed, cap_node *const *first_params) {
  latch_status status = LATCH_OK;
  int n = c->e->param_count;
  for (int p = 0; p < n && status == LATCH_OK; p++) {
    if (first_params) {
      c->params[p] = first_params[p];
      continue;
    }
    const cap_src *src = &c->e->params[p];
    if (src->kind == CAP_SRC_SEED && !c->seed_node && !(c->seed_node = cap_seed_node(seed))) status = LATCH_ERR_INTERNAL;
    c->params[p] = param_node(c->rt, c->e, src, c->inputs, c->seed_node);
    if (!c->params[p] && status == LATCH_OK) {
      status = LATCH_ERR_INTERNAL;
      cap_set_error("call: a tensor the function reads could not be computed");
    }
  }
  for (int p = 0; p < n && status == LATCH_OK; p++) {
    c->shells[p] = *c->params[p]->value;
    c->shells[p].refcount = 1;
    c->views[p] = &c->shells[p];
  }
  return status;
}

/* One execute of run (the module itself, a bound executable or the cached one); the error
 * set on failure. */
static latch_status execute_once(entry_call *c, const cap_spec *run, rt_value **result) {
  latch_runtime *rt = c->rt;
  int n = c->e->param_count;
  hlo_diag diag; /* not zeroed whole (1 KB a call): status and message[0] are what is read */
  hlo_diag_clear(&diag);
  uint64_t start = cap_now_ns();
  latch_status status;
  if (run->module) {
    status = cap_status(rt->backend->execute_module(run->module, c->views, n, result, &diag));
  } else if (run->bound) {
    status = cap_status(run->bound_by->execute(run->bound, c->views, n, result, &diag));
  } else {
    cap_exe *exe = cache_entry_value(run->cached);
    status = cap_status(exe->backend->execute(exe->exe, c->views, n, result, &diag));
  }
  atomic_fetch_add(&rt->execute_ns, cap_now_ns() - start);
  if (status != LATCH_OK) cap_set_error("call: %s", diag.message);
  return status;
}

/* The entry's first run failed on its executable loaded from a cache tier: compiled afresh
 * from the kept source (the entry is nobody else's yet), the entry holding the new one. False
 * when that is not the case, or the compile failed too (*status then says why). */
static bool recompile_cached(entry_call *c, const cap_spec *run, latch_status *status) {
  cap_entry *e = c->e;
  cap_exe *exe = run->cached ? cache_entry_value(run->cached) : NULL;
  if (!exe || run->cached != e->cached || !e->source || !atomic_load(&exe->on_trial)) return false;
  cap_graph stand_in = {.key = cache_entry_key(e->cached), .backend = exe->backend,
                        .param_count = exe->param_count, .root_count = exe->output_count};
  e->cached = cap_exe_recompile(c->rt, &stand_in, e->source, e->cached, status);
  return e->cached != NULL;
}

/* The binding run (c->held) failed its first run on what a cache tier gave it (a binding
 * loaded from disk, or a specialization loaded from a tier): taken out of the entry and made
 * afresh (specialize), c->held the new one. False when that is not the case, or making it
 * failed too (*status then says why). */
static bool respecialize(entry_call *c, const cap_spec *run, latch_status *status) {
  cap_kept *held = c->held;
  cap_exe *exe = run->cached ? cache_entry_value(run->cached) : NULL;
  if (!held || run->bound != held->spec.bound || run->cached != held->spec.cached ||
      !(atomic_load(&held->on_trial) || (exe && atomic_load(&exe->on_trial))))
    return false;
  char failure[sizeof ((hlo_diag *)0)->message];
  snprintf(failure, sizeof failure, "%s", latch_last_error());
  cap_bindings_forget(c->rt, c->e, held);
  cap_run_kind kind;
  latch_status made = LATCH_OK;
  c->held = specialize(c->rt, c->e, c->bindings, c->params, failure, &kind, &made);
  cap_bindings_release(c->rt, held);
  if (!c->held) *status = made != LATCH_OK ? made : *status;
  return c->held != NULL;
}

/* Whether run is on trial: what a cache tier (or rank 0) gave for it has not run yet. */
static bool on_trial(const entry_call *c, const cap_spec *run) {
  cap_exe *exe = run->cached ? cache_entry_value(run->cached) : NULL;
  return (exe && atomic_load(&exe->on_trial)) || (c->held && atomic_load(&c->held->on_trial));
}

/* After run failed on trial: whether making it afresh keeps the ranks in step (the entry
 * named otherwise: the executable's, else the trace's). */
static bool in_step(const entry_call *c, const cap_spec *run, unsigned mark) {
  const cache_entry *named = run->cached ? run->cached : c->e->cached;
  return cap_first_run_in_step(c->rt, named ? cache_entry_key(named) : (cache_key){0}, mark);
}

/* Runs one executable and keeps its results as the roots. */
static latch_status call_execute(entry_call *c, const cap_spec *run) {
  rt_value *result = NULL;
  bool trial = on_trial(c, run);
  unsigned mark = trial ? cap_first_run_mark(c->rt) : 0;
  latch_status status = execute_once(c, run, &result);
  cap_spec fresh;
  bool recover = status != LATCH_OK && trial && in_step(c, run, mark);
  bool again = recover && recompile_cached(c, run, &status);
  if (again) fresh = (cap_spec){.cached = c->e->cached};
  else if (recover && (again = respecialize(c, run, &status))) fresh = c->held->spec;
  if (again) {
    run = &fresh;
    rt_value_release(result);
    result = NULL;
    status = execute_once(c, run, &result);
  }
  cap_exe *ran = status == LATCH_OK && run->cached ? cache_entry_value(run->cached) : NULL;
  if (ran && atomic_load_explicit(&ran->on_trial, memory_order_relaxed)) /* a hit writes nothing shared */
    atomic_store(&ran->on_trial, false);
  if (status == LATCH_OK && c->held && atomic_load_explicit(&c->held->on_trial, memory_order_relaxed))
    atomic_store(&c->held->on_trial, false);
  atomic_fetch_add(&c->rt->syncs, 1);
  if (status == LATCH_OK && (!result || result->shape.dtype != HLO_TUPLE || result->tuple_count != c->e->root_count)) {
    cap_set_error("call: the backend returned a wrong number of outputs");
    status = LATCH_ERR_INTERNAL;
  }
  for (int r = 0; status == LATCH_OK && r < c->e->root_count; r++) {
    rt_value *out = cap_take_output(result->tuple[r], c->views, c->e->param_count);
    if (!out || !(c->roots[r] = cap_node_data(out))) {
      status = LATCH_ERR_INTERNAL;
      cap_set_error("call: out of memory");
    }
  }
  rt_value_release(result);
  return status;
}

/* The roots at these bindings: the trace's executable, or (a symbolic entry at other sizes,
 * or one run in segments) what specialize makes or kept for them. */
static latch_status call_roots(entry_call *c, const int64_t *bindings, cap_run_kind *kind, uint64_t *instantiate_ns) {
  cap_entry *e = c->e;
  latch_status status = LATCH_OK;
  cap_spec run = {.cached = e->cached};
  if (e->nodes && (e->segments || !same_bindings(bindings, e->hint_bindings, e->symbol_count))) {
    uint64_t start = cap_now_ns();
    c->bindings = bindings;
    c->held = specialize(c->rt, e, bindings, c->params, NULL, kind, &status);
    run = c->held ? c->held->spec : (cap_spec){0};
    if (*kind == CAP_RUN_INSTANTIATED) *instantiate_ns = cap_now_ns() - start;
  }
  if (run.segment_runs) {
    status = cap_segments_run(c->rt, e, run.segment_runs, bindings, c->params, c->views, c->roots);
    atomic_fetch_add(&c->rt->syncs, 1);
  } else if (run.cached || run.module || run.bound) {
    status = call_execute(c, &run);
  }
  return status;
}

/* The call's outputs, and the in-place updates written back to inputs and weights. */
static latch_status call_outputs(entry_call *c, latch_tensor **outputs) {
  cap_entry *e = c->e;
  for (int j = 0; j < e->output_count; j++) {
    const cap_src *src = &e->outputs[j];
    switch (src->kind) {
    case CAP_SRC_ROOT: outputs[j] = cap_wrap(c->rt, cap_node_retain(c->roots[src->index])); break;
    case CAP_SRC_INPUT: outputs[j] = latch_retain(c->inputs[src->index]); break;
    case CAP_SRC_CAPTURED: outputs[j] = latch_retain(e->captured[src->index].handle); break;
    default: outputs[j] = cap_wrap(c->rt, cap_node_retain(src->node)); break;
    }
    if (!outputs[j]) return LATCH_ERR_INTERNAL;
  }
  for (int a = 0; a < e->alias_count; a++) {
    const cap_src *target = &e->aliases[a].target;
    latch_tensor *h = target->kind == CAP_SRC_INPUT ? c->inputs[target->index] : e->captured[target->index].handle;
    store(h, c->roots[e->aliases[a].root]);
  }
  return LATCH_OK;
}

latch_status cap_entry_run(latch_runtime *rt, cap_entry *e, latch_tensor *const *inputs, uint64_t seed,
                           const int64_t *bindings, cap_node *const *first_params, latch_tensor **outputs,
                           cap_run_kind *kind, uint64_t *instantiate_ns) {
  *kind = CAP_RUN_PLAIN;
  entry_call c;
  latch_status status = call_open(&c, rt, e, inputs);
  if (status == LATCH_OK) status = call_params(&c, seed, first_params);
  if (status == LATCH_OK && e->root_count) status = call_roots(&c, bindings, kind, instantiate_ns);
  if (status == LATCH_OK) status = call_outputs(&c, outputs);
  call_close(&c);
  if (first_params) { /* the entry's first run is over: nothing left to compile afresh */
    hlo_module_free(e->source);
    e->source = NULL;
  }
  return status;
}
