build-dev/obj/tools/cli.o: tools/cli.c tools/cli.h cache/cache.h \
 hlo/hlo.h hlo/opcode.def runtime/runtime.h capture/capture.h \
 include/latch.h guards/guards.h
tools/cli.h:
cache/cache.h:
hlo/hlo.h:
hlo/opcode.def:
runtime/runtime.h:
capture/capture.h:
include/latch.h:
guards/guards.h:
