#!/usr/bin/env bash
# coord_restart: a coordinator that dies is started again and the job goes
# on (issue 12, "Coordinator restart"), as systemd does with
# gpp-coordinator.service (Restart=on-abnormal, --resume=auto) and
# gpp-agent@.service (Restart=on-failure). External agents (started here
# by hand, as systemd or Slurm would), 100 iterations, a set every 2:
#   1. the reference: an uninterrupted job; --resume=auto in an empty
#      directory is a fresh start and says so;
#   2. the coordinator is SIGKILLed mid-run (once iteration 3 is printed);
#      its agents notice
#      the silence and exit 1 (systemd would start them again);
#   3. the coordinator started again with --resume=auto and new agents
#      resumes from the newest complete set and ends with the reference's
#      weights digest; the metrics file keeps the killed run's lines;
#   4. --resume=auto of the finished job prints its weights digest (the
#      last set's manifest) and exits 0: nothing to do.
# Usage: coord_restart.sh BUILD_DIR
set -u
. "$(dirname "$0")/../integration/lib/gpp_test.sh"
gpp_test_begin coord_restart "${1:-}"
COORD=$BUILD/coordinator/gpp-coordinator
AGENT=$BUILD/agent/gpp-agent
MODEL="mmt:branches=2,layers=1,hidden=32,heads=2,seq=8,ffn=64"
ITERS=100

# $1 name: external launch, 2 slots on 127.0.0.1, its own port and directory
mkconf() {
    cpu_job_conf "$TMP/$1.toml" 2 $ITERS "$TMP/$1.ckpt" "checkpoint_interval = 2
checkpoint_keep = 5" >/dev/null
    sed -i -e 's/^launch = "local"$/launch = "external"/; s/^timeout_ms = 3000$/timeout_ms = 1500/' \
        -e 's/^\[coordinator\]$/[coordinator]\ninsecure_plaintext = true/' "$TMP/$1.toml"
    printf '[metrics]\nfile = "%s"\n' "$TMP/$1.jsonl" >>"$TMP/$1.toml"
    echo "$TMP/$1.toml"
}
port_of() { sed -n 's|^endpoint = "tcp://127.0.0.1:\([0-9]*\)"$|\1|p' "$1"; }
# agents CONF TAG: both slots, started by hand; pids in AGENTS
agents() {
    local p s
    p=$(port_of "$1")
    AGENTS=()
    for s in 0 1; do
        "$AGENT" --coordinator "tcp://127.0.0.1:$p" --host 127.0.0.1 --slot $s --threads 1 \
            --mem-bytes 2147483648 --heartbeat-ms 100 --timeout-ms 1500 \
            >"$TMP/$2.a$s.out" 2>"$TMP/$2.a$s.err" &
        AGENTS+=($!)
        track $!
    done
}
digest() { sed -n 's/^weights sha256 \([0-9a-f]\{64\}\)$/\1/p' "$1"; }

# 1. the reference, through --resume=auto on an empty directory
C0=$(mkconf ref)
"$COORD" --plan gpp --resume=auto "$C0" >"$TMP/ref.out" 2>"$TMP/ref.err" &
CP=$!
track $CP
wait_until 20 grep -q "listening on" "$TMP/ref.err"
agents "$C0" ref
bwait $CP 120
rc=$?
ref=$(digest "$TMP/ref.out")
if [ $rc = 0 ] && [ -n "$ref" ] && grep -q "resume=auto: no complete checkpoint set in .*; starting fresh" "$TMP/ref.err"; then
    ok "--resume=auto on an empty directory: a fresh start; weights sha256 $ref"
else
    fail "reference run (rc $rc)" "$(grep -v OpenBLAS "$TMP/ref.err" | tail -5)"
fi

# 2. the coordinator SIGKILLed after iteration 3 (set 2 is complete)
C1=$(mkconf job)
"$COORD" --plan gpp "$C1" >"$TMP/k.out" 2>"$TMP/k.err" &
CP=$!
track $CP
wait_until 20 grep -q "listening on" "$TMP/k.err"
agents "$C1" k
wait_until 60 grep -q "^iter 3/$ITERS " "$TMP/k.out"
kill -KILL $CP
wait $CP 2>/dev/null
lines_before=$(wc -l <"$TMP/job.jsonl")
a_rc=()
for p in "${AGENTS[@]}"; do
    bwait "$p" 20
    a_rc+=($?)
done
# the agent that notices first names the coordinator; the other may see its
# peer close the connection first (which one is a race under load)
if [ "${a_rc[*]}" = "1 1" ] && cat "$TMP"/k.a*.err | grep -q "coordinator" &&
    ! grep -q "^iter $ITERS/$ITERS " "$TMP/k.out" && ls "$TMP"/job.ckpt/set-*/MANIFEST.json >/dev/null 2>&1; then
    ok "coordinator SIGKILLed after $(grep -c '^iter' "$TMP/k.out") iterations: both agents gave up (exit 1), a complete set left"
else
    fail "coordinator kill (agents' exit ${a_rc[*]})" "$(grep -v OpenBLAS "$TMP/k.a0.err" | tail -3)" \
        "$(grep '^iter' "$TMP/k.out" | tail -1)" "$(ls "$TMP/job.ckpt" | tr '\n' ' ')"
fi

# 3. started again with --resume=auto, new agents: the reference's weights
"$COORD" --plan gpp --resume=auto "$C1" >"$TMP/r.out" 2>"$TMP/r.err" &
CP=$!
track $CP
wait_until 20 grep -q "listening on" "$TMP/r.err"
agents "$C1" r
bwait $CP 120
rc=$?
from=$(sed -n 's/^summary: .*resumed from checkpoint set \([0-9]*\))$/\1/p' "$TMP/r.out")
if [ $rc = 0 ] && [ -n "$from" ] && [ "$(digest "$TMP/r.out")" = "$ref" ] &&
    [ "$(head -n "$lines_before" "$TMP/job.jsonl" | wc -l)" = "$lines_before" ] &&
    grep -q "^{\"resumed_at_iteration\":$from}$" "$TMP/job.jsonl"; then
    ok "restarted with --resume=auto: from set $from, weights sha256 equal to the uninterrupted run's, metrics kept"
else
    fail "restart (rc $rc, from '$from', digest $(digest "$TMP/r.out"))" "$(grep -v OpenBLAS "$TMP/r.err" | tail -5)"
fi

# 4. the finished job: --resume=auto has nothing to do: it prints the digest
#    the last set's manifest records and exits 0 (no agent needed)
"$COORD" --plan gpp --resume=auto "$C1" >"$TMP/fin.out" 2>"$TMP/fin.err"
rc=$?
if [ $rc = 0 ] && [ "$(digest "$TMP/fin.out")" = "$ref" ] &&
    grep -q "already has all $ITERS iterations: the job finished" "$TMP/fin.err"; then
    ok "--resume=auto of a finished job: exit 0 with the reference's weights digest"
else
    fail "--resume=auto of a finished job (rc $rc)" "$(tail -2 "$TMP/fin.err")"
fi
expect_fail "--resume=bogus" "expected --resume or --resume=auto" "$COORD" --plan gpp --resume=bogus "$C1"

gpp_test_end
