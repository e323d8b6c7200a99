build-dev/obj/hlo/infer.o: hlo/infer.c hlo/hlo.h hlo/opcode.def
hlo/hlo.h:
hlo/opcode.def:
