build-dev/obj/runtime/reference/kernels_dot.o: \
 runtime/reference/kernels_dot.c runtime/reference/reference.h hlo/hlo.h \
 hlo/opcode.def runtime/runtime.h
runtime/reference/reference.h:
hlo/hlo.h:
hlo/opcode.def:
runtime/runtime.h:
