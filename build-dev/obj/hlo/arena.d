build-dev/obj/hlo/arena.o: hlo/arena.c hlo/hlo.h hlo/opcode.def
hlo/hlo.h:
hlo/opcode.def:
