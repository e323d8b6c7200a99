build-dev/obj/hlo/parse_names.o: hlo/parse_names.c hlo/parse_internal.h \
 hlo/hlo.h hlo/opcode.def hlo/lex_internal.h
hlo/parse_internal.h:
hlo/hlo.h:
hlo/opcode.def:
hlo/lex_internal.h:
