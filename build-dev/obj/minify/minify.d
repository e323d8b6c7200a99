build-dev/obj/minify/minify.o: minify/minify.c minify/minify.h hlo/hlo.h \
 hlo/opcode.def runtime/runtime.h minify/minify_internal.h cache/cache.h
minify/minify.h:
hlo/hlo.h:
hlo/opcode.def:
runtime/runtime.h:
minify/minify_internal.h:
cache/cache.h:
