/* The verifier walks each computation once: structure first (so later checks can trust
 * pointers), then each instruction's called computations and inferred shape. */
#include "hlo.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* ---- called computations ---- */

typedef struct call_ctx {
  const hlo_instr *instr;
  unsigned flags;
  hlo_diag *diag;
} call_ctx;

static hlo_status call_fail(call_ctx *c, const hlo_comp *comp, const char *format, ...)
    __attribute__((format(printf, 3, 4)));
static hlo_status call_fail(call_ctx *c, const hlo_comp *comp, const char *format, ...) {
  char detail[600];
  va_list args;
  va_start(args, format);
  vsnprintf(detail, sizeof detail, format, args);
  va_end(args);
  return hlo_diag_set(c->diag, HLO_ERR_INPUT, "%s %%%s: called computation %%%s %s",
                      hlo_opcode_name(c->instr->opcode), c->instr->name, comp ? comp->name : "?",
                      detail);
}

static hlo_status call_oom(call_ctx *c) {
  return hlo_diag_set(c->diag, HLO_ERR_INTERNAL, "out of memory checking the computations %s %%%s calls",
                      hlo_opcode_name(c->instr->opcode), c->instr->name);
}

static const hlo_shape *operand_shape(const call_ctx *c, int i) { return &c->instr->operands[i]->shape; }

/* The computation must take exactly these parameter shapes (compatible, layouts ignored). */
static hlo_status check_params(call_ctx *c, const hlo_comp *comp, int count, const hlo_shape *want) {
  if (comp->param_count != count)
    return call_fail(c, comp, "takes %d parameters but needs %d", comp->param_count, count);
  for (int i = 0; i < count; i++) {
    const hlo_instr *param = comp->params[i];
    if (!param) return call_fail(c, comp, "has no parameter %d", i);
    if (!hlo_shape_compatible(&param->shape, &want[i]))
      return call_fail(c, comp, "parameter %d is %s but needs %s", i, hlo_shape_text(&param->shape).s, hlo_shape_text(&want[i]).s);
  }
  return HLO_OK;
}

/* The root, where the importer also lets a one-element tuple stand for its element. */
static const hlo_shape *root_shape(const call_ctx *c, const hlo_comp *comp, bool unwrap) {
  const hlo_shape *root = &comp->root->shape;
  if (unwrap && (c->flags & HLO_INFER_IMPORTER) && root->dtype == HLO_TUPLE && root->tuple_count == 1)
    return &root->tuple[0];
  return root;
}

static hlo_status check_root(call_ctx *c, const hlo_comp *comp, const hlo_shape *want, bool unwrap) {
  const hlo_shape *root = root_shape(c, comp, unwrap);
  if (!hlo_shape_compatible(root, want))
    return call_fail(c, comp, "returns %s but needs %s", hlo_shape_text(root).s, hlo_shape_text(want).s);
  return HLO_OK;
}

/* A reducer over N values: parameters (acc_0..acc_N-1, x_0..x_N-1) and a result of N
 * values, each of the given shape; one value is returned bare, several as a tuple. */
static hlo_status check_reducer(call_ctx *c, const hlo_comp *comp, int n, const hlo_shape *value,
                                const hlo_shape *element) {
  hlo_shape *params = hlo_calloc((size_t)(2 * n), sizeof *params);
  hlo_shape *results = hlo_calloc((size_t)n, sizeof *results);
  if (!params || !results) {
    free(params);
    free(results);
    return call_oom(c);
  }
  for (int i = 0; i < n; i++) {
    params[i] = value[i];
    params[n + i] = element[i];
    results[i] = value[i];
  }
  hlo_status status = check_params(c, comp, 2 * n, params);
  if (!status) {
    if (n == 1) {
      status = check_root(c, comp, &results[0], true);
    } else {
      hlo_shape tuple;
      memset(&tuple, 0, sizeof tuple);
      tuple.dtype = HLO_TUPLE;
      tuple.tuple_count = n;
      tuple.tuple = results;
      status = check_root(c, comp, &tuple, false);
    }
  }
  free(params);
  free(results);
  return status;
}

/* reduce and reduce-window: accumulators have the init values' shape (scalars in valid HLO)
 * and elements the inputs' type, which may be a narrower float (bf16 summed in f32). The
 * importer's non-scalar inits take init-shaped elements too. */
static hlo_status check_reduce(call_ctx *c) {
  int n = c->instr->operand_count / 2;
  hlo_shape *values = hlo_calloc((size_t)(2 * n), sizeof *values);
  if (!values) return call_oom(c);
  const hlo_comp *reducer = c->instr->called[0];
  for (int i = 0; i < n; i++) {
    const hlo_shape *init = operand_shape(c, n + i);
    values[i] = *init;
    values[n + i] = init->rank == 0 ? hlo_shape_scalar(operand_shape(c, i)->dtype) : *init;
    /* Like XLA, elements may arrive in another float width than the reducer takes. */
    const hlo_instr *param = n + i < reducer->param_count ? reducer->params[n + i] : NULL;
    if (param && hlo_dtype_is_float(param->shape.dtype) && hlo_dtype_is_float(values[n + i].dtype))
      values[n + i].dtype = param->shape.dtype;
  }
  hlo_status status = check_reducer(c, reducer, n, values, values + n);
  free(values);
  return status;
}

static hlo_status check_scatter(call_ctx *c) {
  int n = (c->instr->operand_count - 1) / 2;
  hlo_shape *values = hlo_calloc((size_t)(2 * n), sizeof *values);
  if (!values) return call_oom(c);
  for (int i = 0; i < n; i++) {
    values[i] = hlo_shape_scalar(operand_shape(c, i)->dtype);
    values[n + i] = hlo_shape_scalar(operand_shape(c, n + 1 + i)->dtype);
  }
  hlo_status status = check_reducer(c, c->instr->called[0], n, values, values + n);
  free(values);
  return status;
}

/* all-reduce and reduce-scatter reduce elementwise with a binary scalar computation. */
static hlo_status check_collective_reducer(call_ctx *c) {
  const hlo_shape *x = operand_shape(c, 0);
  while (x->dtype == HLO_TUPLE && x->tuple_count > 0) x = &x->tuple[0];
  hlo_shape scalar = hlo_shape_scalar(x->dtype);
  return check_reducer(c, c->instr->called[0], 1, &scalar, &scalar);
}

static hlo_status check_sort(call_ctx *c) {
  int n = c->instr->operand_count;
  const hlo_comp *comp = c->instr->called[0];
  hlo_shape *params = hlo_calloc((size_t)(2 * n), sizeof *params);
  if (!params) return call_oom(c);
  for (int i = 0; i < n; i++)
    params[2 * i] = params[2 * i + 1] = hlo_shape_scalar(operand_shape(c, i)->dtype);
  hlo_status status = check_params(c, comp, 2 * n, params);
  free(params);
  hlo_shape pred = hlo_shape_scalar(HLO_PRED);
  return status ? status : check_root(c, comp, &pred, true);
}

static hlo_status check_map(call_ctx *c) {
  int n = c->instr->operand_count;
  hlo_shape *params = hlo_calloc((size_t)n, sizeof *params);
  if (!params) return call_oom(c);
  for (int i = 0; i < n; i++) params[i] = hlo_shape_scalar(operand_shape(c, i)->dtype);
  hlo_status status = check_params(c, c->instr->called[0], n, params);
  free(params);
  return status;
}

static hlo_status check_select_and_scatter(call_ctx *c) {
  hlo_shape element = hlo_shape_scalar(operand_shape(c, 0)->dtype);
  hlo_shape source = hlo_shape_scalar(operand_shape(c, 1)->dtype);
  hlo_shape pair[2] = {element, element}, pred = hlo_shape_scalar(HLO_PRED);
  const hlo_comp *select = c->instr->called[0];
  if (check_params(c, select, 2, pair) || check_root(c, select, &pred, true)) return HLO_ERR_INPUT;
  return check_reducer(c, c->instr->called[1], 1, &source, &source);
}

static hlo_status check_while(call_ctx *c) {
  const hlo_shape *state = operand_shape(c, 0);
  const hlo_comp *condition = c->instr->called[0], *body = c->instr->called[1];
  hlo_shape pred = hlo_shape_scalar(HLO_PRED);
  if (check_params(c, condition, 1, state) || check_root(c, condition, &pred, false)) return HLO_ERR_INPUT;
  if (check_params(c, body, 1, state) || check_root(c, body, state, false)) return HLO_ERR_INPUT;
  return HLO_OK;
}

static hlo_status check_conditional(call_ctx *c) {
  const hlo_comp *first = c->instr->called[0];
  if (c->instr->operand_count != c->instr->called_count + 1)
    return call_fail(c, first, "is one of %d branches but there are %d branch operands", c->instr->called_count,
                     c->instr->operand_count - 1);
  for (int i = 0; i < c->instr->called_count; i++) {
    const hlo_comp *branch = c->instr->called[i];
    if (check_params(c, branch, 1, operand_shape(c, i + 1))) return HLO_ERR_INPUT;
    if (!hlo_shape_compatible(&branch->root->shape, &first->root->shape))
      return call_fail(c, branch, "returns %s but branch %%%s returns %s", hlo_shape_text(&branch->root->shape).s,
                       first->name, hlo_shape_text(&first->root->shape).s);
  }
  return HLO_OK;
}

/* call and fusion pass their operands as the parameters. */
static hlo_status check_call(call_ctx *c) {
  int n = c->instr->operand_count;
  hlo_shape *params = hlo_calloc((size_t)(n ? n : 1), sizeof *params);
  if (!params) return call_oom(c);
  for (int i = 0; i < n; i++) params[i] = *operand_shape(c, i);
  hlo_status status = check_params(c, c->instr->called[0], n, params);
  free(params);
  return status;
}

hlo_status hlo_verify_calls(const hlo_instr *instr, unsigned flags, hlo_diag *diag) {
  call_ctx c = {instr, flags, diag};
  for (int i = 0; i < instr->called_count; i++) {
    if (!instr->called[i])
      return hlo_diag_set(diag, HLO_ERR_INPUT, "%s %%%s: called computation %d is missing",
                          hlo_opcode_name(instr->opcode), instr->name, i);
    if (!instr->called[i]->root)
      return call_fail(&c, instr->called[i], "has no root");
  }
  int need = 0;
  switch (instr->opcode) {
    case HLO_OP_REDUCE: case HLO_OP_REDUCE_WINDOW: case HLO_OP_SCATTER: case HLO_OP_ALL_REDUCE:
    case HLO_OP_REDUCE_SCATTER: case HLO_OP_SORT: case HLO_OP_MAP: case HLO_OP_CALL:
    case HLO_OP_FUSION:
      need = 1;
      break;
    case HLO_OP_WHILE: case HLO_OP_SELECT_AND_SCATTER: need = 2; break;
    case HLO_OP_CONDITIONAL: need = 1; break;
    default: return HLO_OK; /* custom-call, async ops and the like: their callees are opaque */
  }
  if (instr->called_count < need ||
      (instr->opcode != HLO_OP_CONDITIONAL && instr->called_count != need))
    return hlo_diag_set(diag, HLO_ERR_INPUT, "%s %%%s: needs %d called computation%s, has %d",
                        hlo_opcode_name(instr->opcode), instr->name, need, need == 1 ? "" : "s",
                        instr->called_count);
  switch (instr->opcode) {
    case HLO_OP_REDUCE: case HLO_OP_REDUCE_WINDOW: return check_reduce(&c);
    case HLO_OP_SCATTER: return check_scatter(&c);
    case HLO_OP_ALL_REDUCE: case HLO_OP_REDUCE_SCATTER: return check_collective_reducer(&c);
    case HLO_OP_SORT: return check_sort(&c);
    case HLO_OP_MAP: return check_map(&c);
    case HLO_OP_SELECT_AND_SCATTER: return check_select_and_scatter(&c);
    case HLO_OP_WHILE: return check_while(&c);
    case HLO_OP_CONDITIONAL: return check_conditional(&c);
    default: return check_call(&c);
  }
}

/* ---- structure ---- */

typedef struct verify_ctx {
  const hlo_module *module;
  const hlo_comp *comp;
  hlo_diag *diag;
  hlo_arena scratch; /* inferred tuple shapes */
  const hlo_instr *at; /* the instruction being checked: its source position leads the message */
} verify_ctx;

/* detail, prefixed with the computation and, when known, the instruction's position. */
static hlo_status fail_at(verify_ctx *v, hlo_status code, const char *detail) {
  const hlo_instr *at = v->at;
  if (at && at->line > 0 && v->module && v->module->source) /* as the parser's messages read */
    return hlo_diag_set(v->diag, code, "%s:%d:%d: error: computation %s: %s", v->module->source, at->line, at->col,
                        v->comp ? v->comp->name : "?", detail);
  return hlo_diag_set(v->diag, code, "computation %s: %s", v->comp ? v->comp->name : "?", detail);
}

static hlo_status comp_fail(verify_ctx *v, const char *format, ...) __attribute__((format(printf, 2, 3)));
static hlo_status comp_fail(verify_ctx *v, const char *format, ...) {
  char detail[900];
  va_list args;
  va_start(args, format);
  vsnprintf(detail, sizeof detail, format, args);
  va_end(args);
  return fail_at(v, HLO_ERR_INPUT, detail);
}

/* An error another layer wrote into diag, prefixed the same way; its code kept, so out of
 * memory stays HLO_ERR_INTERNAL. */
static hlo_status prefix_fail(verify_ctx *v, hlo_diag *inner) { return fail_at(v, inner->status, inner->message); }

static uint64_t hash_name(const char *name) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a: names only need spreading, not security */
  for (const unsigned char *p = (const unsigned char *)name; *p; p++) h = (h ^ *p) * 1099511628211ull;
  return h;
}

/* Duplicate names within one computation, via an open-addressing table of the names. */
static hlo_status check_unique_names(verify_ctx *v) {
  const hlo_comp *comp = v->comp;
  size_t capacity = 16;
  while (capacity < (size_t)comp->instr_count * 2) capacity *= 2;
  const char **table = hlo_calloc(capacity, sizeof *table);
  if (!table) return hlo_diag_set(v->diag, HLO_ERR_INTERNAL, "out of memory checking computation %s", comp->name);
  hlo_status status = HLO_OK;
  for (int i = 0; i < comp->instr_count && !status; i++) {
    const char *name = comp->instrs[i]->name;
    if (!name) {
      status = comp_fail(v, "instruction %d has no name", i);
      break;
    }
    size_t slot = hash_name(name) & (capacity - 1);
    while (table[slot] && strcmp(table[slot], name) != 0) slot = (slot + 1) & (capacity - 1);
    if (table[slot]) status = comp_fail(v, "instruction name %%%s is used twice", name);
    table[slot] = name;
  }
  free(table);
  return status;
}

static hlo_status check_params_table(verify_ctx *v) {
  const hlo_comp *comp = v->comp;
  int seen = 0;
  for (int i = 0; i < comp->instr_count; i++) {
    const hlo_instr *instr = comp->instrs[i];
    if (instr->opcode != HLO_OP_PARAMETER) continue;
    seen++;
    int64_t number = instr->parameter_number;
    if (number < 0 || number >= comp->param_count || comp->params[number] != instr)
      return comp_fail(v, "parameter %%%s has number %lld, which is not its slot in the parameter table",
                       instr->name, (long long)number);
  }
  for (int i = 0; i < comp->param_count; i++)
    if (!comp->params[i]) return comp_fail(v, "parameter numbers are not dense: %d is missing", i);
  if (seen != comp->param_count)
    return comp_fail(v, "has %d parameter instructions but %d parameter numbers", seen, comp->param_count);
  return HLO_OK;
}

static bool valid_layout(const hlo_shape *shape) {
  if (shape->dtype == HLO_TUPLE) {
    for (int i = 0; i < shape->tuple_count; i++)
      if (!valid_layout(&shape->tuple[i])) return false;
    return true;
  }
  if (shape->rank < 0 || shape->rank > HLO_MAX_RANK) return false;
  bool seen[HLO_MAX_RANK] = {false};
  for (int i = 0; i < shape->rank; i++) {
    int d = shape->minor_to_major[i];
    if (d < 0 || d >= shape->rank || seen[d]) return false;
    seen[d] = true;
    if (shape->dim_kind[i] != HLO_DIM_UNBOUNDED && shape->dims[i] < 0) return false;
  }
  return shape->dtype > HLO_INVALID && shape->dtype < HLO_DTYPE_COUNT;
}

static hlo_status too_large(verify_ctx *v, const hlo_instr *instr) {
  return comp_fail(v, "instruction %%%s: shape %s is larger than %lld bytes (or its size overflows)", instr->name,
                   hlo_shape_text(&instr->shape).s, (long long)HLO_MAX_BYTES);
}

/* Pointers first: every later check follows them. */
static hlo_status check_links(verify_ctx *v, const hlo_instr *instr, int position) {
  const hlo_comp *comp = v->comp;
  v->at = instr;
  if (instr->parent != comp || instr->id != position)
    return comp_fail(v, "instruction %%%s is not registered at its position", instr->name);
  if (!valid_layout(&instr->shape))
    return comp_fail(v, "instruction %%%s has an invalid shape %s", instr->name, hlo_shape_text(&instr->shape).s);
  if (!hlo_shape_size_ok(&instr->shape)) return too_large(v, instr);
  for (int i = 0; i < instr->operand_count; i++) {
    const hlo_instr *operand = instr->operands[i];
    if (!operand) return comp_fail(v, "instruction %%%s: operand %d is missing", instr->name, i);
    if (operand->parent != comp)
      return comp_fail(v, "instruction %%%s: operand %%%s belongs to computation %s", instr->name,
                       operand->name, operand->parent ? operand->parent->name : "(none)");
    if (operand->id >= position || comp->instrs[operand->id] != operand)
      return comp_fail(v, "instruction %%%s: operand %%%s does not come before it", instr->name, operand->name);
  }
  for (int i = 0; i < instr->called_count; i++) {
    const hlo_comp *callee = instr->called[i];
    if (!callee) return comp_fail(v, "instruction %%%s: called computation %d is missing", instr->name, i);
    if (callee->module != v->module || callee->id < 0 || callee->id >= v->module->comp_count ||
        v->module->comps[callee->id] != callee)
      return comp_fail(v, "instruction %%%s calls %s, which is not in the module", instr->name, callee->name);
    if (callee->id >= comp->id)
      return comp_fail(v, "instruction %%%s calls %s, which does not come before its caller%s", instr->name,
                       callee->name, callee == comp ? " (recursion)" : "");
  }
  return HLO_OK;
}

static hlo_status check_shape(verify_ctx *v, const hlo_instr *instr, unsigned flags) {
  hlo_diag inner; /* cleared, not zeroed: writing its 1 KB per instruction was a quarter of a verify */
  hlo_diag_clear(&inner);
  v->at = instr;
  hlo_shape inferred;
  if (hlo_infer_shape_flags(instr, flags, &inferred, &v->scratch, &inner)) return prefix_fail(v, &inner);
  if (hlo_verify_calls(instr, flags, &inner)) return prefix_fail(v, &inner);
  if (hlo_shape_compatible(&inferred, &instr->shape)) return HLO_OK;
  hlo_strbuf operands;
  hlo_sb_init(&operands);
  hlo_describe_operands(instr, &operands);
  hlo_status status = comp_fail(v, "%s %%%s: declared shape %s but the operands give %s%s",
                                hlo_opcode_name(instr->opcode), instr->name, hlo_shape_text(&instr->shape).s,
                                hlo_shape_text(&inferred).s, operands.data ? operands.data : "");
  hlo_sb_free(&operands);
  return status;
}

/* decoded (hlo_verify_decoded): instruction names are not compared. */
static hlo_status verify_comp(verify_ctx *v, const hlo_comp *comp, unsigned flags, bool decoded) {
  v->comp = comp;
  v->at = NULL;
  if (comp->module != v->module) return comp_fail(v, "belongs to another module");
  if (!comp->root) return comp_fail(v, "has no root instruction");
  if (comp->root->parent != comp) return comp_fail(v, "its root %%%s is not in it", comp->root->name);
  if (comp->instr_count == 0) return comp_fail(v, "is empty");
  hlo_status status = HLO_OK; /* every instruction's links were checked first (hlo_verify_module) */
  v->at = NULL;
  if (!status) status = check_params_table(v);
  if (!status && !decoded) status = check_unique_names(v);
  for (int i = 0; i < comp->instr_count && !status; i++) status = check_shape(v, comp->instrs[i], flags);
  return status;
}

/* Marks the computations the entry reaches; the rest get the importer's leniency. */
static void mark_reachable(const hlo_comp *comp, unsigned char *reached) {
  if (reached[comp->id]) return;
  reached[comp->id] = 1;
  for (int i = 0; i < comp->instr_count; i++)
    for (int k = 0; k < comp->instrs[i]->called_count; k++) {
      const hlo_comp *callee = comp->instrs[i]->called[k];
      if (callee && callee->id < comp->id) mark_reachable(callee, reached);
    }
}

static hlo_status check_module_shape(verify_ctx *v) {
  const hlo_module *m = v->module;
  if (!m->entry) return hlo_diag_set(v->diag, HLO_ERR_INPUT, "module %s has no entry computation", m->name);
  for (int i = 0; i < m->comp_count; i++) {
    const hlo_comp *comp = m->comps[i];
    v->comp = comp;
    if (!comp || comp->id != i) return hlo_diag_set(v->diag, HLO_ERR_INPUT, "module %s: computation %d is not registered at its position", m->name, i);
    if (comp->is_entry && comp != m->entry) return comp_fail(v, "is marked ENTRY but the module's entry is %s", m->entry->name);
    for (int j = 0; j < i; j++)
      if (strcmp(m->comps[j]->name, comp->name) == 0) return comp_fail(v, "the name is used twice");
  }
  if (m->entry->id < 0 || m->entry->id >= m->comp_count || m->comps[m->entry->id] != m->entry)
    return hlo_diag_set(v->diag, HLO_ERR_INPUT, "module %s: the entry %s is not among its computations", m->name, m->entry->name);
  return HLO_OK;
}

/* What a decoder that checked every link as it read it leaves to verify of an instruction's
 * structure: its shape's layout. */
static hlo_status check_layout(verify_ctx *v, const hlo_instr *instr) {
  v->at = instr;
  if (!valid_layout(&instr->shape)) return comp_fail(v, "instruction %%%s has an invalid shape %s", instr->name, hlo_shape_text(&instr->shape).s);
  return hlo_shape_size_ok(&instr->shape) ? HLO_OK : too_large(v, instr);
}

static hlo_status verify_module(const hlo_module *module, bool decoded, hlo_diag *diag) {
  if (!module) return hlo_diag_set(diag, HLO_ERR_INPUT, "no module to verify");
  verify_ctx v = {module, NULL, diag, {NULL, 0, false}, NULL};
  if (check_module_shape(&v)) return HLO_ERR_INPUT;
  unsigned char *reached = hlo_calloc((size_t)module->comp_count + 1, 1);
  if (!reached) return hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory verifying module %s", module->name);
  hlo_arena_init(&v.scratch);
  /* Links first, everywhere, so reachability can follow called pointers safely. */
  hlo_status status = HLO_OK;
  for (int i = 0; i < module->comp_count && !status; i++) {
    v.comp = module->comps[i];
    for (int k = 0; k < v.comp->instr_count && !status; k++)
      status = decoded ? check_layout(&v, v.comp->instrs[k]) : check_links(&v, v.comp->instrs[k], k);
  }
  if (!status) mark_reachable(module->entry, reached);
  for (int i = 0; i < module->comp_count && !status; i++)
    status = verify_comp(&v, module->comps[i], reached[i] ? 0 : HLO_INFER_IMPORTER, decoded);
  hlo_arena_free(&v.scratch);
  free(reached);
  return status;
}

hlo_status hlo_verify_module(const hlo_module *module, hlo_diag *diag) { return verify_module(module, false, diag); }

hlo_status hlo_verify_decoded(const hlo_module *module, hlo_diag *diag) { return verify_module(module, true, diag); }

hlo_status hlo_verify_some_shapes(const hlo_comp *comp, const bool *only, hlo_diag *diag) {
  verify_ctx v = {comp->module, comp, diag, {NULL, 0, false}, NULL};
  hlo_arena_init(&v.scratch);
  hlo_status status = HLO_OK;
  for (int i = 0; i < comp->instr_count && !status; i++)
    if (!only || only[i]) status = check_shape(&v, comp->instrs[i], 0);
  hlo_arena_free(&v.scratch);
  return status;
}

