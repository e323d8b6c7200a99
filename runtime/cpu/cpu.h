/* runtime/cpu/: the fast cpu backend: passes, fusion, buffer planning, typed parallel
 * kernels (BLAS for dot and convolution), executables bound to new sizes and serialized for
 * the disk cache, the reference kernels as its fallback. The layer's one header; the rest is
 * private, each declaration under the file that defines it: kernel_internal.h (what kernels
 * share), plan_internal.h (steps and plans), exec_internal.h (what executable.c calls
 * besides the plan), dnnl_internal.h (oneDNN steps), fusion_internal.h (fused programs),
 * attention_internal.h (attention steps),
 * blob_internal.h (the serialized bytes), erf_f32_internal.h, exp_f32_internal.h,
 * tanh_f32_internal.h (vector math). Uses runtime/, runtime/reference/, hlo/, OpenMP, oneDNN
 * and BLAS.
 *
 * Its files, each depending only on files above it (tests/test_cpu_layers.sh checks):
 *   kernels     isa.c fallback.c dnnl_engine.c dnnl_matmul.c dnnl_conv_bf16.c conv_gemm.c
 *               dnnl_conv_grad.c elementwise.c layout.c gather.c conv.c batchnorm.c dot_rows.c
 *               pooling.c pool_grad.c dot.c reduce.c attention.c
 *   oneDNN      wino.c dnnl_pool.c dnnl_concat.c dnnl_conv.c
 *   the plan    kept.c kept_places.c dnnl_plan.c attention_plan.c fusion_run.c fusion_groups.c
 *               plan.c
 *   passes      pass_fold_affine.c pass_space_to_depth.c pass_dot_repeat.c pass_input_grad.c mark_choices.c
 *   storing     blob.c bind.c serialize.c deserialize_module.c deserialize.c
 *   the backend libraries.c executable.c */
#ifndef RT_CPU_H
#define RT_CPU_H
#include "runtime/runtime.h"

/* executable.c: the backend. */
extern const rt_backend rt_backend_cpu;

/* Work done so far in this process, for tests and reports that must show a load from the
 * disk cache compiled nothing: how often the passes ran (a compile) and how many plans were
 * built (a compile or a bind). Deserializing does neither. */
/* executable.c */
int64_t rt_cpu_pass_runs(void);
/* plan.c */
int64_t rt_cpu_plans_built(void);

/* libraries.c: the versions of oneDNN and OpenBLAS and the instruction set each will use, one line
 * ("dnnl=2.7.3/HASH dnnl_isa=0x27 blas=OpenBLAS_0.3.21_..._MAX_THREADS=64/Haswell"), what
 * rt_backend_cpu.libraries gives the fingerprint. */
const char *rt_cpu_libraries(void);

#endif
