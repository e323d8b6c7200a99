build-dev/obj/bench/function_micro.o: bench/function_micro.c \
 bench/bench.h include/latch.h include/latch.h
bench/bench.h:
include/latch.h:
include/latch.h:
