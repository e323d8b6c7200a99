build-dev/obj/tools/run_cache.o: tools/run_cache.c tools/run_cache.h \
 cache/cache.h hlo/hlo.h hlo/opcode.def runtime/runtime.h \
 capture/capture.h include/latch.h guards/guards.h tools/cli.h
tools/run_cache.h:
cache/cache.h:
hlo/hlo.h:
hlo/opcode.def:
runtime/runtime.h:
capture/capture.h:
include/latch.h:
guards/guards.h:
tools/cli.h:
