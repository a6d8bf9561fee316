#!/usr/bin/env bash
# zb_runtime: 1f1b against zb-h1 as 4 local CPU agents run them. gpp-plan
# writes one plan (the same stages and micro-batch) under both schedules;
# the coordinator trains each plan file ITERATIONS iterations, ROUNDS times
# in turn (1f1b, zb-h1, 1f1b, ...: the machine's load drifts over both
# alike), with the measured trace of the last iteration. Prints per run the
# median iteration time over the iterations after the first and the weights
# sha256, per schedule the simulated time (gpp-plan) and the median over
# the rounds, the zb-h1 memory table
# (predicted by gpp_zb_stage_mem vs measured), and from the last round's
# traces where the W passes ran (bench/zb_trace.py).
# Usage: zb_runtime.sh BUILD_DIR [ITERATIONS]   (ROUNDS=3)
set -euo pipefail
BUILD=${1:?usage: zb_runtime.sh BUILD_DIR [ITERATIONS]}
ITERS=${2:-20}
ROUNDS=${ROUNDS:-3}
MODEL=${MODEL:-"mmt:branches=2,layers=2,hidden=64,heads=4,seq=16,ffn=256"}
BATCH=32
MICRO=4
SRC=$(cd "$(dirname "$0")/.." && pwd)
TMP=$(mktemp -d /tmp/gpp_bench_zb.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
PY=/usr/bin/python3
. "$SRC/scripts/blas-env.sh"

conf() { # conf NAME: a 4-agent local CPU job writing metrics to NAME.jsonl
    cat >"$TMP/$1.toml" <<EOF
[coordinator]
endpoint = "tcp://127.0.0.1:$("$BUILD/tests/gpp-test-port" 1)"
[cluster]
device = "cpu"
mem_gib = 2
[[nodes]]
host = "127.0.0.1"
slots = 4
[job]
model = "$MODEL"
batch = $BATCH
micro_batch = $MICRO
iterations = $ITERS
launch = "local"
[metrics]
file = "$TMP/$1.jsonl"
EOF
    echo "$TMP/$1.toml"
}

echo "cores: $(nproc); load average: $(cut -d' ' -f1-3 /proc/loadavg); commit $(git -C "$SRC" rev-parse --short HEAD)"
echo "model $MODEL, batch $BATCH, micro-batch $MICRO, 4 CPU agents, $ITERS iterations, $ROUNDS rounds"
for s in 1f1b zb-h1; do
    "$BUILD/planner/gpp-plan" --cluster "$(conf plan)" --batch "$BATCH" --micro-batch "$MICRO" \
        --schedule "$s" --print-schedule --json "$TMP/$s.json" >"$TMP/plan-$s.txt"
done
"$PY" - "$TMP/1f1b.json" "$TMP/zb-h1.json" <<'EOF'
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
key = lambda p: [(s["ops"], s["devices"], s["micro_batch"]) for s in p["stages"]]
assert key(a) == key(b), "the two schedules' plans differ: no like-for-like comparison"
print("plan: %d stages, the same under both schedules; zb-h1 W delays %s" %
      (len(a["stages"]), [s.get("w_delay") for s in b["stages"]]))
EOF
for s in 1f1b zb-h1; do
    printf "%-6s %s\n" "$s" "$(grep '^simulated ' "$TMP/plan-$s.txt")"
done
sed -n '/^schedule (/,$p' "$TMP/plan-zb-h1.txt"

median_iter() { # median_iter METRICS: the median iteration_ms after the first
    "$PY" -c 'import json, statistics, sys
v = [r["iteration_ms"] for r in map(json.loads, open(sys.argv[1])) if "iteration_ms" in r and r.get("iteration", 0) > 0]
print("%.3f" % statistics.median(v))' "$1"
}
printf "%-6s %-6s %14s  %s\n" round sched "median ms/it" "weights sha256"
for r in $(seq "$ROUNDS"); do
    for s in 1f1b zb-h1; do
        C=$(conf "$s-$r")
        "$BUILD/coordinator/gpp-coordinator" --plan "$TMP/$s.json" --trace "$TMP/$s.trace.json" \
            "$C" >"$TMP/$s-$r.out" 2>"$TMP/$s-$r.err" || { tail -20 "$TMP/$s-$r.err"; exit 1; }
        m=$(median_iter "$TMP/$s-$r.jsonl")
        echo "$m" >>"$TMP/$s.medians"
        printf "%-6s %-6s %14s  %s\n" "$r" "$s" "$m" "$(sed -n 's/^weights sha256 //p' "$TMP/$s-$r.out")"
    done
done
for s in 1f1b zb-h1; do
    printf "%-6s median over rounds %.3f ms/iteration\n" "$s" \
        "$(sort -g "$TMP/$s.medians" | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')"
done
echo "zb-h1 memory (round $ROUNDS):"
sed -n '/^  memory  stage/,/^weights/p' "$TMP/zb-h1-$ROUNDS.out" | grep -v '^weights'
echo "1f1b memory (round $ROUNDS):"
sed -n '/^  memory  stage/,/^weights/p' "$TMP/1f1b-$ROUNDS.out" | grep -v '^weights'
"$PY" "$SRC/bench/zb_trace.py" "$TMP/1f1b.trace.json" "$TMP/zb-h1.trace.json" "$TMP/zb-h1.json"
