build-dev/obj/hlo/instr_attrs.o: hlo/instr_attrs.c hlo/hlo.h \
 hlo/opcode.def
hlo/hlo.h:
hlo/opcode.def:
