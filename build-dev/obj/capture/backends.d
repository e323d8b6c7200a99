build-dev/obj/capture/backends.o: capture/backends.c capture/capture.h \
 cache/cache.h hlo/hlo.h hlo/opcode.def include/latch.h runtime/runtime.h \
 guards/guards.h runtime/cpu/cpu.h runtime/reference/reference.h
capture/capture.h:
cache/cache.h:
hlo/hlo.h:
hlo/opcode.def:
include/latch.h:
runtime/runtime.h:
guards/guards.h:
runtime/cpu/cpu.h:
runtime/reference/reference.h:
