#!/usr/bin/env bash
# run-all: every benchmark in bench/ against one build, in turn, each under a
# "== name: command" header (`make bench` runs it). What each prints and the
# figures to compare with: BENCHMARKS.md. A benchmark that fails (a missed
# target, a prerequisite it lacks, such as PyTorch for bench_train) is
# reported and the rest still run; the exit status is 1 when any failed.
# OPENBLAS_CORETYPE comes from scripts/blas-env.sh for all of them.
#
#   bench/run-all.sh [BUILD_DIR]     (default: build)
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=$(cd "${1:-build}" 2>/dev/null && pwd) ||
    { echo "run-all: no build folder '${1:-build}'; build first: make build" >&2; exit 2; }
cd "$HERE/.." # the benchmarks read repository paths (tests/data, scripts) from the root
. scripts/blas-env.sh
RAN=0
FAILED=()

# section NAME CMD...: runs CMD under a header; a failure is named and counted
section() {
    local name=$1
    shift
    printf '\n== %s: %s\n' "$name" "$*"
    RAN=$((RAN + 1))
    "$@" || { echo "== $name: FAILED (exit $?)"; FAILED+=("$name"); }
}

section plan_search bash bench/plan_search.sh "$BUILD"
section plan_throughput bash bench/plan_throughput.sh "$BUILD"
section plan_ablation bash bench/plan_ablation.sh "$BUILD"
section plan_search_gap bash bench/plan_search_gap.sh "$BUILD"
section bench_train bash bench/bench_train.sh "$BUILD"
section fuse_cpu bash bench/fuse_cpu.sh "$BUILD"
section bench_barrier bash bench/bench_barrier.sh "$BUILD"
section bench_sim_ratio bash bench/bench_sim_ratio.sh "$BUILD"
section mem_error bash bench/mem_error.sh "$BUILD"
section bench_gemm "$BUILD/bench/bench_gemm"
section bench_comm "$BUILD/bench/bench_comm"

echo
if [ ${#FAILED[@]} -gt 0 ]; then
    echo "run-all: ${#FAILED[@]} of $RAN failed: ${FAILED[*]}"
    exit 1
fi
echo "run-all: all $RAN passed"
