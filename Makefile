# latch build. `make` builds the library and the command, `make test` runs the tests,
# `make sanitize` runs the same tests under AddressSanitizer + UndefinedBehaviorSanitizer.
CC ?= cc
CXX ?= c++
BUILD ?= build
OPT ?= -O2
SAN ?=
CFLAGS_COMMON = -g $(OPT) $(SAN) -Wall -Wextra -Werror -D_GNU_SOURCE -I. -Iinclude -fPIC
CFLAGS += -std=c11 $(CFLAGS_COMMON)
CXXFLAGS += -std=c++17 $(CFLAGS_COMMON)
LDLIBS = -lm -lpthread

LIB_C = $(sort $(wildcard hlo/*.c guards/*.c cache/*.c runtime/*.c minify/*.c capture/*.c))
LIB_CXX = $(sort $(wildcard runtime/*.cc))
LIB_OBJ = $(LIB_C:%.c=$(BUILD)/obj/%.o) $(LIB_CXX:%.cc=$(BUILD)/obj/%.o)
TOOL_C = $(sort $(wildcard tools/*.c))
TOOL_OBJ = $(TOOL_C:%.c=$(BUILD)/obj/%.o)
TEST_C = $(sort $(wildcard tests/test_*.c))
TEST_BIN = $(TEST_C:tests/%.c=$(BUILD)/tests/%)
TEST_SUPPORT = $(filter-out $(TEST_C),$(sort $(wildcard tests/*.c)))

all: $(BUILD)/liblatch.a $(BUILD)/liblatch.so $(BUILD)/latch

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

$(BUILD)/latch: $(TOOL_OBJ) $(BUILD)/liblatch.a
	$(CC) $(SAN) -o $@ $(TOOL_OBJ) $(BUILD)/liblatch.a $(LDLIBS)

$(BUILD)/tests/%: tests/%.c $(TEST_SUPPORT) tests/test.h $(BUILD)/liblatch.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(TEST_SUPPORT) $(BUILD)/liblatch.a $(LDLIBS)

test: all $(TEST_BIN)
	@BUILD=$(BUILD) sh tests/run.sh $(TEST_BIN)

sanitize:
	$(MAKE) BUILD=build-san OPT=-O1 SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" test

clean:
	rm -rf build build-san build-fuzz

.PHONY: all test sanitize clean
-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
