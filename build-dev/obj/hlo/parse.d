build-dev/obj/hlo/parse.o: hlo/parse.c hlo/hlo.h hlo/opcode.def \
 hlo/parse_internal.h hlo/lex_internal.h
hlo/hlo.h:
hlo/opcode.def:
hlo/parse_internal.h:
hlo/lex_internal.h:
