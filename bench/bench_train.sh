#!/usr/bin/env bash
# bench_train: samples/s of single-process CPU training, gpp-train vs
# PyTorch (bench/torch_train.py, Debian's python3-torch), on small MMT, DLRM
# and CANDLE-Uno variants with the same shapes, batch, optimizer (AdamW; sparse
# tables: lazy AdamW vs SparseAdam) and thread count.
#
# Each side runs ROUNDS times, alternating, and the best round counts: on a
# shared machine the best round is the one least disturbed by other work.
# A round times ITERS iterations after WARMUP untimed ones (samples/s =
# batch x iterations / their wall time). The CPU-time columns divide by the
# process CPU time instead (all threads): with one thread that is the time
# the run actually computed, robust to other load on the machine. gpp's time
# includes generating the inputs and teacher labels; PyTorch's includes
# torch.randn inputs.
#
# usage: bench/bench_train.sh [BUILD_DIR] [THREADS]
#   env: ROUNDS (3), ITERS (10), WARMUP (3), PYTHON (/usr/bin/python3)
set -eu
PYTHON=${PYTHON:-/usr/bin/python3}
# OpenBLAS misdetects some virtualised AVX-512 CPUs as Prescott; both sides
# link OpenBLAS, so both get the same setting (cpu_train_common.sh).
. "$(dirname "$0")/cpu_train_common.sh" "$@"
"$PYTHON" -c 'import torch' 2>/dev/null || { echo "bench_train: $PYTHON has no torch (apt-get install python3-torch)" >&2; exit 2; }

# One gpp round -> "wall_rate cpu_rate": per-iteration wall and process-CPU
# times after the warm-up.
gpp_round() {
    "$TRAIN" --model "$1" --batch "$2" --iterations $((WARMUP + ITERS)) --threads "$THREADS" |
        gpp_rates "$2"
}
torch_round() {
    "$PYTHON" "$HERE/torch_train.py" --model "$1" --batch "$2" --iterations "$ITERS" \
        --warmup "$WARMUP" --threads "$THREADS" |
        sed 's/.* samples\/s=\([0-9.]*\) cpu_samples\/s=\([0-9.]*\).*/\1 \2/'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2fx", a / b }'; }

printf '| model | batch | threads | gpp samples/s | PyTorch samples/s | gpp / PyTorch | gpp CPU-time samples/s | PyTorch CPU-time samples/s | gpp / PyTorch (CPU time) |\n'
printf '|---|---|---|---|---|---|---|---|---|\n'
for entry in "${MODELS[@]}"; do
    spec=${entry% *}
    batch=${entry##* }
    gw=() gc=() pw=() pc=()
    for _ in $(seq "$ROUNDS"); do
        read -r w c < <(gpp_round "$spec" "$batch")
        gw+=("$w") gc+=("$c")
        read -r w c < <(torch_round "$spec" "$batch")
        pw+=("$w") pc+=("$c")
    done
    a=$(best "${gw[@]}") b=$(best "${pw[@]}") c=$(best "${gc[@]}") d=$(best "${pc[@]}")
    printf '| `%s` | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$spec" "$batch" "$THREADS" \
        "$a" "$b" "$(ratio "$a" "$b")" "$c" "$d" "$(ratio "$c" "$d")"
done
