#!/usr/bin/env bash
# flood_cli: a plaintext coordinator (external agents, no key_dir) that a
# flood of hostile frames from peers that are no agents (garbage, Register
# of another build or slot, RdvSet with a wrong token, oversized frames,
# connect/close cycles; bench/bench_flood) neither stops nor makes it log
# every frame: the refusals are logged first 20, then one line per 1,000,
# with the count, and the real agents then run the job. Memory is measured
# by bench/flood.sh (BENCHMARKS.md), not asserted here: it depends on
# timing. Usage: flood_cli.sh BUILD_DIR
set -u
. "$(dirname "$0")/lib/gpp_test.sh"
gpp_test_begin flood_cli "${1:-}"
COORD=$BUILD/coordinator/gpp-coordinator
AGENT=$BUILD/agent/gpp-agent
FLOOD=$BUILD/bench/bench_flood

P=$(free_port)
cat >"$TMP/c.toml" <<EOF
[coordinator]
endpoint = "tcp://127.0.0.1:$P"
insecure_plaintext = true
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
"$COORD" --control-only --barriers 2 --start-timeout-ms 120000 "$TMP/c.toml" \
    >"$TMP/c.out" 2>"$TMP/c.err" &
CP=$!
track $CP
wait_until 20 grep -q "listening on" "$TMP/c.err" || fail "coordinator did not start" "$(cat "$TMP/c.err")"

# a few seconds of each kind at once, 4 connections each
F=()
for m in garbage register rdv big cycle; do
    "$FLOOD" --endpoint "tcp://127.0.0.1:$P" --mode $m --seconds 3 --conns 4 >"$TMP/f.$m" 2>&1 &
    F+=($!)
done
track "${F[@]}"
for p in "${F[@]}"; do wait "$p"; done
sent=$(cat "$TMP"/f.* | awk '{s += $6} END {print s + 0}')
if running $CP && [ "$sent" -gt 1000 ]; then
    ok "the coordinator outlived $sent hostile frames"
else
    fail "coordinator after the flood (sent $sent)" "$(cat "$TMP"/f.*)" "$(tail -5 "$TMP/c.err")"
fi

# every refusal counted; of the coordinator's (unregistered peers) and the
# rendezvous table's (requests without the job's token) at most 20 + 1 per
# 1,000 logged each
wait_until 20 grep -q "refused so far" "$TMP/c.err"
sparse() { # sparse WHO: 0 when WHO's refusal lines are few for their count
    local lines last
    lines=$(grep "$1" "$TMP/c.err" | grep -c "refused so far")
    last=$(grep "$1" "$TMP/c.err" | sed -n 's/.*(\([0-9]*\) refused so far.*/\1/p' | sort -n | tail -1)
    echo "$1 $lines lines for ${last:-0} refusals"
    [ "$lines" -ge 1 ] && [ "$lines" -le $((20 + ${last:-0} / 1000)) ]
}
c=$(sparse "coordinator: ") && r=$(sparse "rendezvous: ") &&
    grep -q "refused so far, one in 1000 logged" "$TMP/c.err" &&
    ! grep -q "cannot send reject" "$TMP/c.err"
if [ $? = 0 ]; then
    ok "refusals logged sparingly: $c; $r"
else
    fail "refusal log: $c; $r" "$(grep -c . "$TMP/c.err") lines in all"
fi

# the real agents register and run the job
A=()
for s in 0 1; do
    "$AGENT" --coordinator tcp://127.0.0.1:$P --host 127.0.0.1 --slot $s --control-barriers 2 \
        --heartbeat-ms 100 --timeout-ms 5000 2>"$TMP/a$s.err" &
    A+=($!)
done
track "${A[@]}"
bwait $CP 60
rc=$?
if [ $rc = 0 ] && grep -q "registered 127.0.0.1:1" "$TMP/c.err"; then
    ok "the real agents then ran the job (exit 0)"
else
    fail "the job after the flood (exit $rc)" "$(tail -5 "$TMP/c.err")" "$(tail -3 "$TMP/a0.err")"
fi
gpp_test_end
