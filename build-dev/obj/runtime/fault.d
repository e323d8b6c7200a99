build-dev/obj/runtime/fault.o: runtime/fault.c runtime/runtime.h \
 hlo/hlo.h hlo/opcode.def
runtime/runtime.h:
hlo/hlo.h:
hlo/opcode.def:
