build-dev/obj/bench/zoo.o: bench/zoo.c bench/models/models.h \
 bench/layers.h bench/bench.h include/latch.h
bench/models/models.h:
bench/layers.h:
bench/bench.h:
include/latch.h:
