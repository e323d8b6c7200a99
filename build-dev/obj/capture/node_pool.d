build-dev/obj/capture/node_pool.o: capture/node_pool.c capture/capture.h \
 cache/cache.h hlo/hlo.h hlo/opcode.def include/latch.h runtime/runtime.h \
 guards/guards.h
capture/capture.h:
cache/cache.h:
hlo/hlo.h:
hlo/opcode.def:
include/latch.h:
runtime/runtime.h:
guards/guards.h:
