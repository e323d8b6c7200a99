build-dev/obj/tools/cmd_cache.o: tools/cmd_cache.c cache/cache.h \
 hlo/hlo.h hlo/opcode.def capture/capture.h include/latch.h \
 runtime/runtime.h guards/guards.h tools/cli.h
cache/cache.h:
hlo/hlo.h:
hlo/opcode.def:
capture/capture.h:
include/latch.h:
runtime/runtime.h:
guards/guards.h:
tools/cli.h:
