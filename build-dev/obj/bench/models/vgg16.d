build-dev/obj/bench/models/vgg16.o: bench/models/vgg16.c \
 bench/models/models.h bench/layers.h bench/bench.h include/latch.h
bench/models/models.h:
bench/layers.h:
bench/bench.h:
include/latch.h:
