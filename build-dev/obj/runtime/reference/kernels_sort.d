build-dev/obj/runtime/reference/kernels_sort.o: \
 runtime/reference/kernels_sort.c runtime/reference/reference.h hlo/hlo.h \
 hlo/opcode.def runtime/runtime.h
runtime/reference/reference.h:
hlo/hlo.h:
hlo/opcode.def:
runtime/runtime.h:
