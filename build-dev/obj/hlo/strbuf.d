build-dev/obj/hlo/strbuf.o: hlo/strbuf.c hlo/hlo.h hlo/opcode.def
hlo/hlo.h:
hlo/opcode.def:
