#!/usr/bin/env bash
# bench_train: samples/s of single-process CPU training, gpp-train vs
# PyTorch (bench/torch_train.py, Debian's python3-torch), on small MMT, DLRM
# and CANDLE-Uno variants with the same shapes, batch, optimizer (AdamW; sparse
# tables: lazy AdamW vs SparseAdam) and thread count.
#
# Each side runs ROUNDS times, alternating, and the best round counts: on a
# shared machine the best round is the one least disturbed by other work.
# A round times ITERS iterations after WARMUP untimed ones (samples/s =
# batch x iterations / their wall time). gpp's time includes generating the
# inputs and teacher labels; PyTorch's includes torch.randn inputs.
#
# usage: bench/bench_train.sh [BUILD_DIR] [THREADS]
#   env: ROUNDS (3), ITERS (10), WARMUP (3), PYTHON (/usr/bin/python3)
set -eu
BUILD=${1:-build}
THREADS=${2:-1}
ROUNDS=${ROUNDS:-3}
ITERS=${ITERS:-10}
WARMUP=${WARMUP:-3}
PYTHON=${PYTHON:-/usr/bin/python3}
TRAIN=$BUILD/agent/exec/gpp-train
HERE=$(cd "$(dirname "$0")" && pwd)
# OpenBLAS misdetects some virtualised AVX-512 CPUs as Prescott; both sides
# link OpenBLAS, so both get the same setting.
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-SkylakeX}
export OMP_NUM_THREADS=$THREADS

[ -x "$TRAIN" ] || { echo "bench_train: no $TRAIN; build first" >&2; exit 2; }
"$PYTHON" -c 'import torch' 2>/dev/null || { echo "bench_train: $PYTHON has no torch (apt-get install python3-torch)" >&2; exit 2; }

MODELS=(
    "mmt:branches=2,layers=2,hidden=128,heads=4,seq=32,ffn=512,classes=16 32"
    "dlrm:dense_branches=2,sparse_branches=2,dense_in=256,hidden=256,dense_layers=2,rows=100000,dim=32,bag=16,top_layers=2 128"
    "candle_uno:branches=3,layers=3,hidden=512,in=512,doses=1,top_layers=2 128"
)

# samples/s of one gpp round: per-iteration rates after the warm-up
gpp_round() {
    "$TRAIN" --model "$1" --batch "$2" --iterations $((WARMUP + ITERS)) --threads "$THREADS" |
        grep -o 'samples/s=[0-9.]*' | head -n $((WARMUP + ITERS)) | cut -d= -f2 |
        awk -v w="$WARMUP" -v b="$2" 'NR > w { t += b / $1; n++ } END { printf "%.1f", b * n / t }'
}
torch_round() {
    "$PYTHON" "$HERE/torch_train.py" --model "$1" --batch "$2" --iterations "$ITERS" \
        --warmup "$WARMUP" --threads "$THREADS" | grep -o 'samples/s=[0-9.]*' | cut -d= -f2
}
best() { printf '%s\n' "$@" | sort -g | tail -n 1; }

printf '| model | batch | threads | gpp samples/s | PyTorch samples/s | gpp / PyTorch |\n'
printf '|---|---|---|---|---|---|\n'
for entry in "${MODELS[@]}"; do
    spec=${entry% *}
    batch=${entry##* }
    g=() p=()
    for _ in $(seq "$ROUNDS"); do
        g+=("$(gpp_round "$spec" "$batch")")
        p+=("$(torch_round "$spec" "$batch")")
    done
    gb=$(best "${g[@]}")
    pb=$(best "${p[@]}")
    printf '| `%s` | %s | %s | %s | %s | %.2fx |\n' "$spec" "$batch" "$THREADS" "$gb" "$pb" \
        "$(awk -v a="$gb" -v b="$pb" 'BEGIN { print a / b }')"
done
