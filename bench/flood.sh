#!/usr/bin/env bash
# flood: the coordinator's memory under hostile control-plane traffic.
#
#   bench/flood.sh [BUILD_DIR] [SECONDS_PER_PHASE] [CONNECTIONS]
#
# Two real coordinators in turn, each a control-only job of two external
# agents that waits for them: one plaintext (no key_dir), one with CURVE
# (key_dir from gpp-coordinator --keygen). Against each, phase after phase,
# bench_flood sends one kind of hostile traffic for SECONDS_PER_PHASE from
# CONNECTIONS connections (split over 4 processes), then all kinds at once.
# The coordinator's VmRSS and VmHWM are read from /proc once a second. At
# the end the real agents run the job; it must exit 0. Prints one table row
# per phase: frames and bytes sent, connections made, RSS before, peak
# (VmHWM) and after, and the coordinator's log size. Defaults: 10 s, 64.
set -u
BUILD=$(cd "${1:-build}" && pwd)
SECS=${2:-10}
CONNS=${3:-64}
COORD=$BUILD/coordinator/gpp-coordinator
AGENT=$BUILD/agent/gpp-agent
FLOOD=$BUILD/bench/bench_flood
MAX=$((64 << 20)) # GPP_MSG_MAX_BYTES (proto/gpp_msg.h)
for f in "$COORD" "$AGENT" "$FLOOD"; do
    [ -x "$f" ] || { echo "flood: $f missing: build first (cmake --build $BUILD)" >&2; exit 2; }
done
TMP=$(mktemp -d /tmp/gpp_flood_XXXXXX)
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$TMP"' EXIT

kb() { sed -n "s/^$2:[[:space:]]*\([0-9]*\) kB/\1/p" "/proc/$1/status" 2>/dev/null; }

# conf NAME PORT [KEYDIR]
conf() {
    cat >"$TMP/$1.toml" <<EOF
[coordinator]
endpoint = "tcp://127.0.0.1:$2"
${3:+key_dir = \"$3\"}
$([ -n "$3" ] || echo "insecure_plaintext = true")
[[nodes]]
host = "127.0.0.1"
slots = 2
[job]
model = "mmt:branches=2,layers=1,hidden=16,heads=2,seq=4,ffn=32"
batch = 8
iterations = 1
launch = "external"
[health]
heartbeat_ms = 100
timeout_ms = 5000
EOF
}

# phase NAME MODE... : every MODE for SECS from CONNS connections (4 processes
# per mode, CONNS/4 connections each, when several modes: CONNS/4 per mode)
phase() {
    local name=$1
    shift
    local per=$((CONNS / 4)) procs=4 fp=()
    [ $# -gt 1 ] && procs=1
    [ $per -lt 1 ] && per=1
    local rss0 log0
    rss0=$(kb "$CP" VmRSS)
    log0=$(stat -c %s "$TMP/c.err")
    # VmHWM is the peak since start: the phase's own peak is sampled
    local peak=$rss0
    for m in "$@"; do
        local fb=$((MAX + 1))
        [ "$m" = raw ] && fb=$((MAX - 1)) # the largest frame the limit lets through
        for ((i = 0; i < procs; i++)); do
            "$FLOOD" --endpoint "tcp://127.0.0.1:$PORT" --mode "$m" --seconds "$SECS" \
                --conns "$per" --frame-bytes $fb ${KEY:+--server-key "$KEY"} \
                >"$TMP/f.$m.$i" 2>&1 &
            fp+=($!)
        done
    done
    local t=0
    while kill -0 "${fp[@]}" 2>/dev/null; do
        sleep 1
        t=$((t + 1))
        local r
        r=$(kb "$CP" VmRSS)
        [ -n "$r" ] && [ "$r" -gt "$peak" ] && peak=$r
        echo "$SCEN $name $t $r" >>"$TMP/rss.txt"
    done
    wait "${fp[@]}" 2>/dev/null
    sleep 2 # what the coordinator still holds once the senders are gone
    local frames bytes conns
    frames=$(cat "$TMP"/f.* | awk '{s += $6} END {print s + 0}')
    bytes=$(cat "$TMP"/f.* | awk '{s += $8} END {printf "%.0f", s / 1048576}')
    conns=$(cat "$TMP"/f.* | awk '{s += $10} END {print s + 0}')
    rm -f "$TMP"/f.*
    if ! kill -0 "$CP" 2>/dev/null; then
        echo "flood: the coordinator died during phase $name" >&2
        tail -5 "$TMP/c.err" >&2
        exit 1
    fi
    printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$SCEN" "$name" "$frames" "$bytes" \
        "$conns" "$((rss0 / 1024))" "$((peak / 1024))" "$(($(kb "$CP" VmRSS) / 1024))" \
        "$((($(stat -c %s "$TMP/c.err") - log0) / 1024))"
}

# run SCEN KEYDIR(or empty) PHASES...
scenario() {
    SCEN=$1
    local keys=$2
    shift 2
    PORT=$("$BUILD/tests/gpp-test-port")
    conf "$SCEN" "$PORT" "$keys"
    "$COORD" --control-only --barriers 3 --start-timeout-ms 3600000 "$TMP/$SCEN.toml" \
        >"$TMP/c.out" 2>"$TMP/c.err" &
    CP=$!
    PIDS+=($CP)
    for _ in $(seq 50); do grep -q "listening on" "$TMP/c.err" && break; sleep 0.1; done
    KEY=
    [ -n "$keys" ] && KEY=$(sed -n 's/^ *public-key = "\(.*\)"$/\1/p' "$keys/coordinator.key")
    sleep 1
    echo "$SCEN idle: VmRSS $(kb "$CP" VmRSS) kB" >&2
    for p in "$@"; do
        phase "$p" ${p//+/ }
    done
    local a=()
    for s in 0 1; do
        "$AGENT" --coordinator "tcp://127.0.0.1:$PORT" --host 127.0.0.1 --slot $s \
            --control-barriers 3 --heartbeat-ms 100 --timeout-ms 5000 \
            ${keys:+--coordinator-key "$keys/coordinator.key" --key "$keys/agent-$s.key_secret"} \
            2>"$TMP/a$s.err" &
        a+=($!)
    done
    local rc=0
    wait "$CP" || rc=$?
    wait "${a[@]}" 2>/dev/null
    if [ $rc = 0 ]; then
        echo "$SCEN: the real agents then ran the job: exit 0 ($(grep -c 'dropped a message\|rejected a registration\|refused a connection' "$TMP/c.err") refusals logged)" >&2
    else
        echo "$SCEN: the job after the flood FAILED (exit $rc)" >&2
        tail -5 "$TMP/c.err" >&2
        exit 1
    fi
}

echo "| scenario | traffic | frames | MiB sent | connections | RSS before (MiB) | peak RSS (MiB) | RSS after (MiB) | log (KiB) |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|"
scenario plaintext "" garbage register rdv cycle big raw garbage+register+rdv+cycle+big+raw
"$COORD" --keygen "$TMP/keys" --agents 2 >/dev/null 2>&1 || { echo "flood: keygen failed" >&2; exit 1; }
scenario curve "$TMP/keys" garbage stranger cycle big raw garbage+stranger+cycle+big+raw
