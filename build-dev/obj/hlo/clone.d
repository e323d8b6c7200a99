build-dev/obj/hlo/clone.o: hlo/clone.c hlo/hlo.h hlo/opcode.def
hlo/hlo.h:
hlo/opcode.def:
