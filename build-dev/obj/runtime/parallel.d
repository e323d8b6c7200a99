build-dev/obj/runtime/parallel.o: runtime/parallel.c runtime/runtime.h \
 hlo/hlo.h hlo/opcode.def
runtime/runtime.h:
hlo/hlo.h:
hlo/opcode.def:
