build-dev/obj/runtime/value.o: runtime/value.c runtime/runtime.h \
 hlo/hlo.h hlo/opcode.def
runtime/runtime.h:
hlo/hlo.h:
hlo/opcode.def:
