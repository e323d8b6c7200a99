build-dev/obj/cache/clock.o: cache/clock.c cache/cache.h hlo/hlo.h \
 hlo/opcode.def
cache/cache.h:
hlo/hlo.h:
hlo/opcode.def:
