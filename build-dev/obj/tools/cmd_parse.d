build-dev/obj/tools/cmd_parse.o: tools/cmd_parse.c tools/cli.h \
 cache/cache.h hlo/hlo.h hlo/opcode.def runtime/runtime.h
tools/cli.h:
cache/cache.h:
hlo/hlo.h:
hlo/opcode.def:
runtime/runtime.h:
