#!/usr/bin/env bash
# cluster_control: the control plane with real processes on loopback (no
# training): local launch and barriers, external agents, a missing agent, a
# duplicate slot, a silent agent, a lost coordinator, an agent that dies,
# Ctrl-C, and a killed coordinator. Every case checks that no process is
# left behind. Usage: cluster_control.sh BUILD_DIR
set -u
. "$(dirname "$0")/lib/gpp_test.sh"
gpp_test_begin cluster_control "${1:-}"
COORD=$BUILD/coordinator/gpp-coordinator
AGENT=$BUILD/agent/gpp-agent

# cluster file: $1 name, $2 port, $3 slots, $4 launch (external: plaintext,
# opted into: these cases are about the control logic; curve_cli.sh has keys)
mkconf() {
    cat >"$TMP/$1.toml" <<EOF
[coordinator]
endpoint = "tcp://127.0.0.1:$2"
insecure_plaintext = $([ "$4" = external ] && echo true || echo false)
[[nodes]]
host = "127.0.0.1"
slots = $3
[job]
model = "mmt:branches=2,layers=1,hidden=16,heads=2,seq=4,ffn=32"
batch = 8
iterations = 1
launch = "$4"
[health]
heartbeat_ms = 100
timeout_ms = 3000
EOF
    echo "$TMP/$1.toml"
}

# 0 when process $1 has at least $2 children
has_children() { [ "$(pgrep -P "$1" | wc -l)" -ge "$2" ]; }
# the coordinator's children, once $2 of them are up (at most 5 s)
children() {
    wait_until 5 has_children "$1" "$2"
    pgrep -P "$1" | tr '\n' ' '
}

# case $1: a control-only job on config $2 with $3 local agents that would
# run for ever; sets CP and KIDS once the agents are up (and half a second on)
start_endless() {
    local C
    C=$(mkconf "$2" "$(free_port)" "$3" local)
    "$COORD" --control-only --barriers 100000000 "$C" >"$TMP/$1.out" 2>"$TMP/$1.err" &
    CP=$!
    KIDS=$(children $CP "$3"); track $KIDS
    sleep 0.5
}

# case $1 after a signal: the coordinator $CP exits with status $2 within
# 30 s, naming $3 (a grep pattern) on stderr, and its agents $KIDS are gone
# within $4 s (a stopped $VICTIM is resumed: it cannot die otherwise); $5
# says what passed
expect_stopped() {
    bwait $CP 30
    local rc=$?
    [ -n "$VICTIM" ] && kill -CONT "$VICTIM" 2>/dev/null
    if [ $rc = "$2" ] && grep -q "$3" "$TMP/$1.err" && wait_gone "$4" $KIDS; then
        ok "$5"
    else
        fail "$5 (rc $rc)" "$(tail -5 "$TMP/$1.err")"
    fi
}

# 1. local launch: 4 agents, 50 barriers, clean shutdown
P=$(free_port); C=$(mkconf local $P 4 local)
timeout 30 "$COORD" --control-only --barriers 50 "$C" >"$TMP/1.out" 2>"$TMP/1.err"
rc=$?
if [ $rc = 0 ] && grep -q "barrier: 4 agents, 49 round trips" "$TMP/1.out" &&
    [ "$(grep -c 'agent 127.0.0.1:[0-3]: shutdown' "$TMP/1.err")" = 4 ]; then
    ok "local launch, 4 agents, 50 barriers, shutdown"
else
    fail "local launch (rc $rc)"; cat "$TMP/1.out" "$TMP/1.err"
fi

# 2. external agents started by hand, registering in any order
P=$(free_port); C=$(mkconf ext $P 2 external)
"$COORD" --control-only --barriers 5 "$C" >"$TMP/2.out" 2>"$TMP/2.err" &
CP=$!
"$AGENT" --coordinator tcp://127.0.0.1:$P --host 127.0.0.1 --slot 1 --control-barriers 5 \
    --heartbeat-ms 100 --timeout-ms 3000 2>"$TMP/2a1.err" &
A1=$!
"$AGENT" --coordinator tcp://127.0.0.1:$P --host 127.0.0.1 --slot 0 --control-barriers 5 \
    --heartbeat-ms 100 --timeout-ms 3000 2>"$TMP/2a0.err" &
A0=$!
bwait $CP 30; rc=$?; bwait $A0 10; r0=$?; bwait $A1 10; r1=$?
if [ $rc = 0 ] && [ $r0 = 0 ] && [ $r1 = 0 ] && grep -q "registered as rank 1 of 2" "$TMP/2a1.err"; then
    ok "external agents, rank from the cluster file"
else
    fail "external agents (rc $rc, agents $r0 $r1)"; cat "$TMP/2.err" "$TMP/2a0.err" "$TMP/2a1.err"
fi

# 3. a missing agent: the start timeout names it; the present agent is aborted
#    (4 s: the present agent must register first, also on a loaded machine)
P=$(free_port); C=$(mkconf miss $P 3 external)
"$COORD" --control-only --start-timeout-ms 4000 "$C" >"$TMP/3.out" 2>"$TMP/3.err" &
CP=$!
"$AGENT" --coordinator tcp://127.0.0.1:$P --host 127.0.0.1 --slot 1 --control-barriers 1 \
    --heartbeat-ms 100 --timeout-ms 3000 2>"$TMP/3a.err" &
A=$!
bwait $CP 30; rc=$?; bwait $A 10; ra=$?
if [ $rc = 1 ] && [ $ra = 1 ] &&
    grep -q "missing 127.0.0.1:0, 127.0.0.1:2 (1 of 3 registered)" "$TMP/3.err" &&
    grep -q "job aborted by the coordinator: timed out" "$TMP/3a.err"; then
    ok "missing agents named at the start timeout"
else
    fail "missing agent (rc $rc, agent $ra)"; cat "$TMP/3.err" "$TMP/3a.err"
fi

# 4. two agents for one slot: the second is rejected with the reason, the job goes on
P=$(free_port); C=$(mkconf dup $P 2 external)
"$COORD" --control-only --barriers 3 --start-timeout-ms 5000 "$C" >"$TMP/4.out" 2>"$TMP/4.err" &
CP=$!
"$AGENT" --coordinator tcp://127.0.0.1:$P --host 127.0.0.1 --slot 0 --control-barriers 0 \
    --heartbeat-ms 100 --timeout-ms 3000 2>"$TMP/4a.err" &
A=$!
# the second one waits until the first is registered
wait_until 5 grep -q "registered as rank" "$TMP/4a.err"
"$AGENT" --coordinator tcp://127.0.0.1:$P --host 127.0.0.1 --slot 0 --control-barriers 3 \
    --heartbeat-ms 100 --timeout-ms 3000 2>"$TMP/4b.err"
rb=$?
# the job never finishes its barriers (the registered agent runs none): stop it
kill -INT $CP; bwait $CP 30; rc=$?; bwait $A 10; ra=$?
if [ $rb = 1 ] && grep -q "rejected by the coordinator: slot 127.0.0.1:0 is already taken" "$TMP/4b.err" &&
    [ $rc = 130 ] && [ $ra != 0 ]; then
    ok "duplicate slot rejected with a reason"
else
    fail "duplicate slot (second agent $rb, coordinator $rc)"; cat "$TMP/4.err" "$TMP/4b.err"
fi

# 5. a silent agent (SIGSTOP): named after the heartbeat timeout, job stopped, no orphans
start_endless 5 silent 3
VICTIM=$(echo $KIDS | cut -d' ' -f2)
kill -STOP $VICTIM
expect_stopped 5 1 "agent 127.0.0.1:[0-2] (rank [0-2], pid $VICTIM) silent for" 5 \
    "silent agent named, job stopped, agents gone"

# 6. an agent killed: the coordinator names it at once and stops the job
start_endless 6 kill 3
VICTIM=$(echo $KIDS | cut -d' ' -f3)
kill -KILL $VICTIM
expect_stopped 6 1 "pid $VICTIM) killed by signal 9 (Killed) before the job finished" 5 \
    "killed agent named, the others stopped"

# 7. Ctrl-C (SIGINT to the coordinator only): agents aborted and reaped, status 130
start_endless 7 intr 4
VICTIM=
kill -INT $CP
expect_stopped 7 130 "interrupted by Interrupt" 1 "SIGINT: agents aborted and reaped, status 130"

# 8. the coordinator killed with SIGKILL: its agents die with it (PR_SET_PDEATHSIG)
start_endless 8 pdeath 3
kill -KILL $CP
wait $CP 2>/dev/null
if [ "$(echo $KIDS | wc -w)" = 3 ] && wait_gone 5 $KIDS; then
    ok "killed coordinator takes its agents with it"
else
    fail "orphans after the coordinator was killed: $KIDS"
fi

# 9. a lost coordinator (SIGSTOP): external agents give up after their timeout
P=$(free_port); C=$(mkconf lost $P 1 external)
"$COORD" --control-only --barriers 1 --start-timeout-ms 10000 "$C" >"$TMP/9.out" 2>"$TMP/9.err" &
CP=$!
sleep 0.3
kill -STOP $CP
"$AGENT" --coordinator tcp://127.0.0.1:$P --host 127.0.0.1 --slot 0 --heartbeat-ms 100 \
    --timeout-ms 800 2>"$TMP/9a.err"
ra=$?
kill -CONT $CP; kill -TERM $CP; bwait $CP 10
if [ $ra = 1 ] && grep -q "coordinator tcp://127.0.0.1:$P silent for" "$TMP/9a.err"; then
    ok "agent gives up on a silent coordinator"
else
    fail "lost coordinator (agent $ra)"; cat "$TMP/9a.err"
fi

# 10. bad cluster file: its place is reported, status 2
printf '[job]\nbatch = -4\n' >"$TMP/bad.toml"
"$COORD" --control-only "$TMP/bad.toml" >/dev/null 2>"$TMP/10.err"; rc=$?
if [ $rc = 2 ] && grep -q "bad.toml:2:" "$TMP/10.err"; then
    ok "bad cluster file reported with its place"
else
    fail "bad cluster file (rc $rc)"; cat "$TMP/10.err"
fi

# backend = "cuda" where the agents see no GPU (CUDA_VISIBLE_DEVICES empty,
# so on a GPU machine too): refused with exit 2, naming agent and host,
# never a CPU run (tests/integration/cuda_agents.sh has the other cases)
CONF=$(mkconf cuda "$(free_port)" 2 local)
sed -i 's/^launch = .*/&\nbackend = "cuda"/' "$CONF"
printf '[cluster]\ndevice = "h100-80g"\n' >>"$CONF"
expect_fail "cuda backend without a GPU refused" 'on host 127.0.0.1 has no usable GPU\|built without CUDA' \
    env CUDA_VISIBLE_DEVICES= "$COORD" "$CONF"

gpp_test_end
