/* LATCH_CHECK: a newly compiled graph is checked before anything runs it. With "compile", the
 * backend must compile it and run it once on the sync's own inputs without an error; with
 * "accuracy", the outputs of that run must also agree with the reference evaluator in fp64.
 * That first compile and first execution happen in a child process with a time limit
 * (minify/isolate.c, the minifier's own isolation), so a backend that crashes or hangs fails
 * the check instead of killing or stalling the program. A graph that fails any way is
 * minified to a repro directory (minify/auto.c), one warning line names it, and the graph
 * runs on the reference backend from then on, so the program still gets correct values.
 * A graph that passes is compiled again in this process (what the child compiled died with
 * it) and runs as usual.
 *
 * The check happens inside the compile-cache miss, so it costs once per graph, and a checked
 * run never reads or writes the disk cache: the compile being checked must really happen,
 * and a fallback executable must never be stored under the backend's name. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
  rt_value **views = hlo_calloc((size_t)g->param_count + 1, sizeof *views);
  *owned = hlo_calloc((size_t)g->param_count + 1, sizeof **owned);
  bool ok = views && *owned;
  for (int i = 0; ok && i < g->param_count; i++) {
    const rt_value *value = g->params[i]->value;
    if (!value) {
      hlo_diag diag = {0};
      value = (*owned)[i] = rt_random_value(&module->entry->params[i]->shape, 1, (uint64_t)i, &diag);
    }
    views[i] = value ? hlo_malloc(sizeof *views[i]) : NULL;
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

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The check in a child process: false with the outcome when the backend failed it. A check
 * that cannot be started (no fork) is run here instead, unprotected, after a warning:
 * checking matters more than isolating it. */
static bool check_isolated(const hlo_module *module, rt_value **views, int count, const min_predicate *predicate,
                           min_outcome *outcome) {
  hlo_diag diag = {0};
  if (min_check(predicate, module, views, count, outcome, &diag) != HLO_OK) {
    fprintf(stderr, "latch: warning: the check runs unisolated: %s\n", diag.message);
    min_check_inline(predicate, module, views, count, outcome);
  }
  return outcome->kind == MIN_PASS;
}

/* A new repro directory under options.repro_dir (LATCH_REPRO_DIR), else /tmp; false when
 * none can be made. */
static bool make_repro_dir(const latch_runtime *rt, char *dir, size_t size) {
  int n = snprintf(dir, size, "%s/latch-repro-XXXXXX", rt->repro_dir[0] ? rt->repro_dir : "/tmp");
  return n >= 0 && (size_t)n < size && mkdtemp(dir) != NULL;
}

/* Writes the unminified graph (dir/unminified.hlo), then minifies it into the same directory
 * in what is left of the budget, starting from the failure the check saw (a hang is not
 * checked again, nor minified). The note says where the repro is, or why there is none. */
static void write_repro(latch_runtime *rt, const hlo_module *module, rt_value **views, int count, min_check_kind kind,
                        const min_outcome *failure, double deadline, const char *dir, char *note, size_t size) {
  hlo_diag diag = {0};
  if (min_write_case(dir, "unminified.hlo", module, NULL, 0, &diag) != HLO_OK) {
    snprintf(note, size, "no repro: %s", diag.message);
    return;
  }
  double left = deadline - now_s();
  if (left <= 0) {
    snprintf(note, size, "not minified (the check budget LATCH_CHECK_BUDGET is spent): %s/unminified.hlo", dir);
    return;
  }
  min_auto_request request = {.module = module, .inputs = views, .input_count = count, .backend = rt->backend,
                              .compile_options = &rt->compile_options, .kind = kind, .tol = rt->check_tol,
                              .timeout_s = rt->check_timeout, .budget_s = left, .failure = failure, .dir = dir,
                              .max_bytes = rt->options.repro_max_bytes, .max_checks = rt->options.check_max_runs,
                              .bisect = rt->options.check_bisect};
  char path[4096];
  if (min_auto_repro(&request, path, sizeof path, &diag) != HLO_OK)
    snprintf(note, size, "not minified (%s): %s/unminified.hlo", diag.message, dir);
  else snprintf(note, size, "repro: %s", path);
}

/* Writes the repro and prints the one warning line. */
static void report_failure(latch_runtime *rt, const hlo_module *module, rt_value **views, int count,
                           min_check_kind kind, const min_outcome *failure, const char *why, double deadline) {
  char dir[4096], note[8192];
  bool made = make_repro_dir(rt, dir, sizeof dir);
  if (!made) snprintf(note, sizeof note, "no repro: cannot create %s", dir);
  else write_repro(rt, module, views, count, kind, failure, deadline, dir, note, sizeof note);
  fprintf(stderr, "latch: warning: a graph failed the %s check on the %s backend (%s); it runs on the reference "
          "backend from now on; %s\n", min_check_kind_name(kind), rt->backend->name, why, note);
  if (made) {
    pthread_mutex_lock(&rt->repro_lock);
    snprintf(rt->last_repro, sizeof rt->last_repro, "%s", dir);
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
  double deadline = now_s() + rt->check_budget;
  min_predicate predicate = {.kind = rt->check_mode == MIN_MODE_ACCURACY ? MIN_CHECK_ACCURACY : MIN_CHECK_EXECUTE,
                             .backend = backend, .compile_options = &rt->compile_options, .tol = rt->check_tol,
                             .timeout_s = rt->check_timeout < rt->check_budget ? rt->check_timeout : rt->check_budget};
  char why[1400];
  min_outcome outcome;
  bool ok = check_isolated(module, views, g->param_count, &predicate, &outcome);
  if (!ok) min_outcome_describe(&outcome, why, (int)sizeof why);
  const min_outcome *seen = &outcome;
  rt_executable *exe = NULL;
  if (ok) { /* passed in the child: the same compile again, here */
    hlo_diag compile_diag = {0};
    exe = backend->compile(module, &rt->compile_options, &compile_diag);
    if (exe) atomic_fetch_add(&rt->compiles, 1);
    else {
      snprintf(why, sizeof why, "compile error on the second compile: %s", compile_diag.message);
      seen = NULL; /* not what the check saw: the minifier checks the graph afresh */
    }
    ok = exe != NULL;
  }
  if (!ok) {
    atomic_fetch_add(&rt->check_failures, 1);
    report_failure(rt, module, views, g->param_count, predicate.kind, seen, why, deadline);
    backend = &rt_backend_reference;
    exe = backend->compile(module, &rt->compile_options, diag);
  }
  free_views(views, owned, g->param_count);
  hlo_module_free(module);
  if (!exe) return NULL;
  cap_exe *value = hlo_malloc(sizeof *value);
  if (!value) {
    backend->destroy(exe);
    hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory");
    return NULL;
  }
  *value = (cap_exe){backend, exe, g->param_count, g->root_count, false};
  return value;
}
