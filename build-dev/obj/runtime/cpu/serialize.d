build-dev/obj/runtime/cpu/serialize.o: runtime/cpu/serialize.c \
 runtime/cpu/blob_internal.h hlo/hlo.h hlo/opcode.def \
 runtime/cpu/dnnl_internal.h runtime/cpu/cpu_internal.h runtime/cpu/cpu.h \
 runtime/runtime.h runtime/reference/reference.h \
 runtime/cpu/fusion_internal.h
runtime/cpu/blob_internal.h:
hlo/hlo.h:
hlo/opcode.def:
runtime/cpu/dnnl_internal.h:
runtime/cpu/cpu_internal.h:
runtime/cpu/cpu.h:
runtime/runtime.h:
runtime/reference/reference.h:
runtime/cpu/fusion_internal.h:
