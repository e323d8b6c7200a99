build-dev/obj/cache/disk_io.o: cache/disk_io.c cache/disk_internal.h \
 cache/cache.h hlo/hlo.h hlo/opcode.def
cache/disk_internal.h:
cache/cache.h:
hlo/hlo.h:
hlo/opcode.def:
