build-dev/obj/capture/borrow.o: capture/borrow.c capture/capture.h \
 cache/cache.h hlo/hlo.h hlo/opcode.def include/latch.h runtime/runtime.h \
 guards/guards.h
capture/capture.h:
cache/cache.h:
hlo/hlo.h:
hlo/opcode.def:
include/latch.h:
runtime/runtime.h:
guards/guards.h:
