/* Backend fingerprints for the on-disk compile cache (see fingerprint.h). */
#include "runtime.h"

#include <stdio.h>
#include <string.h>

#if defined(__x86_64__)
#define ARCH "x86_64"
#elif defined(__aarch64__)
#define ARCH "aarch64"
#elif defined(__i386__)
#define ARCH "i386"
#else
#define ARCH "other"
#endif

const char *rt_cpu_features(void) {
  /* Computed on each call: a few cpuid-backed tests, far cheaper than the compile it keys. */
  static _Thread_local char features[256];
  features[0] = '\0';
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  /* The features a code generator would choose between; __builtin_cpu_supports needs
   * literal names, hence the list of calls. */
  const struct {
    const char *name;
    int present;
  } table[] = {
      {"sse4.2", __builtin_cpu_supports("sse4.2")}, {"avx", __builtin_cpu_supports("avx")},
      {"avx2", __builtin_cpu_supports("avx2")},     {"fma", __builtin_cpu_supports("fma")},
      {"f16c", __builtin_cpu_supports("f16c")},     {"bmi2", __builtin_cpu_supports("bmi2")},
      {"avx512f", __builtin_cpu_supports("avx512f")}, {"avx512bw", __builtin_cpu_supports("avx512bw")},
      {"avx512vl", __builtin_cpu_supports("avx512vl")}, {"avx512vnni", __builtin_cpu_supports("avx512vnni")},
      {"avx512bf16", __builtin_cpu_supports("avx512bf16")},
  };
  size_t len = 0;
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
    if (!table[i].present) continue;
    int n = snprintf(features + len, sizeof features - len, "%s%s", len ? "," : "", table[i].name);
    if (n > 0 && (size_t)n < sizeof features - len) len += (size_t)n;
  }
#endif
  return features;
}

size_t rt_fingerprint(const rt_backend *backend, const char *options, char *out, size_t size) {
  /* Options come last: whatever they hold (spaces, '=') cannot be mistaken for another
   * field, so two different inputs never give the same string. */
  int n = snprintf(out, size, "backend=%s/%s latch=%s arch=%s cpu=%s options=%s", backend->name,
                   backend->version, RT_LATCH_VERSION, ARCH, rt_cpu_features(), options ? options : "");
  return n < 0 ? 0 : (size_t)n;
}
