build-dev/obj/runtime/reference/kernels_convert.o: \
 runtime/reference/kernels_convert.c runtime/reference/reference.h \
 hlo/hlo.h hlo/opcode.def runtime/runtime.h
runtime/reference/reference.h:
hlo/hlo.h:
hlo/opcode.def:
runtime/runtime.h:
