build-dev/obj/cache/hash.o: cache/hash.c cache/cache.h hlo/hlo.h \
 hlo/opcode.def
cache/cache.h:
hlo/hlo.h:
hlo/opcode.def:
