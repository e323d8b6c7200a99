/* The one oneDNN engine every primitive of the cpu backend is made on, and the OpenMP team
 * oneDNN runs on. This oneDNN is Debian's, built on OpenMP (libgomp): a primitive sizes its
 * work split when it is made and runs with the calling thread's team, so each caller (the
 * convolutions, dot.c's sgemm) sets that team to the runtime's thread count
 * (rt_parallel_openmp_threads: one in a forked child) first, and so oneDNN uses what latch
 * was given. Under ThreadSanitizer, which cannot see libgomp's synchronization, the team is
 * one thread: concurrent executes are still checked. And the instruction set oneDNN's kernels use on this
 * host, for reports. */
#include <omp.h>
#include <pthread.h>

#include "dnnl_internal.h"
#include "runtime/runtime.h"

static dnnl_engine_t engine;
static pthread_once_t engine_once = PTHREAD_ONCE_INIT;

static void make_engine(void) {
  if (dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success) engine = NULL;
}

dnnl_engine_t rt_cpu_dnnl_engine(void) {
  pthread_once(&engine_once, make_engine);
  return engine;
}

int rt_cpu_dnnl_team(void) {
#if defined(__SANITIZE_THREAD__)
  return 1;
#else
  return rt_parallel_openmp_threads();
#endif
}

int rt_cpu_dnnl_team_begin(void) {
  int before = omp_get_max_threads();
  omp_set_num_threads(rt_cpu_dnnl_team());
  return before;
}

const char *rt_cpu_dnnl_isa_name(void) {
  static const struct {
    dnnl_cpu_isa_t isa;
    const char *name;
  } isas[] = {
      {dnnl_cpu_isa_avx512_core_amx, "avx512_core_amx"}, {dnnl_cpu_isa_avx512_core_bf16, "avx512_core_bf16"},
      {dnnl_cpu_isa_avx512_core_vnni, "avx512_core_vnni"}, {dnnl_cpu_isa_avx512_core, "avx512_core"},
      {dnnl_cpu_isa_avx2_vnni, "avx2_vnni"}, {dnnl_cpu_isa_avx2, "avx2"}, {dnnl_cpu_isa_avx, "avx"},
      {dnnl_cpu_isa_sse41, "sse41"},
  };
  dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
  for (size_t i = 0; i < sizeof isas / sizeof isas[0]; i++)
    if ((isa & isas[i].isa) == isas[i].isa) return isas[i].name;
  return "none";
}
