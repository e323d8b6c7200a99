build-dev/obj/runtime/cpu/deserialize_module.o: \
 runtime/cpu/deserialize_module.c runtime/cpu/blob_internal.h hlo/hlo.h \
 hlo/opcode.def runtime/cpu/cpu_internal.h runtime/cpu/cpu.h \
 runtime/runtime.h runtime/reference/reference.h
runtime/cpu/blob_internal.h:
hlo/hlo.h:
hlo/opcode.def:
runtime/cpu/cpu_internal.h:
runtime/cpu/cpu.h:
runtime/runtime.h:
runtime/reference/reference.h:
