build-dev/obj/runtime/cpu/fusion_run.o: runtime/cpu/fusion_run.c \
 runtime/cpu/fusion_internal.h runtime/cpu/cpu_internal.h \
 runtime/cpu/cpu.h runtime/runtime.h hlo/hlo.h hlo/opcode.def \
 runtime/reference/reference.h runtime/cpu/erf_f32_internal.h \
 runtime/cpu/exp_f32_internal.h runtime/cpu/tanh_f32_internal.h
runtime/cpu/fusion_internal.h:
runtime/cpu/cpu_internal.h:
runtime/cpu/cpu.h:
runtime/runtime.h:
hlo/hlo.h:
hlo/opcode.def:
runtime/reference/reference.h:
runtime/cpu/erf_f32_internal.h:
runtime/cpu/exp_f32_internal.h:
runtime/cpu/tanh_f32_internal.h:
