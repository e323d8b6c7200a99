build-dev/obj/hlo/parse_attrs.o: hlo/parse_attrs.c hlo/parse_internal.h \
 hlo/hlo.h hlo/opcode.def hlo/lex_internal.h
hlo/parse_internal.h:
hlo/hlo.h:
hlo/opcode.def:
hlo/lex_internal.h:
