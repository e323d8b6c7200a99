build-dev/obj/cache/disk_scan.o: cache/disk_scan.c cache/disk_internal.h \
 cache/cache.h hlo/hlo.h hlo/opcode.def
cache/disk_internal.h:
cache/cache.h:
hlo/hlo.h:
hlo/opcode.def:
