build-dev/obj/runtime/reference/eval.o: runtime/reference/eval.c \
 runtime/reference/reference.h hlo/hlo.h hlo/opcode.def runtime/runtime.h
runtime/reference/reference.h:
hlo/hlo.h:
hlo/opcode.def:
runtime/runtime.h:
