build-dev/obj/tools/bench_remote.o: tools/bench_remote.c cache/cache.h \
 hlo/hlo.h hlo/opcode.def tools/cli.h runtime/runtime.h
cache/cache.h:
hlo/hlo.h:
hlo/opcode.def:
tools/cli.h:
runtime/runtime.h:
