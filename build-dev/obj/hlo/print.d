build-dev/obj/hlo/print.o: hlo/print.c hlo/hlo.h hlo/opcode.def
hlo/hlo.h:
hlo/opcode.def:
