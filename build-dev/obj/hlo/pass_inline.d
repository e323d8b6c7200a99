build-dev/obj/hlo/pass_inline.o: hlo/pass_inline.c hlo/hlo.h \
 hlo/opcode.def
hlo/hlo.h:
hlo/opcode.def:
