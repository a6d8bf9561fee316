#!/usr/bin/env bash
# monitor_top: what a gpp-top frame costs over the authenticated control
# plane (MonitorRequest with the run directory's monitor key, CURVE) and
# over HTTP (/metrics + /schedule), against a running local training job
# (2 CPU agents). Each sample is one `gpp-top --once` process: start, CURVE
# handshake (or two HTTP requests), reply, parse, render. Prints the best
# and the median of N per mode and the reply size.
# Usage: monitor_top.sh BUILD_DIR [N]
set -euo pipefail
BUILD=${1:?usage: monitor_top.sh BUILD_DIR [N]}
N=${2:-50}
TMP=$(mktemp -d /tmp/gpp_bench_top.XXXXXX)
CP=
trap '[ -z "$CP" ] || kill $CP 2>/dev/null; wait 2>/dev/null; rm -rf "$TMP"' EXIT
read -r CPORT HPORT <<<"$("$BUILD/tests/gpp-test-port" 2 | tr '\n' ' ')"
cat >"$TMP/c.toml" <<TOML
[coordinator]
endpoint = "tcp://127.0.0.1:$CPORT"
[cluster]
device = "cpu"
mem_gib = 2
[[nodes]]
host = "127.0.0.1"
slots = 2
[job]
model = "mmt:branches=2,layers=1,hidden=16,heads=2,seq=4,ffn=32"
batch = 16
iterations = 100000000
launch = "local"
[health]
heartbeat_ms = 500
timeout_ms = 10000
[metrics]
http_port = $HPORT
TOML
"$BUILD/coordinator/gpp-coordinator" --plan gpp --run-dir "$TMP/run" "$TMP/c.toml" \
    >"$TMP/c.out" 2>"$TMP/c.err" &
CP=$!
for _ in $(seq 600); do
    "$BUILD/coordinator/gpp-top" --once --run-dir "$TMP/run" 2>/dev/null |
        grep -q "^job training  *iteration [1-9]" && break
    sleep 0.1
done
TOP=$BUILD/coordinator/gpp-top
echo "cores: $(nproc); load: $(cut -d' ' -f1-3 /proc/loadavg); $N frames per mode"
for mode in curve http; do
    args=(--run-dir "$TMP/run")
    [ $mode = http ] && args=("127.0.0.1:$HPORT")
    for ((i = 0; i < N; i++)); do
        t0=$(date +%s%N)
        "$TOP" --once "${args[@]}" >/dev/null
        echo $((($(date +%s%N) - t0) / 1000))
    done | sort -n | awk -v m=$mode '{ a[NR] = $1 } END {
        printf "%-5s best %.2f ms, median %.2f ms\n", m, a[1] / 1000, a[int((NR + 1) / 2)] / 1000 }'
done
size() { python3 -c 'import sys, urllib.request; print(len(urllib.request.urlopen(sys.argv[1]).read()))' "$1"; }
echo "/metrics $(size "http://127.0.0.1:$HPORT/metrics") bytes, /schedule" \
    "$(size "http://127.0.0.1:$HPORT/schedule") bytes (a MonitorReply carries both)"
