#!/usr/bin/env bash
# zb_train: 4 local CPU agents run zero-bubble schedules. gpp-plan writes
# the same 4-stage plan (stages, micro-batches) under 1f1b, zb-h1 and
# zb-h2; the coordinator trains each plan file, and the job with
# job.schedule = "zb-h1" plans and trains it itself: every run ends with the
# same weights sha256 (B then W is the whole backward bit for bit, W passes
# in micro-batch order). The zb-h1 run's measured trace has every rank's
# F, B and W passes in the plan's order, and the summary names the
# schedule. Each stage's measured memory equals the prediction under every
# schedule. Bad input (exit 2, nothing started, the setting named): zb-h1
# in job.schedule or in a plan file for backend = "cuda".
# Usage: zb_train.sh BUILD_DIR
set -u
. "$(dirname "$0")/lib/gpp_test.sh"
gpp_test_begin zb_train "${1:-}"
COORD=$BUILD/coordinator/gpp-coordinator
PLAN=$BUILD/planner/gpp-plan
MODEL="mmt:branches=2,layers=1,hidden=32,heads=2,seq=8,ffn=64"
PY=/usr/bin/python3 # Debian's: the python3 first on PATH may be another
. "$SRC/scripts/blas-env.sh"

# conf NAME [JOB_LINES]: 3 iterations on 4 agents, micro-batch 4
conf() {
    cpu_job_conf "$TMP/$1.toml" 4 3 "$TMP/$1.ckpt" "micro_batch = 4
${2:-}" >/dev/null
    printf '[metrics]\nfile = "%s"\n' "$TMP/$1.jsonl" >>"$TMP/$1.toml"
    echo "$TMP/$1.toml"
}
digest() { sed -n 's/^weights sha256 \([0-9a-f]\{64\}\)$/\1/p' "$1"; }

# 1. one plan under the three schedules
C=$(conf plan)
for s in 1f1b zb-h1 zb-h2; do
    "$PLAN" --cluster "$C" --batch 16 --micro-batch 4 --schedule "$s" --json "$TMP/$s.json" \
        >"$TMP/plan-$s.out" 2>&1 || fail "gpp-plan --schedule $s" "$(tail -3 "$TMP/plan-$s.out")"
done
if out=$("$PY" - "$TMP" <<'EOF' 2>&1
import json, sys
p = {s: json.load(open("%s/%s.json" % (sys.argv[1], s))) for s in ("1f1b", "zb-h1", "zb-h2")}
key = lambda q: [(s["ops"], s["devices"], s["micro_batch"]) for s in q["stages"]]
assert len(p["1f1b"]["stages"]) == 4
assert key(p["1f1b"]) == key(p["zb-h1"]) == key(p["zb-h2"]), "the schedules' plans differ"
assert p["zb-h1"]["schedule_kind"] == "zb-h1" and p["zb-h2"]["schedule_kind"] == "zb-h2"
assert any("W" in t for o in p["zb-h1"]["schedule"] for t in o)
print("4 stages, micro-batch 4, the same under 1f1b, zb-h1 and zb-h2")
EOF
); then ok "plans: $out"; else fail "plans" "$out"; fi

# 2. the three plan files trained: one digest
for s in 1f1b zb-h1 zb-h2; do
    T=()
    [ "$s" = zb-h1 ] && T=(--trace "$TMP/trace.json")
    C=$(conf "run-$s")
    timeout 120 "$COORD" --plan "$TMP/$s.json" "${T[@]}" "$C" >"$TMP/$s.out" 2>"$TMP/$s.err"
    rc=$?
    d=$(digest "$TMP/$s.out")
    if [ $rc = 0 ] && [ -n "$d" ] && grep -q "^  simulated iteration .*, schedule $s$" "$TMP/$s.out"; then
        ok "$s plan file: trained, schedule named, weights sha256 $d"
    else
        fail "$s plan file (rc $rc)" "$(tail -4 "$TMP/$s.out")" "$(grep -v OpenBLAS "$TMP/$s.err" | tail -5)"
    fi
done
ref=$(digest "$TMP/1f1b.out")
if [ -n "$ref" ] && [ "$(digest "$TMP/zb-h1.out")" = "$ref" ] && [ "$(digest "$TMP/zb-h2.out")" = "$ref" ]; then
    ok "1f1b, zb-h1 and zb-h2: the same weights sha256"
else
    fail "digests differ: 1f1b $ref zb-h1 $(digest "$TMP/zb-h1.out") zb-h2 $(digest "$TMP/zb-h2.out")"
fi

# 2b. memory: each stage's measured device peak equals the coordinator's
#     prediction to the byte under every schedule (the agents allocate the
#     order's memory plan, W passes included); bytes from the metrics file
for s in 1f1b zb-h1 zb-h2; do
    pairs=$(grep '"iteration":' "$TMP/run-$s.jsonl" | tail -1 |
        grep -o '"mem_predicted_bytes":[0-9]*,"mem_measured_bytes":[0-9]*' | tr -c '0-9\n' ' ')
    if [ "$(echo "$pairs" | grep -c .)" = 4 ] &&
        echo "$pairs" | awk '{ if (!($1 > 0) || $1 != $2) bad = 1 } END { exit bad }'; then
        ok "$s memory: predicted = measured on 4 stages ($(echo "$pairs" | awk '{ printf "%s%s", s, $2; s = " " }') bytes)"
    else
        fail "$s memory: predicted != measured" "$pairs"
    fi
done

# 3. the measured trace: every rank's passes in the plan's order, W included
if out=$("$PY" - "$TMP/trace.json" "$TMP/zb-h1.json" <<'EOF' 2>&1
import json, sys
t, plan = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
S = len(plan["stages"])
meas = [e for e in t["traceEvents"] if e["ph"] == "X" and e["pid"] < S]
n_w = 0
for s in range(S):
    row = sorted((e for e in meas if e["pid"] == s and e["tid"] == 0), key=lambda e: e["ts"])
    passes = [e["name"] for e in row if e["name"][0] in "FBW" and e["name"][1:].isdigit()]
    assert passes == plan["schedule"][s], (s, passes, plan["schedule"][s])
    n_w += sum(p[0] == "W" for p in passes)
print("%d stages, %d measured W passes in the plan's order" % (S, n_w))
EOF
); then ok "trace: $out"; else fail "trace" "$out"; fi

# 4. job.schedule = "zb-h1": the coordinator plans zb-h1 itself
C=$(conf sched 'schedule = "zb-h1"')
timeout 120 "$COORD" --plan gpp "$C" >"$TMP/sched.out" 2>"$TMP/sched.err"; rc=$?
if [ $rc = 0 ] && grep -q "^  simulated iteration .*, schedule zb-h1$" "$TMP/sched.out" &&
    [ "$(digest "$TMP/sched.out")" = "$ref" ]; then
    ok "job.schedule = \"zb-h1\": planned and trained, the same weights sha256"
else
    fail "job.schedule zb-h1 (rc $rc)" "$(tail -4 "$TMP/sched.out")" "$(grep -v OpenBLAS "$TMP/sched.err" | tail -5)"
fi

# 5. bad input: zero-bubble for the cuda backend (no split backward)
cuda() { # cuda NAME [JOB_LINES]: conf NAME on a GPU preset with backend cuda
    local c
    c=$(conf "$1" "${2:-}")
    sed -i -e 's/^device = "cpu"/device = "a100-80g"/' -e 's/^launch = .*/&\nbackend = "cuda"/' "$c"
    echo "$c"
}
expect_fail "job.schedule zb-h1 on cuda" "job.schedule = \"zb-h1\": the cuda backend has no split backward (B and W passes); use schedule = \"1f1b\" or \"auto\", or backend = \"cpu\"" \
    timeout 30 "$COORD" --plan gpp "$(cuda cu1 'schedule = "zb-h1"')"
expect_fail "zb-h1 plan file on cuda" "plan $TMP/zb-h1.json: schedule_kind \"zb-h1\": the cuda backend has no split backward" \
    timeout 30 "$COORD" --plan "$TMP/zb-h1.json" "$(cuda cu2)"
if [ ! -e "$TMP/cu1.ckpt" ] && [ ! -e "$TMP/cu2.ckpt" ]; then
    ok "refused before anything was written"
else
    fail "a refused job wrote its checkpoint directory"
fi
gpp_test_end
