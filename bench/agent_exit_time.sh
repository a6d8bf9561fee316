#!/usr/bin/env bash
# agent_exit_time: from an agent giving up to its exit, over aborted joins
# (docs/operations.md, "Agents that give up"). Per trial: an external job
# of 2 CPU agents whose workers are held in a call nothing interrupts
# before the data plane (GPP_FAULT=worker_stuck, as a Gloo connect to a
# peer that went); the coordinator is SIGKILLed (odd trials: the agents see
# the connection drop) or SIGTERMed (even trials: its Abort). Each agent's
# time from its log line of giving up to its exit (as its parent's wait
# sees it), and
# the maximum over all. --comm-timeout-ms COMM_MS bounds it: COMM_MS + 1 s.
# Usage: bench/agent_exit_time.sh BUILD_DIR [TRIALS] [COMM_MS]
set -uo pipefail
BUILD=${1:-build}
TRIALS=${2:-20}
COMM_MS=${3:-2000}
COORD=$BUILD/coordinator/gpp-coordinator
AGENT=$BUILD/agent/gpp-agent
TMP=$(mktemp -d "${TMPDIR:-/tmp}/gpp_agent_exit_time.XXXXXX")
PIDS=()
trap 'kill -KILL "${PIDS[@]}" $(cat "$TMP"/*.pid 2>/dev/null) 2>/dev/null; wait 2>/dev/null; rm -rf "$TMP"' EXIT

log_ms() { # FILE PATTERN: the log time (ms) of the first matching line
    local t
    t=$(grep -m1 -e "$2" "$1" | cut -d' ' -f1)
    [ -n "$t" ] && echo $(($(date -u -d "$t" +%s%N) / 1000000))
}
waitfor() { # SECONDS CMD...
    local t=$(($1 * 50))
    shift
    until "$@"; do
        t=$((t - 1))
        [ $t -le 0 ] && return 1
        sleep 0.02
    done
}
stuck() { grep -q "fault worker_stuck" "$1.a0.err" && grep -q "fault worker_stuck" "$1.a1.err"; }

max=0
for t in $(seq 1 "$TRIALS"); do
    port=$("$BUILD/tests/gpp-test-port")
    T=$TMP/t$t
    cat >"$T.toml" <<EOF
[coordinator]
endpoint = "tcp://127.0.0.1:$port"
insecure_plaintext = true
[cluster]
device = "cpu"
mem_gib = 2
[[nodes]]
host = "127.0.0.1"
slots = 2
[job]
model = "mmt:branches=2,layers=1,hidden=32,heads=2,seq=8,ffn=64"
batch = 16
iterations = 20
launch = "external"
[health]
heartbeat_ms = 100
timeout_ms = 3000
EOF
    "$COORD" --plan gpp "$T.toml" >"$T.out" 2>"$T.err" &
    cp=$!
    PIDS+=($cp)
    waitfor 20 grep -q "listening on" "$T.err"
    for s in 0 1; do # a wrapper waits for the agent and writes its exit time (ns)
        (
            GPP_FAULT=worker_stuck:120000 "$AGENT" --coordinator "tcp://127.0.0.1:$port" \
                --host 127.0.0.1 --slot $s --threads 1 --heartbeat-ms 100 --timeout-ms 1500 \
                --comm-timeout-ms "$COMM_MS" >/dev/null 2>"$T.a$s.err" &
            echo $! >"$T.a$s.pid"
            wait $!
            date +%s%N >"$T.a$s.end"
        ) &
        PIDS+=($!)
    done
    if ! waitfor 60 stuck "$T"; then
        echo "trial $t: the workers never got stuck"
        exit 1
    fi
    if [ $((t % 2)) = 1 ]; then
        kill -KILL $cp
        how="coordinator SIGKILLed"
        pat="connection to the coordinator .* dropped"
    else
        kill -TERM $cp
        how="coordinator SIGTERMed"
        pat="job aborted by the coordinator"
    fi
    line="trial $t ($how):"
    for s in 0 1; do
        waitfor 30 test -s "$T.a$s.end" || { echo "trial $t: agent $s still running"; exit 1; }
        t0=$(log_ms "$T.a$s.err" "$pat")
        d=$(($(cat "$T.a$s.end") / 1000000 - t0))
        [ $d -gt $max ] && max=$d
        line="$line agent $s $d ms"
    done
    wait "$cp" 2>/dev/null
    echo "$line"
done
echo "max from giving up to exit over $TRIALS aborted joins ($((TRIALS * 2)) agents): $max ms" \
    "(--comm-timeout-ms $COMM_MS; bound $((COMM_MS + 1000)) ms)"
