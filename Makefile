# latch build. `make` builds the library and the command, `make test` runs the tests,
# `make sanitize` runs the same tests under AddressSanitizer + UndefinedBehaviorSanitizer.
CC ?= cc
CXX ?= c++
BUILD ?= build
OPT ?= -O2
SAN ?=
# -O2 vectorizes only loops whose trip count needs no remainder (GCC's "very cheap" cost
# model), which left every elementwise and fused-tile loop scalar; the dynamic model
# vectorizes them. Results do not change: float sums are never reordered without -ffast-math.
VECTORIZE = -fvect-cost-model=dynamic
CFLAGS_COMMON = -g $(OPT) $(VECTORIZE) $(SAN) -Wall -Wextra -Werror -D_GNU_SOURCE -I. -Iinclude -fPIC
CFLAGS += -std=c11 $(CFLAGS_COMMON)
CXXFLAGS += -std=c++17 $(CFLAGS_COMMON)
# tbb and openblas serve the cpu backend (runtime/parallel.cc, runtime/cpu_*.c); stdc++ is
# for the one C++ file, since the C compiler drives the link.
LDLIBS = -lxxhash -lck -ltbb -lopenblas -lstdc++ -lm -lpthread

LIB_C = $(sort $(wildcard hlo/*.c guards/*.c cache/*.c runtime/*.c runtime/reference/*.c runtime/cpu/*.c minify/*.c capture/*.c))
LIB_CXX = $(sort $(wildcard runtime/*.cc))
LIB_OBJ = $(LIB_C:%.c=$(BUILD)/obj/%.o) $(LIB_CXX:%.cc=$(BUILD)/obj/%.o)
# bench/: the model zoo and harness, written against include/latch.h alone; linked into the
# command and into the tests (as build/libbench.a), not into the library.
BENCH_C = $(sort $(wildcard bench/*.c bench/models/*.c))
BENCH_OBJ = $(BENCH_C:%.c=$(BUILD)/obj/%.o)
TOOL_C = $(sort $(wildcard tools/*.c))
TOOL_OBJ = $(TOOL_C:%.c=$(BUILD)/obj/%.o)
TEST_C = $(sort $(wildcard tests/test_*.c))
TEST_BIN = $(TEST_C:tests/%.c=$(BUILD)/tests/%)
TEST_SUPPORT = $(filter-out $(TEST_C),$(sort $(wildcard tests/*.c)))

all: $(BUILD)/liblatch.a $(BUILD)/liblatch.so $(BUILD)/latch $(BUILD)/libbench.a

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/obj/%.o: %.cc
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/liblatch.a: $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/liblatch.so: $(LIB_OBJ)
	$(CC) -shared $(SAN) -o $@ $^ $(LDLIBS)

$(BUILD)/libbench.a: $(BENCH_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/latch: $(TOOL_OBJ) $(BUILD)/libbench.a $(BUILD)/liblatch.a
	$(CC) $(SAN) -o $@ $(TOOL_OBJ) $(BUILD)/libbench.a $(BUILD)/liblatch.a $(LDLIBS)

$(BUILD)/tests/%: tests/%.c $(TEST_SUPPORT) $(wildcard tests/*.h) $(BUILD)/libbench.a $(BUILD)/liblatch.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(TEST_SUPPORT) $(BUILD)/libbench.a $(BUILD)/liblatch.a $(LDLIBS)

test: all $(TEST_BIN)
	@BUILD=$(BUILD) SAN="$(SAN)" sh tests/run.sh $(TEST_BIN) tests/test_embed.sh tests/test_layers.sh tests/test_compare_torch.sh tests/test_zoo_sweep.sh

sanitize:
	$(MAKE) BUILD=build-san OPT=-O1 SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" test

# ThreadSanitizer over the tests that use threads (named *thread* or *table*); only those
# are built, so it stays quick.
THREAD_TEST_C = $(foreach t,$(TEST_C),$(if $(findstring thread,$(t))$(findstring table,$(t)),$(t)))
THREAD_TEST_BIN = $(THREAD_TEST_C:tests/%.c=$(BUILD)/tests/%)

tsan:
	$(MAKE) BUILD=build-tsan OPT=-O1 SAN="-fsanitize=thread" test-threads

test-threads: $(THREAD_TEST_BIN)
	@BUILD=$(BUILD) sh tests/run.sh $(THREAD_TEST_BIN)

# `make soak` (issue 17): two processes x SOAK_THREADS threads x SOAK_CALLS calls of traced
# functions racing on one disk cache, every result checked against eager, RSS and open files
# flat; a few minutes, so not in `make test`.
SOAK_CALLS ?= 12000
SOAK_THREADS ?= 8
$(BUILD)/soak: tests/soak/soak.c $(BUILD)/liblatch.a
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/liblatch.a $(LDLIBS)

soak: $(BUILD)/soak
	$(BUILD)/soak $(SOAK_CALLS) $(SOAK_THREADS)

# The minifier on MobileNetV2 with an injected culprit: minutes and gigabytes, so not in `make test`.
minify-mobilenet: all
	@BUILD=$(BUILD) sh tests/minify_mobilenet.sh

clean:
	rm -rf build build-san build-tsan build-fuzz

# `make bench-function`: the micro-benchmarks of capture and traced functions.
bench-function: all
	$(BUILD)/latch bench --micro


# `make install PREFIX=/opt/latch`: the one public header, both libraries, the command and a
# pkg-config files (embedders: cc app.c $$(pkg-config --cflags --libs latch), or latch-static
# for the archive).
PREFIX ?= /usr/local
install: all
	mkdir -p $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/bin
	cp include/latch.h $(DESTDIR)$(PREFIX)/include/
	cp $(BUILD)/liblatch.a $(BUILD)/liblatch.so $(DESTDIR)$(PREFIX)/lib/
	cp $(BUILD)/latch $(DESTDIR)$(PREFIX)/bin/
	printf 'prefix=%s\nincludedir=$${prefix}/include\nlibdir=$${prefix}/lib\n\nName: latch\nDescription: lazy tensors recorded as XLA HLO graphs\nVersion: 0.1\nCflags: -I$${includedir}\nLibs: -L$${libdir} -llatch\nLibs.private: $(LDLIBS)\n' '$(PREFIX)' > $(DESTDIR)$(PREFIX)/lib/pkgconfig/latch.pc
	# latch-static.pc names the archive itself: -llatch would pick liblatch.so next to it.
	printf 'prefix=%s\nincludedir=$${prefix}/include\nlibdir=$${prefix}/lib\n\nName: latch-static\nDescription: latch linked statically (liblatch.a)\nVersion: 0.1\nCflags: -I$${includedir}\nLibs: $${libdir}/liblatch.a $(LDLIBS)\n' '$(PREFIX)' > $(DESTDIR)$(PREFIX)/lib/pkgconfig/latch-static.pc

# `make check-torch`: the zoo's logits against PyTorch's on the same exported weights (needs
# python3-torch and python3-torchvision; opt-in, not part of `make test`).
check-torch: all
	sh bench/check_torch.sh

# `make compare-torch`: latch's trace-once times against PyTorch eager on the same models,
# batch sizes, input sizes and thread count (issue 7); opt-in like check-torch.
# COMPARE_ARGS passes options on, e.g. COMPARE_ARGS="--batch 1 --repeat 10 --json out.json".
compare-torch: all
	/usr/bin/python3 bench/compare_torch.py --latch $(BUILD)/latch $(COMPARE_ARGS)

.PHONY: all test sanitize tsan test-threads clean install check-torch compare-torch bench-function minify-mobilenet soak
-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)

# `make fuzz`: the parser's libFuzzer target (tests/fuzz/fuzz_parse.c) built with clang under
# ASan and UBSan into build-fuzz/, seeded from the small real dumps and slices of the larger
# ones, run for FUZZ_SECONDS; fails if the fuzzer finds a crash, leak, hang or abort.
FUZZ_CC ?= clang
FUZZ_SECONDS ?= 60
FUZZ_BUILD = build-fuzz
LATCH_CORPUS ?= ../shared/corpus/xla
FUZZ_PARSER_C = hlo/lex.c $(wildcard hlo/parse*.c) hlo/ir.c hlo/shape.c hlo/dtype.c hlo/arena.c hlo/diag.c hlo/strbuf.c

$(FUZZ_BUILD)/fuzz_parse: tests/fuzz/fuzz_parse.c $(FUZZ_PARSER_C) $(wildcard hlo/*.h hlo/*.def)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) -std=c11 -g -O1 -D_GNU_SOURCE -I. -Iinclude -DHLO_PARSE_MAX_CONSTANT_BYTES=16777216 \
	  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	  -o $@ tests/fuzz/fuzz_parse.c $(FUZZ_PARSER_C) -lm

fuzz: $(FUZZ_BUILD)/fuzz_parse
	@mkdir -p $(FUZZ_BUILD)/corpus $(FUZZ_BUILD)/artifacts
	@for f in $(LATCH_CORPUS)/*.hlo; do \
	  b=$$(basename $$f .hlo); \
	  if [ $$(wc -c < $$f) -le 4096 ]; then cp $$f $(FUZZ_BUILD)/corpus/$$b; \
	  else split -b 3000 -a 3 $$f $(FUZZ_BUILD)/corpus/$$b.; fi; \
	done
	$(FUZZ_BUILD)/fuzz_parse -max_len=4096 -max_total_time=$(FUZZ_SECONDS) -timeout=10 \
	  -dict=tests/fuzz/hlo.dict -artifact_prefix=$(FUZZ_BUILD)/artifacts/ -print_final_stats=1 \
	  $(FUZZ_BUILD)/corpus

.PHONY: fuzz

# `make fuzz-npy`: libFuzzer on the .npy reader (tests/fuzz/fuzz_npy.c), clang + ASan + UBSan,
# seeded with three small hand-made files, run for FUZZ_SECONDS.
NPY_FUZZ_C = runtime/npy.c runtime/value.c hlo/shape.c hlo/dtype.c hlo/arena.c hlo/diag.c hlo/strbuf.c

$(FUZZ_BUILD)/fuzz_npy: tests/fuzz/fuzz_npy.c $(NPY_FUZZ_C) runtime/runtime.h hlo/hlo.h
	@mkdir -p $(dir $@)
	$(FUZZ_CC) -std=c11 -g -O1 -D_GNU_SOURCE -I. -Iinclude \
	  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	  -o $@ tests/fuzz/fuzz_npy.c $(NPY_FUZZ_C) -lm

fuzz-npy: $(FUZZ_BUILD)/fuzz_npy
	@mkdir -p $(FUZZ_BUILD)/npy_corpus $(FUZZ_BUILD)/artifacts
	@printf "\223NUMPY\001\000\072\000{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n\000\000\200\077\000\000\000\100" > $(FUZZ_BUILD)/npy_corpus/f4
	@printf "\223NUMPY\001\000\073\000{'descr': '>i2', 'fortran_order': True, 'shape': (2, 2), }\n\000\001\000\002\000\003\000\004" > $(FUZZ_BUILD)/npy_corpus/i2
	@printf "\223NUMPY\002\000\070\000\000\000{'descr': '|b1', 'fortran_order': False, 'shape': (), }\n\001" > $(FUZZ_BUILD)/npy_corpus/b1
	$(FUZZ_BUILD)/fuzz_npy -max_len=1024 -max_total_time=$(FUZZ_SECONDS) -timeout=10 \
	  -dict=tests/fuzz/npy.dict -artifact_prefix=$(FUZZ_BUILD)/artifacts/npy- -print_final_stats=1 \
	  $(FUZZ_BUILD)/npy_corpus

.PHONY: fuzz-npy
