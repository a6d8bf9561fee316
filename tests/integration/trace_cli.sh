#!/usr/bin/env bash
# trace_cli: gpp-coordinator --trace FILE on a small CPU job of 4 local
# agents — the Chrome trace holds every rank's measured actions of the
# traced iteration (as many as its lowered list, the durations it reported
# in the metrics file, the plan's compute order, W passes included when
# auto picks a zero-bubble schedule) on one time axis starting
# at 0, no overlap within a row, the simulated stages beside them, and
# clock offsets within the round trips' error for agents on this host; the
# summary line; --trace-iteration; bad input (unwritable path, a directory,
# an iteration not run, --control-only) refused with exit 2 before any
# agent starts.
# Usage: trace_cli.sh BUILD_DIR
set -u
. "$(dirname "$0")/lib/gpp_test.sh"
gpp_test_begin trace_cli "${1:-}"
COORD=$BUILD/coordinator/gpp-coordinator
MODEL="mmt:branches=2,layers=1,hidden=32,heads=2,seq=8,ffn=64"
PY=/usr/bin/python3 # Debian's: the python3 first on PATH may be another

C=$(cpu_job_conf "$TMP/job.toml" 4 3 "$TMP/ckpt" "micro_batch = 4")
printf '[metrics]\nfile = "%s"\n' "$TMP/m.jsonl" >>"$C"

# 1. the default: the last iteration (2)
timeout 120 "$COORD" --plan gpp --trace "$TMP/t.json" "$C" >"$TMP/1.out" 2>"$TMP/1.err"; rc=$?
line=$(grep '^trace: ' "$TMP/1.out")
if [ $rc = 0 ] && echo "$line" | grep -q "^trace: iteration 2 measured [0-9.]* ms, simulated [0-9.]* ms (x[0-9.]*); bubble measured/simulated: s0 [0-9]*%/[0-9]*%.* 4 of 4 ranks -> $TMP/t.json$"; then
    ok "summary: $line"
else
    fail "trace run (rc $rc)" "$line"; tail -5 "$TMP/1.out"; grep -v OpenBLAS "$TMP/1.err" | tail -8
fi

if out=$("$PY" - "$TMP/t.json" "$TMP/m.jsonl" "$TMP/ckpt/plan.json" 2 <<'EOF' 2>&1
import json, sys
t = json.load(open(sys.argv[1]))
it = int(sys.argv[4])
rows = [json.loads(l) for l in open(sys.argv[2]) if '"agents"' in l]
agents = [r for r in rows if r["iteration"] == it][0]["agents"]
plan = json.load(open(sys.argv[3]))
S = len(plan["stages"])
ev = t["traceEvents"]
names = {e["pid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
for s in range(S):
    assert names.get(s) == "measured stage %d" % s, names
    assert names.get(S + s) == "simulated stage %d" % s, names
spans = [e for e in ev if e["ph"] == "X"]
meas = [e for e in spans if e["pid"] < S]
sim = [e for e in spans if S <= e["pid"] < 2 * S]
assert len(meas) + len(sim) == len(spans)
assert {e["pid"] for e in sim} == set(range(S, 2 * S)), "a simulated stage without spans"
assert t["otherData"]["iteration"] == it
assert min(e["ts"] for e in meas) == 0 and all(e["ts"] >= 0 and e["dur"] >= 0 for e in meas)
n_rows = 0
for a in agents:
    row = sorted((e for e in meas if e["pid"] == a["stage"] and e["tid"] == a["replica"]),
                 key=lambda e: e["ts"])
    # one span per action of the rank's lowered list, with the reported time
    assert len(row) == len(a["action_ms"]), (a["rank"], len(row), len(a["action_ms"]))
    for e, ms in zip(row, a["action_ms"]):
        assert abs(e["dur"] - 1000 * ms) <= max(2, 0.002 * e["dur"]), (e, ms)
    for x, y in zip(row, row[1:]):
        assert x["ts"] + x["dur"] <= y["ts"], ("overlap", a["rank"], x, y)
    if a["replica"] == 0:
        # F, B and (under a zero-bubble plan) W passes, as the plan orders them
        fb = [e["name"] for e in row if e["name"][0] in "FBW" and e["name"][1:].isdigit()]
        assert fb == plan["schedule"][a["stage"]], (fb, plan["schedule"][a["stage"]])
    n_rows += 1
assert n_rows == len(agents) == plan["devices"] or n_rows == sum(s["devices"] for s in plan["stages"])
assert all(e["name"] in ("ALLREDUCE", "STEP") or e["name"][0] in "FBW" or
           e["name"].startswith(("send ", "recv ")) for e in meas)
# one host, one CLOCK_MONOTONIC: each offset is within its round trip's error
off, dly = t["otherData"]["clock_offset_us"], t["otherData"]["clock_delay_us"]
assert len(off) == len(dly) == n_rows
for o, d in zip(off, dly):
    assert o is not None and abs(o) <= d / 2 + 1 and abs(o) < 5000, (o, d)
print("%d ranks, %d measured and %d simulated spans, offsets %s us" % (n_rows, len(meas), len(sim), off))
EOF
); then
    ok "trace: $out"
else
    fail "trace contents" "$out"
fi

# 2. --trace-iteration picks another; the file is replaced
C2=$(cpu_job_conf "$TMP/job2.toml" 2 3 "$TMP/ckpt2" "micro_batch = 4")
timeout 120 "$COORD" --plan gpp --trace "$TMP/t.json" --trace-iteration 0 "$C2" \
    >"$TMP/2.out" 2>"$TMP/2.err"; rc=$?
if [ $rc = 0 ] && grep -q '^trace: iteration 0 measured' "$TMP/2.out" &&
    "$PY" -c 'import json,sys; assert json.load(open(sys.argv[1]))["otherData"]["iteration"] == 0' "$TMP/t.json"; then
    ok "--trace-iteration 0"
else
    fail "--trace-iteration 0 (rc $rc)"; grep -v OpenBLAS "$TMP/2.err" | tail -5
fi

# 3. bad input: refused before any agent starts, exit 2, naming the path
expect_fail "unwritable --trace" "--trace $TMP/no/such/dir/t.json: cannot write there" \
    "$COORD" --plan gpp --trace "$TMP/no/such/dir/t.json" "$C"
grep -q "launched" "$TMP/err" && fail "agents launched for an unwritable trace" || ok "no agent launched"
expect_fail "--trace a directory" "--trace $TMP: is a directory" "$COORD" --plan gpp --trace "$TMP" "$C"
C3=$(cpu_job_conf "$TMP/job3.toml" 2 3 "$TMP/ckpt3" "micro_batch = 4")
expect_fail "--trace-iteration past the run" "--trace-iteration 7: this run trains iterations 0..2" \
    "$COORD" --plan gpp --trace "$TMP/t2.json" --trace-iteration 7 "$C3"
expect_fail "--trace with --control-only" "--trace needs a training job" \
    "$COORD" --control-only --trace "$TMP/t2.json" "$C"
expect_fail "--trace-iteration alone" "--trace-iteration goes with --trace" \
    "$COORD" --plan gpp --trace-iteration 1 "$C"
[ ! -e "$TMP/t2.json" ] && ok "nothing written on refusal" || fail "a trace written on refusal"

gpp_test_end
