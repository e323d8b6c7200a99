build-dev/obj/runtime/reference/kernels_gather.o: \
 runtime/reference/kernels_gather.c runtime/reference/reference.h \
 hlo/hlo.h hlo/opcode.def runtime/runtime.h
runtime/reference/reference.h:
hlo/hlo.h:
hlo/opcode.def:
runtime/runtime.h:
