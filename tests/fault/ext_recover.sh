#!/usr/bin/env bash
# ext_recover: automatic recovery with EXTERNAL agents (issue 12). Every
# slot's agent runs under a supervisor loop that starts it again when it
# ends with a failure after $DELAY s, as systemd does with
# gpp-agent@.service (Restart=on-failure, RestartSec=). launch = "external"
# on 127.0.0.1, 2 slots, $ITERS iterations, a set every 2:
#   a. the reference: an uninterrupted job under the same supervisors (the
#      same agent flags: threads, memory);
#   b. --max-restarts 2, CURVE keys from key_dir: slot 1's agent is
#      SIGKILLed mid-run; every agent exits on the Abort and is started
#      again with its key, the coordinator waits on its endpoint for both
#      to register again, resumes from the newest complete set and ends
#      with the reference's weights sha256;
#   c. slot 1's supervisor gives up (no restart): with --elastic the job is
#      re-planned on slot 0 after --rejoin-timeout-ms, resumes from the
#      newest set re-sharded and finishes, every loss equal to the
#      reference's; without --elastic it stops with exit 1 naming slot 1;
#   d. a slot whose agent dies on every start (SIGKILLed once registered)
#      stops the job after --max-restarts 2 restarts (exit 1).
# Prints the time from the kill to training again in b.
# Usage: ext_recover.sh BUILD_DIR
set -u
. "$(dirname "$0")/../integration/lib/gpp_test.sh"
gpp_test_begin ext_recover "${1:-}"
COORD=$BUILD/coordinator/gpp-coordinator
AGENT=$BUILD/agent/gpp-agent
MODEL="mmt:branches=2,layers=1,hidden=32,heads=2,seq=8,ffn=64"
ITERS=300
DELAY=0.5 # the supervisor's restart delay (RestartSec)
SUPS=()   # supervisor loops (subshells): stopped before the test's cleanup

# $1 name: external launch, 2 slots on 127.0.0.1, its own port and directory
mkconf() {
    cpu_job_conf "$TMP/$1.toml" 2 $ITERS "$TMP/$1.ckpt" "micro_batch = 4
checkpoint_interval = 2
checkpoint_keep = 5" >/dev/null
    sed -i -e 's/^launch = "local"$/launch = "external"/; s/^timeout_ms = 3000$/timeout_ms = 1500/' \
        -e 's/^\[coordinator\]$/[coordinator]\ninsecure_plaintext = true/' "$TMP/$1.toml"
    printf '[metrics]\nfile = "%s"\n' "$TMP/$1.jsonl" >>"$TMP/$1.toml"
    echo "$TMP/$1.toml"
}
port_of() { sed -n 's|^endpoint = "tcp://127.0.0.1:\([0-9]*\)"$|\1|p' "$1"; }

# supervise CONF TAG SLOT: starts the slot's agent and again $DELAY s after
# each failed end, until it ends with 0 or $TMP/TAG.hold.SLOT exists. Run
# n logs to $TMP/TAG.aSLOT.n.err; $TMP/TAG.pidSLOT holds "PID n" of the
# agent now running. A cluster file with key_dir: the agent uses its keys.
supervise() {
    local p n=0 rc keys=()
    p=$(port_of "$1")
    grep -q "^key_dir" "$1" && keys=(--coordinator-key "$K/coordinator.key" --key "$K/agent-$3.key_secret")
    while :; do
        "$AGENT" --coordinator "tcp://127.0.0.1:$p" --host 127.0.0.1 --slot "$3" --threads 1 \
            --mem-bytes 2147483648 --heartbeat-ms 100 --timeout-ms 1500 "${keys[@]}" \
            >"$TMP/$2.a$3.$n.out" 2>"$TMP/$2.a$3.$n.err" &
        echo "$! $n" >"$TMP/$2.pid$3"
        wait $!
        rc=$?
        [ $rc = 0 ] || [ -e "$TMP/$2.hold.$3" ] && break
        n=$((n + 1))
        sleep $DELAY
    done
}
# supervisors CONF TAG: one per slot
supervisors() {
    local s
    for s in 0 1; do
        supervise "$1" "$2" $s 2>>"$TMP/supervisors.err" &
        SUPS+=($!)
    done
}
# the loops first (else they start agents again), then their agents
stop_supervisors() {
    local p f
    for p in "${SUPS[@]}"; do
        kill -KILL "$p" 2>/dev/null
        wait "$p" 2>/dev/null # reaped quietly (no "Killed" line)
    done
    for f in "$TMP"/*.pid[01]; do
        [ -f "$f" ] && kill -KILL "$(cut -d' ' -f1 "$f")" 2>/dev/null
    done
    SUPS=()
}
trap 'stop_supervisors; gpp_test_cleanup' EXIT
agent_pid() { cut -d' ' -f1 "$TMP/$1.pid$2" 2>/dev/null; }
digest() { sed -n 's/^weights sha256 \([0-9a-f]\{64\}\)$/\1/p' "$1"; }
# coordinator NAME ARGS...: started on $TMP/NAME.toml with its supervisors; CP
coordinator() {
    local name=$1
    shift
    "$COORD" --plan gpp "$@" "$TMP/$name.toml" >"$TMP/$name.out" 2>"$TMP/$name.err" &
    CP=$!
    track $CP
    wait_until 20 grep -q "listening on" "$TMP/$name.err"
    supervisors "$TMP/$name.toml" "$name"
}
# kill_at NAME ITER SLOT: SIGKILLs the slot's agent once iteration ITER is printed
kill_at() {
    wait_until 120 grep -q "^iter $2/$ITERS " "$TMP/$1.out"
    date -u +%Y-%m-%dT%H:%M:%S.%N >"$TMP/$1.kill"
    kill -KILL "$(agent_pid "$1" "$3")"
}
errtail() { grep -v OpenBLAS "$1" | tail -"${2:-5}"; }

# a. the reference
mkconf ref >/dev/null
coordinator ref
bwait $CP 180
rc=$?
ref=$(digest "$TMP/ref.out")
if [ $rc = 0 ] && [ -n "$ref" ]; then
    ok "uninterrupted external run under supervisors: weights sha256 $ref"
else
    fail "reference run (rc $rc)" "$(errtail "$TMP/ref.err")"
fi
stop_supervisors

# b. slot 1 SIGKILLed after iteration 10: both come back, the job resumes
K=$TMP/keys
"$COORD" --keygen "$K" --agents 2 >/dev/null
mkconf kill >/dev/null
sed -i -e "s|^\[coordinator\]$|[coordinator]\nkey_dir = \"$K\"|" -e '/^insecure_plaintext = /d' "$TMP/kill.toml"
coordinator kill --max-restarts 2
kill_at kill 10 1
bwait $CP 180
rc=$?
from=$(sed -n 's/^restart: agents died; waiting up to .* then resuming from checkpoint set \([0-9]*\)$/\1/p' "$TMP/kill.out")
if [ $rc = 0 ] && [ -n "$from" ] && [ "$(digest "$TMP/kill.out")" = "$ref" ] &&
    [ "$(grep -c "^restart: agents died" "$TMP/kill.out")" = 1 ] &&
    [ -s "$TMP/kill.a0.1.err" ] && [ -s "$TMP/kill.a1.1.err" ] && ! grep -q "NOT authenticated" "$TMP/kill.err"; then
    ok "slot 1 SIGKILLed after iteration 10 (CURVE): both slots registered again, resumed from set $from, the reference's weights sha256"
else
    fail "recovery (rc $rc, from '$from', digest $(digest "$TMP/kill.out"))" "$(errtail "$TMP/kill.err")"
fi
# the restart is counted against slot 1 alone: the coordinator named it from
# slot 0's Error (the peer whose connection broke) or found it silent
if grep -q "agent 127.0.0.1:1 (rank 1) is blamed: a peer's connection to it broke first\|agent 127.0.0.1:1 (rank 1.*) silent for" "$TMP/kill.err" &&
    ! grep -q "agent 127.0.0.1:0 (rank 0) is blamed\|every slot counts a restart" "$TMP/kill.err"; then
    ok "the restart is blamed on slot 1 only ($(grep -o "is blamed: a peer's connection to it broke first\|silent for" "$TMP/kill.err" | head -1))"
else
    fail "blame after slot 1's kill" "$(grep "blamed\|silent\|every slot" "$TMP/kill.err")"
fi
python3 - "$TMP/kill.err" "$(cat "$TMP/kill.kill")" "$DELAY" <<'EOF'
import sys
from datetime import datetime
t = lambda s: datetime.strptime(s[:23], "%Y-%m-%dT%H:%M:%S.%f")
up = [l for l in open(sys.argv[1]) if "all 2 agents ready; training" in l]
if len(up) >= 2:
    print("     kill to training again: %.0f ms (external agents, supervisor restart delay %s s)"
          % ((t(up[-1]) - t(sys.argv[2])).total_seconds() * 1000, sys.argv[3]))
EOF
stop_supervisors

# c1. slot 1 not restarted, --elastic: re-planned on slot 0
mkconf el >/dev/null
coordinator el --max-restarts 2 --elastic --rejoin-timeout-ms 4000
touch "$TMP/el.hold.1"
kill_at el 10 1
bwait $CP 180
rc=$?
if [ $rc = 0 ] && grep -q "not back within 4.0 s (--rejoin-timeout-ms); --elastic: dropping slot 127.0.0.1:1" "$TMP/el.err" &&
    grep -q "^elastic: 1 slot dropped; re-planning (--plan gpp) on the 1 remaining device from checkpoint set" "$TMP/el.out" &&
    grep -q "^iter $ITERS/$ITERS " "$TMP/el.out"; then
    ok "slot 1 not back within --rejoin-timeout-ms: dropped, re-planned on slot 0, finished (rc 0)"
else
    fail "elastic (rc $rc)" "$(errtail "$TMP/el.err")" "$(grep "^restart\|^elastic" "$TMP/el.out")"
fi
if python3 - "$TMP/ref.jsonl" "$TMP/el.jsonl" <<'EOF'; then
import json, sys
def losses(path):
    out = {}
    for r in map(json.loads, open(path)):
        if "iteration" in r:
            out[r["iteration"]] = r["loss"]  # the last line of an iteration counts
    return out
ref, el = losses(sys.argv[1]), losses(sys.argv[2])
bad = [i for i in ref if el.get(i) != ref[i]]
assert not bad, [(i, el.get(i), ref[i]) for i in bad[:5]]
print("     all %d losses equal the reference's (%.6f -> %.6f)" % (len(ref), ref[0], ref[max(ref)]))
EOF
    ok "the loss continues on 1 device: every loss equals the uninterrupted 2-agent run's"
else
    fail "losses after the elastic re-plan differ from the reference's"
fi
stop_supervisors

# c2. the same without --elastic: exit 1 naming the missing slot
mkconf noel >/dev/null
coordinator noel --max-restarts 2 --rejoin-timeout-ms 3000
touch "$TMP/noel.hold.1"
kill_at noel 10 1
bwait $CP 120
rc=$?
if [ $rc = 1 ] && grep -q "job stopped: timed out after 3.0 s waiting for agents: missing 127.0.0.1:1 (1 of 2 registered)" "$TMP/noel.err"; then
    ok "without --elastic: exit 1 after the rejoin timeout, naming 127.0.0.1:1"
else
    fail "no elastic (rc $rc)" "$(errtail "$TMP/noel.err")"
fi
stop_supervisors

# d. slot 1 dies on every start: the job stops after 2 restarts
mkconf loop >/dev/null
coordinator loop --max-restarts 2
kills=0
while running $CP && [ $kills -lt 6 ]; do
    read -r pid n 2>/dev/null <"$TMP/loop.pid1" || { sleep 0.1; continue; }
    if grep -q "registered as rank" "$TMP/loop.a1.$n.err" 2>/dev/null && [ ! -e "$TMP/loop.killed.$n" ]; then
        sleep 0.1
        kill -KILL "$pid" 2>/dev/null && kills=$((kills + 1))
        touch "$TMP/loop.killed.$n"
    fi
    sleep 0.05
done
bwait $CP 60
rc=$?
if [ $rc = 1 ] && [ $kills = 3 ] && [ "$(grep -c "^restart: agents died" "$TMP/loop.out")" = 2 ] &&
    grep -q -- "--max-restarts 2 reached, not restarting" "$TMP/loop.err"; then
    ok "slot 1 killed on every start: 2 restarts, then exit 1 (--max-restarts 2 reached)"
else
    fail "bounded restarts (rc $rc, $kills kills)" "$(grep -h "^restart:" "$TMP/loop.out")
$(grep -h "blamed\|silent\|job stopped" "$TMP/loop.err" | tail -n 12)"
fi
stop_supervisors
gpp_test_end
