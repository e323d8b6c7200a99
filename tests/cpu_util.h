/* Helpers for the cpu backend's tests: compile HLO text on a backend, run it, compare. */
#ifndef LATCH_CPU_UTIL_H
#define LATCH_CPU_UTIL_H
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "eval_util.h"
#include "runtime/runtime.h"
#include "runtime/cpu/cpu.h"
#include "runtime/reference/reference.h"

/* The distance in representable floats between a and b (the f32 math functions' tests). */
static inline int64_t ulps_apart(float a, float b) {
  int32_t ia, ib;
  memcpy(&ia, &a, sizeof ia);
  memcpy(&ib, &b, sizeof ib);
  int64_t oa = ia < 0 ? (int64_t)INT32_MIN - ia : ia, ob = ib < 0 ? (int64_t)INT32_MIN - ib : ib;
  return oa > ob ? oa - ob : ob - oa;
}

/* The compile options the helpers below pass (NULL: the defaults); a test may point it at
 * others for a while (fusion off, say). */
static const rt_compile_options *cpu_util_options;

/* Parses text, compiles and runs it on backend; the result or NULL (message in diag). args
 * are borrowed. */
static inline rt_value *run_on(const rt_backend *backend, const char *text, rt_value *const *args, int count,
                               hlo_diag *diag) {
  hlo_diag_clear(diag);
  hlo_module *module = hlo_parse_module(text, strlen(text), "test", diag);
  if (!module) return NULL;
  rt_executable *exe = backend->compile(module, cpu_util_options, diag);
  hlo_module_free(module);
  if (!exe) return NULL;
  rt_value *result = NULL;
  backend->execute(exe, args, count, &result, diag);
  backend->destroy(exe);
  return result;
}

/* text parsed, or NULL after a failed check naming the parser's message. */
static inline hlo_module *parse_checked(const char *text) {
  hlo_diag diag = {0};
  hlo_module *module = hlo_parse_module(text, strlen(text), "test", &diag);
  CHECK_MSG(module != NULL, "parse: %s\n%s", diag.message, text);
  return module;
}

/* text compiled on the cpu backend, or NULL after a failed check. */
static inline rt_executable *compile_checked(const char *text) {
  hlo_diag diag = {0};
  hlo_module *module = parse_checked(text);
  rt_executable *exe = module ? rt_backend_cpu.compile(module, cpu_util_options, &diag) : NULL;
  CHECK_MSG(exe != NULL || !module, "compile: %s", diag.message);
  hlo_module_free(module);
  return exe;
}

/* Whether got matches want (tuples element by element) within 1e-4 relative to 1 + |want|,
 * NaN matching NaN: the cpu backend against the reference, up to summation order. */
static inline bool cpu_agree(const rt_value *want, const rt_value *got) {
  if (!want || !got || want->shape.dtype != got->shape.dtype) return false;
  if (want->shape.dtype == HLO_TUPLE) {
    if (want->tuple_count != got->tuple_count) return false;
    for (int i = 0; i < want->tuple_count; i++)
      if (!cpu_agree(want->tuple[i], got->tuple[i])) return false;
    return true;
  }
  if (want->count != got->count) return false;
  for (int64_t i = 0; i < want->count; i++) {
    double a = rt_get_f64(want, i), b = rt_get_f64(got, i);
    if (!(a == b || (isnan(a) && isnan(b)) || fabs(a - b) <= 1e-4 * (1 + fabs(a)))) return false;
  }
  return true;
}

/* Runs text on the cpu backend (args released here) and checks the array result against
 * want within tol (relative, plus tol absolute). */
static inline void expect_cpu(int line, const char *text, rt_value **args, int count, const double *want,
                              int64_t want_count, double tol) {
  hlo_diag diag;
  rt_value *got = run_on(&rt_backend_cpu, text, args, count, &diag);
  for (int i = 0; i < count; i++) rt_value_release(args[i]);
  CHECK_MSG(got != NULL, "line %d: cpu run failed: %s", line, diag.message);
  if (!got) return;
  expect_values(line, got, want, want_count, tol);
  rt_value_release(got);
}
#define EXPECT_CPU(text, args, want, tol)                                                  \
  expect_cpu(__LINE__, (text), (args), (int)(sizeof(args) / sizeof *(args)), (want),         \
             (int64_t)(sizeof(want) / sizeof *(want)), (tol))
/* For modules without parameters. */
#define EXPECT_CPU0(text, want, tol) \
  expect_cpu(__LINE__, (text), NULL, 0, (want), (int64_t)(sizeof(want) / sizeof *(want)), (tol))

/* Runs text on the reference and the cpu backend with arguments seeded by seed (at most 8
 * parameters) and checks the results agree (cpu_agree). */
static inline void expect_same_as_reference(const char *text, int seed) {
  hlo_diag diag = {0};
  hlo_module *module = hlo_parse_module(text, strlen(text), "t", &diag);
  CHECK_MSG(module != NULL, "%s\n%s", diag.message, text);
  if (!module) return;
  int n = module->entry->param_count;
  rt_value *args[8] = {0};
  for (int i = 0; i < n && i < 8; i++)
    args[i] = rt_random_value(&module->entry->params[i]->shape, (uint64_t)seed, (uint64_t)i, &diag);
  hlo_module_free(module);
  rt_value *want = run_on(&rt_backend_reference, text, args, n, &diag);
  rt_value *got = run_on(&rt_backend_cpu, text, args, n, &diag);
  CHECK_MSG(want && got && cpu_agree(want, got), "seed %d: %s\n%s", seed, diag.message, text);
  rt_value_release(want);
  rt_value_release(got);
  for (int i = 0; i < n && i < 8; i++) rt_value_release(args[i]);
}

#endif
