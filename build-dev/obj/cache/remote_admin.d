build-dev/obj/cache/remote_admin.o: cache/remote_admin.c \
 cache/remote_internal.h cache/disk_internal.h cache/cache.h hlo/hlo.h \
 hlo/opcode.def
cache/remote_internal.h:
cache/disk_internal.h:
cache/cache.h:
hlo/hlo.h:
hlo/opcode.def:
