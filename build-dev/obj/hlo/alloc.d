build-dev/obj/hlo/alloc.o: hlo/alloc.c hlo/hlo.h hlo/opcode.def
hlo/hlo.h:
hlo/opcode.def:
