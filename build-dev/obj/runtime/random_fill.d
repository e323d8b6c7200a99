build-dev/obj/runtime/random_fill.o: runtime/random_fill.c \
 runtime/runtime.h hlo/hlo.h hlo/opcode.def
runtime/runtime.h:
hlo/hlo.h:
hlo/opcode.def:
