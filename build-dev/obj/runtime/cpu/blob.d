build-dev/obj/runtime/cpu/blob.o: runtime/cpu/blob.c \
 runtime/cpu/blob_internal.h hlo/hlo.h hlo/opcode.def runtime/runtime.h
runtime/cpu/blob_internal.h:
hlo/hlo.h:
hlo/opcode.def:
runtime/runtime.h:
