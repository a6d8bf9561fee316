#!/usr/bin/env bash
# control_curve: what CURVE costs the control plane. The barrier round trip
# of bench_barrier (a control-only job, each agent enters barrier i once
# barrier i-1 is released) with N agents, twice: local launch (CURVE, keys
# handed to the forked agents) and the same agents started by hand without
# keys (external, plaintext). Usage: control_curve.sh BUILD_DIR [BARRIERS] [N ...]
set -euo pipefail
BUILD=${1:?usage: control_curve.sh BUILD_DIR [BARRIERS] [N ...]}
BARRIERS=${2:-1000}
shift $(($# > 1 ? 2 : 1))
COUNTS=${*:-2 8}
TMP=$(mktemp -d /tmp/gpp_bench_curve.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
echo "cores: $(nproc); barriers per run: $BARRIERS"
for n in $COUNTS; do
    PORT=$("$BUILD/tests/gpp-test-port")
    cat >"$TMP/c.toml" <<TOML
[coordinator]
endpoint = "tcp://127.0.0.1:$PORT"
[[nodes]]
host = "127.0.0.1"
slots = $n
[job]
model = "mmt:branches=2,layers=1,hidden=16,heads=2,seq=4,ffn=32" # unused: no training
launch = "local"
[health]
heartbeat_ms = 500
timeout_ms = 10000
TOML
    echo -n "CURVE     $n agents: "
    "$BUILD/coordinator/gpp-coordinator" --control-only --barriers "$BARRIERS" "$TMP/c.toml" \
        2>/dev/null | grep '^barrier'
    echo -n "plaintext $n agents: "
    "$BUILD/coordinator/gpp-coordinator" --external --insecure --control-only --barriers "$BARRIERS" \
        "$TMP/c.toml" 2>/dev/null | grep '^barrier' &
    C=$!
    for ((s = 0; s < n; s++)); do
        "$BUILD/agent/gpp-agent" --coordinator "tcp://127.0.0.1:$PORT" --host 127.0.0.1 \
            --slot $s --control-barriers "$BARRIERS" --timeout-ms 10000 2>/dev/null &
    done
    wait
done
