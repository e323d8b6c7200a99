build-dev/obj/runtime/cpu/kept_places.o: runtime/cpu/kept_places.c \
 runtime/cpu/dnnl_internal.h runtime/cpu/cpu_internal.h runtime/cpu/cpu.h \
 runtime/runtime.h hlo/hlo.h hlo/opcode.def runtime/reference/reference.h
runtime/cpu/dnnl_internal.h:
runtime/cpu/cpu_internal.h:
runtime/cpu/cpu.h:
runtime/runtime.h:
hlo/hlo.h:
hlo/opcode.def:
runtime/reference/reference.h:
