/* The libraries the cpu backend's executables depend on, for the compile cache's fingerprint:
 * oneDNN's version and the instruction set it will use (it may be held below the host's, by
 * ONEDNN_MAX_CPU_ISA), OpenBLAS's build configuration and the core it chose. A blob made where
 * oneDNN used AVX-512, or by another oneDNN or OpenBLAS, is then a miss instead of an executable
 * whose first run fails or computes with layouts this process does not make. */
#include <stdio.h>

#include <cblas.h>

#include "dnnl_internal.h"
#include "cpu.h"

const char *rt_cpu_libraries(void) {
  static _Thread_local char text[384];
  const dnnl_version_t *v = dnnl_version();
  const char *config = openblas_get_config(), *core = openblas_get_corename();
  int n = snprintf(text, sizeof text, "dnnl=%d.%d.%d/%s dnnl_isa=0x%x blas=", v->major, v->minor, v->patch,
                   v->hash ? v->hash : "", (unsigned)dnnl_get_effective_cpu_isa());
  char *blas = text + (n > 0 && (size_t)n < sizeof text ? n : 0);
  snprintf(blas, sizeof text - (size_t)(blas - text), "%s/%s", config ? config : "", core ? core : "");
  for (char *p = blas; *p; p++) /* one space-free field: "OpenBLAS_0.3.21_NO_AFFINITY_..." */
    if (*p == ' ') *p = '_';
  return text;
}
