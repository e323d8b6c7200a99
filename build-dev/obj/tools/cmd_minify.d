build-dev/obj/tools/cmd_minify.o: tools/cmd_minify.c tools/cli.h \
 cache/cache.h hlo/hlo.h hlo/opcode.def runtime/runtime.h minify/minify.h \
 capture/capture.h include/latch.h guards/guards.h
tools/cli.h:
cache/cache.h:
hlo/hlo.h:
hlo/opcode.def:
runtime/runtime.h:
minify/minify.h:
capture/capture.h:
include/latch.h:
guards/guards.h:
