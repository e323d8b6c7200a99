build-dev/obj/bench/models/vit.o: bench/models/vit.c \
 bench/models/models.h bench/layers.h bench/bench.h include/latch.h
bench/models/models.h:
bench/layers.h:
bench/bench.h:
include/latch.h:
