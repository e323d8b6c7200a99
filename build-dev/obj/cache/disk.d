build-dev/obj/cache/disk.o: cache/disk.c cache/disk_internal.h \
 cache/cache.h hlo/hlo.h hlo/opcode.def
cache/disk_internal.h:
cache/cache.h:
hlo/hlo.h:
hlo/opcode.def:
