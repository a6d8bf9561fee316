#!/usr/bin/env bash
# resume: gpp-coordinator --resume continues a killed job from its newest
# complete checkpoint set, and ends with the same weights as a job that was
# never killed. A job of 6 iterations (3 local CPU agents, a set every 2
# iterations) whose agents SIGKILL themselves in the middle of the save of
# set 6 (GPP_FAULT=ckpt_kill:2, gpp_fault.h) leaves set 4 as the newest
# complete set. Then:
#   - a start without --resume in that directory is refused (exit 2, naming
#     the directory, --resume and a new directory) and changes nothing;
#   - --resume with another plan is refused naming both plans;
#   - --resume runs iterations 5-6 from set 4, prints the fault-free run's
#     weights digest and commits a set 6 byte-identical to the fault-free
#     run's; the metrics file keeps the killed run's lines and goes on;
#   - --resume of the finished job prints its weights digest (recorded in
#     the last set's manifest) and exits 0; of a directory without a set
#     it is refused (exit 2);
#   - with --max-restarts the coordinator restarts the killed agents itself
#     from set 4 and ends with the fault-free weights; a fault in every
#     attempt stops the job after the bounded number of restarts;
#   - a coordinator SIGKILLed with its agents mid-job is continued by
#     --resume to the fault-free run's weights.
# Usage: resume.sh BUILD_DIR
set -u
. "$(dirname "$0")/../integration/lib/gpp_test.sh"
gpp_test_begin resume "${1:-}"
COORD=$BUILD/coordinator/gpp-coordinator
MODEL="mmt:branches=2,layers=1,hidden=32,heads=2,seq=8,ffn=64"

# $1 name, $2 micro-batch, $3 checkpoint dir name: 3 agents, 6 iterations, a
# set every 2, every set kept, metrics in $TMP/$3.jsonl
mkconf() {
    cpu_job_conf "$TMP/$1.toml" 3 6 "$TMP/$3.ckpt" "micro_batch = $2
checkpoint_interval = 2
checkpoint_keep = 3" >/dev/null
    printf '[metrics]\nfile = "%s"\n' "$TMP/$3.jsonl" >>"$TMP/$1.toml"
    echo "$TMP/$1.toml"
}
set_of() { printf '%s/%s.ckpt/set-%010d' "$TMP" "$1" "$2"; }
digest() { sed -n 's/^weights sha256 \([0-9a-f]\{64\}\)$/\1/p' "$1"; }
# every file but the temp files of the killed save (garbage a start removes)
tree_sum() { (cd "$1" && find . -type f ! -name '*.tmp.*' | sort | xargs sha256sum); }

# 1. the fault-free reference
timeout 120 "$COORD" --plan gpp "$(mkconf ref 4 ref)" >"$TMP/ref.out" 2>"$TMP/ref.err"; rc=$?
ref=$(digest "$TMP/ref.out")
if [ $rc = 0 ] && [ -n "$ref" ] && [ -f "$(set_of ref 6)/MANIFEST.json" ]; then
    ok "fault-free run: weights sha256 $ref"
else
    fail "fault-free run (rc $rc)"; grep -v OpenBLAS "$TMP/ref.err" | tail -10
fi

# 2. killed while saving set 6: set 4 is the newest complete set
C=$(mkconf run 4 run)
GPP_FAULT=ckpt_kill:2 timeout 120 "$COORD" --plan gpp "$C" >"$TMP/kill.out" 2>"$TMP/kill.err"; rc=$?
if [ $rc != 0 ] && grep -q "ckpt_kill: killing pid" "$TMP/kill.err" &&
    [ -f "$(set_of run 4)/MANIFEST.json" ] && [ ! -f "$(set_of run 6)/MANIFEST.json" ]; then
    ok "killed during the save of set 6 (rc $rc): set 4 complete, set 6 without manifest"
else
    fail "kill (rc $rc)"; grep -v OpenBLAS "$TMP/kill.err" | tail -10
fi
lines_before=$(wc -l <"$TMP/run.jsonl")

# 3. a fresh start in the same directory: refused, nothing changed
before=$(tree_sum "$TMP/run.ckpt"; sha256sum <"$TMP/run.jsonl")
timeout 60 "$COORD" --plan gpp "$C" >"$TMP/fresh.out" 2>"$TMP/fresh.err"; rc=$?
after=$(tree_sum "$TMP/run.ckpt"; sha256sum <"$TMP/run.jsonl")
if [ $rc = 2 ] && grep -q "job.checkpoint_dir $TMP/run.ckpt holds checkpoint set 4" "$TMP/fresh.err" &&
    grep -q -- "--resume" "$TMP/fresh.err" && grep -q "new directory" "$TMP/fresh.err" &&
    [ "$before" = "$after" ]; then
    ok "start without --resume refused (exit 2), checkpoints and metrics unchanged"
else
    fail "start without --resume (rc $rc)"; tail -3 "$TMP/fresh.err"
fi

# 4. --resume with another plan (micro-batch 2): refused naming both
timeout 60 "$COORD" --resume --plan gpp "$(mkconf other 2 run)" >"$TMP/other.out" \
    2>"$TMP/other.err"; rc=$?
after=$(tree_sum "$TMP/run.ckpt"; sha256sum <"$TMP/run.jsonl")
if [ $rc = 2 ] && grep -q "the plan to run (--plan gpp) differs from the plan of checkpoint set 4 ($(set_of run 4)/plan.json)" "$TMP/other.err" &&
    [ "$before" = "$after" ]; then
    ok "--resume with another plan refused (exit 2), nothing changed"
else
    fail "--resume with another plan (rc $rc)"; tail -3 "$TMP/other.err"
fi
# the same with --plan auto: planned once the agents profiled, refused the
# same way (exit 2, not 1; issue 33, item 10)
timeout 120 "$COORD" --resume --plan auto "$(mkconf other 2 run)" >"$TMP/other2.out" \
    2>"$TMP/other2.err"; rc=$?
if [ $rc = 2 ] && grep -q "differs from the plan of checkpoint set 4" "$TMP/other2.err"; then
    ok "--resume --plan auto with another plan refused (exit 2)"
else
    fail "--resume --plan auto with another plan (rc $rc)"; grep -v OpenBLAS "$TMP/other2.err" | tail -3
fi

# 5. --resume: iterations 5-6 from set 4, the fault-free weights
timeout 120 "$COORD" --resume --plan gpp "$C" >"$TMP/resume.out" 2>"$TMP/resume.err"; rc=$?
got=$(digest "$TMP/resume.out")
if [ $rc = 0 ] && grep -q "resuming from checkpoint set 4" "$TMP/resume.err" &&
    grep -q "^iter 5/6 " "$TMP/resume.out" && grep -q "^iter 6/6 " "$TMP/resume.out" &&
    ! grep -q "^iter [1-4]/6 " "$TMP/resume.out"; then
    ok "--resume ran iterations 5 and 6 only"
else
    fail "--resume (rc $rc)"; grep -v OpenBLAS "$TMP/resume.err" | tail -10
fi
if [ -n "$got" ] && [ "$got" = "$ref" ] && cmp -s "$(set_of run 6)/stage0.ckpt" "$(set_of ref 6)/stage0.ckpt" &&
    cmp -s "$(set_of run 6)/stage1.ckpt" "$(set_of ref 6)/stage1.ckpt"; then
    ok "resumed run: weights sha256 equal to the fault-free run's, set 6 byte-identical"
else
    fail "resumed weights sha256 '$got' vs fault-free '$ref'"
fi
# the killed run's metrics lines stay; the resumed run's follow a marker
if python3 - "$TMP/run.jsonl" "$lines_before" "$ref" <<'EOF'; then
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
before = int(sys.argv[2])
assert [r["iteration"] for r in rows[:before]] == list(range(before)), rows[:before]
assert rows[before] == {"resumed_at_iteration": 4}, rows[before]
assert [r.get("iteration") for r in rows[before + 1:before + 3]] == [4, 5], rows[before + 1:]
assert rows[-1] == {"weights_sha256": sys.argv[3]}, rows[-1]
EOF
    ok "metrics: the killed run's $lines_before lines kept, iterations 4-5 appended after the marker"
else
    fail "metrics file after --resume"; cat "$TMP/run.jsonl"
fi

# 6. nothing left to resume: the finished job, a directory without sets
timeout 60 "$COORD" --resume --plan gpp "$C" >"$TMP/fin.out" 2>"$TMP/fin.err"; rc=$?
if [ $rc = 0 ] && [ "$(digest "$TMP/fin.out")" = "$ref" ] &&
    grep -q "already has all 6 iterations: the job finished" "$TMP/fin.err"; then
    ok "--resume of the finished job: exit 0 with its weights digest (from set 6's manifest)"
else
    fail "--resume of the finished job (rc $rc)" "$(tail -2 "$TMP/fin.err")"
fi
expect_fail "--resume without a set" "holds no complete checkpoint set" \
    timeout 60 "$COORD" --resume --plan gpp "$(mkconf empty 4 empty)"
# 7. --max-restarts: the same kill, and the coordinator itself stops and
# restarts the agents from set 4 (the restarted agents save once: the fault,
# armed for a process's third save, does not fire again)
C=$(mkconf auto 4 auto)
GPP_FAULT=ckpt_kill:2 timeout 120 "$COORD" --max-restarts 1 --plan gpp "$C" >"$TMP/auto.out" \
    2>"$TMP/auto.err"; rc=$?
got=$(digest "$TMP/auto.out")
if [ $rc = 0 ] && grep -q "ckpt_kill: killing pid" "$TMP/auto.err" &&
    grep -q "^restart: agents died; starting them again from checkpoint set 4$" "$TMP/auto.out" &&
    [ "$got" = "$ref" ]; then
    ok "--max-restarts 1: agents killed, restarted from set 4, weights sha256 equal to the fault-free run's"
else
    fail "--max-restarts 1 (rc $rc, weights sha256 '$got')"; grep -v OpenBLAS "$TMP/auto.err" | tail -10
fi
# a fault that fires in every attempt: the restarts are bounded, 2 per slot
# (which of the 3 agents dies first in an attempt varies: 2 to 6 in all)
C=$(mkconf bound 4 bound)
GPP_FAULT=ckpt_kill:0 timeout 120 "$COORD" --max-restarts 2 --plan gpp "$C" >"$TMP/bound.out" \
    2>"$TMP/bound.err"; rc=$?
n=$(grep -c "^restart: agents died" "$TMP/bound.out")
if [ $rc = 1 ] && [ "$n" -ge 2 ] && [ "$n" -le 6 ] &&
    grep -q -- "died after 2 restarts: --max-restarts 2 reached, not restarting" "$TMP/bound.err"; then
    ok "a fault in every attempt: $n restarts, a slot's third death stops the job (rc 1)"
else
    fail "bounded restarts (rc $rc, $n restarts)"; grep -v OpenBLAS "$TMP/bound.err" | tail -10
fi
# 8. SIGKILL of the coordinator and its agents at once, once set 4 is
# committed (a longer job: 300 iterations, so it is still training when the
# kill comes; the assertions hold whichever set is the newest then), then
# --resume: the fault-free run's weights
long() { # long NAME: 300 iterations, a set every 2, the last 2 kept
    cpu_job_conf "$TMP/$1.toml" 3 300 "$TMP/$1.ckpt" "micro_batch = 4
checkpoint_interval = 2" >/dev/null
    echo "$TMP/$1.toml"
}
timeout 300 "$COORD" --plan gpp "$(long lref)" >"$TMP/lref.out" 2>"$TMP/lref.err"
lref=$(digest "$TMP/lref.out")
C=$(long sig)
"$COORD" --plan gpp "$C" >"$TMP/sig.out" 2>"$TMP/sig.err" &
CP=$!
track $CP
# set 4 or a later one: only the last 2 are kept, so set 4 lives for 4
# iterations, which a loaded machine's polling can miss
newest_set() { # newest_set NAME: the highest committed set number, 0 if none
    local m n=0
    for m in "$TMP/$1.ckpt"/set-*/MANIFEST.json; do
        [ -f "$m" ] || continue
        m=${m%/MANIFEST.json}
        m=$((10#${m##*/set-}))
        [ "$m" -gt "$n" ] && n=$m
    done
    echo $n
}
for _ in $(seq 1 3000); do
    [ "$(newest_set sig)" -ge 4 ] && break
    running $CP || break
    sleep 0.01
done
kids=$(pgrep -P $CP || true)
if running $CP; then
    kill -9 $CP $kids 2>/dev/null
    wait $CP 2>/dev/null
    killed=1
else
    killed=0
fi
timeout 300 "$COORD" --resume --plan gpp "$C" >"$TMP/sigres.out" 2>"$TMP/sigres.err"; rc=$?
from=$(sed -n 's/.*resuming from checkpoint set \([0-9]*\) .*/\1/p' "$TMP/sigres.err")
got=$(digest "$TMP/sigres.out")
if [ $killed = 1 ] && [ $rc = 0 ] && [ -n "$from" ] && [ "$from" -ge 4 ] && [ -n "$lref" ] &&
    [ "$got" = "$lref" ]; then
    ok "coordinator and agents SIGKILLed, --resume from set $from: weights sha256 equal to the fault-free run's"
else
    fail "SIGKILL + --resume (killed $killed, rc $rc, from '$from', '$got' vs '$lref')"
    grep -v OpenBLAS "$TMP/sigres.err" | tail -10
fi
gpp_test_end
