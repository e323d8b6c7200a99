build-dev/obj/runtime/reference/kernels_window.o: \
 runtime/reference/kernels_window.c runtime/reference/reference.h \
 hlo/hlo.h hlo/opcode.def runtime/runtime.h
runtime/reference/reference.h:
hlo/hlo.h:
hlo/opcode.def:
runtime/runtime.h:
