#!/usr/bin/env bash
# fault_ckpt_kill: a real job (coordinator + 3 local CPU agents, checkpoint
# sets every 2 iterations) whose checkpoint writers are killed by SIGKILL in
# the middle of their second save (GPP_FAULT=ckpt_kill:1, gpp_fault.h): the
# job stops with an error, set 2 stays complete and byte-identical to a
# fault-free run's, set 4 has no manifest and is never the newest complete
# set, and the metrics lines written before the kill are intact. A start
# with --resume in the same directory removes the killed writers' temp
# files, resumes from set 2 and runs to the end with the fault-free run's
# sets 4 and 6, byte for byte, and prints the fault-free run's weights
# digest.
# Usage: fault_ckpt_kill.sh BUILD_DIR
set -u
. "$(dirname "$0")/../integration/lib/gpp_test.sh"
gpp_test_begin fault_ckpt_kill "${1:-}"
COORD=$BUILD/coordinator/gpp-coordinator
MODEL="mmt:branches=2,layers=1,hidden=32,heads=2,seq=8,ffn=64"

# $1 name, $2 sets kept: 3 agents, 6 iterations, a set every 2, metrics
# in $TMP/$1.jsonl
mkconf() {
    cpu_job_conf "$TMP/$1.toml" 3 6 "$TMP/$1.ckpt" "micro_batch = 4
checkpoint_interval = 2
checkpoint_keep = $2" >/dev/null
    printf '[metrics]\nfile = "%s"\n' "$TMP/$1.jsonl" >>"$TMP/$1.toml"
    echo "$TMP/$1.toml"
}
set_of() { printf '%s/%s.ckpt/set-%010d' "$TMP" "$1" "$2"; }
same_stages() { # same_stages RUN_A RUN_B SET: every stage file of A's set equal to B's
    local n=0 f
    for f in "$(set_of "$1" "$3")"/stage*.ckpt; do
        cmp -s "$f" "$(set_of "$2" "$3")/$(basename "$f")" || return 1
        n=$((n + 1))
    done
    [ "$n" -ge 1 ]
}

# 1. the fault-free reference, every set kept
timeout 120 "$COORD" --plan gpp "$(mkconf ref 3)" >"$TMP/ref.out" 2>"$TMP/ref.err"; rc=$?
if [ $rc = 0 ] && [ -f "$(set_of ref 2)/MANIFEST.json" ] && [ -f "$(set_of ref 4)/MANIFEST.json" ] &&
    [ -f "$(set_of ref 6)/MANIFEST.json" ]; then
    ok "fault-free run: sets 2, 4 and 6 committed"
else
    fail "fault-free run (rc $rc)"; grep -v OpenBLAS "$TMP/ref.err" | tail -10
fi

# 2. the writers killed during the save of set 4
C=$(mkconf kill 2)
GPP_FAULT=ckpt_kill:1 timeout 120 "$COORD" --plan gpp "$C" >"$TMP/kill.out" 2>"$TMP/kill.err"; rc=$?
tmps=$(find "$TMP/kill.ckpt" -name '*.tmp.*' | wc -l)
if [ $rc != 0 ] && grep -q "ckpt_kill: killing pid" "$TMP/kill.err" &&
    [ -f "$(set_of kill 2)/MANIFEST.json" ] && [ ! -f "$(set_of kill 4)/MANIFEST.json" ] &&
    [ "$tmps" -ge 1 ]; then
    ok "killed during save: job stopped (rc $rc), set 2 complete, set 4 without manifest, $tmps temp files left"
else
    fail "killed during save (rc $rc, $tmps temp files)"; grep -v OpenBLAS "$TMP/kill.err" | tail -10
fi
# (the manifests differ: plan.json records the planner's search time)
if same_stages kill ref 2; then
    ok "set 2 after the kill: stage files byte-identical to the fault-free run's"
else
    fail "set 2 after the kill differs from the fault-free run's"
fi
lines=$(wc -l <"$TMP/kill.jsonl" 2>/dev/null || echo 0)
if [ "$lines" -ge 2 ] && python3 -c '
import json, sys
for i, l in enumerate(open(sys.argv[1])):
    assert json.loads(l)["iteration"] == i
' "$TMP/kill.jsonl"; then
    ok "metrics before the kill intact ($lines lines)"
else
    fail "metrics after the kill ($lines lines)"; cat "$TMP/kill.jsonl"
fi

# 3. --resume in the same directory: temp files removed, resumes from set 2
# and runs to the end
timeout 120 "$COORD" --resume --plan gpp "$C" >"$TMP/again.out" 2>"$TMP/again.err"; rc=$?
tmps=$(find "$TMP/kill.ckpt" -name '*.tmp.*' | wc -l)
if [ $rc = 0 ] && [ "$tmps" = 0 ] && grep -q "left by a save that was cut short" "$TMP/again.err" &&
    same_stages kill ref 6 && same_stages kill ref 4 && [ ! -e "$(set_of kill 2)" ]; then
    ok "--resume: stale temp files removed, sets 4 and 6 byte-identical to the fault-free run's, set 2 pruned (keep 2)"
else
    fail "restart (rc $rc, $tmps temp files)"; grep -v OpenBLAS "$TMP/again.err" | tail -10
fi
# 4. the weights digest: the fault-free run and the restarted one end with
# the same weights (set 6 above), so they print the same digest, also in
# the metrics file
da=$(sed -n 's/^weights sha256 \([0-9a-f]\{64\}\)$/\1/p' "$TMP/ref.out")
db=$(sed -n 's/^weights sha256 \([0-9a-f]\{64\}\)$/\1/p' "$TMP/again.out")
if [ -n "$da" ] && [ "$da" = "$db" ] && grep -q "^{\"weights_sha256\":\"$da\"}$" "$TMP/ref.jsonl"; then
    ok "both runs print weights sha256 $da (and the metrics file has it)"
else
    fail "weights digests '$da' vs '$db'"; tail -3 "$TMP/ref.out" "$TMP/ref.jsonl"
fi
gpp_test_end
