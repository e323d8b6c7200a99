/* Rewrites, after the cuts: the simplifications C-Reduce-style reducers make that cutting
 * instructions out cannot. Each candidate is checked like any other and kept only when it
 * fails the same way (min_try_candidate), and each moves one way only, so the minifier's
 * loop reaches a fixpoint:
 *   bypass      an instruction replaced by one of its operands of the same shape (in every
 *               computation: loop bodies, fusions and reducers too, which cuts never reach)
 *   attributes  a slice's starts to 0 and strides to 1; a pad's interior, then all its
 *               padding, to 0; a window's strides, padding and dilations to their plain
 *               values; shapes are inferred again after the change
 *   types       every f64 to f32, s64 to s32, bf16 and f16 to f32 (one type at a time, the
 *               whole module and its inputs together)
 *   metadata    debug attributes dropped (metadata, statistics: the canonical hash ignores
 *               them, so the program is the same and no check is needed), then
 *               frontend_attributes, sharding and written layouts (checked)
 * They try every instruction, so they run only on modules of at most REWRITE_MAX_INSTRS
 * instructions (the cuts come first and are far cheaper per instruction removed). */
#include <stdlib.h>
#include <string.h>

#include "minify_internal.h"
#include "hlo/hlo.h"

#define REWRITE_MAX_INSTRS 256

static int total_instrs(const hlo_module *module) {
  int count = 0;
  for (int c = 0; c < module->comp_count; c++) count += module->comps[c]->instr_count;
  return count;
}

/* copy (taken), a rewritten clone of the current module whose entry parameters take inputs
 * (NULL: the current inputs), becomes a candidate: shapes inferred again, dead code removed,
 * then checked. True when it was adopted. */
static bool try_rewritten(min_ctx *ctx, hlo_module *copy, rt_value **inputs, min_strategy strategy) {
  hlo_diag diag;
  hlo_diag_clear(&diag);
  hlo_module *candidate = NULL;
  rt_value **new_inputs = NULL;
  int count = 0;
  if (min_reinfer(copy, &diag)) {
    hlo_pass_dce(copy);
    min_disp *disp = hlo_calloc((size_t)copy->entry->instr_count + 1, sizeof *disp);
    min_plan plan = {disp, NULL, 0};
    rt_value *const *given = ctx->shapes_only ? NULL : inputs ? inputs : ctx->inputs;
    if (disp && hlo_module_check_memory(copy, "rewriting a candidate", &diag) == HLO_OK)
      candidate = min_build(copy, given, NULL, &plan, &new_inputs, &count, &diag);
    free(disp);
  }
  if (inputs) min_release_all(inputs, copy->entry->param_count);
  hlo_module_free(copy);
  if (!candidate) {
    min_progress(ctx, "%s: skipped an invalid candidate: %s", min_strategy_name(strategy), diag.message);
    return false;
  }
  bool smaller = total_instrs(candidate) < total_instrs(ctx->module) ||
                 (strategy != MIN_BYPASS && total_instrs(candidate) == total_instrs(ctx->module));
  return min_try_candidate(ctx, candidate, new_inputs, count, strategy, smaller);
}

/* ---- bypass ---- */

/* Tries each instruction of computation c replaced by each of its operands of its shape;
 * true when one was adopted. */
static bool bypass_comp(min_ctx *ctx, int c) {
  bool won = false;
  for (int i = 0; c < ctx->module->comp_count && i < ctx->module->comps[c]->instr_count && !min_stopped(ctx); i++) {
    const hlo_instr *instr = ctx->module->comps[c]->instrs[i];
    if (min_is_leaf(instr)) continue;
    for (int k = 0; k < instr->operand_count && !min_stopped(ctx); k++) {
      bool repeat = false;
      for (int j = 0; j < k; j++) repeat |= instr->operands[j] == instr->operands[k];
      if (repeat || !hlo_shape_equal(&instr->operands[k]->shape, &instr->shape)) continue;
      hlo_diag diag;
      hlo_diag_clear(&diag);
      hlo_module *copy = hlo_module_clone(ctx->module, &diag);
      if (!copy) return won;
      hlo_instr *x = copy->comps[c]->instrs[i];
      hlo_replace_uses(copy->comps[c], x, x->operands[k]);
      if (try_rewritten(ctx, copy, NULL, MIN_BYPASS)) {
        won = true;
        i--; /* the instruction now at i is new to this position */
        break;
      }
    }
  }
  return won;
}

static bool bypass(min_ctx *ctx) {
  bool won = false;
  for (int c = 0; c < ctx->module->comp_count && !min_stopped(ctx); c++) won |= bypass_comp(ctx, c);
  return won;
}

/* ---- attributes ---- */

/* The ways an instruction's attributes can be made plainer, most at once first. */
enum { PLAIN_ALL, PLAIN_STRIDES, PLAIN_PADDING, PLAIN_DILATION, PLAIN_WAYS };

static bool set_ints(hlo_arena *arena, hlo_ints *ints, const int64_t *values) {
  hlo_ints copy = hlo_ints_copy(arena, ints->count, values);
  if (ints->count && !copy.values) return false;
  *ints = copy;
  return true;
}

/* A slice that keeps its shape: strides 1, and with way PLAIN_ALL starts 0. */
static bool plain_slice(hlo_arena *arena, hlo_instr *x, int way) {
  int rank = x->slice_starts.count;
  if (way != PLAIN_ALL && way != PLAIN_STRIDES) return false;
  if (rank != x->slice_limits.count || rank != x->slice_strides.count || rank != x->shape.rank) return false;
  int64_t starts[HLO_MAX_RANK], limits[HLO_MAX_RANK], ones[HLO_MAX_RANK];
  bool changed = false;
  for (int d = 0; d < rank; d++) {
    starts[d] = way == PLAIN_ALL ? 0 : x->slice_starts.values[d];
    limits[d] = starts[d] + x->shape.dims[d];
    ones[d] = 1;
    changed |= starts[d] != x->slice_starts.values[d] || x->slice_strides.values[d] != 1;
  }
  return changed && set_ints(arena, &x->slice_starts, starts) && set_ints(arena, &x->slice_limits, limits) &&
         set_ints(arena, &x->slice_strides, ones);
}

/* A pad: with PLAIN_ALL no padding at all, with PLAIN_PADDING no interior padding. */
static bool plain_pad(hlo_instr *x, int way) {
  if (!x->padding || (way != PLAIN_ALL && way != PLAIN_PADDING)) return false;
  bool changed = false;
  for (int d = 0; d < x->padding->rank; d++) {
    changed |= x->padding->interior[d] != 0;
    x->padding->interior[d] = 0;
    if (way != PLAIN_ALL) continue;
    changed |= x->padding->low[d] != 0 || x->padding->high[d] != 0;
    x->padding->low[d] = x->padding->high[d] = 0;
  }
  return changed;
}

/* A window: strides 1, no padding, no dilation, no reversal, or one of those alone. */
static bool plain_window(hlo_instr *x, int way) {
  if (!x->window) return false;
  bool changed = false;
  for (int d = 0; d < x->window->rank; d++) {
    hlo_window_dim *w = &x->window->dims[d];
    hlo_window_dim plain = *w;
    if (way == PLAIN_ALL || way == PLAIN_STRIDES) plain.stride = 1;
    if (way == PLAIN_ALL || way == PLAIN_PADDING) plain.pad_low = plain.pad_high = 0;
    if (way == PLAIN_ALL || way == PLAIN_DILATION) {
      plain.lhs_dilate = plain.rhs_dilate = 1;
      plain.reversal = false;
    }
    changed |= memcmp(&plain, w, sizeof plain) != 0;
    *w = plain;
  }
  return changed;
}

/* Rewrites x (in copy) the given way; false when that changes nothing. The window and
 * padding structs are copied first: a clone may share them with the module it came from. */
static bool plainer(hlo_module *copy, hlo_instr *x, int way) {
  switch (x->opcode) {
  case HLO_OP_SLICE:
    return plain_slice(&copy->arena, x, way);
  case HLO_OP_PAD: {
    hlo_padding *padding = x->padding ? hlo_arena_memdup(&copy->arena, x->padding, sizeof *padding) : NULL;
    if (!padding) return false;
    x->padding = padding;
    return plain_pad(x, way);
  }
  case HLO_OP_CONVOLUTION:
  case HLO_OP_REDUCE_WINDOW:
  case HLO_OP_SELECT_AND_SCATTER: {
    hlo_window *window = x->window ? hlo_arena_memdup(&copy->arena, x->window, sizeof *window) : NULL;
    if (!window) return false;
    x->window = window;
    return plain_window(x, way);
  }
  default:
    return false;
  }
}

static bool attributes(min_ctx *ctx) {
  bool won = false;
  for (int c = 0; c < ctx->module->comp_count && !min_stopped(ctx); c++)
    for (int i = 0; c < ctx->module->comp_count && i < ctx->module->comps[c]->instr_count && !min_stopped(ctx); i++)
      for (int way = 0; way < PLAIN_WAYS && !min_stopped(ctx); way++) {
        hlo_diag diag;
        hlo_diag_clear(&diag);
        hlo_module *copy = hlo_module_clone(ctx->module, &diag);
        if (!copy) return won;
        if (!plainer(copy, copy->comps[c]->instrs[i], way)) {
          hlo_module_free(copy);
          continue;
        }
        if (try_rewritten(ctx, copy, NULL, MIN_ATTRS)) {
          won = true;
          break; /* the instruction is as plain as it gets this way */
        }
      }
  return won;
}

/* ---- types ---- */

static const struct {
  hlo_dtype from, to;
} narrowings[] = {{HLO_F64, HLO_F32}, {HLO_S64, HLO_S32}, {HLO_BF16, HLO_F32}, {HLO_F16, HLO_F32}};

/* Whether shape holds from anywhere; with apply, retypes it to to. */
static bool retype_shape(hlo_shape *shape, hlo_dtype from, hlo_dtype to, bool apply) {
  bool hit = false;
  if (shape->dtype == HLO_TUPLE) {
    for (int i = 0; i < shape->tuple_count; i++) hit |= retype_shape(&shape->tuple[i], from, to, apply);
    return hit;
  }
  if (shape->dtype != from) return false;
  if (apply) shape->dtype = to;
  return true;
}

/* value's elements in type to (a new value); NULL without memory. */
static rt_value *retyped_value(const rt_value *value, hlo_dtype to) {
  rt_value *out = rt_value_new_array(to, value->shape.rank, value->shape.dims);
  for (int64_t i = 0; out && i < value->count; i++) rt_set_f64(out, i, rt_get_f64(value, i));
  return out;
}

/* A constant's literal in type to, in copy's arena; false when it has no dense data. */
static bool retype_literal(hlo_module *copy, hlo_instr *x, hlo_dtype from, hlo_dtype to) {
  hlo_literal *old = x->literal;
  if (!old || !old->data || old->shape.dtype != from) return false;
  rt_value *value = rt_value_new_array(from, old->shape.rank, old->shape.dims);
  if (!value) return false;
  memcpy(value->data, old->data, (size_t)hlo_shape_bytes(&value->shape));
  rt_value *converted = retyped_value(value, to);
  rt_value_release(value);
  hlo_literal *literal = hlo_arena_alloc(&copy->arena, sizeof *literal);
  void *data = converted && literal
                   ? hlo_arena_memdup(&copy->arena, converted->data, (size_t)hlo_shape_bytes(&converted->shape))
                   : NULL;
  rt_value_release(converted);
  if (!data) return false;
  *literal = *old;
  literal->shape.dtype = to;
  literal->data = data;
  literal->raw_text = NULL;
  x->literal = literal;
  return true;
}

/* Retypes every shape and constant of copy; false when a constant cannot be converted. */
static bool retype_module(hlo_module *copy, hlo_dtype from, hlo_dtype to) {
  for (int c = 0; c < copy->comp_count; c++)
    for (int i = 0; i < copy->comps[c]->instr_count; i++) {
      hlo_instr *x = copy->comps[c]->instrs[i];
      if (x->opcode == HLO_OP_CONSTANT && retype_shape(&x->shape, from, to, false) &&
          (x->shape.dtype == HLO_TUPLE || !retype_literal(copy, x, from, to)))
        return false;
      retype_shape(&x->shape, from, to, true);
    }
  return true;
}

static bool module_has_type(const hlo_module *module, hlo_dtype dtype) {
  for (int c = 0; c < module->comp_count; c++)
    for (int i = 0; i < module->comps[c]->instr_count; i++) {
      hlo_shape shape = module->comps[c]->instrs[i]->shape;
      if (retype_shape(&shape, dtype, dtype, false)) return true;
    }
  return false;
}

/* The current inputs with from retyped to to (new references); NULL when one cannot be. */
static rt_value **retyped_inputs(const min_ctx *ctx, hlo_dtype from, hlo_dtype to) {
  int n = ctx->module->entry->param_count;
  rt_value **inputs = hlo_calloc((size_t)n + 1, sizeof *inputs);
  bool ok = inputs != NULL;
  for (int p = 0; ok && p < n; p++) {
    const rt_value *value = p < ctx->input_count ? ctx->inputs[p] : NULL;
    if (!value || value->shape.dtype == HLO_TUPLE) {
      ok = !value || !retype_shape(&ctx->module->entry->params[p]->shape, from, to, false);
      inputs[p] = rt_value_retain((rt_value *)value);
    } else {
      inputs[p] = value->shape.dtype == from ? retyped_value(value, to) : rt_value_retain((rt_value *)value);
      ok = inputs[p] != NULL;
    }
  }
  if (!ok && inputs) min_release_all(inputs, n);
  return ok ? inputs : NULL;
}

static bool types(min_ctx *ctx) {
  bool won = false;
  for (size_t t = 0; t < sizeof narrowings / sizeof narrowings[0] && !min_stopped(ctx); t++) {
    hlo_dtype from = narrowings[t].from, to = narrowings[t].to;
    if (!module_has_type(ctx->module, from)) continue;
    rt_value **inputs = ctx->shapes_only ? NULL : retyped_inputs(ctx, from, to);
    hlo_diag diag;
    hlo_diag_clear(&diag);
    hlo_module *copy = (inputs || ctx->shapes_only) ? hlo_module_clone(ctx->module, &diag) : NULL;
    if (!copy || !retype_module(copy, from, to)) {
      if (inputs) min_release_all(inputs, ctx->module->entry->param_count);
      hlo_module_free(copy);
      continue;
    }
    won |= try_rewritten(ctx, copy, inputs, MIN_TYPES);
  }
  return won;
}

/* ---- metadata ---- */

/* Removes the named raw attributes of every instruction; whether any was there. */
static bool drop_attrs(hlo_module *copy, const char *const *names, int name_count) {
  bool hit = false;
  for (int c = 0; c < copy->comp_count; c++)
    for (int i = 0; i < copy->comps[c]->instr_count; i++) {
      hlo_instr *x = copy->comps[c]->instrs[i];
      int kept = 0;
      for (int a = 0; a < x->raw_attr_count; a++) {
        bool drop = false;
        for (int k = 0; k < name_count; k++) drop |= strcmp(x->raw_attrs[a].name, names[k]) == 0;
        hit |= drop;
        if (!drop) x->raw_attrs[kept++] = x->raw_attrs[a];
      }
      x->raw_attr_count = kept;
    }
  return hit;
}

/* Makes shape's layouts the default ones, unwritten; whether one was written. */
static bool plain_layout(hlo_shape *shape) {
  bool hit = false;
  if (shape->dtype == HLO_TUPLE)
    for (int i = 0; i < shape->tuple_count; i++) hit |= plain_layout(&shape->tuple[i]);
  hit |= shape->has_layout && (shape->layout_extra || !hlo_shape_is_default_layout(shape));
  hlo_shape_default_layout(shape);
  shape->layout_extra = NULL;
  shape->has_layout = false;
  return hit;
}

static bool plain_layouts(hlo_module *copy) {
  bool hit = false;
  for (int c = 0; c < copy->comp_count; c++)
    for (int i = 0; i < copy->comps[c]->instr_count; i++) {
      hlo_instr *x = copy->comps[c]->instrs[i];
      hit |= plain_layout(&x->shape);
      if (x->literal) hit |= plain_layout(&x->literal->shape);
    }
  return hit;
}

/* Debug attributes: the same program by the canonical hash, adopted without a check. */
static bool drop_debug(min_ctx *ctx) {
  static const char *const debug[] = {"metadata", "statistics"};
  hlo_diag diag;
  hlo_diag_clear(&diag);
  hlo_module *copy = hlo_module_clone(ctx->module, &diag);
  if (!copy) return false;
  hlo_module *result = drop_attrs(copy, debug, 2) ? hlo_module_clone(copy, &diag) : NULL;
  hlo_module_free(copy);
  cache_key key = {0, 0};
  if (!result || !cache_hash_module(result, &key) || !cache_key_equal(key, ctx->key)) {
    hlo_module_free(result); /* not the same program after all: the checked step below covers it */
    return false;
  }
  rt_value **inputs = hlo_calloc((size_t)ctx->input_count + 1, sizeof *inputs);
  if (!inputs) {
    hlo_module_free(result);
    return false;
  }
  for (int i = 0; i < ctx->input_count; i++) inputs[i] = rt_value_retain(ctx->inputs[i]);
  ctx->report->wins[MIN_METADATA]++;
  min_progress(ctx, "metadata: debug attributes dropped (the same program)");
  return min_set_current(ctx, result, inputs, ctx->input_count);
}

static bool metadata(min_ctx *ctx) {
  static const char *const extra[] = {"metadata", "statistics", "frontend_attributes", "sharding"};
  bool won = drop_debug(ctx);
  if (min_stopped(ctx)) return won;
  hlo_diag diag;
  hlo_diag_clear(&diag);
  hlo_module *copy = hlo_module_clone(ctx->module, &diag);
  if (!copy) return won;
  bool dropped = drop_attrs(copy, extra, 4);
  if (!plain_layouts(copy) && !dropped) {
    hlo_module_free(copy);
    return won;
  }
  return try_rewritten(ctx, copy, NULL, MIN_METADATA) || won;
}

bool min_strategy_rewrite(min_ctx *ctx) {
  if (ctx->options->no_rewrite || total_instrs(ctx->module) > REWRITE_MAX_INSTRS) return false;
  min_record_free(ctx->record); /* recorded values are the original instructions', by name */
  ctx->record = NULL;
  bool won = false;
  won |= metadata(ctx);
  won |= bypass(ctx);
  won |= attributes(ctx);
  won |= types(ctx);
  return won;
}
