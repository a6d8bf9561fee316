#!/usr/bin/env bash
# cuda_agents: a job with backend = "cuda" and agents without a usable GPU
# (runs on any machine). An agent registering as a CPU agent (--backend
# cpu), or one asked for a GPU that is not there (--gpu 1000), is refused:
# the coordinator exits 2 naming the agent, its host and the agent's reason,
# and never trains on the CPU. A CPU job's agents report the host's memory.
# Usage: cuda_agents.sh BUILD_DIR
set -u
. "$(dirname "$0")/lib/gpp_test.sh"
gpp_test_begin cuda_agents "${1:-}"
COORD=$BUILD/coordinator/gpp-coordinator
AGENT=$BUILD/agent/gpp-agent

# $1: name; external agents on 127.0.0.1, 2 slots: $TMP/$1.toml, port $PORT
conf() {
    PORT=$(free_port 1)
    cat >"$TMP/$1.toml" <<EOC
[coordinator]
endpoint = "tcp://127.0.0.1:$PORT"
insecure_plaintext = true
[cluster]
device = "h100-80g"
[[nodes]]
host = "127.0.0.1"
slots = 2
[job]
model = "mmt:branches=2,layers=1,hidden=32,heads=2,seq=8,ffn=64"
batch = 8
iterations = 2
launch = "external"
backend = "cuda"
precision = "tf32"
[health]
heartbeat_ms = 100
timeout_ms = 3000
EOC
}

# $1 name, $2.. the agent's device flags: the coordinator's exit and stderr
refused() {
    local name=$1
    shift
    conf "$name"
    timeout 60 "$COORD" --plan gpp "$TMP/$name.toml" >"$TMP/$name.out" 2>"$TMP/$name.err" &
    local cpid=$!
    wait_until 10 grep -q "waiting for 2 agents" "$TMP/$name.err"
    timeout 30 "$AGENT" --coordinator "tcp://127.0.0.1:$PORT" --host 127.0.0.1 --slot 0 \
        --heartbeat-ms 100 --timeout-ms 3000 "$@" >"$TMP/$name.agent" 2>&1
    ARC=$?
    wait $cpid
    CRC=$?
}

refused cpu --backend cpu
if grep -q "built without CUDA" "$TMP/cpu.err"; then
    ok "a build without CUDA refuses backend cuda (exit $CRC)"
    gpp_test_end
fi
if [ $CRC = 2 ] && [ $ARC = 1 ] &&
    grep -q 'agent 127.0.0.1:0 (rank 0, pid [0-9]*) on host 127.0.0.1 has no usable GPU' "$TMP/cpu.err" &&
    grep -q 'started without --gpu / --backend cuda' "$TMP/cpu.err" &&
    grep -q 'rejected\|no usable GPU' "$TMP/cpu.agent" && ! grep -q '^iter ' "$TMP/cpu.out"; then
    ok "a CPU agent in a cuda job: refused, exit 2, agent and host named"
else
    fail "CPU agent in a cuda job (coordinator exit $CRC, agent exit $ARC)" \
        "$(tail -5 "$TMP/cpu.err"; tail -5 "$TMP/cpu.agent")"
fi

refused nogpu --gpu 1000
if [ $CRC = 2 ] && [ $ARC = 1 ] &&
    grep -q 'agent 127.0.0.1:0 (rank 0, pid [0-9]*) on host 127.0.0.1 has no usable GPU (no usable GPU 1000: ' "$TMP/nogpu.err" &&
    grep -q 'registering as a CPU agent' "$TMP/nogpu.agent"; then
    ok "an agent whose GPU is missing: refused with the CUDA runtime's reason ($(grep -o 'no usable GPU 1000: [^)]*' "$TMP/nogpu.err" | head -1 | cut -c1-80))"
else
    fail "agent with --gpu 1000 in a cuda job (coordinator exit $CRC, agent exit $ARC)" \
        "$(tail -5 "$TMP/nogpu.err"; tail -5 "$TMP/nogpu.agent")"
fi
gpp_test_end
