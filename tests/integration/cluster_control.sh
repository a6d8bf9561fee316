#!/usr/bin/env bash
# cluster_control: the control plane with real processes on loopback (no
# training): local launch and barriers, external agents, a missing agent, a
# duplicate slot, a silent agent, a lost coordinator, an agent that dies,
# Ctrl-C, and a killed coordinator. Every case checks that no process is
# left behind. Usage: cluster_control.sh BUILD_DIR
set -u
BUILD=${1:?usage: cluster_control.sh BUILD_DIR}
COORD=$BUILD/coordinator/gpp-coordinator
AGENT=$BUILD/agent/gpp-agent
PORT0=$((10000 + ($$ * 7) % 10000)) # unique per run, below the ephemeral range; each case adds its own offset
. "$(dirname "$0")/lib/cluster_lib.sh"
cluster_begin cluster_control

# cluster file: $1 name, $2 port, $3 slots, $4 launch
mkconf() {
    cat >"$TMP/$1.toml" <<EOF
[coordinator]
endpoint = "tcp://127.0.0.1:$2"
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

# the coordinator's children, once $2 of them are up (at most 5 s)
children() {
    local t=50 kids
    while [ $t -gt 0 ]; do
        kids=$(pgrep -P "$1" | tr '\n' ' ')
        [ "$(echo $kids | wc -w)" -ge "$2" ] && { echo "$kids"; return; }
        sleep 0.1; t=$((t - 1))
    done
    echo "$kids"
}

# case $1: a control-only job on config $2 with $3 local agents that would
# run for ever; sets CP and KIDS once the agents are up (and half a second on)
start_endless() {
    local C
    C=$(mkconf "$2" $((PORT0 + $1)) "$3" local)
    "$COORD" --control-only --barriers 100000000 "$C" >"$TMP/$1.out" 2>"$TMP/$1.err" &
    CP=$!; PIDS+=($CP)
    KIDS=$(children $CP "$3"); PIDS+=($KIDS)
    sleep 0.5
}

# 1. local launch: 4 agents, 50 barriers, clean shutdown
P=$((PORT0 + 1)); C=$(mkconf local $P 4 local)
timeout 30 "$COORD" --control-only --barriers 50 "$C" >"$TMP/1.out" 2>"$TMP/1.err"
rc=$?
if [ $rc = 0 ] && grep -q "barrier: 4 agents, 49 round trips" "$TMP/1.out" &&
    [ "$(grep -c 'agent 127.0.0.1:[0-3]: shutdown' "$TMP/1.err")" = 4 ]; then
    pass "local launch, 4 agents, 50 barriers, shutdown"
else
    fail "local launch (rc $rc)"; cat "$TMP/1.out" "$TMP/1.err"
fi

# 2. external agents started by hand, registering in any order
P=$((PORT0 + 2)); C=$(mkconf ext $P 2 external)
"$COORD" --control-only --barriers 5 "$C" >"$TMP/2.out" 2>"$TMP/2.err" &
CP=$!; PIDS+=($CP)
"$AGENT" --coordinator tcp://127.0.0.1:$P --host 127.0.0.1 --slot 1 --control-barriers 5 \
    --heartbeat-ms 100 --timeout-ms 3000 2>"$TMP/2a1.err" &
A1=$!; PIDS+=($A1)
"$AGENT" --coordinator tcp://127.0.0.1:$P --host 127.0.0.1 --slot 0 --control-barriers 5 \
    --heartbeat-ms 100 --timeout-ms 3000 2>"$TMP/2a0.err" &
A0=$!; PIDS+=($A0)
bwait $CP 30; rc=$?; bwait $A0 10; r0=$?; bwait $A1 10; r1=$?
if [ $rc = 0 ] && [ $r0 = 0 ] && [ $r1 = 0 ] && grep -q "registered as rank 1 of 2" "$TMP/2a1.err"; then
    pass "external agents, rank from the cluster file"
else
    fail "external agents (rc $rc, agents $r0 $r1)"; cat "$TMP/2.err" "$TMP/2a0.err" "$TMP/2a1.err"
fi

# 3. a missing agent: the start timeout names it; the present agent is aborted
P=$((PORT0 + 3)); C=$(mkconf miss $P 3 external)
"$COORD" --control-only --start-timeout-ms 1000 "$C" >"$TMP/3.out" 2>"$TMP/3.err" &
CP=$!; PIDS+=($CP)
"$AGENT" --coordinator tcp://127.0.0.1:$P --host 127.0.0.1 --slot 1 --control-barriers 1 \
    --heartbeat-ms 100 --timeout-ms 3000 2>"$TMP/3a.err" &
A=$!; PIDS+=($A)
bwait $CP 30; rc=$?; bwait $A 10; ra=$?
if [ $rc = 1 ] && [ $ra = 1 ] &&
    grep -q "missing 127.0.0.1:0, 127.0.0.1:2 (1 of 3 registered)" "$TMP/3.err" &&
    grep -q "job aborted by the coordinator: timed out" "$TMP/3a.err"; then
    pass "missing agents named at the start timeout"
else
    fail "missing agent (rc $rc, agent $ra)"; cat "$TMP/3.err" "$TMP/3a.err"
fi

# 4. two agents for one slot: the second is rejected with the reason, the job goes on
P=$((PORT0 + 4)); C=$(mkconf dup $P 2 external)
"$COORD" --control-only --barriers 3 --start-timeout-ms 5000 "$C" >"$TMP/4.out" 2>"$TMP/4.err" &
CP=$!; PIDS+=($CP)
"$AGENT" --coordinator tcp://127.0.0.1:$P --host 127.0.0.1 --slot 0 --control-barriers 0 \
    --heartbeat-ms 100 --timeout-ms 3000 2>"$TMP/4a.err" &
A=$!; PIDS+=($A)
# the second one waits until the first is registered
for i in $(seq 50); do grep -q "registered as rank" "$TMP/4a.err" && break; sleep 0.1; done
"$AGENT" --coordinator tcp://127.0.0.1:$P --host 127.0.0.1 --slot 0 --control-barriers 3 \
    --heartbeat-ms 100 --timeout-ms 3000 2>"$TMP/4b.err"
rb=$?
# the job never finishes its barriers (the registered agent runs none): stop it
kill -INT $CP; bwait $CP 30; rc=$?; bwait $A 10; ra=$?
if [ $rb = 1 ] && grep -q "rejected by the coordinator: slot 127.0.0.1:0 is already taken" "$TMP/4b.err" &&
    [ $rc = 130 ] && [ $ra != 0 ]; then
    pass "duplicate slot rejected with a reason"
else
    fail "duplicate slot (second agent $rb, coordinator $rc)"; cat "$TMP/4.err" "$TMP/4b.err"
fi

# 5. a silent agent (SIGSTOP): named after the heartbeat timeout, job stopped, no orphans
start_endless 5 silent 3
VICTIM=$(echo $KIDS | cut -d' ' -f2)
kill -STOP $VICTIM
bwait $CP 30; rc=$?
kill -CONT $VICTIM 2>/dev/null
if [ $rc = 1 ] && grep -q "agent 127.0.0.1:[0-2] (rank [0-2], pid $VICTIM) silent for" "$TMP/5.err" &&
    wait_gone 5 $KIDS; then
    pass "silent agent named, job stopped, agents gone"
else
    fail "silent agent (rc $rc)"; tail -5 "$TMP/5.err"
fi

# 6. an agent killed: the coordinator names it at once and stops the job
start_endless 6 kill 3
VICTIM=$(echo $KIDS | cut -d' ' -f3)
kill -KILL $VICTIM
bwait $CP 30; rc=$?
if [ $rc = 1 ] && grep -q "pid $VICTIM) killed by signal 9 (Killed) before the job finished" "$TMP/6.err" &&
    wait_gone 5 $KIDS; then
    pass "killed agent named, the others stopped"
else
    fail "killed agent (rc $rc)"; tail -5 "$TMP/6.err"
fi

# 7. Ctrl-C (SIGINT to the coordinator only): agents aborted and reaped, status 130
start_endless 7 intr 4
kill -INT $CP
bwait $CP 30; rc=$?
if [ $rc = 130 ] && grep -q "interrupted by Interrupt" "$TMP/7.err" && wait_gone 1 $KIDS; then
    pass "SIGINT: agents aborted and reaped, status 130"
else
    fail "SIGINT (rc $rc)"; tail -5 "$TMP/7.err"
fi

# 8. the coordinator killed with SIGKILL: its agents die with it (PR_SET_PDEATHSIG)
start_endless 8 pdeath 3
kill -KILL $CP
wait $CP 2>/dev/null
if [ "$(echo $KIDS | wc -w)" = 3 ] && wait_gone 5 $KIDS; then
    pass "killed coordinator takes its agents with it"
else
    fail "orphans after the coordinator was killed: $KIDS"
fi

# 9. a lost coordinator (SIGSTOP): external agents give up after their timeout
P=$((PORT0 + 9)); C=$(mkconf lost $P 1 external)
"$COORD" --control-only --barriers 1 --start-timeout-ms 10000 "$C" >"$TMP/9.out" 2>"$TMP/9.err" &
CP=$!; PIDS+=($CP)
sleep 0.3
kill -STOP $CP
"$AGENT" --coordinator tcp://127.0.0.1:$P --host 127.0.0.1 --slot 0 --heartbeat-ms 100 \
    --timeout-ms 800 2>"$TMP/9a.err"
ra=$?
kill -CONT $CP; kill -TERM $CP; bwait $CP 10
if [ $ra = 1 ] && grep -q "coordinator tcp://127.0.0.1:$P silent for" "$TMP/9a.err"; then
    pass "agent gives up on a silent coordinator"
else
    fail "lost coordinator (agent $ra)"; cat "$TMP/9a.err"
fi

# 10. bad cluster file: its place is reported, status 2
printf '[job]\nbatch = -4\n' >"$TMP/bad.toml"
"$COORD" --control-only "$TMP/bad.toml" >/dev/null 2>"$TMP/10.err"; rc=$?
if [ $rc = 2 ] && grep -q "bad.toml:2:" "$TMP/10.err"; then
    pass "bad cluster file reported with its place"
else
    fail "bad cluster file (rc $rc)"; cat "$TMP/10.err"
fi

cluster_end
