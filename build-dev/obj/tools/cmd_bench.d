build-dev/obj/tools/cmd_bench.o: tools/cmd_bench.c bench/bench.h \
 include/latch.h capture/capture.h cache/cache.h hlo/hlo.h hlo/opcode.def \
 runtime/runtime.h guards/guards.h tools/cli.h
bench/bench.h:
include/latch.h:
capture/capture.h:
cache/cache.h:
hlo/hlo.h:
hlo/opcode.def:
runtime/runtime.h:
guards/guards.h:
tools/cli.h:
