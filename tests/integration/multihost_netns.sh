#!/usr/bin/env bash
# multihost_netns: a job across three hosts made of network namespaces
# (issue 11, "Multi-host"): a switch namespace with a bridge, veth pairs to a
# coordinator host `coord` (10.77.0.1) and two agent hosts `hosta`, `hostb`
# (10.77.0.2-3), each with its own host name (unshare --uts) and its own
# /etc/hosts (/etc/netns/NS/hosts, which `ip netns exec` bind-mounts) that
# maps the host's own name to 127.0.1.1 as Debian's installer does. The
# coordinator binds by host name, two agents per agent host connect to it
# by name with CURVE keys (docs/operations.md's multi-host steps: --keygen,
# key_dir, --coordinator-key and --key per slot) and train the main job; the loss curve and the weights digest must
# equal those of the same plan on one host. Then the other bind forms
# (interface, wildcard), the bind errors, and a network partition (hostb cut
# off mid-run: detected, stopped, resumed to the uninterrupted run's
# weights once healed). Needs root and `ip netns`:
# exit 77 (skip) where they are not permitted.
# Usage: multihost_netns.sh BUILD_DIR
set -u
. "$(dirname "$0")/lib/gpp_test.sh"
gpp_test_begin multihost_netns "${1:-}"
COORD=$BUILD/coordinator/gpp-coordinator
AGENT=$BUILD/agent/gpp-agent
. "$SRC/scripts/blas-env.sh"
# the main job (config/examples/local-cpu.toml), fewer iterations
MODEL="mmt:branches=2,layers=2,hidden=256,heads=4,seq=16,ffn=1024"
ITERS=4
NS=gppmh$$ # namespace prefix: ${NS}_sw (the bridge), ${NS}_coord, ${NS}_hosta, ${NS}_hostb
HOSTS=(coord hosta hostb)

# namespaces and their hosts files go even on failure; processes first
# (a process keeps its namespace alive after `ip netns del`)
ns_cleanup() {
    local p
    for p in $(jobs -p); do kill -KILL "$p" 2>/dev/null; done
    for n in sw "${HOSTS[@]}"; do
        ip netns pids "${NS}_$n" 2>/dev/null | xargs -r kill -KILL 2>/dev/null
        ip netns del "${NS}_$n" 2>/dev/null
        rm -rf "/etc/netns/${NS}_$n"
    done
    gpp_test_cleanup
}
trap ns_cleanup EXIT

skip() {
    echo "SKIP: $*"
    exit 77
}
[ "$(id -u)" = 0 ] || skip "network namespaces need root (CI runs this test as root)"
command -v ip >/dev/null && command -v unshare >/dev/null || skip "ip (iproute2) or unshare missing"
ip netns add "${NS}_sw" 2>"$TMP/netns.err" || skip "ip netns add is not permitted here: $(cat "$TMP/netns.err")"

# 1. the hosts: coord 10.77.0.1, hosta .2, hostb .3 on one bridge
setup() {
    ip netns exec "${NS}_sw" ip link add br0 type bridge &&
        ip netns exec "${NS}_sw" ip link set br0 up || return 1
    local i=1 n h
    for n in "${HOSTS[@]}"; do
        ip netns add "${NS}_$n" &&
            ip netns exec "${NS}_sw" ip link add "v_$n" type veth peer name eth0 netns "${NS}_$n" &&
            ip netns exec "${NS}_sw" ip link set "v_$n" master br0 up &&
            ip netns exec "${NS}_$n" ip addr add "10.77.0.$i/24" dev eth0 &&
            ip netns exec "${NS}_$n" ip link set eth0 up &&
            ip netns exec "${NS}_$n" ip link set lo up || return 1
        mkdir -p "/etc/netns/${NS}_$n"
        {
            echo "127.0.0.1 localhost"
            # Debian maps a host's own name to 127.0.1.1: an agent must not
            # advertise that; the coordinator host's name is its address
            [ "$n" != coord ] && echo "127.0.1.1 $n"
            for h in 1 2 3; do echo "10.77.0.$h ${HOSTS[h - 1]}"; done
        } >"/etc/netns/${NS}_$n/hosts"
        i=$((i + 1))
    done
}
if setup 2>"$TMP/setup.err"; then
    ok "three hosts on a bridge: coord 10.77.0.1, hosta 10.77.0.2, hostb 10.77.0.3"
else
    skip "veth pairs and bridges are not permitted here: $(cat "$TMP/setup.err")"
fi

# on HOST CMD...: CMD on HOST, under HOST's own host name
on() { ip netns exec "${NS}_$1" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$@"; }
# spawn HOST OUT ERR CMD...: the same in the background; $! is CMD's pid
# (every step execs the next)
spawn() {
    local h=$1 o=$2 e=$3
    shift 3
    (exec ip netns exec "${NS}_$h" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$h" "$@" >"$o" 2>"$e") &
}

if on hosta getent hosts coord | grep -q '^10.77.0.1 ' && [ "$(on hostb hostname)" = hostb ] &&
    on hostb getent hosts hostb | grep -q '^127.0.1.1 '; then
    ok "names resolve per host (hostb: coord 10.77.0.1, its own name 127.0.1.1)"
else
    fail "name resolution or reachability in the namespaces" "$(on hosta getent hosts coord)"
fi

# cluster file PATH ENDPOINT LAUNCH [[nodes] lines]: the main job
conf() {
    cat >"$1" <<EOF
[coordinator]
endpoint = "$2"
$([ "$3" = external ] && echo "key_dir = \"$TMP/keys\"")
[cluster]
device = "cpu"
mem_gib = 0.03
$4
[job]
model = "$MODEL"
batch = 32
iterations = $ITERS
optimizer = "adamw"
lr = 1e-3
weight_decay = 0.01
seed = 42
launch = "$3"
checkpoint_dir = "${1%.toml}.ckpt"
[health]
heartbeat_ms = 250
timeout_ms = 20000
[metrics]
file = "${1%.toml}.jsonl"
EOF
}
TWO_HOSTS='[[nodes]]
host = "hosta"
slots = 2
[[nodes]]
host = "hostb"
slots = 2'
# the local launch gives each of its 4 agents cores/4 threads (at least
# one); the external agents get as many, so that OpenBLAS sums alike
CORES=$(getconf _NPROCESSORS_ONLN)
THREADS=$((CORES > 4 ? CORES / 4 : 1))
MEM=32212254 # mem_gib 0.03 in bytes, as the local launch passes it
# the keys of docs/operations.md's multi-host steps: one pair per slot
# index (agent-N admits slot N on any host), shared by the hosts
"$COORD" --keygen "$TMP/keys" --agents 2 >/dev/null
# agent HOST PORT SLOT [ARGS]: one agent on HOST, started by hand, connecting
# to the coordinator by name with its slot's key
agent() {
    local h=$1 p=$2 s=$3
    shift 3
    spawn "$h" "$TMP/$h.$p.$s.out" "$TMP/$h.$p.$s.err" "$AGENT" --coordinator "tcp://coord:$p" \
        --slot "$s" --threads "$THREADS" --mem-bytes $MEM --heartbeat-ms 250 --timeout-ms 20000 \
        --coordinator-key "$TMP/keys/coordinator.key" --key "$TMP/keys/agent-$s.key_secret" "$@"
}
losses() { grep -o '"iteration":[0-9]*,"loss":[^,]*' "$1"; }
digest() { sed -n 's/^{"weights_sha256":"\([0-9a-f]*\)"}$/\1/p' "$1"; }

# 2. the main job on one host (local launch, loopback) with the planner's plan
conf "$TMP/one.toml" "tcp://127.0.0.1:$(free_port)" local '[[nodes]]
host = "127.0.0.1"
slots = 4'
timeout 300 "$COORD" --plan gpp "$TMP/one.toml" >"$TMP/one.out" 2>"$TMP/one.err"
rc=$?
if [ $rc = 0 ] && [ "$(losses "$TMP/one.jsonl" | wc -l)" = $ITERS ] && [ -n "$(digest "$TMP/one.jsonl")" ]; then
    ok "single host: $ITERS iterations, digest $(digest "$TMP/one.jsonl" | head -c 16)..."
else
    fail "single-host run (rc $rc)" "$(tail -5 "$TMP/one.out")" "$(grep -v OpenBLAS "$TMP/one.err" | tail -5)"
fi

# 3. the same plan across the hosts: the coordinator binds its host name;
#    hostb's slot 1 names its address (--advertise), the others find theirs
conf "$TMP/mh.toml" "tcp://coord:5555" external "$TWO_HOSTS"
spawn coord "$TMP/mh.out" "$TMP/mh.err" "$COORD" --plan "$TMP/one.ckpt/plan.json" "$TMP/mh.toml"
CP=$!
wait_until 20 grep -q "listening on" "$TMP/mh.err"
agent hosta 5555 0
agent hosta 5555 1
agent hostb 5555 0
agent hostb 5555 1 --advertise 10.77.0.3
bwait $CP 300
rc=$?
if [ $rc = 0 ] && grep -q "listening on tcp://coord:5555 (tcp://10.77.0.1:5555" "$TMP/mh.err" &&
    [ "$(losses "$TMP/mh.jsonl")" = "$(losses "$TMP/one.jsonl")" ] &&
    [ -n "$(digest "$TMP/mh.jsonl")" ] && [ "$(digest "$TMP/mh.jsonl")" = "$(digest "$TMP/one.jsonl")" ]; then
    ok "coord + hosta + hostb: the loss curve and the weights digest of the single-host run"
else
    fail "multi-host run (rc $rc): losses or digest differ from the single-host run" \
        "one: $(losses "$TMP/one.jsonl" | tr '\n' ' ') $(digest "$TMP/one.jsonl")" \
        " mh: $(losses "$TMP/mh.jsonl" | tr '\n' ' ') $(digest "$TMP/mh.jsonl")" \
        "$(grep -v OpenBLAS "$TMP/mh.err" | tail -8)" "$(cat "$TMP"/host*.5555.*.err | grep -v OpenBLAS | tail -8)"
fi
# every advertised data-plane address is the host's network address
dp() { sed -n 's/.*data plane on \([0-9.]*\) (\(.*\))$/\1 \2/p' "$TMP/$1.5555.$2.err"; }
if [ "$(dp hosta 0)" = "10.77.0.2 route to the coordinator coord" ] &&
    [ "$(dp hosta 1)" = "10.77.0.2 route to the coordinator coord" ] &&
    [ "$(dp hostb 0)" = "10.77.0.3 route to the coordinator coord" ] &&
    [ "$(dp hostb 1)" = "10.77.0.3 --advertise" ]; then
    ok "data plane: hosta 10.77.0.2, hostb 10.77.0.3, not their names' 127.0.1.1"
else
    fail "advertised data-plane addresses" "$(dp hosta 0)|$(dp hosta 1)|$(dp hostb 0)|$(dp hostb 1)"
fi

# 4. the other bind forms: an interface (a control-only job: registration
#    and barriers; hostb's agents take their interface's address, --iface)
#    and the wildcard (training: the agents' rendezvous endpoint then names
#    the coordinator's host name, which they resolve)
conf "$TMP/iface.toml" "tcp://eth0:5556" external "$TWO_HOSTS"
spawn coord "$TMP/iface.out" "$TMP/iface.err" "$COORD" --control-only --barriers 3 "$TMP/iface.toml"
CP=$!
wait_until 20 grep -q "listening on" "$TMP/iface.err"
agent hosta 5556 0 --control-barriers 3
agent hosta 5556 1 --control-barriers 3
agent hostb 5556 0 --control-barriers 3 --iface eth0
agent hostb 5556 1 --control-barriers 3 --iface eth0
if bwait $CP 60 && grep -q "^barrier: 4 agents, 2 round trips" "$TMP/iface.out" &&
    grep -q "listening on tcp://eth0:5556 (tcp://10.77.0.1:5556" "$TMP/iface.err" &&
    grep -q "data plane on 10.77.0.3 (--iface eth0)" "$TMP/hostb.5556.1.err"; then
    ok "bind to an interface (tcp://eth0:5556): 4 agents, 3 barriers"
else
    fail "bind to an interface" "$(grep -v OpenBLAS "$TMP/iface.err" | tail -5)"
fi
conf "$TMP/wild.toml" "tcp://*:5557" external "$TWO_HOSTS"
spawn coord "$TMP/wild.out" "$TMP/wild.err" "$COORD" --plan "$TMP/one.ckpt/plan.json" --iterations 2 "$TMP/wild.toml"
CP=$!
wait_until 20 grep -q "listening on" "$TMP/wild.err"
for h in hosta hostb; do agent $h 5557 0; agent $h 5557 1; done
bwait $CP 300
rc=$?
if [ $rc = 0 ] && grep -q "listening on tcp://\*:5557" "$TMP/wild.err" &&
    [ "$(losses "$TMP/wild.jsonl")" = "$(losses "$TMP/one.jsonl" | head -2)" ]; then
    ok "bind to every interface (tcp://*:5557): 2 iterations, the single-host losses"
else
    fail "bind to the wildcard (rc $rc)" "$(losses "$TMP/wild.jsonl" | tr '\n' ' ')" \
        "$(grep -v OpenBLAS "$TMP/wild.err" | tail -5)"
fi

# 5. bind errors: exit status 2, the host or port named, nothing left running
conf "$TMP/bad.toml" "tcp://nohost.invalid:5555" external "$TWO_HOSTS"
expect_fail "a host name that does not resolve" "host name 'nohost.invalid' does not resolve" \
    on coord "$COORD" --control-only "$TMP/bad.toml"
conf "$TMP/other.toml" "tcp://hosta:5555" external "$TWO_HOSTS"
expect_fail "another host's name" "'hosta' resolves to 10.77.0.2, which is not an address of this host" \
    on coord "$COORD" --control-only "$TMP/other.toml"
conf "$TMP/busy.toml" "tcp://coord:5558" external "$TWO_HOSTS"
spawn coord "$TMP/hold.out" "$TMP/hold.err" "$COORD" --control-only "$TMP/busy.toml"
HOLD=$!
wait_until 20 grep -q "listening on" "$TMP/hold.err"
expect_fail "a port in use (by another coordinator)" \
    "cannot bind 'tcp://coord:5558' (tcp://10.77.0.1:5558): Address already in use" \
    on coord "$COORD" --control-only "$TMP/busy.toml"
kill -TERM $HOLD 2>/dev/null
bwait $HOLD 20 >/dev/null
expect_fail "an agent whose --iface does not exist" "interface 'eth9' has no IPv4 address" \
    on hosta "$AGENT" --coordinator tcp://coord:5555 --slot 0 --iface eth9
# 6. a network partition (issue 12's fault suite): hostb is cut off the
#    bridge mid-run. The coordinator names a silent agent on hostb after the
#    heartbeat timeout and stops the job (exit 1); hosta's agents, blocked on
#    tensors from hostb, are aborted and hostb's give up on the coordinator:
#    nothing hangs. Healed, --resume with the agents started again finishes
#    from the newest set with the weights digest of an uninterrupted run.
ITERS12=12
conf "$TMP/ref12.toml" "tcp://127.0.0.1:$(free_port)" local '[[nodes]]
host = "127.0.0.1"
slots = 4'
sed -i 's/^\[job\]$/[job]\ncheckpoint_interval = 2/' "$TMP/ref12.toml"
timeout 300 "$COORD" --plan "$TMP/one.ckpt/plan.json" --iterations $ITERS12 "$TMP/ref12.toml" \
    >"$TMP/ref12.out" 2>"$TMP/ref12.err"
REF12=$(digest "$TMP/ref12.jsonl")
conf "$TMP/part.toml" "tcp://coord:5559" external "$TWO_HOSTS"
sed -i 's/^\[job\]$/[job]\ncheckpoint_interval = 2/; s/^timeout_ms = 20000$/timeout_ms = 2000/' "$TMP/part.toml"
spawn coord "$TMP/part.out" "$TMP/part.err" "$COORD" --plan "$TMP/one.ckpt/plan.json" \
    --iterations $ITERS12 "$TMP/part.toml"
CP=$!
wait_until 20 grep -q "listening on" "$TMP/part.err"
for h in hosta hostb; do agent $h 5559 0 --timeout-ms 2000; agent $h 5559 1 --timeout-ms 2000; done
APIDS=$(jobs -p)
wait_until 120 grep -q "^iter 4/$ITERS12 " "$TMP/part.out"
ip netns exec "${NS}_sw" ip link set v_hostb down
t0=$(date +%s%N)
bwait $CP 60
rc=$?
t1=$(date +%s%N)
agents_gone() { ! ip netns pids "${NS}_hosta" | grep -q . && ! ip netns pids "${NS}_hostb" | grep -q .; }
if [ $rc = 1 ] && [ -n "$REF12" ] && grep -q "job stopped: .*agent hostb:[01] .*" "$TMP/part.err" &&
    ! grep -q "^iter $ITERS12/$ITERS12 " "$TMP/part.out" && wait_until 30 agents_gone; then
    ok "hostb cut off after iteration 4: stopped in $(((t1 - t0) / 1000000)) ms naming an agent on hostb (rc 1), every agent gone"
else
    fail "network partition (rc $rc)" "$(grep -v OpenBLAS "$TMP/part.err" | grep -i 'error\|stopped' | tail -4)" \
        "left: $(ip netns pids "${NS}_hosta") $(ip netns pids "${NS}_hostb")"
fi
ip netns exec "${NS}_sw" ip link set v_hostb up
spawn coord "$TMP/part2.out" "$TMP/part2.err" "$COORD" --plan "$TMP/one.ckpt/plan.json" \
    --iterations $ITERS12 --resume "$TMP/part.toml"
CP=$!
wait_until 20 grep -q "listening on" "$TMP/part2.err"
for h in hosta hostb; do agent $h 5559 0 --timeout-ms 2000; agent $h 5559 1 --timeout-ms 2000; done
bwait $CP 300
rc=$?
if [ $rc = 0 ] && grep -q "resumed from checkpoint set" "$TMP/part2.out" &&
    [ "$(digest "$TMP/part.jsonl")" = "$REF12" ]; then
    ok "healed, --resume: $(sed -n 's/^summary: \(.*\)$/\1/p' "$TMP/part2.out"), weights sha256 equal to the uninterrupted run's"
else
    fail "--resume after the partition (rc $rc, digest $(digest "$TMP/part.jsonl"), ref $REF12)" \
        "$(grep -v OpenBLAS "$TMP/part2.err" | tail -5)"
fi

left() { ip netns pids "${NS}_coord"; ip netns pids "${NS}_hosta"; ip netns pids "${NS}_hostb"; }
none_left() { [ -z "$(left)" ]; }
if wait_until 10 none_left; then
    ok "no process left in the hosts"
else
    fail "processes left in the namespaces:" "$(left | xargs -r ps -o pid=,args= -p)"
fi

gpp_test_end
