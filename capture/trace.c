/* The trace context of a traced function call: input dims (static or symbolic), the
 * symbolic dims of the nodes the trace makes, the tensors it reaches that are not inputs,
 * the reads that make a function untraceable, and the latch_size table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"

static atomic_uint trace_counter = 1;

static bool grow(void **array, int *capacity, int count, size_t size) {
  if (count < *capacity) return true;
  int next = *capacity ? *capacity * 2 : 16;
  void *grown = hlo_realloc(*array, (size_t)next * size);
  if (!grown) return false;
  *array = grown;
  *capacity = next;
  return true;
}

latch_status cap_trace_begin(cap_trace *trace, latch_runtime *rt, int input_count, latch_tensor *const *inputs,
                             const bool *symbolic, const bool *independent) {
  memset(trace, 0, sizeof *trace);
  trace->rt = rt;
  trace->id = atomic_fetch_add(&trace_counter, 1);
  if (!trace->id) trace->id = atomic_fetch_add(&trace_counter, 1); /* 0 means "no trace" */
  trace->guards = guard_set_new();
  trace->input_count = input_count;
  trace->callers = inputs;
  trace->inputs = hlo_calloc((size_t)input_count + 1, sizeof *trace->inputs);
  trace->input_nodes = hlo_calloc((size_t)input_count + 1, sizeof *trace->input_nodes);
  trace->input_dims = hlo_calloc((size_t)input_count + 1, sizeof *trace->input_dims);
  bool ok = trace->guards && trace->inputs && trace->input_nodes && trace->input_dims;
  for (int i = 0; ok && i < input_count; i++) {
    int first = 0;
    while (inputs[first] != inputs[i]) first++;
    trace->inputs[i] = first < i ? latch_retain(trace->inputs[first]) : cap_wrap(rt, cap_node_retain(inputs[i]->node));
    ok = trace->inputs[i] != NULL;
  }
  if (!ok) {
    cap_trace_free(trace);
    cap_set_error("call: out of memory starting a trace");
    return LATCH_ERR_INTERNAL;
  }
  for (int i = 0; i < input_count; i++) {
    cap_node *node = inputs[i]->node;
    trace->input_nodes[i] = node;
    guard_set_input(trace->guards, i, (hlo_dtype)node->dtype, node->rank);
    for (int d = 0; d < node->rank; d++) {
      int at = i * HLO_MAX_RANK + d;
      if (symbolic && symbolic[at]) {
        guard_expr e = guard_set_dim_symbolic(trace->guards, i, d, node->dims[d], independent && independent[at]);
        trace->input_dims[i][d] = e;
        if (!guard_expr_is_const(&e, NULL)) trace->symbolic = true;
      } else {
        guard_set_dim_static(trace->guards, i, d, node->dims[d]);
        trace->input_dims[i][d] = guard_expr_const(node->dims[d]);
      }
    }
  }
  cap_ctx_current()->trace = trace;
  return LATCH_OK;
}

void cap_trace_end(cap_trace *trace) {
  cap_ctx *ctx = cap_ctx_current();
  if (ctx->trace == trace) ctx->trace = NULL;
}

void cap_trace_drop_inputs(cap_trace *trace) {
  for (int i = 0; trace->inputs && i < trace->input_count; i++) latch_release(trace->inputs[i]);
  free(trace->inputs);
  trace->inputs = NULL;
}

void cap_trace_free(cap_trace *trace) {
  cap_trace_end(trace);
  cap_trace_drop_inputs(trace);
  guard_set_free(trace->guards);
  for (int i = 0; i < trace->captured_count; i++) latch_release(trace->captured[i].handle);
  cap_node_release(trace->seed);
  free(trace->captured);
  free(trace->input_nodes);
  free(trace->input_dims);
  free(trace->dims);
  free(trace->sizes);
  memset(trace, 0, sizeof *trace);
}

void cap_trace_node_dims(cap_trace *trace, const cap_node *node, guard_expr *out) {
  if (node->trace_id == trace->id && node->trace_sym >= 0) {
    memcpy(out, &trace->dims[node->trace_sym], sizeof(guard_expr) * node->rank);
    return;
  }
  if (node->trace_id != trace->id)
    for (int i = 0; i < trace->input_count; i++)
      if (trace->input_nodes[i] == node) {
        memcpy(out, trace->input_dims[i], sizeof(guard_expr) * node->rank);
        return;
      }
  for (int d = 0; d < node->rank; d++) out[d] = guard_expr_const(node->dims[d]);
}

/* Slices keep their 4 attrs after their dims: start and stop may be symbolic. */
static int stored_count(const cap_node *node) { return node->rank + (node->op == CAP_SLICE ? 4 : 0); }

void cap_trace_new_node(cap_trace *trace, cap_node *node) {
  node->trace_id = trace->id;
  node->trace_sym = -1;
  if (!trace->symbolic) return;
  guard_expr dims[HLO_MAX_RANK + 4];
  int count = stored_count(node);
  cap_symbolic_infer(trace, node, dims);
  bool all_const = true;
  for (int d = 0; d < count; d++) {
    /* Inference must agree with the op's own shape rule in this call; a disagreement is a
     * latch bug, and the trace is then not kept rather than kept wrong. */
    int64_t want = d < node->rank ? node->dims[d] : node->attrs[d - node->rank];
    if (guard_set_hint(trace->guards, &dims[d]) != want) {
      trace->failed = true;
      cap_set_error("trace: symbolic size %d of op %d disagrees with its shape", d, node->op);
    }
    all_const = all_const && guard_expr_is_const(&dims[d], NULL);
  }
  if (all_const || count == 0) return;
  while (trace->dim_count + count > trace->dim_capacity)
    if (!grow((void **)&trace->dims, &trace->dim_capacity, trace->dim_capacity, sizeof(guard_expr))) {
      trace->failed = true;
      return;
    }
  node->trace_sym = trace->dim_count;
  memcpy(&trace->dims[trace->dim_count], dims, sizeof(guard_expr) * (size_t)count);
  trace->dim_count += count;
}

bool cap_trace_node_attrs(cap_trace *trace, const cap_node *node, guard_expr *out) {
  if (node->op != CAP_SLICE || node->trace_id != trace->id || node->trace_sym < 0) return false;
  memcpy(out, &trace->dims[node->trace_sym + node->rank], sizeof(guard_expr) * 4);
  return true;
}

static bool is_input_node(const cap_trace *trace, const cap_node *node) {
  for (int i = 0; i < trace->input_count; i++)
    if (trace->input_nodes[i] == node) return true;
  return false;
}

static int caller_index(const cap_trace *trace, const latch_tensor *h) {
  for (int i = 0; i < trace->input_count; i++)
    if (trace->callers[i] == h) return i;
  return -1;
}

static bool captured_already(const cap_trace *trace, const latch_tensor *h, const cap_node *node) {
  for (int k = 0; k < trace->captured_count; k++)
    if (trace->captured[k].handle == h && trace->captured[k].node == node) return true;
  return false;
}

static void capture(cap_trace *trace, latch_tensor *h, cap_node *node) {
  if (captured_already(trace, h, node)) return;
  if (!grow((void **)&trace->captured, &trace->captured_capacity, trace->captured_count, sizeof(cap_captured))) {
    trace->failed = true;
    return;
  }
  trace->captured[trace->captured_count++] = (cap_captured){latch_retain(h), node};
}

void cap_trace_operands(cap_trace *trace, int count, latch_tensor *const *operands) {
  for (int i = 0; i < count; i++) {
    latch_tensor *h = operands[i];
    if (!h) continue;
    /* The function was given its own handles for its inputs: reaching a caller's handle
     * means reaching it as a weight. Kept with the value it had when the call began (a
     * mirrored assignment may already have replaced it), so the entry guards that it
     * is passed as that input again. */
    int caller = caller_index(trace, h);
    if (caller >= 0) {
      capture(trace, h, trace->input_nodes[caller]);
      continue;
    }
    cap_node *node = h->node;
    if (node->state == CAP_ERROR || (node->state == CAP_PENDING && node->trace_id == trace->id)) continue;
    if (node->state == CAP_PENDING) {
      /* Work pending from before the call: compute it now, so that the trace reads it as
       * data, as it would read a weight. */
      if (cap_sync_nodes(h->rt, 1, &node, &h) != LATCH_OK) {
        trace->failed = true;
        continue;
      }
      node = h->node;
    }
    /* Another handle onto an input's data is taken as that input: the function's own
     * handles (latch_cast to the same dtype makes one) cannot be told from a weight that
     * shares an input's node through another handle. */
    if (is_input_node(trace, node)) continue;
    capture(trace, h, node);
  }
}

/* Whether the captured handle is data the function made during this trace and no longer
 * holds: its references are the trace's captures of it and the outputs that return it. */
static bool temporary(const cap_trace *trace, const latch_tensor *h, latch_tensor *const *outputs, int output_count) {
  if (h->made_in_trace != trace->id) return false;
  int held = 0;
  for (int c = 0; c < trace->captured_count; c++) held += trace->captured[c].handle == h;
  for (int j = 0; j < output_count; j++) held += outputs[j] == h;
  return atomic_load(&h->refs) == held;
}

void cap_trace_forget_temporaries(cap_trace *trace, latch_tensor *const *outputs, int output_count) {
  bool *drop = hlo_calloc((size_t)trace->captured_count + 1, sizeof *drop);
  if (!drop) {
    trace->failed = true; /* no entry is kept: the call computes its values the ordinary way */
    return;
  }
  for (int c = 0; c < trace->captured_count; c++) drop[c] = temporary(trace, trace->captured[c].handle, outputs, output_count);
  int kept = 0;
  for (int c = 0; c < trace->captured_count; c++) {
    if (drop[c]) latch_release(trace->captured[c].handle);
    else trace->captured[kept++] = trace->captured[c];
  }
  trace->captured_count = kept;
  free(drop);
}

void cap_trace_assigned(cap_trace *trace, latch_tensor *dst) {
  for (int i = 0; trace->inputs && i < trace->input_count; i++) {
    latch_tensor *own = trace->inputs[i], *caller = (latch_tensor *)trace->callers[i];
    if (dst == own && caller != dst) cap_handle_follow(caller, dst);
    else if (dst == caller && own != dst) cap_handle_follow(own, dst);
  }
}

void cap_trace_value_read(cap_trace *trace, const char *what) {
  if (!trace->value_read) trace->value_read = what;
}

void cap_trace_dim_read(cap_trace *trace, const cap_node *node, int dim) {
  if (!trace->symbolic) return;
  guard_expr dims[HLO_MAX_RANK];
  cap_trace_node_dims(trace, node, dims);
  if (!guard_expr_is_const(&dims[dim], NULL))
    guard_set_compare(trace->guards, dims[dim], GUARD_EQ, guard_expr_const(node->dims[dim]));
}

/* ---- latch_size ---- */

static latch_size push_size(cap_trace *trace, guard_expr e) {
  int64_t value = guard_set_hint(trace->guards, &e);
  if (guard_expr_is_const(&e, NULL)) return (latch_size){value, -1};
  if (!grow((void **)&trace->sizes, &trace->size_capacity, trace->size_count, sizeof(guard_expr))) {
    trace->failed = true;
    return (latch_size){value, -1};
  }
  trace->sizes[trace->size_count] = e;
  return (latch_size){value, trace->size_count++};
}

static guard_expr size_expr(cap_trace *trace, latch_size s) {
  return trace && s.sym >= 0 && s.sym < trace->size_count ? trace->sizes[s.sym] : guard_expr_const(s.value);
}

/* The trace a size belongs to, or NULL for plain sizes. */
static cap_trace *size_trace(latch_size a, latch_size b) {
  cap_trace *trace = cap_ctx_current()->trace;
  return trace && (a.sym >= 0 || b.sym >= 0) ? trace : NULL;
}

latch_size latch_size_of(const latch_tensor *t, int dim) {
  if (!t) return (latch_size){-1, -1};
  int d = cap_norm_dim(dim, t->node->rank);
  if (d < 0) return (latch_size){-1, -1};
  cap_trace *trace = cap_ctx_current()->trace;
  if (!trace || !trace->symbolic) return (latch_size){t->node->dims[d], -1};
  guard_expr dims[HLO_MAX_RANK];
  cap_trace_node_dims(trace, t->node, dims);
  return push_size(trace, dims[d]);
}

latch_size latch_size_const(int64_t value) { return (latch_size){value, -1}; }

/* A result that does not fit a polynomial is specialized: its operands are guarded. */
static latch_size combine(latch_size a, latch_size b, bool multiply) {
  cap_trace *trace = size_trace(a, b);
  int64_t plain = multiply ? a.value * b.value : a.value + b.value;
  if (!trace) return (latch_size){plain, -1};
  guard_expr x = size_expr(trace, a), y = size_expr(trace, b), out;
  if (multiply ? guard_expr_mul(x, y, &out) : guard_expr_add(x, y, &out)) return push_size(trace, out);
  guard_set_compare(trace->guards, x, GUARD_EQ, guard_expr_const(a.value));
  guard_set_compare(trace->guards, y, GUARD_EQ, guard_expr_const(b.value));
  return (latch_size){plain, -1};
}

latch_size latch_size_mul(latch_size a, latch_size b) { return combine(a, b, true); }
latch_size latch_size_add(latch_size a, latch_size b) { return combine(a, b, false); }

bool latch_size_compare(latch_cmp op, latch_size a, latch_size b) {
  cap_trace *trace = size_trace(a, b);
  if (trace) return guard_set_compare(trace->guards, size_expr(trace, a), (guard_rel)op, size_expr(trace, b));
  switch (op) {
  case LATCH_EQ: return a.value == b.value;
  case LATCH_NE: return a.value != b.value;
  case LATCH_LT: return a.value < b.value;
  case LATCH_LE: return a.value <= b.value;
  case LATCH_GT: return a.value > b.value;
  case LATCH_GE: return a.value >= b.value;
  }
  return false;
}

/* The symbolic dims latch_reshape_sized asked for, read by symbolic.c (one reshape at a
 * time per thread). */
static _Thread_local const latch_size *reshape_sizes;

const latch_size *cap_trace_reshape_sizes(void) { return reshape_sizes; }

latch_tensor *latch_reshape_sized(latch_tensor *x, int rank, const latch_size *dims) {
  if (rank < 0 || rank > HLO_MAX_RANK || (rank && !dims)) return cap_error(x ? x->rt : NULL, "reshape: rank %d is out of range", rank);
  int64_t plain[HLO_MAX_RANK];
  for (int i = 0; i < rank; i++) {
    plain[i] = dims[i].value;
    if (plain[i] < 0) return cap_error(x ? x->rt : NULL, "reshape_sized: dim %d is negative", i);
  }
  reshape_sizes = dims;
  latch_tensor *out = latch_reshape(x, rank, plain);
  reshape_sizes = NULL;
  return out;
}

guard_expr cap_trace_size_expr(cap_trace *trace, latch_size s) { return size_expr(trace, s); }

static _Thread_local const latch_size *slice_sizes;

const latch_size *cap_trace_slice_sizes(void) { return slice_sizes; }

latch_tensor *latch_slice_sized(latch_tensor *x, int dim, latch_size start, latch_size stop, int64_t step) {
  if (!x) return cap_error(NULL, "slice_sized: NULL tensor");
  int d = cap_norm_dim(dim, x->node->rank);
  if (d >= 0 && !(start.value >= 0 && start.value <= stop.value && stop.value <= x->node->dims[d]))
    return cap_error(x->rt, "slice_sized: [%lld, %lld) is not within dim %d of size %lld", (long long)start.value,
                     (long long)stop.value, dim, (long long)x->node->dims[d]);
  latch_size bounds[2] = {start, stop};
  slice_sizes = bounds;
  latch_tensor *out = latch_slice(x, dim, start.value, stop.value, step);
  slice_sizes = NULL;
  return out;
}
