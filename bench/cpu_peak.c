/* The machine's theoretical f32 peak from the processor's own report (/proc/cpuinfo), for
 * `latch bench --peak` to print beside the measured one: cores (distinct physical id and
 * core id pairs, so hyperthreads that share a core's FMA units count once) x clock ("cpu
 * MHz" of the first processor) x flops per cycle, 2 (a multiply and an add) x the FMA width
 * in f32 lanes (16 with avx512f, 8 with avx2 and fma) x 2 FMA units per core. /proc/cpuinfo
 * does not say how many FMA units a core has: 2 is what current server cores have (some
 * AVX-512 parts have 1 for 512-bit vectors; the report says the number assumed). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

enum { FMA_UNITS = 2, MAX_CORES = 4096 };

/* Whether the space-separated flags list holds word. */
static bool has_flag(const char *flags, const char *word) {
  size_t n = strlen(word);
  for (const char *p = flags; (p = strstr(p, word)) != NULL; p += n)
    if ((p == flags || p[-1] == ' ' || p[-1] == '\t') && (p[n] == ' ' || p[n] == '\n' || p[n] == '\0')) return true;
  return false;
}

/* The value after "key<spaces>: " on a cpuinfo line, or NULL when the line is another key's. */
static const char *value_of(const char *line, const char *key) {
  size_t n = strlen(key);
  if (strncmp(line, key, n) != 0) return NULL;
  const char *p = line + n;
  while (*p == ' ' || *p == '\t') p++;
  return *p == ':' ? p + 1 + (p[1] == ' ') : NULL;
}

bool bench_cpu_peak(const char *cpuinfo_path, bench_cpu_peak_info *out) {
  memset(out, 0, sizeof *out);
  FILE *f = fopen(cpuinfo_path, "r");
  if (!f) return false;
  long seen[MAX_CORES];
  int distinct = 0;
  long physical = 0;
  char line[8192];
  while (fgets(line, sizeof line, f)) {
    const char *v;
    if ((v = value_of(line, "processor"))) out->processors++;
    else if ((v = value_of(line, "physical id"))) physical = strtol(v, NULL, 10);
    else if ((v = value_of(line, "core id"))) {
      long key = physical * 65536 + strtol(v, NULL, 10);
      bool known = false;
      for (int i = 0; i < distinct && !known; i++) known = seen[i] == key;
      if (!known && distinct < MAX_CORES) seen[distinct++] = key;
    } else if ((v = value_of(line, "cpu MHz")) && out->mhz == 0) out->mhz = strtod(v, NULL);
    else if ((v = value_of(line, "flags")) && out->lanes == 0)
      out->lanes = has_flag(v, "avx512f") ? 16 : has_flag(v, "avx2") && has_flag(v, "fma") ? 8 : 0;
  }
  fclose(f);
  out->cores = distinct ? distinct : out->processors; /* no core ids (some VMs): each processor a core */
  out->fma_units = FMA_UNITS;
  out->flops_per_cycle = 2 * out->lanes * FMA_UNITS;
  out->gflops = out->cores * out->mhz * out->flops_per_cycle / 1e3;
  return out->cores > 0 && out->mhz > 0 && out->lanes > 0;
}
