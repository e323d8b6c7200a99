build-dev/obj/cache/disk_trust.o: cache/disk_trust.c \
 cache/disk_internal.h cache/cache.h hlo/hlo.h hlo/opcode.def
cache/disk_internal.h:
cache/cache.h:
hlo/hlo.h:
hlo/opcode.def:
