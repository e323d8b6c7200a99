build-dev/obj/runtime/cpu/executable.o: runtime/cpu/executable.c \
 runtime/runtime.h hlo/hlo.h hlo/opcode.def runtime/cpu/blob_internal.h \
 runtime/cpu/cpu_internal.h runtime/cpu/cpu.h \
 runtime/reference/reference.h
runtime/runtime.h:
hlo/hlo.h:
hlo/opcode.def:
runtime/cpu/blob_internal.h:
runtime/cpu/cpu_internal.h:
runtime/cpu/cpu.h:
runtime/reference/reference.h:
