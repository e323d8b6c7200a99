# latch build. `make` builds the library and the command, `make test` runs the tests,
# `make sanitize` runs the same tests under AddressSanitizer + UndefinedBehaviorSanitizer.
CC ?= cc
BUILD ?= build
OPT ?= -O2
SAN ?=
# -O2 vectorizes only loops whose trip count needs no remainder (GCC's "very cheap" cost
# model), which left every elementwise and fused-tile loop scalar; the dynamic model
# vectorizes them. Results do not change: float sums are never reordered without -ffast-math.
VECTORIZE = -fvect-cost-model=dynamic
CFLAGS_COMMON = -g $(OPT) $(VECTORIZE) $(SAN) -Wall -Wextra -Werror -D_GNU_SOURCE -I. -Iinclude -fPIC
CFLAGS += -std=c11 $(CFLAGS_COMMON)
# hiredis (Redis's protocol), nettle (HMAC-SHA256) and GnuTLS (rediss://) serve the compile
# cache's remote tier;
# openblas serves the cpu backend's products (runtime/cpu/), oneDNN its convolutions
# (runtime/cpu/dnnl_*.c); gomp is OpenMP's runtime: oneDNN's threads and latch's own
# parallel loops (runtime/parallel.c, built with -fopenmp) share its one pool.
# Open MPI (libmpi) carries SPMD modules across processes and hosts: runtime/comm.c is the one
# file that includes mpi.h. It is linked into liblatch for everyone (a process that never sets
# LATCH_MPI never initialises it).
MPI_CFLAGS := $(shell pkg-config --cflags ompi-c 2>/dev/null)
MPI_LIBS := $(or $(shell pkg-config --libs ompi-c 2>/dev/null),-lmpi)
LDLIBS = -lxxhash -lck -lhiredis -lnettle -lgnutls -lopenblas -ldnnl -lgomp $(MPI_LIBS) -lm -lpthread

LIB_C = $(sort $(wildcard hlo/*.c guards/*.c cache/*.c runtime/*.c runtime/reference/*.c runtime/cpu/*.c minify/*.c capture/*.c))
LIB_OBJ = $(LIB_C:%.c=$(BUILD)/obj/%.o)
# The cpu backend's loops assume floating-point operations never trap (no code of latch's
# enables traps or reads the exception flags): without that GCC keeps every comparison a
# branch, and a loop with a clamp or a select (erf's, maximum's) stayed scalar. Values do not
# change: only whether an exception flag may be raised by a lane that the scalar code skips.
$(BUILD)/obj/runtime/cpu/%.o: CFLAGS += -fno-trapping-math
# The parallel-for shim's loops are OpenMP's (runtime/parallel.c).
$(BUILD)/obj/runtime/parallel.o: CFLAGS += -fopenmp
$(BUILD)/obj/runtime/comm.o: CFLAGS += $(MPI_CFLAGS)
# bench/: the model zoo and harness, written against include/latch.h alone; linked into the
# command and into the tests (as build/libbench.a), not into the library.
BENCH_C = $(sort $(wildcard bench/*.c bench/models/*.c))
BENCH_OBJ = $(BENCH_C:%.c=$(BUILD)/obj/%.o)
TOOL_C = $(sort $(wildcard tools/*.c))
TOOL_OBJ = $(TOOL_C:%.c=$(BUILD)/obj/%.o)
TEST_C = $(sort $(wildcard tests/test_*.c))
TEST_BIN = $(TEST_C:tests/%.c=$(BUILD)/tests/%)
TEST_SUPPORT = $(filter-out $(TEST_C),$(sort $(wildcard tests/*.c)))

# python/: the latch Python package (a CPython extension over include/latch.h, and the
# latch.torch frontend), built into $(BUILD)/python by `make` (python3-dev is one of
# install-deps.sh's packages); import it with PYTHONPATH=$(BUILD)/python (`make python`
# prints that).
PYTHON ?= /usr/bin/python3
PY_INCLUDE := $(shell $(PYTHON) -c "import sysconfig; print(sysconfig.get_paths()['include'])" 2>/dev/null)
PY_EXT := $(shell $(PYTHON) -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))" 2>/dev/null)
PY_C = $(sort $(wildcard python/src/*.c))
PY_OBJ = $(PY_C:%.c=$(BUILD)/obj/%.o)
PY_SRC = $(sort $(shell find python/latch -name '*.py'))
PY_OUT = $(PY_SRC:python/%=$(BUILD)/python/%)
PY_MODULE = $(BUILD)/python/latch/_latch$(PY_EXT)
# The pytest run; left out of `make sanitize` (SAN set): under the sanitizers it needs ASan's
# runtime preloaded into python3, which `make python-sanitize` does.
# test_pip_install.sh builds the extension with pip, without the sanitizers, so it cannot link
# a sanitized library either.
PYTHON_TESTS = $(if $(SAN),,tests/test_python.sh tests/test_pip_install.sh)

all: $(BUILD)/liblatch.a $(BUILD)/liblatch.so $(BUILD)/latch $(BUILD)/libbench.a python

$(BUILD)/obj/python/src/%.o: python/src/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -I$(PY_INCLUDE) -Ipython/src -MMD -MP -c $< -o $@

$(PY_MODULE): $(PY_OBJ) $(BUILD)/liblatch.a
	@mkdir -p $(dir $@)
	$(CC) -shared $(SAN) -o $@ $(PY_OBJ) $(BUILD)/liblatch.a $(LDLIBS)

$(BUILD)/python/%.py: python/%.py
	@mkdir -p $(dir $@)
	cp $< $@

python: $(PY_MODULE) $(PY_OUT)
	@echo "latch for Python: PYTHONPATH=$(abspath $(BUILD)/python) $(PYTHON)"

# `make print-LDLIBS`: a variable's value (setup.py links the extension with the same libraries).
print-%:
	@echo '$($*)'

# The build identity: a hash of every library source file (names and contents),
# the compiler's version and the flags, written to $(BUILD)/gen/build_id.h. It is part of
# every compile-cache key (runtime/fingerprint.c), so any change to the code that lowers or
# compiles a graph makes the entries of the old build misses, with no version to bump by
# hand. The header is rewritten only when the hash changes, so only fingerprint.o rebuilds.
BUILD_ID_SRC = $(sort $(shell find hlo guards cache runtime minify capture include -type f \
  \( -name '*.c' -o -name '*.cc' -o -name '*.h' -o -name '*.def' \) 2>/dev/null))
$(BUILD)/gen/build_id.h: $(BUILD_ID_SRC) Makefile
	@mkdir -p $(dir $@)
	@id=$$( { sha256sum $(BUILD_ID_SRC); $(CC) --version | head -n 1; \
	  echo '$(CFLAGS_COMMON) $(LDLIBS)'; } | sha256sum | cut -c1-32 ); \
	printf '/* generated by the Makefile: the build identity */\n#define LATCH_BUILD_ID "%s"\n' "$$id" > $@.tmp; \
	if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv $@.tmp $@; fi
$(BUILD)/obj/runtime/fingerprint.o: $(BUILD)/gen/build_id.h
$(BUILD)/obj/runtime/fingerprint.o: CFLAGS += -I$(BUILD)/gen

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

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
	@BUILD=$(BUILD) SAN="$(SAN)" sh tests/run.sh $(TEST_BIN) tests/test_embed.sh tests/test_layers.sh tests/test_cpu_layers.sh tests/test_docs.sh tests/test_build_id.sh tests/test_compare_torch.sh tests/test_compare_ort.sh tests/test_zoo_sweep.sh tests/test_warm_cache.sh tests/test_peak.sh $(PYTHON_TESTS)

SAN_FLAGS = -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
sanitize:
	$(MAKE) BUILD=build-san OPT=-O1 SAN="$(SAN_FLAGS)" test

# The Python tests under ASan + UBSan (opt-in, not in `make sanitize`): the extension built
# with the sanitizers into build-san/python, python3 run with ASan's runtime preloaded (it
# must be the first library loaded; python3 itself is not instrumented) and libstdc++ with
# it (python3 does not link it, and ASan's __cxa_throw interceptor must find it at start,
# or torch's first C++ exception stops the process) and leak checks off (CPython and torch
# keep allocations until exit, which LeakSanitizer would report).
python-sanitize:
	$(MAKE) BUILD=build-san OPT=-O1 SAN="$(SAN_FLAGS)" python
	BUILD=build-san PY_PRELOAD="$$($(CC) -print-file-name=libasan.so) $$($(CC) -print-file-name=libstdc++.so.6)" \
	  sh tests/test_python.sh

# ThreadSanitizer over the tests that use threads (named *thread* or *table*, and test_fork,
# whose threads are inside latch's locks when it forks); only those are built, so it stays
# quick.
THREAD_TEST_C = $(foreach t,$(TEST_C),$(if $(findstring thread,$(t))$(findstring table,$(t)),$(t))) tests/test_fork.c
THREAD_TEST_BIN = $(THREAD_TEST_C:tests/%.c=$(BUILD)/tests/%)

tsan:
	$(MAKE) BUILD=build-tsan OPT=-O1 SAN="-fsanitize=thread" test-threads

test-threads: $(THREAD_TEST_BIN)
	@BUILD=$(BUILD) sh tests/run.sh $(THREAD_TEST_BIN)

# `make soak`: first two processes x SOAK_THREADS threads x SOAK_CALLS calls of traced
# functions racing on one disk cache, every result checked against eager, RSS and open files
# flat; a few minutes, so not in `make test`.
SOAK_CALLS ?= 12000
SOAK_THREADS ?= 8
$(BUILD)/soak: tests/soak/soak.c tests/soak/soak_util.h $(BUILD)/liblatch.a
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/liblatch.a $(LDLIBS)

# Then tests/soak/soak_remote.c: SOAK_PROCESSES processes for SOAK_SECONDS on a private
# redis-server, each in rounds with a fresh disk cache, a helper thread and a fork per round;
# every result checked, nothing lost on the server, RSS and open files flat.
SOAK_SECONDS ?= 120
SOAK_PROCESSES ?= 3
$(BUILD)/soak_remote: tests/soak/soak_remote.c tests/soak/soak_util.h tests/redis_test_util.h $(BUILD)/liblatch.a
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/liblatch.a $(LDLIBS)

soak: $(BUILD)/soak $(BUILD)/soak_remote
	$(BUILD)/soak $(SOAK_CALLS) $(SOAK_THREADS)
	$(BUILD)/soak_remote $(SOAK_SECONDS) $(SOAK_PROCESSES)

# The minifier on MobileNetV2 with an injected culprit: minutes and gigabytes, so not in `make test`.
minify-mobilenet: all
	@BUILD=$(BUILD) sh tests/minify_mobilenet.sh

# Interacting culprits on 100 generated graphs (make test runs 6 of them).
minify-pairs: $(BUILD)/tests/test_minify_pairs
	$(BUILD)/tests/test_minify_pairs 100

# latch bisect on 100 generated graphs, each with a fault at a random choice of the cpu
# backend (make test runs 4): how many culprits it names, and the checks each took.
bisect-generated: $(BUILD)/tests/test_bisect
	$(BUILD)/tests/test_bisect 100

# The minifier at scale: a generated 20,000-instruction step with 128 GiB of parameters and an
# injected compile fault, timed with its peak memory (opt-in: prints figures, asserts none).
minify-scale: all
	@BUILD=$(BUILD) sh tests/minify_scale.sh

clean:
	rm -rf build build-san build-tsan build-fuzz

# `make bench-function`: the micro-benchmarks of capture and traced functions.
bench-function: all
	$(BUILD)/latch bench --micro


# `make bench-allreduce`: latch's all-reduce against a bare MPI_Allreduce on the same ranks,
# over shared memory and over TCP (bench/mpi/allreduce.c, its own MPI program; prints figures,
# asserts none). ALLREDUCE_ARGS: megabytes and rounds (default 64 9).
$(BUILD)/bench-allreduce: bench/mpi/allreduce.c $(BUILD)/liblatch.a
	$(CC) $(CFLAGS) $(MPI_CFLAGS) -o $@ $< $(BUILD)/liblatch.a $(LDLIBS)
bench-allreduce: $(BUILD)/bench-allreduce
	mpirun --oversubscribe -np 2 --mca btl self,vader $(BUILD)/bench-allreduce $(ALLREDUCE_ARGS)
	mpirun --oversubscribe -np 2 --mca btl self,tcp $(BUILD)/bench-allreduce $(ALLREDUCE_ARGS)

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
	$(MAKE) -s install-python

# `make install-python PREFIX=...`: the Python package (what `make python` built) into the
# prefix's site-packages, with the metadata that registers the torch_dynamo_backends entry
# point; the last line says the PYTHONPATH to use. pip's route: docs/python.md.
PY_SITE = $(shell $(PYTHON) -c "import sysconfig; print(sysconfig.get_path('platlib', 'posix_prefix', {'base': '$(PREFIX)', 'platbase': '$(PREFIX)'}))")
PY_DIST = $(DESTDIR)$(PY_SITE)/latch-0.1.dist-info
install-python: python
	rm -rf $(DESTDIR)$(PY_SITE)/latch $(PY_DIST)
	cd $(BUILD)/python && find latch \( -name '*.py' -o -name '_latch*.so' \) -exec install -D -m 644 {} $(DESTDIR)$(PY_SITE)/{} \;
	mkdir -p $(PY_DIST)
	printf 'Metadata-Version: 2.1\nName: latch\nVersion: 0.1\n' > $(PY_DIST)/METADATA
	printf '[torch_dynamo_backends]\nlatch = latch.torch.backend:backend\n' > $(PY_DIST)/entry_points.txt
	printf 'make install\n' > $(PY_DIST)/INSTALLER
	@echo "latch for Python: PYTHONPATH=$(PY_SITE) $(PYTHON)"

# `make check-torch`: the zoo's logits against PyTorch's on the same exported weights (needs
# python3-torch and python3-torchvision; opt-in, not part of `make test`).
check-torch: all
	sh bench/check_torch.sh

# `make check-torch-zoo`: latch.torch.compile on every torchvision family's smallest model at
# 224 and PyTorch's sequence modules (latch/zoo.py), batch 1, 2 threads: compiled whole or in
# parts, max difference from eager, latch and eager ms (opt-in: slow; docs/pytorch-capture.md).
check-torch-zoo: all
	PYTHONPATH=$(abspath $(BUILD)/python) $(PYTHON) bench/check_torch_zoo.py $(ZOO_ARGS)

# `make train-torch`: training steps (forward, loss, backward, SGD) of resnet18 at 64x64, a
# 2-layer nn.TransformerEncoder and an MLP through latch.torch.compile against eager PyTorch
# in a process of its own, parameters compared after the steps (opt-in: slow;
# docs/pytorch-training.md). TRAIN_ARGS passes options on, e.g. TRAIN_ARGS="--whole --steps 20".
train-torch: all
	PYTHONPATH=$(abspath $(BUILD)/python) $(PYTHON) bench/train_torch.py $(TRAIN_ARGS)

# `make pause-torch`: a step right after a step against a step after a pause, training and
# eval inference through latch.torch.compile (docs/cpu-backend.md). PAUSE_ARGS passes options
# on, e.g. PAUSE_ARGS="--eager" for PyTorch alone.
pause-torch: all
	PYTHONPATH=$(abspath $(BUILD)/python) $(PYTHON) bench/pause_torch.py $(PAUSE_ARGS)

# `make compare-torch`: latch's trace-once times against PyTorch eager on the same models,
# batch sizes, input sizes and thread count; opt-in like check-torch.
# COMPARE_ARGS passes options on, e.g. COMPARE_ARGS="--batch 1 --repeat 10 --json out.json".
compare-torch: all
	/usr/bin/python3 bench/compare_torch.py --latch $(BUILD)/latch $(COMPARE_ARGS)

# `make compare-ort`: latch's trace-once times against ONNX Runtime (npm's onnxruntime-node,
# its cpu binaries; --ignore-scripts skips the install script, which only fetches GPU parts)
# and PyTorch eager, on the image models at 224x224, every side on the same weights and input
# and every output checked; opt-in like compare-torch, needs node and npm besides
# python3-torch and python3-torchvision. compare-ort-transformers: ViT-B/16, BERT-base at 128
# and 512 tokens, GPT-2 small at 128, and GPT-2 small generating 128 tokens on a KV cache.
ORT_DIR = $(BUILD)/ort
$(ORT_DIR)/node_modules/onnxruntime-node/package.json:
	mkdir -p $(ORT_DIR) && npm install --prefix $(ORT_DIR) --ignore-scripts --no-audit --no-fund onnxruntime-node

compare-ort: all $(ORT_DIR)/node_modules/onnxruntime-node/package.json
	/usr/bin/python3 bench/compare_ort.py --latch $(BUILD)/latch --ort $(ORT_DIR)/node_modules/onnxruntime-node \
	  --onnx-dir $(BUILD)/onnx $(COMPARE_ARGS)

compare-ort-transformers: all $(ORT_DIR)/node_modules/onnxruntime-node/package.json
	/usr/bin/python3 bench/compare_ort.py --latch $(BUILD)/latch --ort $(ORT_DIR)/node_modules/onnxruntime-node \
	  --onnx-dir $(BUILD)/onnx --suite transformers,generate $(COMPARE_ARGS)

.PHONY: python install-python python-sanitize all test sanitize tsan test-threads clean install check-torch check-torch-zoo train-torch pause-torch compare-torch compare-ort compare-ort-transformers bench-function bench-allreduce minify-mobilenet soak \
	minify-pairs minify-scale bisect-generated
-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)

# `make fuzz`: the parser's libFuzzer target (tests/fuzz/fuzz_parse.c) built with clang under
# ASan and UBSan into build-fuzz/, seeded from the small real dumps and slices of the larger
# ones, run for FUZZ_SECONDS; fails if the fuzzer finds a crash, leak, hang or abort.
FUZZ_CC ?= clang
FUZZ_SECONDS ?= 60
# seconds of wall time one input may take before it counts as a hang (fuzz-blob, fuzz-run)
FUZZ_TIMEOUT ?= 10
FUZZ_RUN_TIMEOUT ?= 20
FUZZ_BUILD = build-fuzz
LATCH_CORPUS ?= ../shared/corpus/xla
FUZZ_PARSER_C = hlo/lex.c $(wildcard hlo/parse*.c) hlo/ir.c hlo/shape.c hlo/dtype.c hlo/alloc.c hlo/arena.c hlo/diag.c hlo/strbuf.c

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
NPY_FUZZ_C = runtime/npy.c runtime/value.c runtime/fork_lock.c runtime/test_point.c hlo/shape.c hlo/dtype.c hlo/alloc.c hlo/arena.c hlo/diag.c hlo/strbuf.c

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

# `make fuzz-blob`: libFuzzer on the cpu backend's serialized executables
# (tests/fuzz/fuzz_blob.c: the input is a blob's body, the target writes a header with its
# checksum), run for FUZZ_SECONDS. The loader reaches every kernel picker, so the whole
# library is built with clang under ASan and UBSan into build-fuzz/lib; seeded with the
# bodies of the blobs the command writes for small corpus modules and tiny zoo models.
FUZZ_LIB = $(FUZZ_BUILD)/lib/liblatch.a
FUZZ_LIB_FLAGS = BUILD=$(FUZZ_BUILD)/lib CC=$(FUZZ_CC) VECTORIZE= OPT=-O1 \
  SAN="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined"

$(FUZZ_BUILD)/fuzz_blob: tests/fuzz/fuzz_blob.c $(LIB_C) $(wildcard hlo/*.h runtime/*.h runtime/cpu/*.h)
	$(MAKE) $(FUZZ_LIB_FLAGS) $(FUZZ_LIB)
	$(FUZZ_CC) -std=c11 -g -O1 -D_GNU_SOURCE -I. -Iinclude \
	  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -fopenmp \
	  -o $@ tests/fuzz/fuzz_blob.c $(FUZZ_LIB) $(LDLIBS)

fuzz-blob: $(FUZZ_BUILD)/fuzz_blob $(BUILD)/latch
	@rm -rf $(FUZZ_BUILD)/blob_corpus
	@mkdir -p $(FUZZ_BUILD)/artifacts
	sh tests/fuzz/blob_seeds.sh $(BUILD)/latch $(LATCH_CORPUS) $(FUZZ_BUILD)/blob_corpus
	$(FUZZ_BUILD)/fuzz_blob -max_len=16384 -max_total_time=$(FUZZ_SECONDS) -timeout=$(FUZZ_TIMEOUT) -rss_limit_mb=4096 $(if $(BLOB_RUNS),-runs=$(BLOB_RUNS)) \
	  -artifact_prefix=$(FUZZ_BUILD)/artifacts/blob- -print_final_stats=1 $(FUZZ_BUILD)/blob_corpus

.PHONY: fuzz-blob

# `make fuzz-run`: libFuzzer on parse + verify + compile + execute on the cpu and reference
# backends (tests/fuzz/fuzz_run.c), small modules only, the library built as for fuzz-blob;
# seeded with the small real dumps and the modules the C tests write (tests/fuzz/run_seeds.py),
# run for FUZZ_SECONDS; fails on a crash, leak, overflow, hang or abort.
$(FUZZ_BUILD)/fuzz_run: tests/fuzz/fuzz_run.c $(LIB_C) $(wildcard hlo/*.h runtime/*.h runtime/cpu/*.h)
	$(MAKE) $(FUZZ_LIB_FLAGS) $(FUZZ_LIB)
	$(FUZZ_CC) -std=c11 -g -O1 -D_GNU_SOURCE -I. -Iinclude \
	  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -fopenmp \
	  -o $@ tests/fuzz/fuzz_run.c $(FUZZ_LIB) $(LDLIBS)

fuzz-run: $(FUZZ_BUILD)/fuzz_run
	@mkdir -p $(FUZZ_BUILD)/run_corpus $(FUZZ_BUILD)/artifacts
	python3 tests/fuzz/run_seeds.py $(LATCH_CORPUS) tests $(FUZZ_BUILD)/run_seeds
	$(FUZZ_BUILD)/fuzz_run -max_len=4096 -max_total_time=$(FUZZ_SECONDS) -timeout=$(FUZZ_RUN_TIMEOUT) -rss_limit_mb=4096 \
	  -dict=tests/fuzz/hlo.dict -artifact_prefix=$(FUZZ_BUILD)/artifacts/run- -print_final_stats=1 \
	  $(FUZZ_BUILD)/run_corpus $(FUZZ_BUILD)/run_seeds

.PHONY: fuzz-run

# `make fuzz-hour`: the opt-in long run: fuzz-run and fuzz-blob side by side for
# FUZZ_HOUR_SECONDS (an hour) each, their output in build-fuzz/hour-run.log and
# hour-blob.log; prints each one's final stats, fails if either finds anything. It is meant
# to run niced on a shared machine, where a starved input takes many times its CPU time:
# a hang is an input that takes FUZZ_HOUR_TIMEOUT seconds.
FUZZ_HOUR_SECONDS ?= 3600
FUZZ_HOUR_TIMEOUT ?= 120

fuzz-hour: $(BUILD)/latch
	$(MAKE) $(FUZZ_BUILD)/fuzz_run $(FUZZ_BUILD)/fuzz_blob
	@echo "fuzz-hour: fuzz-run and fuzz-blob for $(FUZZ_HOUR_SECONDS) s each, logs in $(FUZZ_BUILD)/hour-*.log"
	@$(MAKE) fuzz-run FUZZ_SECONDS=$(FUZZ_HOUR_SECONDS) FUZZ_RUN_TIMEOUT=$(FUZZ_HOUR_TIMEOUT) \
	  > $(FUZZ_BUILD)/hour-run.log 2>&1 & pid=$$!; \
	$(MAKE) fuzz-blob FUZZ_SECONDS=$(FUZZ_HOUR_SECONDS) FUZZ_TIMEOUT=$(FUZZ_HOUR_TIMEOUT) \
	  > $(FUZZ_BUILD)/hour-blob.log 2>&1; blob=$$?; \
	wait $$pid; run=$$?; \
	for f in run blob; do echo "== fuzz-$$f"; grep -E '^(stat::|Done|==[0-9]+==|SUMMARY)|runtime error|Test unit written' $(FUZZ_BUILD)/hour-$$f.log | tail -12; done; \
	[ $$run -eq 0 ] && [ $$blob -eq 0 ]

.PHONY: fuzz-hour
