build-dev/obj/minify/values.o: minify/values.c minify/minify_internal.h \
 hlo/hlo.h hlo/opcode.def runtime/runtime.h cache/cache.h minify/minify.h \
 runtime/reference/reference.h
minify/minify_internal.h:
hlo/hlo.h:
hlo/opcode.def:
runtime/runtime.h:
cache/cache.h:
minify/minify.h:
runtime/reference/reference.h:
