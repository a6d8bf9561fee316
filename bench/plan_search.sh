#!/usr/bin/env bash
# plan_search.sh: partitioner search times on the paper's Table 1 configs
# (zoo defaults, v100-16g, 4 GPUs per node) and the 1024-GPU stress case,
# GPP and SPP, against the targets (1/100 of the paper's GraphPipe times).
#
#   bench/plan_search.sh [BUILD_DIR] [REPEAT]     (default: build, 5)
#
# Times are the best of REPEAT runs of gpp_part_run: wall clock and process
# CPU time. The target is judged on the wall clock (what a user waits): up to
# 64 devices GPP plans its chain candidate on a second thread, so its CPU
# time is the sum of both searches (on a shared machine, compare the best of
# several invocations).
set -euo pipefail
BUILD=${1:-build}
REPEAT=${2:-5}
BIN="$BUILD/bench/bench_plan"
if [ ! -x "$BIN" ]; then
    echo "plan_search: $BIN not found; build first: cmake --build $BUILD --target bench_plan" >&2
    exit 1
fi

# model devices batch target_ms (paper GraphPipe seconds / 100, in ms)
CONFIGS=(
    "mmt 4 64 1.2"          "mmt 8 128 7.6"          "mmt 16 256 30.0"          "mmt 32 512 101.1"
    "dlrm 4 256 3.3"        "dlrm 8 512 27.3"        "dlrm 16 1024 132.8"       "dlrm 32 2048 546.0"
    "candle_uno 4 4096 1.9" "candle_uno 8 8192 14.3" "candle_uno 16 16384 61.4" "candle_uno 32 32768 223.7"
    "mmt:branches=64 1024 16384 10000"
)

printf "%-18s %5s %6s | %9s %9s %9s %5s | %9s %9s | %10s %10s\n" model gpus batch \
    "gpp_ms" "gpp_cpu" "target" ok "spp_ms" "spp_cpu" "gpp_iter" "spp_iter"
fail=0
for c in "${CONFIGS[@]}"; do
    set -- $c
    model=$1 dev=$2 batch=$3 target=$4
    g=$("$BIN" "$model" "$dev" "$batch" --repeat "$REPEAT")
    gms=$(echo "$g" | sed -E 's/.*search +([0-9.]+) ms.*/\1/')
    gcpu=$(echo "$g" | sed -E 's/.*cpu +([0-9.]+) ms.*/\1/')
    giter=$(echo "$g" | sed -E 's/.*iter +([0-9.]+) ms.*/\1/')
    if [ "$dev" -le 32 ]; then
        s=$("$BIN" "$model" "$dev" "$batch" --spp --repeat 1)
        sms=$(echo "$s" | sed -E 's/.*search +([0-9.]+) ms.*/\1/')
        scpu=$(echo "$s" | sed -E 's/.*cpu +([0-9.]+) ms.*/\1/')
        siter=$(echo "$s" | sed -E 's/.*iter +([0-9.]+) ms.*/\1/')
    else
        sms=- scpu=- siter=-
    fi
    ok=$(awk -v a="$gms" -v t="$target" 'BEGIN { print (a <= t) ? "yes" : "NO" }')
    [ "$ok" = yes ] || fail=1
    printf "%-18s %5s %6s | %9s %9s %9s %5s | %9s %9s | %10s %10s\n" "$model" "$dev" "$batch" \
        "$gms" "$gcpu" "$target" "$ok" "$sms" "$scpu" "$giter" "$siter"
done
echo "(ms; gpp_iter/spp_iter: estimated iteration time TPS x (B + (depth-1) b) of the chosen plan)"
exit $fail
