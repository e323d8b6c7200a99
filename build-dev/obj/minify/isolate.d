build-dev/obj/minify/isolate.o: minify/isolate.c minify/minify.h \
 hlo/hlo.h hlo/opcode.def runtime/runtime.h runtime/reference/reference.h
minify/minify.h:
hlo/hlo.h:
hlo/opcode.def:
runtime/runtime.h:
runtime/reference/reference.h:
