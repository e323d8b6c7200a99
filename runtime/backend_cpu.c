/* The cpu backend: compile runs the hlo/ passes over a copy of the module and builds a plan
 * (backend_cpu_plan.c); execute walks the plan with per-call state only, so one executable
 * may run on many threads at once. Parallelism is inside kernels (TBB, runtime/parallel.cc);
 * OpenBLAS is held to one thread so the two never oversubscribe the cores: big matrix
 * products are split across TBB tasks instead (backend_cpu_dot.c). Its serialized form is
 * the HLO text after the passes; deserialize compiles that again. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "backend.h"
#include "backend_cpu.h"
#include "hlo/clone.h"
#include "hlo/parse.h"
#include "hlo/pass.h"
#include "hlo/print.h"
#include "hlo/verify.h"

/* Arenas up to this size are kept by the executable between executes: a fresh allocation
 * that large is an mmap whose pages fault in (zeroed by the kernel) on every step, which cost
 * more than the small steps' arithmetic. Bigger arenas are allocated per execute, so an
 * executable left in the compile cache does not hold gigabytes. */
enum { SPARE_ARENA_MAX = 256 << 20 };

struct rt_executable {
  hlo_module *module;
  rt_cpu_plan *plan;
  /* one arena kept from a finished execute, taken whole by the next (a thread that finds
   * it taken allocates its own): executes running at once never share buffers */
  _Atomic(char *) spare;
};

static char *take_arena(rt_executable *exe) {
  int64_t bytes = exe->plan->arena_bytes;
  if (!bytes) return NULL;
  char *arena = atomic_exchange(&exe->spare, NULL);
  return arena ? arena : aligned_alloc(64, (size_t)bytes);
}

static void give_arena(rt_executable *exe, char *arena) {
  char *empty = NULL;
  if (arena && exe->plan->arena_bytes <= SPARE_ARENA_MAX &&
      atomic_compare_exchange_strong(&exe->spare, &empty, arena))
    return;
  free(arena);
}

/* One step's result during an execute. Views (of arguments, constants, buffers, other
 * results) live in the cell itself and are never released; owned values are. */
typedef struct cell {
  rt_value *value;
  bool owned;
  rt_value view;
} cell;

static rt_executable *cpu_compile_owned(hlo_module *module, hlo_diag *diag) {
  if (!module) return NULL;
  if (hlo_verify_module(module, diag) != HLO_OK) {
    hlo_module_free(module);
    return NULL;
  }
  hlo_pass_run_all(module);
  openblas_set_num_threads(1);
  rt_cpu_plan *plan = rt_cpu_plan_build(module, diag);
  if (!plan) {
    hlo_module_free(module);
    return NULL;
  }
  rt_executable *exe = calloc(1, sizeof *exe);
  if (!exe) {
    rt_cpu_plan_free(plan);
    hlo_module_free(module);
    hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory");
    return NULL;
  }
  exe->module = module;
  exe->plan = plan;
  return exe;
}

static rt_executable *cpu_compile(const hlo_module *module, hlo_diag *diag) {
  return cpu_compile_owned(hlo_module_clone(module, diag), diag);
}

static void set_view(cell *c, const hlo_shape *shape, void *data) {
  c->view = (rt_value){.refcount = 1};
  c->view.shape = hlo_shape_make(shape->dtype, shape->rank, shape->dims);
  c->view.count = hlo_shape_elements(&c->view.shape);
  c->view.data = data;
  c->value = &c->view;
  c->owned = false;
}

static bool is_view(const cell *cells, int count, const rt_value *value) {
  uintptr_t p = (uintptr_t)value, lo = (uintptr_t)cells, hi = (uintptr_t)(cells + count);
  return p >= lo && p < hi;
}

/* A reference kernel may hand back (retained) one of its operands, or a tuple holding
 * one: views must not outlive their step, so those become copies. */
static rt_value *detach(const cell *cells, int count, rt_value *value) {
  if (!value) return NULL;
  if (is_view(cells, count, value)) {
    rt_value *copy = rt_value_copy(value);
    rt_value_release(value); /* undoes the kernel's retain; a view's count never hits 0 */
    return copy;
  }
  for (int i = 0; i < value->tuple_count; i++) {
    value->tuple[i] = detach(cells, count, value->tuple[i]);
    if (!value->tuple[i]) {
      rt_value_release(value);
      return NULL;
    }
  }
  return value;
}

/* An owned value for the caller: owned cells are passed on, views copied. */
static rt_value *hand_out(cell *c) {
  if (c->owned) return rt_value_retain(c->value);
  return rt_value_copy(c->value);
}

static hlo_status check_args(const hlo_comp *entry, rt_value *const *args, int arg_count, hlo_diag *diag) {
  if (arg_count != entry->param_count)
    return hlo_diag_set(diag, HLO_ERR_INPUT, "computation %s takes %d arguments, got %d", entry->name,
                        entry->param_count, arg_count);
  for (int i = 0; i < arg_count; i++) {
    const hlo_shape *want = &entry->params[i]->shape;
    const rt_value *have = args[i];
    bool ok = have != NULL;
    if (ok && want->dtype == HLO_TUPLE) ok = have->shape.dtype == HLO_TUPLE && have->tuple_count == want->tuple_count;
    else if (ok) ok = have->shape.dtype == want->dtype && have->shape.rank == want->rank;
    for (int d = 0; ok && want->dtype != HLO_TUPLE && d < want->rank; d++) ok = have->shape.dims[d] == want->dims[d];
    if (!ok) {
      char want_text[128], have_text[128];
      return hlo_diag_set(diag, HLO_ERR_INPUT, "argument %d of %s: expected %s, got %s", i, entry->name,
                          hlo_shape_str(want, want_text, sizeof want_text),
                          have ? hlo_shape_str(&have->shape, have_text, sizeof have_text) : "nothing");
    }
  }
  return HLO_OK;
}

static hlo_status run_step(const rt_cpu_step *step, cell *cells, int count, char *arena,
                           rt_value *const *args, rt_value **ops, rt_eval *eval) {
  const hlo_instr *instr = step->instr;
  cell *c = &cells[instr->id];
  for (int k = 0; k < rt_cpu_step_input_count(step); k++) ops[k] = cells[rt_cpu_step_input(step, k)].value;
  switch (step->kind) {
    case RT_STEP_PARAM: {
      rt_value *arg = args[instr->parameter_number];
      if (arg->shape.dtype == HLO_TUPLE) { /* copied: the caller's elements are not ours to retain */
        c->value = rt_value_copy(arg);
        c->owned = true;
        break;
      }
      set_view(c, &arg->shape, arg->data);
      break;
    }
    case RT_STEP_CONST:
      set_view(c, &instr->literal->shape, instr->literal->data);
      break;
    case RT_STEP_ALIAS:
      if (instr->opcode == HLO_OP_GET_TUPLE_ELEMENT) {
        const rt_value *tuple = ops[0];
        if (tuple->shape.dtype != HLO_TUPLE || instr->index < 0 || instr->index >= tuple->tuple_count)
          return hlo_diag_set(eval->diag, HLO_ERR_INPUT, "get-tuple-element %%%s: index %lld out of range",
                              instr->name, (long long)instr->index);
        c->view = *tuple->tuple[instr->index];
        c->view.refcount = 1;
        c->value = &c->view;
        c->owned = false;
      } else {
        set_view(c, &instr->shape, ops[0]->data);
      }
      break;
    case RT_STEP_TUPLE: {
      rt_value **elements = calloc((size_t)instr->operand_count + 1, sizeof(rt_value *));
      if (!elements) return hlo_diag_set(eval->diag, HLO_ERR_INTERNAL, "out of memory in tuple %%%s", instr->name);
      bool ok = true;
      for (int k = 0; k < instr->operand_count; k++) {
        elements[k] = hand_out(&cells[instr->operands[k]->id]);
        ok = ok && elements[k];
      }
      c->value = ok ? rt_value_new_tuple(instr->operand_count, elements) : NULL;
      if (!c->value)
        for (int k = 0; k < instr->operand_count; k++) rt_value_release(elements[k]);
      free(elements);
      if (!c->value) return hlo_diag_set(eval->diag, HLO_ERR_INTERNAL, "out of memory in tuple %%%s", instr->name);
      c->owned = true;
      break;
    }
    case RT_STEP_INSIDE:
      break;
    case RT_STEP_FAST:
    case RT_STEP_FUSED:
      if (step->output) {
        c->value = rt_value_new(&instr->shape);
        if (!c->value)
          return hlo_diag_set(eval->diag, HLO_ERR_INTERNAL, "out of memory for the result of %%%s", instr->name);
        c->owned = true;
      } else {
        set_view(c, &instr->shape, arena + step->offset);
      }
      if (step->kind == RT_STEP_FUSED ? !rt_cpu_fusion_run(step->fusion, (const rt_value *const *)ops, c->value)
                                      : !step->fast(instr, (const rt_value *const *)ops, c->value))
        return hlo_diag_set(eval->diag, HLO_ERR_INTERNAL, "out of memory in %s %%%s",
                            hlo_opcode_name(instr->opcode), instr->name);
      break;
    case RT_STEP_SLOW: {
      rt_value *out = NULL;
      hlo_status status = step->slow(eval, instr, ops, &out);
      if (status != HLO_OK) {
        rt_value_release(out);
        return status;
      }
      if (!out)
        return hlo_diag_set(eval->diag, HLO_ERR_INTERNAL, "%s %%%s produced no value",
                            hlo_opcode_name(instr->opcode), instr->name);
      c->value = detach(cells, count, out);
      if (!c->value) return hlo_diag_set(eval->diag, HLO_ERR_INTERNAL, "out of memory in %%%s", instr->name);
      c->owned = true;
      break;
    }
  }
  return HLO_OK;
}

static hlo_status cpu_execute(rt_executable *exe, rt_value *const *args, int arg_count, rt_value **result,
                              hlo_diag *diag) {
  *result = NULL;
  const hlo_comp *entry = exe->module->entry;
  const rt_cpu_plan *plan = exe->plan;
  hlo_status status = check_args(entry, args, arg_count, diag);
  if (status != HLO_OK) return status;
  rt_eval_options options = {.fp64 = false};
  if (plan->dynamic) return rt_evaluate(exe->module, args, arg_count, &options, result, diag);
  rt_eval eval = {.options = &options, .diag = diag, .call_depth = 0};
  int n = plan->step_count;
  cell *cells = calloc((size_t)n + 1, sizeof(cell));
  rt_value **ops = calloc((size_t)plan->max_operands + 1, sizeof(rt_value *));
  char *arena = take_arena(exe);
  if (!cells || !ops || (plan->arena_bytes && !arena))
    status = hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory: %lld bytes of buffers for %s",
                          (long long)plan->arena_bytes, exe->module->name);
  for (int i = 0; i < n && status == HLO_OK; i++) {
    const rt_cpu_step *step = &plan->steps[i];
    status = run_step(step, cells, n, arena, args, ops, &eval);
    for (int f = 0; f < step->free_count; f++) {
      cell *dead = &cells[step->frees[f]];
      if (dead->owned) rt_value_release(dead->value);
      dead->value = NULL;
      dead->owned = false;
    }
  }
  if (status == HLO_OK) {
    *result = hand_out(&cells[entry->root->id]);
    if (!*result) status = hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory copying the result");
  }
  for (int i = 0; cells && i < n; i++)
    if (cells[i].owned) rt_value_release(cells[i].value);
  free(cells);
  free(ops);
  give_arena(exe, arena);
  return status;
}

static void cpu_destroy(rt_executable *exe) {
  if (!exe) return;
  free(atomic_load(&exe->spare));
  rt_cpu_plan_free(exe->plan);
  hlo_module_free(exe->module);
  free(exe);
}

static hlo_status cpu_serialize(const rt_executable *exe, void **bytes, size_t *len, hlo_diag *diag) {
  return rt_module_text_bytes(exe->module, bytes, len, diag);
}

static rt_executable *cpu_deserialize(const void *bytes, size_t len, hlo_diag *diag) {
  return cpu_compile_owned(hlo_parse_module(bytes, len, "<cache entry>", diag), diag);
}

const rt_backend rt_backend_cpu = {
    .name = "cpu",
    .version = "1",
    .compile = cpu_compile,
    .execute = cpu_execute,
    .destroy = cpu_destroy,
    .serialize = cpu_serialize,
    .deserialize = cpu_deserialize,
};
