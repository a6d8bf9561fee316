# Thin wrapper: the README's two commands. Everything real is in CMake.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
ifneq ($(CI),)
CMAKE_FLAGS += -DGPP_WERROR=ON
endif

.PHONY: all deps build run test coverage bench gpu-check clean format

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

# Benchmarks (PyTorch, for the CPU training comparison, is in the normal set).
bench: build
	@bash bench/run-all.sh $(BUILD)

# On a GPU machine: build with the CUDA backend (nvcc from /usr/local/cuda
# when it is not on PATH), run the gpu-labelled tests and the GPU
# benchmarks, write bench/results/gpu-<date>.txt (docs/gpu.md).
gpu-check: deps
	@PATH="$$PATH:/usr/local/cuda/bin" cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPP_CUDA=ON $(CMAKE_FLAGS) >/dev/null
	@MAKEFLAGS= cmake --build $(BUILD) -j $(JOBS) -- --no-print-directory
	@bash bench/gpu_check.sh $(BUILD)

format:
	@clang-format -i $$(git ls-files '*.c' '*.h' '*.cc')

clean:
	@rm -rf $(BUILD) build-cov
