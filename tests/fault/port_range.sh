#!/usr/bin/env bash
# port_range: a host whose ephemeral port range is too narrow for its
# agents fails the job at rendezvous with a message that names the range,
# its size and the fix, never a hang (issue 33, item 9). In a network
# namespace of its own (root: unshare -n; exit 77 where that is not
# permitted) with net.ipv4.ip_local_port_range narrowed to 12 ports, a job
# of 4 local CPU agents (bench/port_count.sh: they hold 20).
# Usage: port_range.sh BUILD_DIR
set -u
. "$(dirname "$0")/../integration/lib/gpp_test.sh"
gpp_test_begin port_range "${1:-}"
COORD=$BUILD/coordinator/gpp-coordinator
MODEL="mmt:branches=4,layers=1,hidden=32,heads=2,seq=8,ffn=64"

if ! unshare -n sh -c 'ip link set lo up && sysctl -qw net.ipv4.ip_local_port_range="40000 40011"' 2>/dev/null; then
    echo "skipped: needs root to make a network namespace (unshare -n) and set its port range"
    exit 77
fi
C=$(cpu_job_conf "$TMP/narrow.toml" 4 5 "")
# the namespace is empty: a fixed coordinator port outside the range
sed -i 's|^endpoint = .*|endpoint = "tcp://127.0.0.1:5555"|' "$C"
timeout 120 unshare -n sh -c 'ip link set lo up && sysctl -qw net.ipv4.ip_local_port_range="40000 40011" && exec "$0" --plan gpp "$1"' \
    "$COORD" "$C" >"$TMP/narrow.out" 2>"$TMP/narrow.err"
rc=$?
line=$(grep "job stopped: " "$TMP/narrow.err" | tail -1)
if [ $rc = 1 ] && echo "$line" | grep -q "Address already in use (no free port: this host's ephemeral range net.ipv4.ip_local_port_range is 40000-40011, 12 ports;.*widen it"; then
    ok "a 12-port range: the job stops at rendezvous naming the range and the fix (exit 1)"
else
    fail "narrow port range (rc $rc)" "${line:-no stop line}" "$(grep -v OpenBLAS "$TMP/narrow.err" | tail -3)"
fi
gpp_test_end
