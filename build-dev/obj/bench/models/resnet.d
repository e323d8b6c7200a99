build-dev/obj/bench/models/resnet.o: bench/models/resnet.c \
 bench/models/models.h bench/layers.h bench/bench.h include/latch.h
bench/models/models.h:
bench/layers.h:
bench/bench.h:
include/latch.h:
