#!/usr/bin/env bash
# plan_search_gap.sh: how far the free micro-batch search is from the best
# plan a fixed micro-batch finds. For each configuration of
# plan_throughput.sh (appendix batches, v100-16g, 4 GPUs per node) and each
# planner, gpp-plan's simulated iteration time with the free search, then
# with --micro-batch b for every divisor b of the batch up to 8192 (a fixed
# b runs Algorithm 1 as is: the least-TPS plan, no depth descent, no
# simulated pick). free / best fixed > 1 means the search missed a plan
# (the DP's cut-off is on the estimate, docs/planner.md); < 1 means the
# search's descent and simulated pick found a better plan than any single
# least-TPS one. About 90 s on the development machine.
#
#   bench/plan_search_gap.sh [BUILD_DIR]     (default: build)
set -euo pipefail
BUILD=${1:-build}
BIN="$BUILD/planner/gpp-plan"
if [ ! -x "$BIN" ]; then
    echo "plan_search_gap: $BIN not found; build first: cmake --build $BUILD --target gpp-plan" >&2
    exit 1
fi

# sim SPEC DEVICES BATCH PLANNER [B_FIXED] -> simulated ms (empty when no plan)
sim() {
    "$BIN" --model "$1" --devices "$2" --device v100-16g --gpus-per-node 4 --batch "$3" \
        --planner "$4" ${5:+--micro-batch "$5"} 2>/dev/null | awk '/^simulated/ { print $2 }' || true
}

echo "| model | GPUs | batch | planner | free search sim ms | best fixed-b sim ms | its b | free / best fixed |"
echo "|---|---|---|---|---|---|---|---|"
for cfg in "mmt 4 64" "mmt 8 128" "mmt 16 256" "mmt 32 512" "dlrm 4 256" "dlrm 8 512" \
    "dlrm 16 1024" "dlrm 32 2048" "candle_uno 4 4096" "candle_uno 8 8192" "candle_uno 16 16384" \
    "candle_uno 32 32768" "candle_uno:branches=16 16 16384"; do
    set -- $cfg
    for pl in gpp spp; do
        free=$(sim "$1" "$2" "$3" "$pl")
        best= bb=
        for ((b = 1; b <= $3 && b <= 8192; b++)); do
            (($3 % b == 0)) || continue
            t=$(sim "$1" "$2" "$3" "$pl" "$b")
            [ -n "$t" ] || continue
            if [ -z "$best" ] || awk -v a="$t" -v c="$best" 'BEGIN { exit !(a < c) }'; then
                best=$t bb=$b
            fi
        done
        echo "| $1 | $2 | $3 | $pl | $free | $best | $bb | $(awk -v a="$free" -v c="$best" 'BEGIN { printf "%.4f", a / c }') |"
    done
done
