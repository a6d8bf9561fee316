#!/usr/bin/env bash
# bench_barrier: control-plane latency of a barrier across N local agents
# (default 2 8 32): a control-only job where every agent enters barrier i
# as soon as barrier i-1 is released; the coordinator times release to
# release (one full round trip through every agent) and prints mean, p50,
# p99 and max. Usage: bench_barrier.sh BUILD_DIR [BARRIERS] [N ...]
set -euo pipefail
BUILD=${1:?usage: bench_barrier.sh BUILD_DIR [BARRIERS] [N ...]}
BARRIERS=${2:-1000}
shift $(($# > 1 ? 2 : 1))
COUNTS=${*:-2 8 32}
TMP=$(mktemp -d /tmp/gpp_bench_barrier.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
PORT=$((20000 + ($$ * 13) % 30000))
echo "cores: $(nproc); barriers per run: $BARRIERS"
for n in $COUNTS; do
    PORT=$((PORT + 1))
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
    "$BUILD/coordinator/gpp-coordinator" --control-only --barriers "$BARRIERS" "$TMP/c.toml" \
        2>"$TMP/err" | grep '^barrier:' || { tail -5 "$TMP/err"; exit 1; }
done
