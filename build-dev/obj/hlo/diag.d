build-dev/obj/hlo/diag.o: hlo/diag.c hlo/hlo.h hlo/opcode.def
hlo/hlo.h:
hlo/opcode.def:
