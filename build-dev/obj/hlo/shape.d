build-dev/obj/hlo/shape.o: hlo/shape.c hlo/hlo.h hlo/opcode.def
hlo/hlo.h:
hlo/opcode.def:
