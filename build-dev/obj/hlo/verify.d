build-dev/obj/hlo/verify.o: hlo/verify.c hlo/hlo.h hlo/opcode.def
hlo/hlo.h:
hlo/opcode.def:
