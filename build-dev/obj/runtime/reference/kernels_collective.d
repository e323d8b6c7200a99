build-dev/obj/runtime/reference/kernels_collective.o: \
 runtime/reference/kernels_collective.c runtime/reference/reference.h \
 hlo/hlo.h hlo/opcode.def runtime/runtime.h
runtime/reference/reference.h:
hlo/hlo.h:
hlo/opcode.def:
runtime/runtime.h:
