build-dev/obj/hlo/pass_cse.o: hlo/pass_cse.c hlo/hlo.h hlo/opcode.def
hlo/hlo.h:
hlo/opcode.def:
