#!/usr/bin/env bash
# restart_time: from a killed agent to training again with
# gpp-coordinator --max-restarts (docs/checkpoints.md), and whether the
# restarted run ends with the fault-free run's weights.
# A job of 6 iterations on 3 local CPU agents (a set every 2 iterations)
# whose agents SIGKILL themselves in the save of set 6
# (GPP_FAULT=ckpt_kill:2); per trial: the log time of the first kill to the
# log time of "all 3 agents ready; training" after the restart, and the
# weights sha256 against a fault-free run's.
# Usage: bench/restart_time.sh BUILD_DIR [TRIALS] [MODEL]
set -euo pipefail
BUILD=${1:-build}
TRIALS=${2:-10}
MODEL=${3:-mmt:branches=2,layers=1,hidden=32,heads=2,seq=8,ffn=64}
COORD=$BUILD/coordinator/gpp-coordinator
TMP=$(mktemp -d "${TMPDIR:-/tmp}/gpp_restart_time.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

conf() { # conf NAME: a cluster file with its own port and checkpoint dir
    cat >"$TMP/$1.toml" <<EOF
[coordinator]
endpoint = "tcp://127.0.0.1:$("$BUILD/tests/gpp-test-port")"
[cluster]
device = "cpu"
mem_gib = 2
[[nodes]]
host = "127.0.0.1"
slots = 3
[job]
model = "$MODEL"
batch = 16
micro_batch = 4
iterations = 6
launch = "local"
checkpoint_dir = "$TMP/$1.ckpt"
checkpoint_interval = 2
checkpoint_keep = 3
[health]
heartbeat_ms = 100
timeout_ms = 3000
EOF
    echo "$TMP/$1.toml"
}
digest() { sed -n 's/^weights sha256 \([0-9a-f]\{64\}\)$/\1/p' "$1"; }
ms() { date -d "$(echo "$1" | cut -c1-24)" +%s%3N; } # a log line's time, ms

"$COORD" --plan gpp "$(conf ref)" >"$TMP/ref.out" 2>/dev/null
ref=$(digest "$TMP/ref.out")
same=0
times=()
for t in $(seq 1 "$TRIALS"); do
    GPP_FAULT=ckpt_kill:2 "$COORD" --max-restarts 1 --plan gpp "$(conf "t$t")" \
        >"$TMP/t.out" 2>"$TMP/t.err"
    kill_line=$(grep -m1 "ckpt_kill: killing pid" "$TMP/t.err")
    train_line=$(grep "agents ready; training" "$TMP/t.err" | sed -n 2p)
    times+=($(($(ms "$train_line") - $(ms "$kill_line"))))
    [ "$(digest "$TMP/t.out")" = "$ref" ] && same=$((same + 1))
done
sorted=($(printf '%s\n' "${times[@]}" | sort -n))
n=${#sorted[@]}
echo "restart_time: $MODEL, 3 agents, $(nproc) cores, $TRIALS trials"
echo "  kill -> training again: median ${sorted[$((n / 2))]} ms, min ${sorted[0]} ms, max ${sorted[$((n - 1))]} ms"
echo "  weights sha256 equal to the fault-free run's: $same of $TRIALS"
