build-dev/obj/bench/models/squeezenet.o: bench/models/squeezenet.c \
 bench/models/models.h bench/layers.h bench/bench.h include/latch.h
bench/models/models.h:
bench/layers.h:
bench/bench.h:
include/latch.h:
