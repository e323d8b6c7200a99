build-dev/obj/runtime/reference/kernels_layout.o: \
 runtime/reference/kernels_layout.c runtime/reference/reference.h \
 hlo/hlo.h hlo/opcode.def runtime/runtime.h
runtime/reference/reference.h:
hlo/hlo.h:
hlo/opcode.def:
runtime/runtime.h:
