build-dev/obj/minify/record.o: minify/record.c minify/minify_internal.h \
 hlo/hlo.h hlo/opcode.def runtime/runtime.h cache/cache.h minify/minify.h
minify/minify_internal.h:
hlo/hlo.h:
hlo/opcode.def:
runtime/runtime.h:
cache/cache.h:
minify/minify.h:
