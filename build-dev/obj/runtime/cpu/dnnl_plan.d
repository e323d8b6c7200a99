build-dev/obj/runtime/cpu/dnnl_plan.o: runtime/cpu/dnnl_plan.c \
 runtime/cpu/dnnl_internal.h runtime/cpu/cpu_internal.h runtime/cpu/cpu.h \
 runtime/runtime.h hlo/hlo.h hlo/opcode.def runtime/reference/reference.h
runtime/cpu/dnnl_internal.h:
runtime/cpu/cpu_internal.h:
runtime/cpu/cpu.h:
runtime/runtime.h:
hlo/hlo.h:
hlo/opcode.def:
runtime/reference/reference.h:
