#!/usr/bin/env bash
# fuse_cpu: what running a linear and the ReLU/GELU it feeds as one call
# (docs/executor.md "Fusion") does to single-process CPU training: samples/s
# and the executor's peak activation bytes, fused (the default) against
# gpp-train --no-fuse, on the bench_train.sh models. Both runs end with the
# same weights (the digest line is compared: exit 1 when they differ).
#
# Each side runs ROUNDS times, alternating; the best round counts. A round
# times ITERS iterations after WARMUP untimed ones, by process CPU time
# (all threads), which other load on the machine disturbs least.
#
# usage: bench/fuse_cpu.sh [BUILD_DIR] [THREADS]
#   env: ROUNDS (3), ITERS (10), WARMUP (3)
set -eu
BUILD=${1:-build}
THREADS=${2:-1}
ROUNDS=${ROUNDS:-3}
ITERS=${ITERS:-10}
WARMUP=${WARMUP:-3}
TRAIN=$BUILD/agent/exec/gpp-train
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../scripts/blas-env.sh"
export OMP_NUM_THREADS=$THREADS
[ -x "$TRAIN" ] || { echo "fuse_cpu: no $TRAIN; build first" >&2; exit 2; }

MODELS=(
    "mmt:branches=2,layers=2,hidden=128,heads=4,seq=32,ffn=512,classes=16 32"
    "dlrm:dense_branches=2,sparse_branches=2,dense_in=256,hidden=256,dense_layers=2,rows=100000,dim=32,bag=16,top_layers=2 128"
    "candle_uno:branches=3,layers=3,hidden=512,in=512,doses=1,top_layers=2 128"
)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# One round -> "cpu_rate peak_bytes digest"
round() {
    "$TRAIN" --model "$1" --batch "$2" --iterations $((WARMUP + ITERS)) --threads "$THREADS" \
        $3 >"$TMP/out"
    local rate peak digest
    rate=$(grep '^iter=' "$TMP/out" | sed 's/.*cpu_ms=\([0-9.]*\)/\1/' |
        awk -v w="$WARMUP" -v b="$2" 'NR > w { c += $1 / 1000; n++ } END { printf "%.1f", b * n / c }')
    peak=$(sed -n 's/.*peak_stash_bytes=\([0-9]*\).*/\1/p' "$TMP/out")
    digest=$(sed -n 's/^weights sha256 //p' "$TMP/out")
    echo "$rate $peak $digest"
}
best() { printf '%s\n' "$@" | sort -g | tail -n 1; }

printf '| model | batch | threads | fused samples/s (CPU time) | unfused samples/s | fused / unfused | peak activations fused | unfused | same weights |\n'
printf '|---|---|---|---|---|---|---|---|---|\n'
fail=0
for entry in "${MODELS[@]}"; do
    spec=${entry% *}
    batch=${entry##* }
    fr=() ur=()
    for _ in $(seq "$ROUNDS"); do
        read -r r fp fd < <(round "$spec" "$batch" "")
        fr+=("$r")
        read -r r up ud < <(round "$spec" "$batch" --no-fuse)
        ur+=("$r")
    done
    f=$(best "${fr[@]}")
    u=$(best "${ur[@]}")
    same=yes
    [ "$fd" = "$ud" ] || { same=NO; fail=1; }
    printf '| %s | %s | %s | %s | %s | %s | %.2f MiB | %.2f MiB | %s |\n' "${spec%%:*}" "$batch" \
        "$THREADS" "$f" "$u" "$(awk -v a="$f" -v b="$u" 'BEGIN { printf "%.2fx", a / b }')" \
        "$(awk -v x="$fp" 'BEGIN { print x / 1048576 }')" \
        "$(awk -v x="$up" 'BEGIN { print x / 1048576 }')" "$same"
done
exit $fail
