#!/usr/bin/env bash
# gpu_check: the one command for a GPU machine (`make gpu-check`). Runs the
# gpu-labelled tests (tests/gpu/), bench_cuda_ops (per-op times, fused vs
# two-op linear + activation, launch overhead), bench_train_gpu.sh (training
# vs PyTorch eager, MFU, with and without CUDA graphs; needs a python with
# torch: PYTHON), bench_sim_gpu.sh (measured / simulated iteration) and
# bench_pipe_gpu.sh (the agents' pipeline through gpp-coordinator with
# [job] cuda_graphs on vs off, on one plan: the 4-agent main job, one
# agent alone and a larger MMT at bf16 on one agent; ms/iteration,
# samples/s, the same weights) against a build made with the CUDA backend,
# and writes everything with the device name (nvidia-smi), the commit and
# the date to bench/results/gpu-<date>.txt. Exit status 1 when a test
# failed, or when there was no GPU to run on (tests skipped, nothing
# measured): a figure is only ever written from a run that measured it.
#
#   bench/gpu_check.sh [BUILD_DIR]      (default: build)
#   env: GPU_CHECK_BENCH (default "ops train sim pipe"): which benchmarks run
#        after the tests, e.g. "ops" alone where a command may only run a
#        few minutes, "" for the tests alone.
#        GPU_CHECK_TESTS (default 1): 0 skips the GPU tests, for a second
#        call on the same machine whose first call ran them (the result
#        file then says so).
#        GPU_CHECK_TESTS_MAX_S (default 300): the GPU tests together are
#        stopped after this many seconds (they took 25 s on an H100 on
#        2026-11-25), so a hang leaves the call's time to the benchmarks.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=$(cd "${1:-build}" 2>/dev/null && pwd) ||
    { echo "gpu_check: no build folder '${1:-build}'; run make gpu-check" >&2; exit 2; }
cd "$HERE/.."
. scripts/blas-env.sh
mkdir -p bench/results
DATE=$(date -u +%Y-%m-%d)
OUT=bench/results/gpu-$DATE.txt
status=0
{
    echo "# gpu-check $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
    if command -v nvidia-smi >/dev/null 2>&1; then
        echo "# device: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -1)"
    else
        echo "# device: none (no nvidia-smi)"
    fi
    grep -q '^GPP_CUDA:BOOL=ON' "$BUILD/CMakeCache.txt" ||
        echo "# warning: $BUILD was configured without the CUDA backend (GPP_CUDA=OFF)"
    echo
    echo "== tests: (cd $BUILD && ctest -L gpu --output-on-failure -V)"
} | tee "$OUT"
if [ "${GPU_CHECK_TESTS:-1}" = 0 ]; then
    echo "(not run here: GPU_CHECK_TESTS=0)" | tee -a "$OUT"
else
    # bounded as a whole, so that a test that hangs on the device (a
    # kernel that never ends) leaves the call time for the benchmarks
    (cd "$BUILD" && timeout -k 10 "${GPU_CHECK_TESTS_MAX_S:-300}" ctest -L gpu --output-on-failure -V) \
        >"$OUT.tests" 2>&1
    rc=$?
    grep -E '^[0-9]+: |tests passed|Skipped|Failed|Passed|Timeout' "$OUT.tests" | tee -a "$OUT"
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        echo "gpu_check: the GPU tests ran past ${GPU_CHECK_TESTS_MAX_S:-300} s and were stopped;" \
            "the last lines:" | tee -a "$OUT"
        tail -n 40 "$OUT.tests" | tee -a "$OUT"
    fi
    [ $rc -eq 0 ] || status=1
    rm -f "$OUT.tests"
fi
BENCHES=${GPU_CHECK_BENCH:-ops train sim pipe}
if grep -q 'SKIPPED:' "$OUT"; then
    echo "gpu_check: the GPU tests were SKIPPED: no usable GPU here; nothing measured" | tee -a "$OUT"
    status=1
    BENCHES= # the benchmarks would measure nothing either
fi
case " $BENCHES " in
*" ops "*)
    echo | tee -a "$OUT"
    echo "== bench: $BUILD/bench/bench_cuda_ops" | tee -a "$OUT"
    "$BUILD/bench/bench_cuda_ops" 2>&1 | tee -a "$OUT"
    rc=${PIPESTATUS[0]}
    if [ "$rc" -eq 77 ]; then
        echo "gpu_check: nothing measured (no usable GPU)" | tee -a "$OUT"
        status=1
        BENCHES= # the rest would measure nothing either
    elif [ "$rc" -ne 0 ]; then
        echo "gpu_check: bench_cuda_ops failed (exit $rc)" | tee -a "$OUT"
        status=1
    fi
    ;;
esac
# bench WORD SCRIPT: runs bench/SCRIPT when GPU_CHECK_BENCH names WORD
bench() {
    case " $BENCHES " in *" $1 "*) ;; *) return 0 ;; esac
    echo | tee -a "$OUT"
    echo "== bench: bench/$2 $BUILD" | tee -a "$OUT"
    bash "bench/$2" "$BUILD" 2>&1 | tee -a "$OUT"
    [ "${PIPESTATUS[0]}" -eq 0 ] || { echo "gpu_check: $2 failed" | tee -a "$OUT"; status=1; }
}
bench train bench_train_gpu.sh
bench sim bench_sim_gpu.sh
bench pipe bench_pipe_gpu.sh
echo "gpu_check: wrote $OUT"
exit $status
