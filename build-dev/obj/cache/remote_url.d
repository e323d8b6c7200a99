build-dev/obj/cache/remote_url.o: cache/remote_url.c cache/cache.h \
 hlo/hlo.h hlo/opcode.def
cache/cache.h:
hlo/hlo.h:
hlo/opcode.def:
