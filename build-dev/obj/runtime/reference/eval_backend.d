build-dev/obj/runtime/reference/eval_backend.o: \
 runtime/reference/eval_backend.c runtime/runtime.h hlo/hlo.h \
 hlo/opcode.def runtime/reference/reference.h
runtime/runtime.h:
hlo/hlo.h:
hlo/opcode.def:
runtime/reference/reference.h:
