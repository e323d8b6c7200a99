build-dev/obj/guards/guard_set.o: guards/guard_set.c guards/guards.h \
 hlo/hlo.h hlo/opcode.def
guards/guards.h:
hlo/hlo.h:
hlo/opcode.def:
