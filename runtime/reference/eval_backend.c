/* The reference evaluator behind the backend interface. Its "executable" is the module
 * itself; its serialized form is the module's HLO text. */
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime.h"
#include "reference.h"
#include "hlo/hlo.h"

struct rt_executable {
  hlo_module *module;
  rt_comm *comm; /* the compile's world (borrowed), for modules across ranks */
};

static rt_executable *wrap(hlo_module *module, hlo_diag *diag) {
  if (!module) return NULL;
  if (hlo_verify_module(module, diag) != HLO_OK) {
    hlo_module_free(module);
    return NULL;
  }
  rt_executable *exe = hlo_calloc(1, sizeof *exe);
  if (!exe) {
    hlo_module_free(module);
    hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory");
    return NULL;
  }
  exe->module = module;
  return exe;
}

/* Of the options, the evaluator keeps only the world. */
static rt_executable *reference_compile(const hlo_module *module, const rt_compile_options *options, hlo_diag *diag) {
  rt_executable *exe = wrap(hlo_module_clone(module, diag), diag);
  if (exe && options) exe->comm = options->comm;
  return exe;
}

static hlo_status reference_execute(rt_executable *exe, rt_value *const *args, int arg_count,
                                    rt_value **result, hlo_diag *diag) {
  rt_eval_options options = {.fp64 = false, .comm = exe->comm};
  return rt_evaluate(exe->module, args, arg_count, &options, result, diag);
}

static hlo_status reference_execute_module(const hlo_module *module, rt_value *const *args, int arg_count,
                                           rt_value **result, hlo_diag *diag) {
  rt_eval_options options = {.fp64 = false};
  return rt_evaluate(module, args, arg_count, &options, result, diag);
}

static void reference_destroy(rt_executable *exe) {
  if (!exe) return;
  hlo_module_free(exe->module);
  free(exe);
}

/* The serialized form is the module's HLO text, as a malloc'd buffer. */
static hlo_status reference_serialize(const rt_executable *exe, void **bytes, size_t *len, hlo_diag *diag) {
  char *text = hlo_module_to_text(exe->module);
  if (!text) return hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory serializing a module");
  *bytes = text;
  *len = strlen(text);
  return HLO_OK;
}

static rt_executable *reference_deserialize(const void *bytes, size_t len, const rt_compile_options *options,
                                            hlo_diag *diag) {
  rt_executable *exe = wrap(hlo_parse_module(bytes, len, "<cache entry>", diag), diag);
  if (exe && options) exe->comm = options->comm;
  return exe;
}

const rt_backend rt_backend_reference = {
    .name = "reference",
    .version = "1",
    .compile = reference_compile,
    .execute = reference_execute,
    .destroy = reference_destroy,
    .serialize = reference_serialize,
    .deserialize = reference_deserialize,
    .execute_module = reference_execute_module,
};
