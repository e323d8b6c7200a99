build-dev/obj/runtime/reference/kernels_reduce.o: \
 runtime/reference/kernels_reduce.c runtime/reference/reference.h \
 hlo/hlo.h hlo/opcode.def runtime/runtime.h
runtime/reference/reference.h:
hlo/hlo.h:
hlo/opcode.def:
runtime/runtime.h:
