build-dev/obj/runtime/cpu/elementwise.o: runtime/cpu/elementwise.c \
 runtime/cpu/cpu_internal.h runtime/cpu/cpu.h runtime/runtime.h hlo/hlo.h \
 hlo/opcode.def runtime/reference/reference.h \
 runtime/cpu/erf_f32_internal.h runtime/cpu/exp_f32_internal.h \
 runtime/cpu/tanh_f32_internal.h
runtime/cpu/cpu_internal.h:
runtime/cpu/cpu.h:
runtime/runtime.h:
hlo/hlo.h:
hlo/opcode.def:
runtime/reference/reference.h:
runtime/cpu/erf_f32_internal.h:
runtime/cpu/exp_f32_internal.h:
runtime/cpu/tanh_f32_internal.h:
