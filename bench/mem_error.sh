#!/usr/bin/env bash
# mem_error: predicted vs measured peak device memory per stage.
#   1. the main job (make run's config/examples/local-cpu.toml: 4 CPU agents,
#      --plan auto), from the coordinator's closing summary;
#   2. gpp-train (one stage, one micro-batch in flight) on every zoo model at
#      a laptop size, with AdamW and SGD, micro-batch 8 of a batch of 32.
# Predicted: the stage's memory plan (model/gpp_memplan.h, the figure
# plans report, which the executor allocates); measured: the CPU backend's
# high-water mark (every block, 64-byte rounding included). Target: equal
# (error 0.00 %) per stage; the exit status is 1 when a stage misses it.
# Results: BENCHMARKS.md "Memory: predicted vs measured".
#
#   bench/mem_error.sh [BUILD_DIR]     (default: build)
set -u
BUILD=${1:-build}
COORD=$BUILD/coordinator/gpp-coordinator
TRAIN=$BUILD/agent/exec/gpp-train
[ -x "$COORD" ] && [ -x "$TRAIN" ] || { echo "mem_error: build first (make build)" >&2; exit 2; }
[ -n "${OPENBLAS_CORETYPE+x}" ] || . scripts/blas-env.sh
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
BAD=0

# rows "stage predicted_MiB measured_MiB error_%" -> table lines; BAD on a miss
report() {
    awk -v what="$1" '{ ok = $2 == $3 && $4 == 0 && $3 > 0
        printf "%-58s %5d %12.3f %12.3f %+8.2f %s\n", what, $1, $2, $3, $4, ok ? "" : "MISS"
        if (!ok) bad = 1 } END { exit bad }' || BAD=1
}

printf '%-58s %5s %12s %12s %8s\n' "run" "stage" "pred MiB" "meas MiB" "error %"

# 1. the main job, on a port of its own, metrics and checkpoints in $TMP
sed -e "s#\"run/#\"$TMP/#g" -e 's#127.0.0.1:5555#127.0.0.1:5593#' \
    config/examples/local-cpu.toml >"$TMP/main.toml"
if timeout 600 "$COORD" --plan auto "$TMP/main.toml" >"$TMP/main.out" 2>"$TMP/main.err"; then
    awk '/^  memory  stage/ { t = 1; next } t && NF == 4' "$TMP/main.out" |
        report "main job (make run): $(grep -o '^plan [a-z]*' "$TMP/main.out" | tail -1)"
else
    echo "mem_error: the main job failed:"; tail -5 "$TMP/main.err"; BAD=1
fi

# 2. gpp-train on every zoo model
spec_of() {
    case $1 in
    mmt) echo "mmt:branches=2,layers=2,hidden=256,heads=4,seq=16,ffn=1024" ;;
    dlrm) echo "dlrm:dense_branches=2,sparse_branches=2,dense_in=256,hidden=256,dense_layers=2,rows=100000,dim=32,bag=20,top_layers=2" ;;
    candle_uno) echo "candle_uno:branches=3,layers=3,hidden=512,in=256,doses=1,top_layers=2" ;;
    transformer) echo "transformer:layers=4,hidden=256,heads=4,seq=32,ffn=1024" ;;
    case_study) echo "case_study:branches=2,blocks=2,hidden=256,heads=4,seq=32,ffn=1024" ;;
    esac
}
for name in $("$TRAIN" --list-models | awk '/^[a-z_]+ — / { print $1 }'); do
    spec=$(spec_of "$name")
    if [ -z "$spec" ]; then
        echo "mem_error: zoo model '$name' has no size here: add it to spec_of"; BAD=1; continue
    fi
    for opt in adamw sgd; do
        if "$TRAIN" --model "$spec" --optimizer "$opt" --iterations 2 --batch 32 \
            --micro-batch 8 --threads 1 >"$TMP/t.out" 2>"$TMP/t.err"; then
            awk '$1 == "memory:" && $2 == "0" { print $2, $3, $4, $5 }' "$TMP/t.out" |
                report "gpp-train $name $opt"
            grep '^memory_bytes' "$TMP/t.out" | sed 's/^/    /'
        else
            echo "mem_error: gpp-train $name failed: $(tail -1 "$TMP/t.err")"; BAD=1
        fi
    done
done
exit $BAD
