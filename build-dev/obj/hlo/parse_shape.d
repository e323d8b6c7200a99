build-dev/obj/hlo/parse_shape.o: hlo/parse_shape.c hlo/parse_internal.h \
 hlo/hlo.h hlo/opcode.def hlo/lex_internal.h
hlo/parse_internal.h:
hlo/hlo.h:
hlo/opcode.def:
hlo/lex_internal.h:
