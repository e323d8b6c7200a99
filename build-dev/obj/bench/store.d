build-dev/obj/bench/store.o: bench/store.c bench/bench.h include/latch.h
bench/bench.h:
include/latch.h:
