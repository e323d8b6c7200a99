build-dev/obj/runtime/reference/kernels_elementwise.o: \
 runtime/reference/kernels_elementwise.c runtime/reference/reference.h \
 hlo/hlo.h hlo/opcode.def runtime/runtime.h
runtime/reference/reference.h:
hlo/hlo.h:
hlo/opcode.def:
runtime/runtime.h:
