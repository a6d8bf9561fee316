#!/usr/bin/env bash
# plan_ablation.sh: where the graph pipeline's gain over the sequential one
# comes from in gpp's planner, in the paper's own three experiments
# (Evaluation: "Different numbers of branches and micro-batch sizes",
# "Ablation study", "Case study"), simulated on v100-16g, 4 GPUs per node,
# AdamW (gpp-plan's "simulated" iteration time, as plan_throughput.sh):
#   1. fixed micro-batch: MMT with four branches, mini-batch 128, 8 GPUs,
#      every micro-batch size b from 1 to 64 imposed on both planners
#      (--micro-batch b): the gain of a shallower pipeline alone;
#   2. ablation at 32 GPUs, the appendix mini-batches: SPP with its best b,
#      "Parallel" (GPP held to SPP's b: parallel stages only) and GPP with
#      its own best b (parallel stages + the micro-batch its memory allows),
#      with each plan's largest stage memory against the 15.5 GiB bound;
#   3. the case-study model (two branches of four attention + two linear
#      blocks) at 8 GPUs, mini-batch 128: best plans and b = 2, 4.
# Prints the markdown tables of BENCHMARKS.md ("Where the gain comes from").
#
#   bench/plan_ablation.sh [BUILD_DIR]     (default: build)
set -euo pipefail
BUILD=${1:-build}
BIN="$BUILD/planner/gpp-plan"
if [ ! -x "$BIN" ]; then
    echo "plan_ablation: $BIN not found; build first: cmake --build $BUILD --target gpp-plan" >&2
    exit 1
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# plan SPEC DEVICES BATCH PLANNER [B_FIXED]
#   -> "iter_ms depth micro_batch stages max_stage_mem_gib"
plan() {
    local out="$TMP/p.json"
    "$BIN" --model "$1" --devices "$2" --device v100-16g --gpus-per-node 4 --batch "$3" \
        --planner "$4" ${5:+--micro-batch "$5"} --json "$out" >/dev/null
    python3 - "$out" <<'EOF'
import json, sys
p = json.load(open(sys.argv[1]))
mem = max(s["mem_bytes"] for s in p["stages"]) / 2**30
print("%.6f %d %d %d %.2f" % (p["iteration_ms"], p["depth"], p["micro_batch"], len(p["stages"]), mem))
EOF
}

ratio() { python3 -c "print('%.2f' % ($1 / $2))"; }

echo "### Fixed micro-batch: MMT (4 branches), mini-batch 128, 8 GPUs"
echo
echo "| micro-batch | micro-batches | GPP sim ms | depth | stages | SPP sim ms | depth | stages | GPP/SPP |"
echo "|---|---|---|---|---|---|---|---|---|"
for b in 1 2 4 8 16 32 64; do
    read -r gi gd _ gs _ <<<"$(plan mmt 8 128 gpp "$b")"
    read -r si sd _ ss _ <<<"$(plan mmt 8 128 spp "$b")"
    echo "| $b | $((128 / b)) | $(printf %.1f "$gi") | $gd | $gs | $(printf %.1f "$si") | $sd | $ss | **$(ratio "$si" "$gi")x** |"
done
echo
echo "### Ablation, 32 GPUs: parallel stages alone, then the micro-batch they allow"
echo
echo "| model | batch | SPP sim ms | SPP b | SPP depth | SPP max stage GiB | Parallel (GPP at SPP's b) sim ms | depth | max stage GiB | GPP sim ms | GPP b | depth | max stage GiB | Parallel/SPP | GPP/SPP |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
for m in "mmt MMT 512" "dlrm DLRM 2048" "candle_uno CANDLE-Uno 32768"; do
    set -- $m
    read -r si sd sb _ sm <<<"$(plan "$1" 32 "$3" spp)"
    read -r pi pd _ _ pm <<<"$(plan "$1" 32 "$3" gpp "$sb")"
    read -r gi gd gb _ gm <<<"$(plan "$1" 32 "$3" gpp)"
    echo "| $2 | $3 | $(printf %.1f "$si") | $sb | $sd | $sm | $(printf %.1f "$pi") | $pd | $pm | $(printf %.1f "$gi") | $gb | $gd | $gm | $(ratio "$si" "$pi")x | **$(ratio "$si" "$gi")x** |"
done
echo
echo "### Case study: two branches of four (attention, linear, ReLU, linear) blocks, 8 GPUs, mini-batch 128"
echo
echo "| micro-batch | GPP sim ms | GPP b | depth | stages | SPP sim ms | SPP b | depth | stages | GPP/SPP |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for b in best 2 4; do
    fix=$b
    [ "$b" = best ] && fix=
    read -r gi gd gb gs _ <<<"$(plan case_study 8 128 gpp "$fix")"
    read -r si sd sb ss _ <<<"$(plan case_study 8 128 spp "$fix")"
    echo "| $b | $(printf %.1f "$gi") | $gb | $gd | $gs | $(printf %.1f "$si") | $sb | $sd | $ss | **$(ratio "$si" "$gi")x** |"
done
