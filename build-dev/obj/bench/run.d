build-dev/obj/bench/run.o: bench/run.c bench/bench.h include/latch.h
bench/bench.h:
include/latch.h:
