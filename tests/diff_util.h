/* Helpers for the differential tests of the cpu backend's row and product steps (layer norm,
 * attention, bf16 products): HLO text written with printf, seeded random arguments for its
 * parameters, and one element-by-element comparison with a bound on each element. */
#ifndef LATCH_DIFF_UTIL_H
#define LATCH_DIFF_UTIL_H
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#include "cpu_util.h"

typedef struct graph_text {
  char s[8192];
  size_t len;
} graph_text;

static inline void emit(graph_text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline void emit(graph_text *t, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(t->s + t->len, sizeof t->s - t->len, fmt, ap);
  va_end(ap);
  if (n > 0 && t->len + (size_t)n < sizeof t->s) t->len += (size_t)n;
}

/* Parameters of text's entry: seeded values (floats uniform in [-1, 1), preds random); their
 * count. */
static inline int random_args(const char *text, uint64_t seed, rt_value **args) {
  hlo_module *module = parse_checked(text);
  if (!module) return 0;
  int n = module->entry->param_count;
  hlo_diag diag = {0};
  for (int i = 0; i < n; i++) args[i] = rt_random_value(&module->entry->params[i]->shape, seed, (uint64_t)i, &diag);
  hlo_module_free(module);
  return n;
}

/* The bound on |got - want| at element i: rel * |want| + abs, plus per_sum * sums[i] when
 * sums (the products' sums of magnitudes) is given. */
typedef struct diff_bound {
  double rel, abs, per_sum;
  const rt_value *sums;
} diff_bound;

/* How many elements of got lie outside the bound of want's (NaN matching NaN, a count
 * mismatch counting every element); the first such into *first (-1: none). */
static inline int64_t elements_off(const rt_value *want, const rt_value *got, diff_bound bound, int64_t *first) {
  *first = -1;
  if (!want || !got || want->count != got->count) return want ? want->count + 1 : 1;
  int64_t off = 0;
  for (int64_t i = 0; i < want->count; i++) {
    double w = rt_get_f64(want, i), g = rt_get_f64(got, i);
    double most = bound.rel * fabs(w) + bound.abs + (bound.sums ? bound.per_sum * rt_get_f64(bound.sums, i) : 0);
    if ((isnan(w) && isnan(g)) || fabs(g - w) <= most) continue;
    if (off++ == 0) *first = i;
  }
  return off;
}

/* text compiled, serialized and loaded again: the loaded executable runs its step once
 * (run_count, the step's counter, goes up by one) and agrees with the reference evaluator. */
static inline void check_loaded(const char *text, rt_value *const *args, int n, int64_t (*run_count)(void)) {
  hlo_diag diag = {0};
  rt_value *want = run_on(&rt_backend_reference, text, args, n, &diag);
  rt_executable *exe = compile_checked(text);
  void *bytes = NULL;
  size_t len = 0;
  CHECK_MSG(exe && rt_backend_cpu.serialize(exe, &bytes, &len, &diag) == HLO_OK, "serialize: %s", diag.message);
  rt_executable *loaded = bytes ? rt_backend_cpu.deserialize(bytes, len, NULL, &diag) : NULL;
  CHECK_MSG(loaded != NULL, "deserialize: %s", diag.message);
  int64_t runs = run_count();
  rt_value *got = NULL;
  CHECK_MSG(loaded && rt_backend_cpu.execute(loaded, args, n, &got, &diag) == HLO_OK, "execute: %s", diag.message);
  CHECK_EQ_INT(run_count() - runs, 1);
  CHECK(cpu_agree(want, got));
  rt_value_release(want);
  rt_value_release(got);
  free(bytes);
  if (loaded) rt_backend_cpu.destroy(loaded);
  if (exe) rt_backend_cpu.destroy(exe);
}

#endif
