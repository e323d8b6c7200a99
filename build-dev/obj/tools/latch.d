build-dev/obj/tools/latch.o: tools/latch.c tools/cli.h cache/cache.h \
 hlo/hlo.h hlo/opcode.def runtime/runtime.h
tools/cli.h:
cache/cache.h:
hlo/hlo.h:
hlo/opcode.def:
runtime/runtime.h:
