build-dev/obj/bench/models/train_cnn.o: bench/models/train_cnn.c \
 bench/models/models.h bench/layers.h bench/bench.h include/latch.h \
 bench/models/train_common.h
bench/models/models.h:
bench/layers.h:
bench/bench.h:
include/latch.h:
bench/models/train_common.h:
