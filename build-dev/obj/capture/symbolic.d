build-dev/obj/capture/symbolic.o: capture/symbolic.c capture/capture.h \
 cache/cache.h hlo/hlo.h hlo/opcode.def include/latch.h runtime/runtime.h \
 guards/guards.h
capture/capture.h:
cache/cache.h:
hlo/hlo.h:
hlo/opcode.def:
include/latch.h:
runtime/runtime.h:
guards/guards.h:
