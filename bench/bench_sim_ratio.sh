#!/usr/bin/env bash
# bench_sim_ratio: measured / simulated iteration time of real pipeline
# training on 2 local CPU agents, with the simulator fed this machine's own
# op profile (gpp-train --profile-out, same kernels and thread count as the
# agents). Two plans of a two-branch MMT: the planner's (--plan gpp) and a
# branch-parallel one (each branch on its own agent, the head with branch 1).
# The measured time is the median over the iterations after the first.
# The machine's load moves both figures, so ROUNDS rounds (default 3) each
# profile afresh and run both plans; the last lines give the median ratio.
# Usage: bench_sim_ratio.sh BUILD_DIR [ITERATIONS]
set -euo pipefail
BUILD=${1:?usage: bench_sim_ratio.sh BUILD_DIR [ITERATIONS]}
ITERS=${2:-20}
MODEL="mmt:branches=2,layers=2,hidden=128,heads=4,seq=32,ffn=512"
TMP=$(mktemp -d /tmp/gpp_bench_ratio.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
PORT=$((20000 + ($$ * 11) % 30000))


python3 - "$TMP/branches.json" <<'PY'
import json, sys
w2 = ["F0", "F1", "B0", "F2", "B1", "F3", "B2", "B3"]
w1 = ["F0", "B0", "F1", "B1", "F2", "B2", "F3", "B3"]
st = lambda i, ops, infl, succ: {"id": i, "ops": ops, "devices": 1, "micro_batch": 8, "k": 1,
                                 "inflight": infl, "tps_ms": 1, "mem_bytes": 64 << 20, "succ": succ}
p = {"format": "gpp-plan/1", "planner": "gpp", "model": {"name": "mmt", "ops": 39}, "devices": 2,
     "batch": 32, "micro_batch": 8, "depth": 2, "bottleneck_tps_ms": 1, "iteration_ms": 0,
     "throughput": 0, "search_ms": 0,
     "stages": [st(0, list(range(0, 18)), 16, [1]), st(1, list(range(18, 39)), 8, [])],
     "schedule": [w2, w1]}
json.dump(p, open(sys.argv[1], "w"))
PY

echo "cores: $(nproc); load average: $(cut -d' ' -f1-3 /proc/loadavg); model $MODEL, batch 32, 2 agents"
ROUNDS=${ROUNDS:-3}
printf "%-6s %-10s %-8s %12s %12s %8s\n" round plan stages "measured ms" "simulated ms" ratio
: >"$TMP/ratios"
for round in $(seq "$ROUNDS"); do
"$BUILD/agent/exec/gpp-train" --model "$MODEL" --profile-out "$TMP/profile.json" \
    --profile-max-mb 32 --threads 1 >/dev/null 2>"$TMP/profile.err" || { cat "$TMP/profile.err"; exit 1; }
for plan in gpp "$TMP/branches.json"; do
    PORT=$((PORT + 2))
    cat >"$TMP/c.toml" <<TOML
[coordinator]
endpoint = "tcp://127.0.0.1:$PORT"
store = "127.0.0.1:$((PORT + 1))"
[cluster]
device = "cpu"
profile = "$TMP/profile.json"
mem_gib = 4
[[nodes]]
host = "127.0.0.1"
slots = 2
[job]
model = "$MODEL"
batch = 32
iterations = $ITERS
launch = "local"
[health]
heartbeat_ms = 500
timeout_ms = 20000
TOML
    "$BUILD/coordinator/gpp-coordinator" --plan "$plan" --metrics "$TMP/m.jsonl" "$TMP/c.toml" \
        >"$TMP/out" 2>"$TMP/err" || { tail -5 "$TMP/err"; exit 1; }
    sim=$(sed -n 's/^  simulated iteration \([0-9.]*\) ms.*/\1/p' "$TMP/out" | head -1)
    stages=$(sed -n 's/^plan .*: \([0-9]*\) stages\?, .*/\1/p' "$TMP/out" | head -1)
    med=$(python3 -c "
import json, statistics, sys
t = [d['iteration_ms'] for d in map(json.loads, open(sys.argv[1])) if 'iteration_ms' in d][1:]
print('%.2f' % statistics.median(t))" "$TMP/m.jsonl")
    name=$([ "$plan" = gpp ] && echo "gpp (auto)" || echo "branches")
    ratio=$(python3 -c "print('%.2f' % ($med / $sim))")
    printf "%-6s %-10s %-8s %12s %12s %8s\n" "$round" "$name" "$stages" "$med" "$sim" "$ratio"
    echo "$name $ratio" >>"$TMP/ratios"
done
done
python3 - "$TMP/ratios" <<'PY'
import statistics, sys
r = {}
for line in open(sys.argv[1]):
    name, x = line.rsplit(" ", 1)
    r.setdefault(name, []).append(float(x))
for name, xs in r.items():
    print("median measured/simulated, %-10s %.2f  (rounds: %s)" % (name, statistics.median(xs),
          " ".join("%.2f" % x for x in xs)))
PY
