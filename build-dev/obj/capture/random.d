build-dev/obj/capture/random.o: capture/random.c hlo/hlo.h hlo/opcode.def \
 capture/capture.h cache/cache.h include/latch.h runtime/runtime.h \
 guards/guards.h
hlo/hlo.h:
hlo/opcode.def:
capture/capture.h:
cache/cache.h:
include/latch.h:
runtime/runtime.h:
guards/guards.h:
