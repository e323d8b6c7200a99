build-dev/obj/bench/peak.o: bench/peak.c bench/bench.h include/latch.h
bench/bench.h:
include/latch.h:
