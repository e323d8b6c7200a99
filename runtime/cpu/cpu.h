/* runtime/cpu/: the fast cpu backend: passes, fusion, buffer planning, typed parallel
 * kernels (BLAS for dot and convolution), executables bound to new sizes and serialized for
 * the disk cache, the reference kernels as its fallback. The layer's one header: everything
 * else here is private (cpu_internal.h, fusion_internal.h, dnnl_internal.h,
 * blob_internal.h, erf_f32_internal.h). Uses runtime/, runtime/reference/, hlo/, OpenMP,
 * oneDNN and BLAS. */
#ifndef RT_CPU_H
#define RT_CPU_H
#include "runtime/runtime.h"

/* The backend (executable.c). */
extern const rt_backend rt_backend_cpu;

/* Work done so far in this process, for tests and reports that must show a load from the
 * disk cache compiled nothing: how often the passes ran (executable.c, a compile) and how many
 * plans were built (plan.c, a compile or a bind). Deserializing does neither. */
int64_t rt_cpu_pass_runs(void);
int64_t rt_cpu_plans_built(void);

/* The versions of oneDNN and OpenBLAS and the instruction set each will use, one line
 * ("dnnl=2.7.3/HASH dnnl_isa=0x27 blas=OpenBLAS_0.3.21_..._MAX_THREADS=64/Haswell"), what
 * rt_backend_cpu.libraries gives the fingerprint (libraries.c). */
const char *rt_cpu_libraries(void);

#endif
