build-dev/obj/cache/disk_format.o: cache/disk_format.c \
 cache/disk_internal.h cache/cache.h hlo/hlo.h hlo/opcode.def
cache/disk_internal.h:
cache/cache.h:
hlo/hlo.h:
hlo/opcode.def:
