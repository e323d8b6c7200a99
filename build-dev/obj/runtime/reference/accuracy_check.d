build-dev/obj/runtime/reference/accuracy_check.o: \
 runtime/reference/accuracy_check.c runtime/reference/reference.h \
 hlo/hlo.h hlo/opcode.def runtime/runtime.h
runtime/reference/reference.h:
hlo/hlo.h:
hlo/opcode.def:
runtime/runtime.h:
