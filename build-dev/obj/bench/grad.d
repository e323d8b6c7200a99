build-dev/obj/bench/grad.o: bench/grad.c bench/layers.h bench/bench.h \
 include/latch.h
bench/layers.h:
bench/bench.h:
include/latch.h:
