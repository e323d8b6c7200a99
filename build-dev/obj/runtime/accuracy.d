build-dev/obj/runtime/accuracy.o: runtime/accuracy.c runtime/runtime.h \
 hlo/hlo.h hlo/opcode.def
runtime/runtime.h:
hlo/hlo.h:
hlo/opcode.def:
