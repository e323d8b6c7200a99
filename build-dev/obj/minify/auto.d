build-dev/obj/minify/auto.o: minify/auto.c minify/minify.h hlo/hlo.h \
 hlo/opcode.def runtime/runtime.h
minify/minify.h:
hlo/hlo.h:
hlo/opcode.def:
runtime/runtime.h:
