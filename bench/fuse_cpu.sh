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
. "$(dirname "$0")/cpu_train_common.sh" "$@"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# One round -> "cpu_rate peak_bytes digest"
round() {
    "$TRAIN" --model "$1" --batch "$2" --iterations $((WARMUP + ITERS)) --threads "$THREADS" \
        $3 >"$TMP/out"
    local wall rate peak digest
    read -r wall rate < <(gpp_rates "$2" <"$TMP/out")
    peak=$(sed -n 's/.*peak_stash_bytes=\([0-9]*\).*/\1/p' "$TMP/out")
    digest=$(sed -n 's/^weights sha256 //p' "$TMP/out")
    echo "$rate $peak $digest"
}

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
