build-dev/obj/hlo/lex.o: hlo/lex.c hlo/lex_internal.h
hlo/lex_internal.h:
