build-dev/obj/minify/strategies.o: minify/strategies.c \
 minify/minify_internal.h hlo/hlo.h hlo/opcode.def runtime/runtime.h \
 cache/cache.h minify/minify.h
minify/minify_internal.h:
hlo/hlo.h:
hlo/opcode.def:
runtime/runtime.h:
cache/cache.h:
minify/minify.h:
