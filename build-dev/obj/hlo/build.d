build-dev/obj/hlo/build.o: hlo/build.c hlo/hlo.h hlo/opcode.def
hlo/hlo.h:
hlo/opcode.def:
