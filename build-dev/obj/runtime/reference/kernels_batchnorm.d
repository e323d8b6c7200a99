build-dev/obj/runtime/reference/kernels_batchnorm.o: \
 runtime/reference/kernels_batchnorm.c runtime/reference/reference.h \
 hlo/hlo.h hlo/opcode.def runtime/runtime.h
runtime/reference/reference.h:
hlo/hlo.h:
hlo/opcode.def:
runtime/runtime.h:
