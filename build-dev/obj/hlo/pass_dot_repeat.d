build-dev/obj/hlo/pass_dot_repeat.o: hlo/pass_dot_repeat.c hlo/hlo.h \
 hlo/opcode.def
hlo/hlo.h:
hlo/opcode.def:
