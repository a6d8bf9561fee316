# Thin wrapper: the README's two commands. Everything real is in CMake.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
ifneq ($(CI),)
CMAKE_FLAGS += -DGPP_WERROR=ON
endif

.PHONY: all deps build run test coverage bench clean format

all: build

deps:
	@bash scripts/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS) >/dev/null
	@MAKEFLAGS= cmake --build $(BUILD) -j $(JOBS) -- --no-print-directory

# The main job on the local default.
run: build
	@bash scripts/run-main.sh $(BUILD)

test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# Line coverage of the whole test suite: instrumented build in build-cov/,
# ctest, then a per-file summary (docs/testing.md).
coverage: deps
	@GPP_COVERAGE_DEPS=1 bash scripts/install-deps.sh
	@bash scripts/coverage.sh build-cov

# Benchmarks also need PyTorch (the CPU training comparison only).
bench: build
	@GPP_BENCH_DEPS=1 bash scripts/install-deps.sh
	@bash bench/run-all.sh $(BUILD)

format:
	@clang-format -i $$(git ls-files '*.c' '*.h' '*.cc')

clean:
	@rm -rf $(BUILD) build-cov
