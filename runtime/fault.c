/* Test-only fault injection around a backend (fault.h). */
#include "runtime.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hlo/hlo.h"

/* The executable of the wrapper: the inner backend's, which it runs and destroys. */
struct rt_executable {
  const rt_backend *inner;
  rt_executable *exe;
  bool wrong_outputs; /* a choice fault's choice was taken: outputs come out perturbed */
};

static struct {
  const rt_backend *inner;
  rt_fault fault;
  char name[64];
} config;

/* "choice:KIND:N". */
static hlo_status parse_choice(const char *text, rt_fault *fault, hlo_diag *diag) {
  const char *kind = text + strlen("choice:");
  const char *colon = strchr(kind, ':');
  char *end = NULL;
  long index = colon ? strtol(colon + 1, &end, 10) : 0;
  if (!colon || colon == kind || (size_t)(colon - kind) >= sizeof fault->choice_kind || end == colon + 1 || *end ||
      index < 1 || index > 1 << 30)
    return hlo_diag_set(diag, HLO_ERR_INPUT, "LATCH_FAULT '%s': expected choice:KIND:N (choice:fusion:2), N >= 1",
                        text);
  fault->kind = RT_FAULT_CHOICE;
  fault->opcode = HLO_OP_COUNT;
  memcpy(fault->choice_kind, kind, (size_t)(colon - kind));
  fault->choice_kind[colon - kind] = 0;
  fault->choice_index = (int)index;
  return HLO_OK;
}

hlo_status rt_fault_parse(const char *text, rt_fault *fault, hlo_diag *diag) {
  static const struct {
    const char *name;
    rt_fault_kind kind;
  } kinds[] = {{"compile", RT_FAULT_COMPILE}, {"accuracy", RT_FAULT_ACCURACY}, {"crash", RT_FAULT_CRASH},
               {"hang", RT_FAULT_HANG}, {"shift", RT_FAULT_SHIFT}};
  memset(fault, 0, sizeof *fault);
  if (strncmp(text, "choice:", 7) == 0) return parse_choice(text, fault, diag);
  const char *colon = strchr(text, ':');
  for (size_t i = 0; colon && i < sizeof kinds / sizeof kinds[0]; i++)
    if (strlen(kinds[i].name) == (size_t)(colon - text) && memcmp(kinds[i].name, text, (size_t)(colon - text)) == 0)
      fault->kind = kinds[i].kind;
  if (fault->kind == RT_FAULT_NONE)
    return hlo_diag_set(diag, HLO_ERR_INPUT,
                        "LATCH_FAULT '%s': expected compile:OP, accuracy:OP:EPS, crash:OP, hang:OP, shift:OP, "
                        "compile:OP1+OP2, accuracy:OP1+OP2:EPS or choice:KIND:N",
                        text);
  const char *op = colon + 1;
  const char *op_end = strchr(op, ':');
  size_t op_len = op_end ? (size_t)(op_end - op) : strlen(op);
  const char *plus = memchr(op, '+', op_len);
  size_t first_len = plus ? (size_t)(plus - op) : op_len;
  fault->opcode = hlo_opcode_from_name(op, first_len);
  if (fault->opcode == HLO_OP_COUNT)
    return hlo_diag_set(diag, HLO_ERR_INPUT, "LATCH_FAULT '%s': '%.*s' is not an HLO opcode", text, (int)first_len, op);
  if (plus) {
    size_t second_len = op_len - first_len - 1;
    fault->paired = true;
    fault->partner = hlo_opcode_from_name(plus + 1, second_len);
    if (fault->partner == HLO_OP_COUNT)
      return hlo_diag_set(diag, HLO_ERR_INPUT, "LATCH_FAULT '%s': '%.*s' is not an HLO opcode", text, (int)second_len,
                          plus + 1);
    if (fault->kind != RT_FAULT_COMPILE && fault->kind != RT_FAULT_ACCURACY)
      return hlo_diag_set(diag, HLO_ERR_INPUT, "LATCH_FAULT '%s': only compile and accuracy take two ops (OP1+OP2)",
                          text);
  }
  if (fault->kind == RT_FAULT_ACCURACY) {
    char *end = NULL;
    fault->eps = op_end ? strtod(op_end + 1, &end) : 0;
    if (!op_end || end == op_end + 1 || *end || fault->eps == 0)
      return hlo_diag_set(diag, HLO_ERR_INPUT, "LATCH_FAULT '%s': accuracy wants a non-zero EPS (accuracy:%s:0.1)",
                          text, hlo_opcode_name(fault->opcode));
  } else if (op_end) {
    return hlo_diag_set(diag, HLO_ERR_INPUT, "LATCH_FAULT '%s': only accuracy takes a third field", text);
  }
  return HLO_OK;
}

static const hlo_instr *find_opcode(const hlo_module *module, hlo_opcode opcode) {
  for (int c = 0; c < module->comp_count; c++)
    for (int i = 0; i < module->comps[c]->instr_count; i++)
      if (module->comps[c]->instrs[i]->opcode == opcode) return module->comps[c]->instrs[i];
  return NULL;
}

/* x + eps * (|x| + 1), built after x; returns the new value or NULL with diag. */
static hlo_instr *perturbed(hlo_comp *comp, hlo_instr *x, double eps, hlo_diag *diag) {
  int64_t dimensions[1] = {0};
  hlo_dtype dtype = x->shape.dtype;
  hlo_instr *one = hlo_build_constant_scalar(comp, dtype, 1.0, diag);
  hlo_instr *e = hlo_build_constant_scalar(comp, dtype, eps, diag);
  if (!one || !e) return NULL;
  if (x->shape.rank > 0) {
    one = hlo_build_broadcast(comp, one, x->shape.rank, x->shape.dims, dimensions, diag);
    e = one ? hlo_build_broadcast(comp, e, x->shape.rank, x->shape.dims, dimensions, diag) : NULL;
    if (!e) return NULL;
  }
  hlo_instr *magnitude = hlo_build_unary(comp, HLO_OP_ABS, x, diag);
  hlo_instr *scale = magnitude ? hlo_build_binary(comp, HLO_OP_ADD, magnitude, one, diag) : NULL;
  hlo_instr *delta = scale ? hlo_build_binary(comp, HLO_OP_MULTIPLY, scale, e, diag) : NULL;
  return delta ? hlo_build_binary(comp, HLO_OP_ADD, x, delta, diag) : NULL;
}

/* x with its elements moved one place along its last dim, the first going last (as an
 * off-by-one index would); x itself when that dim has fewer than two. */
static hlo_instr *shifted(hlo_comp *comp, hlo_instr *x, hlo_diag *diag) {
  int rank = x->shape.rank;
  if (rank == 0 || x->shape.dims[rank - 1] < 2) return x;
  int64_t starts[HLO_MAX_RANK] = {0}, limits[HLO_MAX_RANK];
  memcpy(limits, x->shape.dims, sizeof(int64_t) * (size_t)rank);
  limits[rank - 1] = 1;
  hlo_instr *head = hlo_build_slice(comp, x, starts, limits, NULL, diag);
  starts[rank - 1] = 1;
  limits[rank - 1] = x->shape.dims[rank - 1];
  hlo_instr *tail = head ? hlo_build_slice(comp, x, starts, limits, NULL, diag) : NULL;
  hlo_instr *parts[2] = {tail, head};
  return tail ? hlo_build_concatenate(comp, 2, parts, rank - 1, diag) : NULL;
}

/* Whether the fault perturbs x: its opcode, or for a pair the partner fed by an opcode. */
static bool targeted(const hlo_instr *x, const rt_fault *fault) {
  if (!fault->paired) return x->opcode == fault->opcode;
  if (x->opcode != fault->partner) return false;
  for (int k = 0; k < x->operand_count; k++)
    if (x->operands[k]->opcode == fault->opcode) return true;
  return false;
}

static bool perturb_comp(hlo_comp *comp, const rt_fault *fault, hlo_diag *diag) {
  int original = comp->instr_count;
  double eps = fault->eps;
  for (int i = 0; i < original; i++) {
    hlo_instr *x = comp->instrs[i];
    if (!targeted(x, fault) || !hlo_shape_is_array(&x->shape) || !hlo_dtype_is_float(x->shape.dtype)) continue;
    if (x->shape.dtype != HLO_F16 && x->shape.dtype != HLO_BF16 && x->shape.dtype != HLO_F32 &&
        x->shape.dtype != HLO_F64)
      continue;
    int first_new = comp->instr_count;
    hlo_instr *y = fault->kind == RT_FAULT_SHIFT ? shifted(comp, x, diag) : perturbed(comp, x, eps, diag);
    if (!y) return false;
    if (y == x) continue;
    /* Every user of x but the rewrite itself now reads y. */
    for (int u = 0; u < comp->instr_count; u++) {
      hlo_instr *user = comp->instrs[u];
      if (u >= first_new) continue;
      for (int k = 0; k < user->operand_count; k++)
        if (user->operands[k] == x) user->operands[k] = y;
    }
    if (comp->root == x) comp->root = y;
  }
  return comp->instr_count == original || hlo_comp_sort(comp, diag);
}

hlo_module *rt_fault_perturb(const hlo_module *module, const rt_fault *fault, hlo_diag *diag) {
  hlo_module *copy = hlo_module_clone(module, diag);
  if (!copy) return NULL;
  for (int c = 0; c < copy->comp_count; c++)
    if (!perturb_comp(copy->comps[c], fault, diag)) {
      hlo_module_free(copy);
      return NULL;
    }
  return copy;
}

/* A choice fault's watch over the inner compile's choices; the caller's log still hears them. */
typedef struct watch {
  const rt_compile_options *outer;
  int seen;
  bool hit;
} watch;

static void watch_choice(void *context, const char *kind, const char *name, bool taken) {
  watch *w = context;
  if (strcmp(kind, config.fault.choice_kind) == 0 && ++w->seen == config.fault.choice_index) w->hit = taken;
  if (w->outer && w->outer->choice_log) w->outer->choice_log(w->outer->choice_log_context, kind, name, taken);
}

/* Compiles with the inner backend, watching for the faulty choice. */
static rt_executable *choice_compile(const hlo_module *module, const rt_compile_options *options, hlo_diag *diag) {
  rt_compile_options watched = options ? *options : (rt_compile_options)RT_COMPILE_OPTIONS_INIT;
  watch w = {options, 0, false};
  watched.choice_log = watch_choice;
  watched.choice_log_context = &w;
  rt_executable *wrapper = hlo_calloc(1, sizeof *wrapper);
  if (!wrapper) {
    hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory");
    return NULL;
  }
  wrapper->inner = config.inner;
  wrapper->exe = config.inner->compile(module, &watched, diag);
  wrapper->wrong_outputs = w.hit;
  if (!wrapper->exe) {
    free(wrapper);
    return NULL;
  }
  return wrapper;
}

/* Every floating element x of value becomes x + 0.5 * (|x| + 1). */
static void perturb_value(rt_value *value) {
  if (value->shape.dtype == HLO_TUPLE) {
    for (int i = 0; i < value->tuple_count; i++) perturb_value(value->tuple[i]);
    return;
  }
  if (!hlo_dtype_is_float(value->shape.dtype)) return;
  for (int64_t i = 0; i < value->count; i++) {
    double x = rt_get_f64(value, i);
    rt_set_f64(value, i, x + 0.5 * (fabs(x) + 1));
  }
  rt_value_touch(value);
}

static rt_executable *fault_compile(const hlo_module *module, const rt_compile_options *options, hlo_diag *diag) {
  const rt_fault *fault = &config.fault;
  if (fault->kind == RT_FAULT_CHOICE) return choice_compile(module, options, diag);
  const hlo_instr *culprit = find_opcode(module, fault->opcode);
  const hlo_instr *partner = fault->paired ? find_opcode(module, fault->partner) : NULL;
  if (culprit && fault->paired && fault->kind == RT_FAULT_COMPILE) {
    if (!partner) culprit = NULL;
    else {
      hlo_diag_set(diag, HLO_ERR_UNSUPPORTED,
                   "backend %s cannot compile %s %%%s together with %s %%%s (fault injected by LATCH_FAULT)",
                   config.inner->name, hlo_opcode_name(culprit->opcode), culprit->name,
                   hlo_opcode_name(partner->opcode), partner->name);
      return NULL;
    }
  }
  if (culprit) {
    switch (fault->kind) {
      case RT_FAULT_COMPILE:
        hlo_diag_set(diag, HLO_ERR_UNSUPPORTED, "backend %s cannot compile %s %%%s (fault injected by LATCH_FAULT)",
                     config.inner->name, hlo_opcode_name(culprit->opcode), culprit->name);
        return NULL;
      case RT_FAULT_CRASH:
        fprintf(stderr, "latch: crashing on %s %%%s (fault injected by LATCH_FAULT)\n",
                hlo_opcode_name(culprit->opcode), culprit->name);
        abort(); /* the one deliberate crash in latch */
      case RT_FAULT_HANG:
        for (;;) pause();
      default: break;
    }
  }
  hlo_module *perturbed_module = NULL;
  if (culprit && (fault->kind == RT_FAULT_ACCURACY || fault->kind == RT_FAULT_SHIFT)) {
    perturbed_module = rt_fault_perturb(module, fault, diag);
    if (!perturbed_module) return NULL;
  }
  rt_executable *wrapper = hlo_calloc(1, sizeof *wrapper);
  if (!wrapper) {
    hlo_module_free(perturbed_module);
    hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory");
    return NULL;
  }
  wrapper->inner = config.inner;
  wrapper->exe = config.inner->compile(perturbed_module ? perturbed_module : module, options, diag);
  hlo_module_free(perturbed_module);
  if (!wrapper->exe) {
    free(wrapper);
    return NULL;
  }
  return wrapper;
}

static hlo_status fault_execute(rt_executable *exe, rt_value *const *args, int arg_count, rt_value **result,
                                hlo_diag *diag) {
  hlo_status status = exe->inner->execute(exe->exe, args, arg_count, result, diag);
  if (status == HLO_OK && exe->wrong_outputs) perturb_value(*result);
  return status;
}

static void fault_destroy(rt_executable *exe) {
  if (!exe) return;
  exe->inner->destroy(exe->exe);
  free(exe);
}

/* Executables with a fault are not meant to be cached: serializing one is refused. */
static hlo_status fault_serialize(const rt_executable *exe, void **bytes, size_t *len, hlo_diag *diag) {
  (void)exe, (void)bytes, (void)len;
  return hlo_diag_set(diag, HLO_ERR_UNSUPPORTED, "a backend with an injected fault does not serialize");
}

static rt_executable *fault_deserialize(const void *bytes, size_t len, const rt_compile_options *options,
                                        hlo_diag *diag) {
  (void)bytes, (void)len, (void)options;
  hlo_diag_set(diag, HLO_ERR_UNSUPPORTED, "a backend with an injected fault does not deserialize");
  return NULL;
}

static void fault_describe(char *out, size_t size) {
  if (config.inner->describe) config.inner->describe(out, size);
  else if (size) out[0] = 0;
}

/* The inner backend's work and libraries, so LATCH_LOG=compiles and the fingerprint read as
 * for the real backend. */
static void fault_work_so_far(char *out, size_t size) {
  if (config.inner->work_so_far) config.inner->work_so_far(out, size);
  else if (size) out[0] = 0;
}

static const char *fault_libraries(void) {
  return config.inner->libraries ? config.inner->libraries() : "";
}

static rt_backend wrapper_backend = {
    .name = config.name,
    .version = "fault",
    .compile = fault_compile,
    .execute = fault_execute,
    .destroy = fault_destroy,
    .serialize = fault_serialize,
    .deserialize = fault_deserialize,
    .describe = fault_describe,
    .work_so_far = fault_work_so_far,
    .libraries = fault_libraries,
};

const rt_backend *rt_fault_backend(const rt_backend *inner, const rt_fault *fault) {
  if (!fault || fault->kind == RT_FAULT_NONE) return inner;
  config.inner = inner;
  config.fault = *fault;
  /* Named as the inner backend, so messages and repro commands read as for the real one. */
  snprintf(config.name, sizeof config.name, "%s", inner->name);
  return &wrapper_backend;
}
