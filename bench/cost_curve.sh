#!/usr/bin/env bash
# cost_curve.sh: how well a profile timed at one micro-batch size predicts
# the other sizes when carried along the device preset's curve (what the
# planner does beyond a profile's measured sizes, planner/gpp_cost.c),
# against the linear rule t(b) * m / b. Profiles small zoo models on this
# machine's CPU backend at micro-batch 1..64 (gpp-train --profile-out, one
# thread), then extrapolates from one size with the "cpu" preset's curve
# (bench_curve). Prints markdown tables (BENCHMARKS.md, "Cost model: the
# micro-batch curve").
#
#   bench/cost_curve.sh [BUILD_DIR]     (default: build)
set -euo pipefail
BUILD=${1:-build}
TRAIN="$BUILD/agent/exec/gpp-train"
CURVE="$BUILD/bench/bench_curve"
for b in "$TRAIN" "$CURVE"; do
    if [ ! -x "$b" ]; then
        echo "cost_curve: $b not found; build first: cmake --build $BUILD --target gpp-train bench_curve" >&2
        exit 1
    fi
done
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
for spec in "mmt:branches=2,layers=1,hidden=128,heads=4,seq=32,ffn=256" \
    "candle_uno:branches=2,layers=2,hidden=256,in=256,doses=1,top_layers=1"; do
    "$TRAIN" --model "$spec" --profile-out "$TMP/p.json" --profile-max-mb 64 --threads 1 \
        2>/dev/null | grep -v OpenBLAS
    for b in 8 0; do # 0: the largest size measured
        echo
        "$CURVE" "$spec" "$TMP/p.json" "$b"
    done
    echo
done
