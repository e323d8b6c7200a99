build-dev/obj/runtime/reference/kernels_rng.o: \
 runtime/reference/kernels_rng.c runtime/reference/reference.h hlo/hlo.h \
 hlo/opcode.def runtime/runtime.h
runtime/reference/reference.h:
hlo/hlo.h:
hlo/opcode.def:
runtime/runtime.h:
