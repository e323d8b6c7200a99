build-dev/obj/bench/models/mobilenet_v2.o: bench/models/mobilenet_v2.c \
 bench/models/models.h bench/layers.h bench/bench.h include/latch.h
bench/models/models.h:
bench/layers.h:
bench/bench.h:
include/latch.h:
