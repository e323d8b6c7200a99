build-dev/obj/cache/remote_compile.o: cache/remote_compile.c \
 cache/cache.h hlo/hlo.h hlo/opcode.def cache/remote_internal.h \
 cache/disk_internal.h
cache/cache.h:
hlo/hlo.h:
hlo/opcode.def:
cache/remote_internal.h:
cache/disk_internal.h:
