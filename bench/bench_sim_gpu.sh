#!/usr/bin/env bash
# bench_sim_gpu: measured / simulated iteration time of single-GPU training
# with the simulator fed a GPU profile (issue 10: <= 1.10). For each model
# and precision:
#   1. profile it on the GPU: gpp-train --profile-out P --backend cuda
#      --precision PREC --batch B --data D (every op's forward and backward
#      device time, CUDA events, micro-batch 1, 2, 4, .. B as far as the
#      profiling budget allows). An input or loss op's time includes
#      reading its samples or labels from the data source, as in training:
#      both steps read the same dataset file D, written beforehand (with
#      the synthetic source the host generates inputs and teacher labels,
#      which on a GPU takes longer than the model's kernels; measured
#      2026-11-24 on an H100: 60 of 68 ms of a CANDLE-Uno profile);
#   2. plan it for one device with that profile: gpp-plan --profile P
#      --devices 1 --device PRESET --batch B --optimizer adamw, and read the
#      plan's micro-batch and simulated iteration time;
#   3. train it: gpp-train --backend cuda --precision PREC --batch B
#      --micro-batch <the plan's> --data <a dataset written beforehand, so
#      input generation on the host is not timed>, WARMUP untimed and ITERS
#      timed iterations; measured = the median iteration time (batch /
#      samples/s of each iteration);
#   4. print measured / simulated;
#   5. after the table: where each profile's step time goes, per kind of op
#      and the slowest ops, at the plan's micro-batch
#      (bench/profile_breakdown.py; skipped without a python3).
# PRESET (the device preset for the optimizer step and for micro-batch
# sizes the profile did not time) follows the profile's device name:
# H100 -> h100-80g, H200 -> h200-141g, A100 -> a100-80g, V100 -> v100-32g;
# set PRESET to override.
#
# Needs only the build folder (no network, no python). Exit status 77
# without a usable GPU (nothing measured), 1 when a step failed, 0
# otherwise (the ratios are printed, not judged: the target is reported).
#
# usage: bench/bench_sim_gpu.sh [BUILD_DIR]
#   env: WARMUP (3), ITERS (10), PRECISIONS ("fp32 bf16"), PRESET,
#        MODELS (newline-separated "SPEC BATCH" entries; default below),
#        KEEP (a folder: keep each run's profile, plan and training output
#        there as <n>-<precision>.{json,plan,train})
set -u
BUILD=${1:-build}
WARMUP=${WARMUP:-3}
ITERS=${ITERS:-10}
PRECISIONS=${PRECISIONS:-fp32 bf16}
TRAIN=$BUILD/agent/exec/gpp-train
PLAN=$BUILD/planner/gpp-plan
for b in "$TRAIN" "$PLAN"; do
    [ -x "$b" ] || { echo "bench_sim_gpu: no $b; build first" >&2; exit 2; }
done
DEFAULT_MODELS="mmt:branches=2,layers=2,hidden=128,heads=4,seq=32,ffn=512,classes=16 32
mmt:branches=2,layers=4,hidden=1024,heads=16,seq=256,ffn=4096,classes=16 16
candle_uno:branches=7,layers=4,hidden=4096,in=4096,doses=1,top_layers=2 256"
MODELS=${MODELS:-$DEFAULT_MODELS}

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "bench_sim_gpu: SKIPPED: no usable GPU (nvidia-smi finds none)"
    exit 77
fi
TMPD=$(mktemp -d)
trap 'rm -rf "$TMPD"' EXIT

preset_of() { # device name -> preset
    case $1 in
    *H200*) echo h200-141g ;;
    *H100*) echo h100-80g ;;
    *A100*) echo a100-80g ;;
    *V100*) echo v100-32g ;;
    *) echo "" ;;
    esac
}

echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1); commit $(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null || echo unknown)"
echo "# warmup $WARMUP, timed $ITERS iterations (median); AdamW; one GPU"
printf '| model | batch | precision | preset | plan micro-batch | profiled sizes | simulated ms | measured ms | measured / simulated |\n'
printf '|---|---|---|---|---|---|---|---|---|\n'
status=0
n=0
BREAKDOWNS=()
[ -n "${KEEP:-}" ] && mkdir -p "$KEEP"
while read -r spec batch; do
    [ -n "$spec" ] || continue
    n=$((n + 1))
    "$TRAIN" --model "$spec" --write-dataset "$TMPD/ds.bin" --samples $((batch * (WARMUP + ITERS))) \
        >/dev/null 2>"$TMPD/ds.err" || { sed 's/^/# dataset: /' "$TMPD/ds.err"; status=1; continue; }
    for prec in $PRECISIONS; do
        if ! "$TRAIN" --model "$spec" --batch "$batch" --backend cuda --precision "$prec" \
            --data "$TMPD/ds.bin" --no-shuffle --profile-out "$TMPD/p.json" \
            >"$TMPD/prof.out" 2>"$TMPD/prof.err"; then
            if grep -qE 'no usable GPU|built without CUDA|CUDA device\(s\) visible' "$TMPD/prof.err"; then
                echo "bench_sim_gpu: SKIPPED: $(tail -1 "$TMPD/prof.err")"
                exit 77
            fi
            sed 's/^/# profile: /' "$TMPD/prof.err" | tail -3
            status=1
            continue
        fi
        # "wrote profile of SPEC (N ops, micro-batch 1..M) on DEVICE (cuda:0, PREC) to FILE"
        sizes=$(sed -n 's/^wrote profile of .*micro-batch \(1\.\.[0-9]*\)).*/\1/p' "$TMPD/prof.out")
        dev=$(sed -n 's/^wrote profile of .*) on \(.*\) (cuda:[0-9]*, .*/\1/p' "$TMPD/prof.out")
        preset=${PRESET:-$(preset_of "$dev")}
        if [ -z "$preset" ]; then
            echo "# no preset for device '$dev'; set PRESET=h100-80g|h200-141g|a100-80g|v100-32g"
            status=1
            continue
        fi
        if ! "$PLAN" --profile "$TMPD/p.json" --devices 1 --gpus-per-node 1 --device "$preset" \
            --batch "$batch" --optimizer adamw >"$TMPD/plan.out" 2>"$TMPD/plan.err"; then
            sed 's/^/# plan: /' "$TMPD/plan.err" | tail -3
            status=1
            continue
        fi
        mb=$(sed -n 's/^micro-batch  *\([0-9]*\)$/\1/p' "$TMPD/plan.out" | head -1)
        sim=$(sed -n 's/^simulated  *\([0-9.]*\) ms\/iteration.*/\1/p' "$TMPD/plan.out" | head -1)
        if [ -z "$mb" ] || [ -z "$sim" ]; then
            echo "# plan: no micro-batch or simulated time in gpp-plan's output"
            sed 's/^/# plan: /' "$TMPD/plan.out" | tail -5
            status=1
            continue
        fi
        "$TRAIN" --model "$spec" --batch "$batch" --micro-batch "$mb" --backend cuda \
            --precision "$prec" --iterations $((WARMUP + ITERS)) --data "$TMPD/ds.bin" --no-shuffle \
            >"$TMPD/train.out" 2>"$TMPD/train.err"
        if [ -n "${KEEP:-}" ]; then
            cp "$TMPD/p.json" "$KEEP/$n-$prec.json"
            cp "$TMPD/plan.out" "$KEEP/$n-$prec.plan"
            cat "$TMPD/train.out" "$TMPD/train.err" >"$KEEP/$n-$prec.train"
        fi
        meas=$(sed -n 's/^iter=.*samples\/s=\([0-9.]*\).*/\1/p' "$TMPD/train.out" |
            awk -v w="$WARMUP" -v b="$batch" 'NR > w { t[n++] = 1000 * b / $1 }
                END { if (!n) { print "fail"; exit }
                      for (i = 0; i < n; i++) for (j = i + 1; j < n; j++)
                          if (t[j] < t[i]) { x = t[i]; t[i] = t[j]; t[j] = x }
                      printf "%.3f\n", n % 2 ? t[int(n / 2)] : (t[n / 2 - 1] + t[n / 2]) / 2 }')
        if [ "$meas" = fail ] || [ -z "$meas" ]; then
            sed 's/^/# train: /' "$TMPD/train.err" | tail -3
            status=1
            continue
        fi
        cp "$TMPD/p.json" "$TMPD/keep-$n-$prec.json"
        BREAKDOWNS+=("$TMPD/keep-$n-$prec.json $mb")
        awk -v s="$spec" -v b="$batch" -v p="$prec" -v ps="$preset" -v mb="$mb" -v sz="$sizes" \
            -v sim="$sim" -v m="$meas" 'BEGIN {
            printf "| `%s` | %d | %s | %s | %d | %s | %.3f | %.3f | %.3f |\n", s, b, p, ps, mb, sz, sim, m, m / sim }'
    done
    rm -f "$TMPD/ds.bin"
done <<<"$MODELS"
echo "# target (issue 10): measured / simulated <= 1.10"
PY=$(command -v python3 || true)
for b in "${BREAKDOWNS[@]}"; do
    [ -n "$PY" ] || { echo "# no python3: per-op breakdowns skipped"; break; }
    set -- $b
    echo
    "$PY" "$(dirname "$0")/profile_breakdown.py" "$1" "$2" --top 6 || status=1
done
exit $status
