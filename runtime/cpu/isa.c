/* Which instruction set the cpu backend's vector loops run as: fused groups (fusion_run.c),
 * the few-row products (dot_rows.c) and the pools (pooling.c) are each compiled for AVX-512,
 * AVX2 and the build's baseline, and all of them run the variant picked here, the widest the
 * processor has (or the one a test picked). Every variant gives the same results. */
#include <stdatomic.h>

#include "kernel_internal.h"

static bool supported(rt_cpu_isa isa) {
  switch (isa) {
    case RT_CPU_ISA_PORTABLE: return true;
#if RT_CPU_X86_VARIANTS
    case RT_CPU_ISA_AVX2: return __builtin_cpu_supports("avx2");
    case RT_CPU_ISA_AVX512: return __builtin_cpu_supports("avx512f");
#endif
    default: return false;
  }
}

/* The variant in use: -1 until the first call picks the widest supported. */
static _Atomic int chosen = -1;

rt_cpu_isa rt_cpu_isa_in_use(void) {
  int isa = atomic_load_explicit(&chosen, memory_order_relaxed);
  if (isa < 0) {
    isa = RT_CPU_ISA_PORTABLE;
    for (int v = RT_CPU_ISA_COUNT - 1; v > RT_CPU_ISA_PORTABLE; v--)
      if (supported((rt_cpu_isa)v)) {
        isa = v;
        break;
      }
    atomic_store_explicit(&chosen, isa, memory_order_relaxed);
  }
  return (rt_cpu_isa)isa;
}

bool rt_cpu_use_isa(rt_cpu_isa isa) {
  if ((int)isa < 0 || isa >= RT_CPU_ISA_COUNT || !supported(isa)) return false;
  atomic_store_explicit(&chosen, (int)isa, memory_order_relaxed);
  return true;
}

const char *rt_cpu_isa_name(rt_cpu_isa isa) {
  static const char *const names[RT_CPU_ISA_COUNT] = {"portable", "avx2", "avx512"};
  return (int)isa >= 0 && isa < RT_CPU_ISA_COUNT ? names[isa] : "?";
}
