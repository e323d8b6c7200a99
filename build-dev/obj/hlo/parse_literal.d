build-dev/obj/hlo/parse_literal.o: hlo/parse_literal.c hlo/hlo.h \
 hlo/opcode.def hlo/parse_internal.h hlo/lex_internal.h
hlo/hlo.h:
hlo/opcode.def:
hlo/parse_internal.h:
hlo/lex_internal.h:
