#!/usr/bin/env bash
# slow_iter: an iteration that runs long prints where each stage is before
# it ends (issue 33, item 10: an 18 s iteration printed nothing until it
# ended). 3 local CPU agents, 300 short iterations, heartbeat timeout 10 s;
# slot 1's agent is stopped (SIGSTOP) for 4 s after iteration 10: the
# coordinator prints "iteration N/300 running for X s" and a line per stage
# that names slot 1 as still working on it and last heard from 2 s or
# more ago (its peers: moments ago), then the job finishes (exit 0).
# Usage: slow_iter.sh BUILD_DIR
set -u
. "$(dirname "$0")/../integration/lib/gpp_test.sh"
gpp_test_begin slow_iter "${1:-}"
COORD=$BUILD/coordinator/gpp-coordinator
MODEL="mmt:branches=2,layers=1,hidden=32,heads=2,seq=8,ffn=64"
ITERS=300

C=$(HEALTH_TIMEOUT_MS=10000 cpu_job_conf "$TMP/slow.toml" 3 $ITERS "" "micro_batch = 4")
PORT=$(sed -n 's|^endpoint = "tcp://127.0.0.1:\([0-9]*\)"$|\1|p' "$C")
"$COORD" --plan gpp "$C" >"$TMP/slow.out" 2>"$TMP/slow.err" &
CP=$!
track $CP
wait_until 120 grep -q "^iter 10/$ITERS " "$TMP/slow.out"
A=$(pgrep -f -- "--coordinator tcp://127.0.0.1:$PORT --host 127.0.0.1 --slot 1 ")
kill -STOP $A
sleep 4
kill -CONT $A
bwait $CP 120
rc=$?
head=$(grep -m1 "coordinator: iteration [0-9]*/$ITERS running for [0-9.]* s" "$TMP/slow.err")
if [ -n "$A" ] && [ $rc = 0 ] && [ -n "$head" ] &&
    grep -q "coordinator:   stage [0-9]*: .*127.0.0.1:1 working on it (heard [2-9]\.[0-9] s ago)" "$TMP/slow.err"; then
    ok "a 4 s iteration: '${head#*coordinator: }', a line per stage naming slot 1 as silent for seconds; the job finished"
else
    fail "slow iteration (rc $rc, pid '$A')" "${head:-no progress line}" \
        "$(grep -v OpenBLAS "$TMP/slow.err" | grep "stage\|iteration" | tail -4)"
fi
gpp_test_end
