build-dev/obj/runtime/reference/kernels_spmd.o: \
 runtime/reference/kernels_spmd.c runtime/reference/reference.h hlo/hlo.h \
 hlo/opcode.def runtime/runtime.h
runtime/reference/reference.h:
hlo/hlo.h:
hlo/opcode.def:
runtime/runtime.h:
