build-dev/obj/hlo/pass_simplify.o: hlo/pass_simplify.c hlo/hlo.h \
 hlo/opcode.def
hlo/hlo.h:
hlo/opcode.def:
