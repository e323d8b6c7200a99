build-dev/obj/hlo/parse_util.o: hlo/parse_util.c hlo/parse_internal.h \
 hlo/hlo.h hlo/opcode.def hlo/lex_internal.h
hlo/parse_internal.h:
hlo/hlo.h:
hlo/opcode.def:
hlo/lex_internal.h:
