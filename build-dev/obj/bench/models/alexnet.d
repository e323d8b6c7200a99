build-dev/obj/bench/models/alexnet.o: bench/models/alexnet.c \
 bench/models/models.h bench/layers.h bench/bench.h include/latch.h
bench/models/models.h:
bench/layers.h:
bench/bench.h:
include/latch.h:
