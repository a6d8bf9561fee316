#!/usr/bin/env bash
# agent_exit: an agent that gives up exits within its comm timeout plus 1 s
# whatever its worker thread is stuck in, always on SIGTERM, and never joins
# the next job on the same endpoint (issue 33, item 2). External agents on
# 127.0.0.1, 2 slots, --comm-timeout-ms 2000; GPP_FAULT=worker_stuck holds
# each training worker 120 s in a call nothing interrupts, before the data
# plane (as a Gloo connect to a peer that went can):
#   a. the coordinator is SIGKILLed: each agent says the connection dropped,
#      exits within 3 s of that line, and a coordinator started at once on
#      the same endpoint never sees it register;
#   b. the coordinator is interrupted (SIGTERM, its Abort): each agent exits
#      within 3 s of the Abort;
#   c. SIGTERM to a stuck agent: it exits within 3 s; a second SIGTERM ends
#      the other one at once.
# Prints the longest time from giving up to exit.
# Usage: agent_exit.sh BUILD_DIR
set -u
. "$(dirname "$0")/../integration/lib/gpp_test.sh"
gpp_test_begin agent_exit "${1:-}"
COORD=$BUILD/coordinator/gpp-coordinator
AGENT=$BUILD/agent/gpp-agent
MODEL="mmt:branches=2,layers=1,hidden=32,heads=2,seq=8,ffn=64"
COMM_MS=2000
LIMIT_MS=$((COMM_MS + 1000))
WORST=0

ms() { echo $(($(date +%s%N) / 1000000)); }
# log_ms FILE PATTERN: the time stamp (ms) of the first line matching PATTERN
log_ms() {
    local t
    t=$(grep -m1 -e "$2" "$1" | cut -d' ' -f1)
    [ -n "$t" ] && echo $(($(date -u -d "${t%Z}Z" +%s%N) / 1000000))
}
# mkconf NAME PORT: an external 2-slot job on PORT
mkconf() {
    cpu_job_conf "$TMP/$1.toml" 2 20 "$TMP/$1.ckpt" >/dev/null
    sed -i -e 's/^launch = "local"$/launch = "external"/' \
        -e "s|^endpoint = .*|endpoint = \"tcp://127.0.0.1:$2\"|" \
        -e 's/^\[coordinator\]$/[coordinator]\ninsecure_plaintext = true/' "$TMP/$1.toml"
}
# agents NAME PORT: slots 0 and 1, stuck once assigned; pids in A0 A1. A
# wrapper waits for each and writes its exit time (ns) to NAME.aSLOT.end
agents() {
    local s
    for s in 0 1; do
        (
            GPP_FAULT=worker_stuck:120000 "$AGENT" --coordinator "tcp://127.0.0.1:$2" --host 127.0.0.1 \
                --slot $s --threads 1 --heartbeat-ms 100 --timeout-ms 1500 --comm-timeout-ms $COMM_MS \
                >"$TMP/$1.a$s.out" 2>"$TMP/$1.a$s.err" &
            echo $! >"$TMP/$1.a$s.pid"
            wait $!
            echo "$? $(date +%s%N)" >"$TMP/$1.a$s.end"
        ) &
        track $!
        wait_until 5 test -s "$TMP/$1.a$s.pid"
        eval "A$s=$(cat "$TMP/$1.a$s.pid")"
        track "$(cat "$TMP/$1.a$s.pid")"
    done
}
stuck() { grep -q "fault worker_stuck: blocking" "$TMP/$1.a0.err" && grep -q "fault worker_stuck: blocking" "$TMP/$1.a1.err"; }
# gone_within NAME SLOT PID PATTERN: the agent exited within LIMIT_MS of its
# log line PATTERN; prints the time taken
worst() { [ "$1" -gt $WORST ] && WORST=$1; }
gone_within() {
    wait_until 10 test -s "$TMP/$1.a$2.end" || {
        echo "still running"
        return 1
    }
    local end t0
    end=$(($(cut -d' ' -f2 "$TMP/$1.a$2.end") / 1000000))
    t0=$(log_ms "$TMP/$1.a$2.err" "$4")
    [ -n "$t0" ] || {
        echo "no '$4' in its log"
        return 1
    }
    echo $((end - t0))
    [ $((end - t0)) -le $LIMIT_MS ]
}
start_job() { # NAME PORT
    mkconf "$1" "$2"
    "$COORD" --plan gpp "$TMP/$1.toml" >"$TMP/$1.out" 2>"$TMP/$1.err" &
    CP=$!
    track $CP
    wait_until 20 grep -q "listening on" "$TMP/$1.err"
    agents "$1" "$2"
    wait_until 60 stuck "$1"
}
errtail() { grep -v OpenBLAS "$1" | tail -"${2:-3}"; }

# a. the coordinator SIGKILLed while the workers are stuck, a new one at once
P=$(free_port 1)
if ! start_job a "$P"; then
    fail "a: the agents never got stuck (fault not reached)" "$(errtail "$TMP/a.a0.err")"
else
    kill -KILL $CP
    "$COORD" --plan gpp "$TMP/a.toml" >"$TMP/a2.out" 2>"$TMP/a2.err" &
    C2=$!
    track $C2
    for s in 0 1; do
        eval "p=\$A$s"
        if took=$(gone_within a $s "$p" "connection to the coordinator .* dropped"); then
            worst "$took"
            ok "a: coordinator SIGKILLed: agent $s gave up and exited $took ms later (limit $LIMIT_MS ms)"
        else
            fail "a: agent $s after the coordinator's SIGKILL: $took" "$(errtail "$TMP/a.a$s.err")"
        fi
    done
    if grep -q "did not stop within 2.0 s" "$TMP/a.a0.err" &&
        [ "$(grep -c "registered as rank" "$TMP/a.a0.err")" = 1 ] &&
        [ "$(grep -c "registered as rank" "$TMP/a.a1.err")" = 1 ] &&
        ! grep -q "coordinator: registered\|unregistered\|dropped" "$TMP/a2.err"; then
        ok "a: the next coordinator on the endpoint heard nothing from the old agents"
    else
        fail "a: the old agents reached the next coordinator" "$(errtail "$TMP/a2.err")" \
            "$(errtail "$TMP/a.a0.err")"
    fi
    kill -KILL $C2
fi

# b. the coordinator interrupted: its Abort reaches stuck workers
P=$(free_port 1)
if ! start_job b "$P"; then
    fail "b: the agents never got stuck (fault not reached)" "$(errtail "$TMP/b.a0.err")"
else
    kill -TERM $CP
    for s in 0 1; do
        eval "p=\$A$s"
        if took=$(gone_within b $s "$p" "job aborted by the coordinator"); then
            worst "$took"
            ok "b: coordinator SIGTERMed: agent $s exited $took ms after the Abort (limit $LIMIT_MS ms)"
        else
            fail "b: agent $s after the coordinator's Abort: $took" "$(errtail "$TMP/b.a$s.err")"
        fi
    done
    bwait $CP 10 >/dev/null
fi

# c. SIGTERM to stuck agents: one, then twice to the other
P=$(free_port 1)
if ! start_job c "$P"; then
    fail "c: the agents never got stuck (fault not reached)" "$(errtail "$TMP/c.a0.err")"
else
    kill -TERM $A0
    if took=$(gone_within c 0 $A0 "Terminated; stopping"); then
        worst "$took"
        ok "c: SIGTERM: the stuck agent exited $took ms later (limit $LIMIT_MS ms)"
    else
        fail "c: SIGTERM to a stuck agent: $took" "$(errtail "$TMP/c.a0.err")"
    fi
    rc0=$(cut -d' ' -f1 "$TMP/c.a0.end")
    if running $A1; then
        kill -TERM $A1
        sleep 0.2
        kill -TERM $A1
        t0=$(ms)
        wait_until 10 test -s "$TMP/c.a1.end"
        t=$(($(cut -d' ' -f2 "$TMP/c.a1.end") / 1000000 - t0))
        if [ $t -le 1000 ] && grep -q "while stopping; exiting now" "$TMP/c.a1.err"; then
            ok "c: a second SIGTERM ended the other stuck agent $t ms later"
        else
            fail "c: second SIGTERM ($t ms)" "$(errtail "$TMP/c.a1.err")"
        fi
    else
        ok "c: the other agent had already gone (its peer's exit ended the job)"
    fi
    [ "$rc0" = 143 ] && ok "c: exit status 143 after SIGTERM" || fail "c: exit status $rc0, want 143"
    kill -KILL $CP 2>/dev/null
fi

echo "longest time from giving up to exit: $WORST ms (comm timeout $COMM_MS ms)"
gpp_test_end
