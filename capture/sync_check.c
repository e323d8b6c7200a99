/* LATCH_CHECK: a newly compiled graph is checked before anything runs it. With "compile", a
 * backend compile error is caught; with "accuracy", the graph is also run once on the sync's
 * own inputs and compared with the reference evaluator in fp64. A graph that fails either way
 * is minified to a repro directory (minify/auto.h), one warning line names it, and the graph
 * runs on the reference backend from then on, so the program still gets correct values.
 *
 * The check happens inside the compile-cache miss, so it costs once per graph, and a checked
 * run never reads or writes the disk cache: the compile being checked must really happen,
 * and a fallback executable must never be stored under the backend's name. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "minify/minify.h"
#include "runtime/runtime.h"
#include "runtime/reference/reference.h"

static void free_views(rt_value **views, rt_value **owned, int count) {
  for (int i = 0; views && i < count; i++) free(views[i]);
  for (int i = 0; owned && i < count; i++) rt_value_release(owned[i]);
  free(views);
  free(owned);
}

/* Shells around the READY parameter values, as sync.c makes them: the backend's retains and
 * releases then touch only this thread's memory. Freed with free(), never released. A
 * parameter with no value (a stand-in: a symbolic trace instantiated for a new binding is
 * compiled from shapes alone) is checked on seeded random data of its shape, kept in
 * owned. */
static rt_value **views_of(const cap_graph *g, const hlo_module *module, rt_value ***owned) {
  rt_value **views = calloc((size_t)g->param_count + 1, sizeof *views);
  *owned = calloc((size_t)g->param_count + 1, sizeof **owned);
  bool ok = views && *owned;
  for (int i = 0; ok && i < g->param_count; i++) {
    const rt_value *value = g->params[i]->value;
    if (!value) {
      hlo_diag diag = {0};
      value = (*owned)[i] = rt_random_value(&module->entry->params[i]->shape, 1, (uint64_t)i, &diag);
    }
    views[i] = value ? malloc(sizeof *views[i]) : NULL;
    ok = views[i] != NULL;
    if (ok) {
      *views[i] = *value;
      views[i]->refcount = 1;
    }
  }
  if (!ok) {
    free_views(views, *owned, g->param_count);
    *owned = NULL;
    return NULL;
  }
  return views;
}

/* Runs exe once and compares with the fp64 reference; false with the reason in why. */
static bool accurate(latch_runtime *rt, const rt_backend *backend, rt_executable *exe, const hlo_module *module,
                     rt_value **views, int count, char *why, size_t size) {
  hlo_diag diag = {0};
  rt_value *result = NULL;
  if (backend->execute(exe, views, count, &result, &diag) != HLO_OK) {
    snprintf(why, size, "execution failed: %s", diag.message);
    return false;
  }
  rt_accuracy_verdict verdict;
  hlo_status status = rt_accuracy_check(module, views, count, result, rt->check_tol, &verdict, &diag);
  rt_value_release(result);
  if (status != HLO_OK) {
    snprintf(why, size, "the accuracy check could not run: %s", diag.message);
    return false;
  }
  if (!verdict.passed) snprintf(why, size, "%s", verdict.message);
  return verdict.passed;
}

/* Minifies the failing graph and prints the one warning line. */
static void report_failure(latch_runtime *rt, const hlo_module *module, rt_value **views, int count,
                           min_check_kind kind, const char *why) {
  char dir[4096] = "", path[4096] = "";
  const char *parent = getenv("LATCH_REPRO_DIR");
  if (parent && *parent) {
    snprintf(dir, sizeof dir, "%s/latch-repro-XXXXXX", parent);
    if (!mkdtemp(dir)) dir[0] = 0;
  }
  min_auto_request request = {.module = module, .inputs = views, .input_count = count, .backend = rt->backend,
                              .kind = kind, .tol = rt->check_tol, .dir = dir[0] ? dir : NULL};
  hlo_diag diag = {0};
  bool wrote = min_auto_repro(&request, path, sizeof path, &diag) == HLO_OK;
  fprintf(stderr, "latch: warning: a graph failed the %s check on the %s backend (%s); it runs on the reference "
          "backend from now on; %s%s\n", kind == MIN_CHECK_COMPILE ? "compile" : "accuracy", rt->backend->name, why,
          wrote ? "repro: " : "no repro: ", wrote ? path : diag.message);
  if (wrote) {
    pthread_mutex_lock(&rt->repro_lock);
    snprintf(rt->last_repro, sizeof rt->last_repro, "%s", path);
    pthread_mutex_unlock(&rt->repro_lock);
  }
}

void *cap_compile_checked(latch_runtime *rt, const cap_graph *g, hlo_diag *diag) {
  hlo_module *module = cap_graph_lower(g, diag);
  if (!module) return NULL;
  rt_value **owned = NULL;
  rt_value **views = views_of(g, module, &owned);
  if (!views) {
    hlo_module_free(module);
    hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory");
    return NULL;
  }
  const rt_backend *backend = rt->backend;
  hlo_diag compile_diag = {0};
  rt_executable *exe = backend->compile(module, &compile_diag);
  char why[1200];
  if (exe) atomic_fetch_add(&rt->compiles, 1);
  min_check_kind failed = MIN_CHECK_COMPILE;
  bool ok = exe != NULL;
  if (!ok) snprintf(why, sizeof why, "%s", compile_diag.message);
  if (ok && rt->check_mode == MIN_MODE_ACCURACY) {
    ok = accurate(rt, backend, exe, module, views, g->param_count, why, sizeof why);
    failed = MIN_CHECK_ACCURACY;
  }
  if (!ok) {
    atomic_fetch_add(&rt->check_failures, 1);
    report_failure(rt, module, views, g->param_count, failed, why);
    if (exe) backend->destroy(exe);
    backend = &rt_backend_reference;
    exe = backend->compile(module, diag);
  }
  free_views(views, owned, g->param_count);
  hlo_module_free(module);
  if (!exe) return NULL;
  cap_exe *value = malloc(sizeof *value);
  if (!value) {
    backend->destroy(exe);
    hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory");
    return NULL;
  }
  *value = (cap_exe){backend, exe, g->param_count, g->root_count};
  return value;
}
