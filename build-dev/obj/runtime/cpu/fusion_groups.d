build-dev/obj/runtime/cpu/fusion_groups.o: runtime/cpu/fusion_groups.c \
 runtime/cpu/fusion_internal.h runtime/cpu/cpu_internal.h \
 runtime/cpu/cpu.h runtime/runtime.h hlo/hlo.h hlo/opcode.def \
 runtime/reference/reference.h
runtime/cpu/fusion_internal.h:
runtime/cpu/cpu_internal.h:
runtime/cpu/cpu.h:
runtime/runtime.h:
hlo/hlo.h:
hlo/opcode.def:
runtime/reference/reference.h:
