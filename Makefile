# terra: a thin Makefile over CMake.
#   make          build (Release with debug info) into build/
#   make test     build and run every test through ctest
#   make demo     fly the built-in path over the default world (output in build/demo/)
#   make bench    run every benchmark; figures in build/bench/results.jsonl
# Variables: BUILD (build dir), SANITIZE (address|thread), WERROR (1), CC.
BUILD    ?= build
SANITIZE ?=
WERROR   ?=
JOBS     ?= $(shell nproc)

CMAKE_FLAGS := -DTERRA_SANITIZE=$(SANITIZE)
ifneq ($(WERROR),)
CMAKE_FLAGS += -DTERRA_WERROR=ON
endif
ifneq ($(CC),cc)
CMAKE_FLAGS += -DCMAKE_C_COMPILER=$(CC)
endif

.PHONY: all deps configure test demo bench clean

all: configure
	cmake --build $(BUILD) -j $(JOBS)

deps:
	@scripts/deps.sh

configure: deps
	@cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null

test: all
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

demo: all
	$(BUILD)/terra fly --out $(BUILD)/demo

bench: all
	scripts/bench.sh $(BUILD)

clean:
	rm -rf $(BUILD)
