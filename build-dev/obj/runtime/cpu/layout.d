build-dev/obj/runtime/cpu/layout.o: runtime/cpu/layout.c \
 runtime/cpu/cpu_internal.h runtime/cpu/cpu.h runtime/runtime.h hlo/hlo.h \
 hlo/opcode.def runtime/reference/reference.h
runtime/cpu/cpu_internal.h:
runtime/cpu/cpu.h:
runtime/runtime.h:
hlo/hlo.h:
hlo/opcode.def:
runtime/reference/reference.h:
