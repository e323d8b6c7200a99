build-dev/obj/runtime/reference/kernels_conv.o: \
 runtime/reference/kernels_conv.c runtime/reference/reference.h hlo/hlo.h \
 hlo/opcode.def runtime/runtime.h
runtime/reference/reference.h:
hlo/hlo.h:
hlo/opcode.def:
runtime/runtime.h:
