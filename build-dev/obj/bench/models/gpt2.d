build-dev/obj/bench/models/gpt2.o: bench/models/gpt2.c \
 bench/models/models.h bench/layers.h bench/bench.h include/latch.h
bench/models/models.h:
bench/layers.h:
bench/bench.h:
include/latch.h:
