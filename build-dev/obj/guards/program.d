build-dev/obj/guards/program.o: guards/program.c guards/guards.h \
 hlo/hlo.h hlo/opcode.def
guards/guards.h:
hlo/hlo.h:
hlo/opcode.def:
