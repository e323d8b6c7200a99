/* The cpu backend against the reference on the corpus ($LATCH_CORPUS, else
 * ../shared/corpus/xla): every module of every file the reference runs quickly, on the same
 * seeded inputs, all outputs compared. Left out: the Llama and MaxText steps (the reference
 * cannot run them), mobilenet_v2 (two minutes on the reference: compare it by hand with
 * `latch run FILE --backend cpu` and `--backend reference`) and sharded_computation (half a
 * minute on the reference). Tolerance: integers exactly, floats within 1e-3 relative to
 * 1 + |reference| (f16/bf16 within 2e-2): summation orders differ between BLAS and the
 * reference's loops over sums of thousands of terms. */
#include <dirent.h>
#include <stdlib.h>

#include "cpu_util.h"
#include "runtime/runtime.h"
#include "runtime/cpu/cpu.h"
#include "runtime/reference/reference.h"

static const char *const skipped[] = {"llama", "maxtext", "mobilenet", "sharded_computation"};

static int compared;

static double tolerance(hlo_dtype t) {
  return t == HLO_F16 || t == HLO_BF16 ? 2e-2 : hlo_dtype_is_float(t) ? 1e-3 : 0;
}

static bool close(double a, double b, double tol) {
  return a == b || (isnan(a) && isnan(b)) || fabs(a - b) <= tol * (1 + fabs(a));
}

static void compare(const char *where, const rt_value *want, const rt_value *got, int *mismatches) {
  if (want->shape.dtype == HLO_TUPLE) {
    CHECK_MSG(got->shape.dtype == HLO_TUPLE && got->tuple_count == want->tuple_count, "%s: tuple differs", where);
    for (int i = 0; got->shape.dtype == HLO_TUPLE && i < want->tuple_count && i < got->tuple_count; i++)
      compare(where, want->tuple[i], got->tuple[i], mismatches);
    return;
  }
  CHECK_MSG(hlo_shape_equal(&want->shape, &got->shape), "%s: shapes differ", where);
  if (!hlo_shape_equal(&want->shape, &got->shape)) return;
  double tol = tolerance(want->shape.dtype);
  for (int64_t i = 0; i < want->count && *mismatches < 5; i++) {
    bool same = hlo_dtype_is_float(want->shape.dtype) ? close(rt_get_f64(want, i), rt_get_f64(got, i), tol)
                                                      : rt_get_i64(want, i) == rt_get_i64(got, i);
    if (!same) {
      (*mismatches)++;
      CHECK_MSG(same, "%s: element %lld: reference %.9g, cpu %.9g", where, (long long)i, rt_get_f64(want, i),
                rt_get_f64(got, i));
    }
  }
}

static void run_module(const char *path, hlo_module *module) {
  hlo_diag diag = {0};
  rt_executable *ref = rt_backend_reference.compile(module, NULL, &diag);
  if (!ref) return; /* not the cpu backend's business */
  rt_executable *cpu = rt_backend_cpu.compile(module, NULL, &diag);
  CHECK_MSG(cpu != NULL, "%s: cpu compile failed: %s", path, diag.message);
  int n = module->entry->param_count;
  rt_value **args = calloc((size_t)n + 1, sizeof *args);
  bool ok = args != NULL;
  for (int i = 0; ok && i < n; i++) ok = (args[i] = rt_random_value(&module->entry->params[i]->shape, 0, (uint64_t)i, &diag));
  rt_value *want = NULL, *got = NULL;
  if (ok && rt_backend_reference.execute(ref, args, n, &want, &diag) == HLO_OK && cpu) {
    CHECK_MSG(rt_backend_cpu.execute(cpu, args, n, &got, &diag) == HLO_OK, "%s: cpu failed: %s", path, diag.message);
    int mismatches = 0;
    if (got) compare(path, want, got, &mismatches);
    compared++;
  }
  rt_value_release(want);
  rt_value_release(got);
  for (int i = 0; args && i < n; i++) rt_value_release(args[i]);
  free(args);
  rt_backend_reference.destroy(ref);
  rt_backend_cpu.destroy(cpu);
}

static void test_corpus(void) {
  const char *corpus = getenv("LATCH_CORPUS") ? getenv("LATCH_CORPUS") : "../shared/corpus/xla";
  DIR *dir = opendir(corpus);
  CHECK_MSG(dir != NULL, "cannot open the corpus %s (set LATCH_CORPUS)", corpus);
  if (!dir) return;
  struct dirent *entry;
  while ((entry = readdir(dir))) {
    size_t len = strlen(entry->d_name);
    if (len < 5 || strcmp(entry->d_name + len - 4, ".hlo") != 0) continue;
    bool skip = false;
    for (size_t s = 0; s < sizeof skipped / sizeof *skipped; s++) skip = skip || strstr(entry->d_name, skipped[s]);
    if (skip) continue;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", corpus, entry->d_name);
    hlo_module **modules = NULL;
    hlo_diag diag = {0};
    int count = hlo_parse_file(path, &modules, &diag);
    for (int m = 0; m < count; m++) {
      run_module(path, modules[m]);
      hlo_module_free(modules[m]);
    }
    free(modules);
  }
  closedir(dir);
  printf("%d corpus modules compared\n", compared);
  CHECK(compared >= 10);
}

int main(void) {
  RUN(test_corpus);
  return TEST_REPORT();
}
