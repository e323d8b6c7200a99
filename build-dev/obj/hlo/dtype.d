build-dev/obj/hlo/dtype.o: hlo/dtype.c hlo/hlo.h hlo/opcode.def
hlo/hlo.h:
hlo/opcode.def:
