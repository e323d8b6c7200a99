build-dev/obj/guards/describe.o: guards/describe.c guards/guards.h \
 hlo/hlo.h hlo/opcode.def
guards/guards.h:
hlo/hlo.h:
hlo/opcode.def:
