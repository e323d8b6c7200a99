/* Shape shrinking, after the ops are cut: the repro's parameters are made smaller. A
 * candidate replaces one dim size shared by the parameters (every dim of that size, in the
 * parameters and in the dims that broadcasts, reshapes and iotas declare) with a smaller one;
 * every other instruction's shape is inferred again from its operands, so the graph stays
 * consistent or the candidate is invalid and costs no check. The new inputs are the leading
 * block of the old ones (the data keep their values where they remain). Sizes are tried
 * smallest first (1, then v/2^k up to v/2), the sizes worth most bytes first, so batch goes
 * to 1 and spatial and feature dims shrink as far as the failure allows. Called computations
 * (loops, calls, fusions, conditionals, reducers) get the same rewrite, callees first, their
 * parameters resized like the entry's, so a size shared across a loop body shrinks with it;
 * the verifier refuses a candidate whose bodies no longer match their callers (a body dim
 * of that size that is not the caller's). Entry parameters with a tuple shape and constants
 * (in any computation) that hold a resized dim make the candidate invalid. Ops whose shape
 * is declared, not inferred (custom-call, infeed, ...), keep their declared shapes. */
#include <stdlib.h>
#include <string.h>

#include "minify_internal.h"
#include "hlo/hlo.h"

/* Whether shape has a dim of size from; with to != 0, replaces them. */
static bool resize_dims(hlo_shape *shape, int64_t from, int64_t to) {
  bool hit = false;
  if (shape->dtype == HLO_TUPLE) {
    for (int i = 0; i < shape->tuple_count; i++) hit |= resize_dims(&shape->tuple[i], from, to);
    return hit;
  }
  for (int d = 0; d < shape->rank; d++)
    if (shape->dim_kind[d] == HLO_DIM_STATIC && shape->dims[d] == from) {
      hit = true;
      if (to) shape->dims[d] = to;
    }
  return hit;
}

static bool declares_dims(hlo_opcode op) {
  return op == HLO_OP_PARAMETER || op == HLO_OP_BROADCAST || op == HLO_OP_RESHAPE || op == HLO_OP_IOTA;
}

/* Rewrites comp's shapes for the size change: its parameters and the dims broadcasts,
 * reshapes and iotas declare are resized, every other shape inferred again (computations it
 * calls are done already). An entry parameter with a tuple shape cannot be resized (its
 * input could not be cut), nor can a constant; false then, or when inference fails. */
static bool resize_comp(hlo_module *copy, hlo_comp *comp, int64_t from, int64_t to, hlo_diag *diag) {
  bool entry = comp == copy->entry;
  for (int i = 0; i < comp->instr_count; i++) {
    hlo_instr *instr = comp->instrs[i];
    if (instr->opcode == HLO_OP_CONSTANT) {
      if (resize_dims(&instr->shape, from, 0)) return false;
      continue;
    }
    if (entry && instr->opcode == HLO_OP_PARAMETER && instr->shape.dtype == HLO_TUPLE) {
      if (resize_dims(&instr->shape, from, 0)) return false;
      continue;
    }
    if (declares_dims(instr->opcode)) {
      resize_dims(&instr->shape, from, to);
      if (instr->opcode == HLO_OP_PARAMETER) continue;
    }
    hlo_shape inferred;
    if (hlo_infer_shape(instr, &inferred, &copy->arena, diag) != HLO_OK) return false;
    if (hlo_shape_is_array(&inferred) && hlo_shape_is_array(&instr->shape)) {
      /* keep the instruction's layout where the rank stays */
      memcpy(instr->shape.dims, inferred.dims, sizeof inferred.dims);
      memcpy(instr->shape.dim_kind, inferred.dim_kind, sizeof inferred.dim_kind);
      if (inferred.rank != instr->shape.rank) instr->shape = inferred;
    } else {
      instr->shape = inferred;
    }
  }
  return true;
}

/* Whether every computation comp calls is in done. */
static bool callees_done(const hlo_module *module, const hlo_comp *comp, const bool *done) {
  for (int i = 0; i < comp->instr_count; i++)
    for (int k = 0; k < comp->instrs[i]->called_count; k++)
      for (int c = 0; c < module->comp_count; c++)
        if (module->comps[c] == comp->instrs[i]->called[k] && !done[c]) return false;
  return true;
}

/* Rewrites every computation of copy for the size change, callees before their callers (a
 * call's shape is its callee's root), so loops, calls, fusions and conditionals whose
 * bodies take arrays shrink with the entry; the verifier then checks that each body's
 * parameters still match what its caller passes. False when anything does not fit. */
static bool resize_module(hlo_module *copy, int64_t from, int64_t to, hlo_diag *diag) {
  int n = copy->comp_count;
  bool *done = hlo_calloc((size_t)n + 1, sizeof *done);
  if (!done) return false;
  bool ok = true;
  for (int finished = 0, progress = 1; ok && finished < n && progress;) {
    progress = 0;
    for (int c = 0; ok && c < n; c++)
      if (!done[c] && callees_done(copy, copy->comps[c], done)) {
        ok = resize_comp(copy, copy->comps[c], from, to, diag);
        done[c] = true;
        finished++;
        progress = 1;
      }
    if (!progress && finished < n) ok = false; /* a cycle: not a valid module */
  }
  free(done);
  return ok && hlo_verify_module(copy, diag) == HLO_OK;
}

/* The leading block of value with shape's dims (same type); NULL without memory. */
static rt_value *leading_block(const rt_value *value, const hlo_shape *shape) {
  rt_value *out = rt_value_new_array(value->shape.dtype, shape->rank, shape->dims);
  if (!out) return NULL;
  size_t element = hlo_dtype_size(value->shape.dtype);
  int rank = shape->rank;
  int64_t old_strides[HLO_MAX_RANK], index[HLO_MAX_RANK] = {0};
  hlo_shape_strides(&value->shape, old_strides);
  int64_t row = rank > 0 ? shape->dims[rank - 1] : 1;
  for (int64_t done = 0; done < out->count; done += row) {
    int64_t from = 0;
    for (int d = 0; d < rank - 1; d++) from += index[d] * old_strides[d];
    memcpy((char *)out->data + (size_t)done * element, (const char *)value->data + (size_t)from * element,
           (size_t)row * element);
    for (int d = rank - 2; d >= 0; d--) {
      if (++index[d] < shape->dims[d]) break;
      index[d] = 0;
    }
  }
  return out;
}

/* The candidate with every dim of size from made to; NULL when it is invalid. */
static hlo_module *resized(min_ctx *ctx, int64_t from, int64_t to, rt_value ***inputs, hlo_diag *diag) {
  hlo_module *copy = hlo_module_clone(ctx->module, diag);
  if (!copy) return NULL;
  if (!resize_module(copy, from, to, diag)) {
    hlo_module_free(copy);
    return NULL;
  }
  const hlo_comp *entry = copy->entry;
  *inputs = hlo_calloc((size_t)entry->param_count + 1, sizeof **inputs);
  bool ok = *inputs != NULL;
  for (int i = 0; ok && i < entry->param_count && !ctx->shapes_only; i++) {
    const rt_value *old = ctx->inputs[i];
    ok = old && old->shape.dtype != HLO_TUPLE && ((*inputs)[i] = leading_block(old, &entry->params[i]->shape));
  }
  if (!ok) {
    for (int i = 0; *inputs && i < entry->param_count; i++) rt_value_release((*inputs)[i]);
    free(*inputs);
    hlo_module_free(copy);
    return NULL;
  }
  return copy;
}

typedef struct size_weight {
  int64_t size;
  double bytes; /* bytes of the parameters with a dim of this size */
} size_weight;

static int by_bytes(const void *a, const void *b) {
  double x = ((const size_weight *)a)->bytes, y = ((const size_weight *)b)->bytes;
  return x < y ? 1 : x > y ? -1 : 0;
}

/* The distinct dim sizes > 1 of the array parameters, most bytes first. */
static int param_sizes(const hlo_comp *entry, size_weight *out, int max) {
  int count = 0;
  for (int p = 0; p < entry->param_count; p++) {
    const hlo_shape *shape = &entry->params[p]->shape;
    if (!hlo_shape_is_array(shape)) continue;
    for (int d = 0; d < shape->rank; d++) {
      int64_t size = shape->dims[d];
      if (size <= 1 || shape->dim_kind[d] != HLO_DIM_STATIC) continue;
      int k = 0;
      while (k < count && out[k].size != size) k++;
      if (k == count) {
        if (count == max) continue;
        out[count++] = (size_weight){size, 0};
      }
      bool counted = false;
      for (int e = 0; e < d; e++) counted |= shape->dims[e] == size;
      if (!counted) out[k].bytes += (double)hlo_shape_bytes(shape);
    }
  }
  qsort(out, (size_t)count, sizeof *out, by_bytes);
  return count;
}

/* Tries the sizes below size for it, smallest first; true when one was adopted. */
static bool shrink_size(min_ctx *ctx, int64_t size) {
  int64_t tries[64];
  int count = 0;
  tries[count++] = 1;
  int64_t small[64];
  int smalls = 0;
  for (int64_t s = size / 2; s > 1 && smalls < 62; s /= 2) small[smalls++] = s;
  for (int i = smalls - 1; i >= 0; i--) tries[count++] = small[i];
  for (int i = 0; i < count && !min_stopped(ctx); i++) {
    rt_value **inputs = NULL;
    hlo_diag diag;
    hlo_diag_clear(&diag);
    hlo_module *candidate = resized(ctx, size, tries[i], &inputs, &diag);
    if (!candidate) {
      min_progress(ctx, "shapes: %lld -> %lld: skipped an invalid candidate%s%s", (long long)size, (long long)tries[i],
                   diag.message[0] ? ": " : "", diag.message);
      continue;
    }
    bool smaller = min_input_bytes(candidate) < min_input_bytes(ctx->module);
    if (min_try_candidate(ctx, candidate, inputs, candidate->entry->param_count, MIN_SHAPES, smaller)) return true;
  }
  return false;
}

bool min_reinfer(hlo_module *copy, hlo_diag *diag) {
  return resize_module(copy, -1, 0, diag); /* no dim has size -1: nothing resized, every shape inferred */
}

bool min_strategy_shapes(min_ctx *ctx) {
  size_weight sizes[64];
  int count = param_sizes(ctx->module->entry, sizes, 64);
  bool won = false;
  for (int i = 0; i < count && min_inputs_large(ctx) && !min_stopped(ctx); i++) won |= shrink_size(ctx, sizes[i].size);
  return won;
}
