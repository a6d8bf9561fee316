# cpu_train_common: what the single-process CPU training benches share
# (bench_train.sh, bench_data_cpu.sh, fuse_cpu.sh). Sourced, not run:
#   . "$(dirname "$0")/cpu_train_common.sh" "$@"
# Sets BUILD ($1, default build), THREADS ($2, default 1), ROUNDS, ITERS,
# WARMUP (env; 3, 10, 3), TRAIN (gpp-train of BUILD), HERE (bench/),
# OMP_NUM_THREADS and OpenBLAS's core type (scripts/blas-env.sh: both sides
# of a comparison link OpenBLAS and get the same setting), MODELS (the
# "SPEC BATCH" entries every CPU bench times), and the functions below.
# Exits 2 when gpp-train is not built.
BUILD=${1:-build}
THREADS=${2:-1}
ROUNDS=${ROUNDS:-3}
ITERS=${ITERS:-10}
WARMUP=${WARMUP:-3}
TRAIN=$BUILD/agent/exec/gpp-train
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../scripts/blas-env.sh"
export OMP_NUM_THREADS=$THREADS
[ -x "$TRAIN" ] || { echo "$(basename "$0" .sh): no $TRAIN; build first" >&2; exit 2; }

MODELS=(
    "mmt:branches=2,layers=2,hidden=128,heads=4,seq=32,ffn=512,classes=16 32"
    "dlrm:dense_branches=2,sparse_branches=2,dense_in=256,hidden=256,dense_layers=2,rows=100000,dim=32,bag=16,top_layers=2 128"
    "candle_uno:branches=3,layers=3,hidden=512,in=512,doses=1,top_layers=2 128"
)

# gpp-train's iteration lines on stdin, batch $1 -> "wall_rate cpu_rate":
# samples/s over the iterations after WARMUP by wall time and by process
# CPU time (all threads).
gpp_rates() {
    grep '^iter=' | sed 's/.*samples\/s=\([0-9.]*\) cpu_ms=\([0-9.]*\)/\1 \2/' |
        awk -v w="$WARMUP" -v b="$1" 'NR > w { t += b / $1; c += $2 / 1000; n++ }
            END { printf "%.1f %.1f\n", b * n / t, b * n / c }'
}
# The largest of the numbers given.
best() { printf '%s\n' "$@" | sort -g | tail -n 1; }
