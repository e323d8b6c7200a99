build-dev/obj/runtime/npy.o: runtime/npy.c runtime/runtime.h hlo/hlo.h \
 hlo/opcode.def
runtime/runtime.h:
hlo/hlo.h:
hlo/opcode.def:
