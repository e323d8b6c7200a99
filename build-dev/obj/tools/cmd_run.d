build-dev/obj/tools/cmd_run.o: tools/cmd_run.c tools/cli.h cache/cache.h \
 hlo/hlo.h hlo/opcode.def runtime/runtime.h runtime/reference/reference.h \
 tools/run_cache.h capture/capture.h include/latch.h guards/guards.h
tools/cli.h:
cache/cache.h:
hlo/hlo.h:
hlo/opcode.def:
runtime/runtime.h:
runtime/reference/reference.h:
tools/run_cache.h:
capture/capture.h:
include/latch.h:
guards/guards.h:
