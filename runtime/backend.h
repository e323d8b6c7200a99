/* Backends: what compiles an HLO module into an executable and runs it. capture/ and the
 * minifier see every backend through this table only, so a new backend is one more entry in
 * rt_backends (backend.c) and nothing else changes.
 *
 * An executable owns everything it needs (its own copy of the module, buffers, plans): the
 * module passed to compile may be freed right after. Executables are immutable once built
 * and may be run by several threads at once. */
#ifndef RT_BACKEND_H
#define RT_BACKEND_H
#include <stddef.h>

#include "hlo/ir.h"
#include "value.h"

typedef struct rt_executable rt_executable;

typedef struct rt_backend {
  const char *name;    /* "reference", "cpu" */
  const char *version; /* bumped when generated code or serialized form changes */
  /* NULL with diag on failure. A module this backend cannot handle is HLO_ERR_UNSUPPORTED
   * with a message naming the op and the instruction: a compile error the minifier can
   * shrink. */
  rt_executable *(*compile)(const hlo_module *module, hlo_diag *diag);
  /* Runs the entry computation: args borrowed, in the parameters' declared types; *result
   * is a new reference (a tuple value when the entry's root is a tuple). */
  hlo_status (*execute)(rt_executable *exe, rt_value *const *args, int arg_count,
                        rt_value **result, hlo_diag *diag);
  void (*destroy)(rt_executable *exe);
  /* Bytes that deserialize gives back as an equal executable (the on-disk cache's value):
   * a malloc'd buffer in *bytes, its length in *len. */
  hlo_status (*serialize)(const rt_executable *exe, void **bytes, size_t *len, hlo_diag *diag);
  rt_executable *(*deserialize)(const void *bytes, size_t len, hlo_diag *diag);
  /* Optional (NULL when the backend must compile first): runs a module directly, with no
   * compile work, as execute would run its executable. A traced function with symbolic dims
   * keeps its graph as a template and, for a binding it has not run yet, builds that
   * binding's module from the template (shapes computed from the symbols) and runs it here;
   * a backend without it binds its compiled executable to the binding's module (bind, below),
 * or failing that compiles one specialization per binding. */
  hlo_status (*execute_module)(const hlo_module *module, rt_value *const *args, int arg_count, rt_value **result,
                               hlo_diag *diag);
  /* Optional (NULL: the backend compiles each size of a graph on its own): an executable
   * for binding, made from exe without compiling. binding is the graph exe was compiled
   * from instantiated at other sizes: the same computations, instruction counts, opcodes,
   * operands and attributes, only shapes and size attributes (slice starts and limits)
   * differ. A traced function with symbolic dims compiles its trace's graph once and binds
   * it for every other binding of its symbols: the passes and their decisions are kept,
   * while shapes, kernel choices and buffer sizes are worked out again for these sizes
   * (microseconds, not a compile). NULL with diag when binding cannot be proven to compute
   * the same function as compiling binding would (another attribute differs, or a pass
   * decision held only at exe's sizes): the caller compiles binding instead.
   * Lifetime: the result shares exe's read-only parts, so exe must outlive it (destroy the
   * bound executable first). binding may be freed once bind returns. */
  rt_executable *(*bind)(rt_executable *exe, const hlo_module *binding, hlo_diag *diag);
} rt_backend;

/* A module's HLO text as a malloc'd buffer: the serialized form of backends whose executable
 * is rebuilt from the module (the reference and cpu backends). */
hlo_status rt_module_text_bytes(const hlo_module *module, void **bytes, size_t *len, hlo_diag *diag);

/* The backend called name, or NULL. */
const rt_backend *rt_backend_find(const char *name);
/* Names of every backend, comma-separated, for messages ("reference, cpu"). */
const char *rt_backend_names(void);

/* The reference evaluator as a backend (backend_reference.c): compile keeps a copy of the
 * module; execute runs rt_evaluate in the declared types. */
extern const rt_backend rt_backend_reference;
/* The fast CPU backend (backend_cpu*.c): passes, a plan with buffer reuse, typed and
 * parallel kernels, BLAS for dot and convolution, the reference kernels for the rest. */
extern const rt_backend rt_backend_cpu;

#endif
