build-dev/obj/runtime/cpu/batchnorm.o: runtime/cpu/batchnorm.c \
 runtime/cpu/cpu_internal.h runtime/cpu/cpu.h runtime/runtime.h hlo/hlo.h \
 hlo/opcode.def runtime/reference/reference.h
runtime/cpu/cpu_internal.h:
runtime/cpu/cpu.h:
runtime/runtime.h:
hlo/hlo.h:
hlo/opcode.def:
runtime/reference/reference.h:
