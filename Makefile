# terra: a thin Makefile over CMake.
#   make          build (Release with debug info) into build/
#   make test     build and run every test through ctest
#   make demo     fly the built-in path over the default world (output in build/demo/)
#   make bench    run every benchmark; figures in build/bench/results.jsonl
#   make install  install headers, libraries, programs, the CMake package and .pc files to PREFIX
# Variables: BUILD (build dir), SANITIZE (address|thread), WERROR (1), CC, PREFIX (/usr/local),
# SHARED (1: shared libraries too). terra-cook-mpi is built where OpenMPI is installed (deps.sh all).
# Missing Debian packages are installed first (scripts/deps.sh): build ones for make, Mesa's
# drivers too for make demo, and the tests' for make test and make bench.
BUILD    ?= build
SANITIZE ?=
WERROR   ?=
JOBS     ?= $(shell nproc)
PREFIX   ?= /usr/local
SHARED   ?=

CMAKE_FLAGS := -DTERRA_SANITIZE=$(SANITIZE)
ifneq ($(WERROR),)
CMAKE_FLAGS += -DTERRA_WERROR=ON
endif
ifneq ($(SHARED),)
CMAKE_FLAGS += -DBUILD_SHARED_LIBS=ON
endif
# terra-cook-mpi (TERRA_BUILD_MPI, off in CMake by default) wherever OpenMPI is installed
ifneq ($(shell pkg-config --exists ompi-c 2>/dev/null && echo yes),)
CMAKE_FLAGS += -DTERRA_BUILD_MPI=ON
endif
ifneq ($(CC),cc)
CMAKE_FLAGS += -DCMAKE_C_COMPILER=$(CC)
endif

.PHONY: all build deps configure test demo bench install clean

all: deps build

build: configure
	cmake --build $(BUILD) -j $(JOBS)

deps:
	@scripts/deps.sh build

configure:
	@cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null

test:
	@scripts/deps.sh all
	@$(MAKE) --no-print-directory build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

demo:
	@scripts/deps.sh demo
	@$(MAKE) --no-print-directory build
	$(BUILD)/terra fly --out $(BUILD)/demo

bench:
	@scripts/deps.sh all
	@$(MAKE) --no-print-directory build
	scripts/bench.sh $(BUILD)

install: all
	cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD)
