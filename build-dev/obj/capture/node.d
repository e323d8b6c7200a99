build-dev/obj/capture/node.o: capture/node.c capture/capture.h \
 cache/cache.h hlo/hlo.h hlo/opcode.def include/latch.h runtime/runtime.h \
 guards/guards.h
capture/capture.h:
cache/cache.h:
hlo/hlo.h:
hlo/opcode.def:
include/latch.h:
runtime/runtime.h:
guards/guards.h:
