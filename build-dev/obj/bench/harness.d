build-dev/obj/bench/harness.o: bench/harness.c bench/bench.h \
 include/latch.h
bench/bench.h:
include/latch.h:
