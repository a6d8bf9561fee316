# Thin wrapper: the README's two commands. Everything real is in CMake.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
ifneq ($(CI),)
CMAKE_FLAGS += -DGPP_WERROR=ON
endif

.PHONY: all deps build run test bench clean format

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

# Benchmarks also need PyTorch (the CPU training comparison only).
bench: build
	@GPP_BENCH_DEPS=1 bash scripts/install-deps.sh
	@bash bench/run-all.sh $(BUILD)

format:
	@clang-format -i $$(git ls-files '*.c' '*.h' '*.cc')

clean:
	@rm -rf $(BUILD)
