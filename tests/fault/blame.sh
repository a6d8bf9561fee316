#!/usr/bin/env bash
# blame: the stop line names the agent that died, not a peer that only saw
# its connection break, and says which peers only reported a broken
# connection (issue 33, item 3). 3 local CPU agents, 300 short
# iterations; slot 1's agent is SIGKILLed after iteration 10, three times.
# The final "job stopped:" line must name 127.0.0.1:1 killed by signal 9,
# and every other agent it names only in "only reported a broken
# connection".
# Usage: blame.sh BUILD_DIR
set -u
. "$(dirname "$0")/../integration/lib/gpp_test.sh"
gpp_test_begin blame "${1:-}"
COORD=$BUILD/coordinator/gpp-coordinator
MODEL="mmt:branches=2,layers=1,hidden=32,heads=2,seq=8,ffn=64"
ITERS=300

for trial in 1 2 3; do
    C=$(cpu_job_conf "$TMP/t$trial.toml" 3 $ITERS "$TMP/t$trial.ckpt" "micro_batch = 4")
    PORT=$(sed -n 's|^endpoint = "tcp://127.0.0.1:\([0-9]*\)"$|\1|p' "$C")
    "$COORD" --plan gpp "$C" >"$TMP/t$trial.out" 2>"$TMP/t$trial.err" &
    CP=$!
    track $CP
    wait_until 120 grep -q "^iter 10/$ITERS " "$TMP/t$trial.out"
    A=$(pgrep -f -- "--coordinator tcp://127.0.0.1:$PORT --host 127.0.0.1 --slot 1 ")
    kill -KILL $A
    bwait $CP 60
    rc=$?
    line=$(grep "job stopped: " "$TMP/t$trial.err" | tail -1)
    head=${line%%; agent* only reported*}
    others=${line#"$head"}
    if [ -n "$A" ] && [ $rc = 1 ] &&
        echo "$head" | grep -q "job stopped: agent 127.0.0.1:1 (rank [0-9], pid $A) killed by signal 9" &&
        ! echo "$head" | grep -q "127.0.0.1:[02]" &&
        ! echo "$others" | grep -q "127.0.0.1:1 "; then
        ok "trial $trial: the stop line names the killed agent${others:+ ($others)}"
    else
        fail "trial $trial (rc $rc, killed pid '$A')" "${line:-no stop line}" \
            "$(grep -v OpenBLAS "$TMP/t$trial.err" | grep -i 'error\|broken' | tail -3)"
    fi
done

gpp_test_end
