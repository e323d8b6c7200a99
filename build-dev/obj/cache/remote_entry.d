build-dev/obj/cache/remote_entry.o: cache/remote_entry.c \
 cache/remote_internal.h cache/disk_internal.h cache/cache.h hlo/hlo.h \
 hlo/opcode.def
cache/remote_internal.h:
cache/disk_internal.h:
cache/cache.h:
hlo/hlo.h:
hlo/opcode.def:
