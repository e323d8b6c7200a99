build-dev/obj/capture/sync_check.o: capture/sync_check.c \
 capture/capture.h cache/cache.h hlo/hlo.h hlo/opcode.def include/latch.h \
 runtime/runtime.h guards/guards.h minify/minify.h \
 runtime/reference/reference.h
capture/capture.h:
cache/cache.h:
hlo/hlo.h:
hlo/opcode.def:
include/latch.h:
runtime/runtime.h:
guards/guards.h:
minify/minify.h:
runtime/reference/reference.h:
