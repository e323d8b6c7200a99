build-dev/obj/hlo/pass_dce.o: hlo/pass_dce.c hlo/hlo.h hlo/opcode.def
hlo/hlo.h:
hlo/opcode.def:
