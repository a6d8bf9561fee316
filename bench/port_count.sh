#!/usr/bin/env bash
# port_count: TCP ports a training job's agents hold on one host, for
# docs/operations.md ("Ports to open"): a local-launch job of N CPU agents
# (the small MMT, --plan gpp) is sampled once every agent trains (iteration
# 3 printed): the distinct local TCP ports of the agents' sockets
# (listening and connected, ss -tanp), in all and per agent, and how many
# are in the ephemeral range (net.ipv4.ip_local_port_range).
# Usage: bench/port_count.sh BUILD_DIR [N...]   (default 4 8 16)
set -uo pipefail
BUILD=${1:-build}
shift
COUNTS=("${@:-4 8 16}")
[ $# -eq 0 ] && COUNTS=(4 8 16)
COORD=$BUILD/coordinator/gpp-coordinator
TMP=$(mktemp -d "${TMPDIR:-/tmp}/gpp_port_count.XXXXXX")
CP=
trap '[ -n "$CP" ] && kill -TERM $CP 2>/dev/null; wait 2>/dev/null; [ "${KEEP:-0}" = 1 ] || rm -rf "$TMP"' EXIT
read -r LO HI </proc/sys/net/ipv4/ip_local_port_range

for n in "${COUNTS[@]}"; do
    cat >"$TMP/c$n.toml" <<EOF
[coordinator]
endpoint = "tcp://127.0.0.1:$("$BUILD/tests/gpp-test-port")"
[cluster]
device = "cpu"
mem_gib = 2
[[nodes]]
host = "127.0.0.1"
slots = $n
[job]
model = "mmt:branches=4,layers=1,hidden=32,heads=2,seq=8,ffn=64"
batch = $((n * 4))
iterations = 100000
launch = "local"
[health]
heartbeat_ms = 200
timeout_ms = 10000
EOF
    "$COORD" --plan gpp "$TMP/c$n.toml" >"$TMP/o$n" 2>"$TMP/e$n" &
    CP=$!
    for _ in $(seq 1 600); do
        grep -q "^iter 3/" "$TMP/o$n" && break
        sleep 0.2
    done
    if ! grep -q "^iter 3/" "$TMP/o$n"; then
        echo "$n agents: the job did not train: $(grep -v OpenBLAS "$TMP/e$n" | tail -2)"
        kill -TERM $CP
        wait $CP
        CP=
        continue
    fi
    kids=$(pgrep -P $CP | tr '\n' '|')
    kids=${kids%|}
    # local ports of sockets whose owner is an agent (pid=NNN in ss -p)
    ss -tanpH 2>/dev/null | grep -E "pid=($kids)," | awk '{print $4}' | sed 's/.*://' |
        sort -un >"$TMP/ports$n"
    total=$(wc -l <"$TMP/ports$n")
    eph=$(awk -v lo="$LO" -v hi="$HI" '$1 >= lo && $1 <= hi' "$TMP/ports$n" | wc -l)
    stages=$(sed -n 's/^plan .*: \([0-9]*\) stages,.*/\1/p' "$TMP/o$n")
    echo "$n agents ($stages stages): $total local TCP ports held by agents," \
        "$eph in the ephemeral range $LO-$HI; $(awk -v t="$total" -v n="$n" 'BEGIN{printf "%.1f", t/n}') per agent"
    kill -TERM $CP
    wait $CP 2>/dev/null
    CP=
done
