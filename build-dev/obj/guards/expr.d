build-dev/obj/guards/expr.o: guards/expr.c guards/guards.h hlo/hlo.h \
 hlo/opcode.def
guards/guards.h:
hlo/hlo.h:
hlo/opcode.def:
