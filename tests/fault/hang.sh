#!/usr/bin/env bash
# hang: an agent that stops answering (SIGSTOP: hung, not dead) is found by
# the heartbeat timeout, killed (it would not act on an Abort), and with
# --max-restarts the job starts again from the newest complete set and ends
# with the weights of an uninterrupted run (issue 12: "SIGSTOP", a hung
# agent detected within the heartbeat timeout + 1 s). 2 local CPU agents,
# 300 short iterations, a set every 2, heartbeat timeout 1.5 s.
# Usage: hang.sh BUILD_DIR
set -u
. "$(dirname "$0")/../integration/lib/gpp_test.sh"
gpp_test_begin hang "${1:-}"
COORD=$BUILD/coordinator/gpp-coordinator
MODEL="mmt:branches=2,layers=1,hidden=32,heads=2,seq=8,ffn=64"
ITERS=300

mkconf() {
    cpu_job_conf "$TMP/$1.toml" 2 $ITERS "$TMP/$1.ckpt" "checkpoint_interval = 2" >/dev/null
    sed -i 's/^timeout_ms = 3000$/timeout_ms = 1500/' "$TMP/$1.toml"
    echo "$TMP/$1.toml"
}
digest() { sed -n 's/^weights sha256 \([0-9a-f]\{64\}\)$/\1/p' "$1"; }
ms() { echo $(($(date +%s%N) / 1000000)); }

timeout 300 "$COORD" --plan gpp "$(mkconf ref)" >"$TMP/ref.out" 2>"$TMP/ref.err"
ref=$(digest "$TMP/ref.out")
[ -n "$ref" ] && ok "uninterrupted run: weights sha256 $ref" ||
    fail "uninterrupted run" "$(grep -v OpenBLAS "$TMP/ref.err" | tail -4)"

C=$(mkconf job)
PORT=$(sed -n 's|^endpoint = "tcp://127.0.0.1:\([0-9]*\)"$|\1|p' "$C")
"$COORD" --plan gpp --max-restarts 1 "$C" >"$TMP/job.out" 2>"$TMP/job.err" &
CP=$!
track $CP
wait_until 60 grep -q "^iter 10/$ITERS " "$TMP/job.out"
A=$(pgrep -f -- "--coordinator tcp://127.0.0.1:$PORT --host 127.0.0.1 --slot 1 ")
kill -STOP $A
t0=$(ms)
wait_until 20 grep -q "silent for" "$TMP/job.err"
t1=$(ms)
wait_until 20 grep -q "coordinator: resuming from checkpoint set" "$TMP/job.err"
t2=$(ms)
bwait $CP 300
rc=$?
detect=$((t1 - t0))
if [ -n "$A" ] && [ $rc = 0 ] && grep -q "agent 127.0.0.1:1 (rank 1, pid $A) silent for" "$TMP/job.err" &&
    grep -q "killed the silent local agent 127.0.0.1:1" "$TMP/job.err" && [ $detect -le 2500 ] &&
    [ "$(digest "$TMP/job.out")" = "$ref" ] && ! kill -0 "$A" 2>/dev/null; then
    ok "agent SIGSTOPped: named after $detect ms (timeout 1.5 s), killed, restarted $((t2 - t1)) ms later; weights sha256 equal to the uninterrupted run's"
else
    fail "hung agent (rc $rc, pid '$A', detected after $detect ms, digest $(digest "$TMP/job.out"))" \
        "$(grep -v OpenBLAS "$TMP/job.err" | grep -i 'silent\|killed\|error' | tail -4)"
fi

gpp_test_end
