build-dev/obj/bench/layers.o: bench/layers.c bench/layers.h bench/bench.h \
 include/latch.h
bench/layers.h:
bench/bench.h:
include/latch.h:
