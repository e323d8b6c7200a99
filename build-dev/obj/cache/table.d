build-dev/obj/cache/table.o: cache/table.c cache/cache.h hlo/hlo.h \
 hlo/opcode.def
cache/cache.h:
hlo/hlo.h:
hlo/opcode.def:
