build-dev/obj/cache/disk_compile.o: cache/disk_compile.c cache/cache.h \
 hlo/hlo.h hlo/opcode.def cache/disk_internal.h
cache/cache.h:
hlo/hlo.h:
hlo/opcode.def:
cache/disk_internal.h:
