build-dev/obj/hlo/ir.o: hlo/ir.c hlo/hlo.h hlo/opcode.def hlo/opcode.def
hlo/hlo.h:
hlo/opcode.def:
hlo/opcode.def:
