#!/usr/bin/env bash
# slurm_local: scripts/slurm/gpp-job.sbatch under a real Slurm (issue 11,
# "Slurm, for real"): a munge key and a slurm.conf for this one machine in
# the scratch folder, munged, slurmctld and slurmd started here (as root, on
# their own socket, ports and state folders, beside any Slurm the machine
# runs; two slurmd, one per node: this host's name and `localhost`, on
# distinct ports), gpp installed into a scratch prefix (cmake --install),
# the job script submitted with sbatch: the coordinator on the allocation's
# first node, 2 agents per node through srun. Checks that the job trained
# (its output, its metrics file), that an allocation smaller than the plan
# fails with the reason, and tears everything down. Exit 77 (skip) only when the daemons
# cannot run here: not root, Slurm or munge not installed
# (scripts/install-deps.sh installs them), or the node name not resolvable.
# Usage: slurm_local.sh BUILD_DIR
set -u
. "$(dirname "$0")/lib/gpp_test.sh"
gpp_test_begin slurm_local "${1:-}"
. "$SRC/scripts/blas-env.sh"

skip() {
    echo "SKIP: $*"
    exit 77
}
[ "$(id -u)" = 0 ] || skip "slurmd runs jobs as their user and needs root (CI runs this test as root)"
for b in munged slurmctld slurmd sbatch squeue scontrol; do
    command -v $b >/dev/null || skip "$b not installed (Debian slurm-wlm, munge: scripts/install-deps.sh)"
done
NODE=$(hostname)
getent hosts "$NODE" >/dev/null || skip "this host's name '$NODE' does not resolve; Slurm's node name must"
[ "$NODE" != localhost ] || skip "this host is called localhost: no second node name for the second slurmd"
NODES=("$NODE" localhost) # node names the agents and the coordinator resolve

S=$TMP/slurm
mkdir -p "$S/run" "$S/log" "$S/ctld" "$S/spool-$NODE" "$S/spool-localhost" "$S/munge"
chmod 700 "$S/run" "$S/munge"
export SLURM_CONF=$S/slurm.conf
JOBS=()
# jobs cancelled (and gone) before the daemons stop: a job step's
# slurmstepd outlives slurmd otherwise
slurm_cleanup() {
    local j
    for j in "${JOBS[@]}"; do scancel "$j" 2>/dev/null; done
    [ ${#JOBS[@]} -gt 0 ] && wait_until 30 sh -c '[ -z "$(squeue -h 2>/dev/null)" ]'
    gpp_test_cleanup
}
trap slurm_cleanup EXIT

# 1. munged with its own key and socket
dd if=/dev/urandom of="$S/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$S/munge/munge.key"
SOCK=$S/run/munge.sock
munged --foreground --force --socket="$SOCK" --key-file="$S/munge/munge.key" \
    --log-file="$S/log/munged.log" --pid-file="$S/run/munged.pid" --seed-file="$S/munge/seed" \
    >"$S/log/munged.out" 2>&1 &
track $!
wait_until 10 test -S "$SOCK" || skip "munged does not start here: $(cat "$S/log/munged.out" "$S/log/munged.log" 2>/dev/null | tail -3)"

# 2. slurm.conf: two nodes on this host (each with 2 CPUs whatever the host
#    has: config_overrides; a slurmd each, on its own port: %n is the node
#    name) in one partition, no accounting, no cgroups
read -r CTLD_PORT PORT1 PORT2 < <(free_port 3 | tr '\n' ' ')
cat >"$SLURM_CONF" <<EOF
ClusterName=gpptest
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SOCK
StateSaveLocation=$S/ctld
SlurmdSpoolDir=$S/spool-%n
SlurmctldPidFile=$S/run/slurmctld.pid
SlurmdPidFile=$S/run/slurmd-%n.pid
SlurmctldLogFile=$S/log/slurmctld.log
SlurmdLogFile=$S/log/slurmd-%n.log
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
NodeName=$NODE NodeHostname=$NODE NodeAddr=127.0.0.1 Port=$PORT1 CPUs=2 State=UNKNOWN
NodeName=localhost NodeHostname=$NODE NodeAddr=127.0.0.1 Port=$PORT2 CPUs=2 State=UNKNOWN
PartitionName=gpp Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
slurmctld -D -i >"$S/log/slurmctld.out" 2>&1 &
track $!
for n in "${NODES[@]}"; do
    slurmd -D -N "$n" >"$S/log/slurmd-$n.out" 2>&1 &
    track $!
done
idle() { [ "$(sinfo -h -o %t 2>/dev/null)" = idle ] && [ "$(sinfo -h -o %D 2>/dev/null)" = 2 ]; }
if wait_until 30 idle; then
    ok "munged, slurmctld (port $CTLD_PORT), 2 slurmd (ports $PORT1 $PORT2): nodes ${NODES[*]} idle"
else
    skip "the Slurm daemons do not come up here: $(tail -n3 "$S/log/slurmctld.log" "$S/log"/slurmd-*.log 2>/dev/null | grep -v '^$' | tail -4)"
fi

# 3. gpp installed into a prefix, as the job script finds it
P=$TMP/prefix
if cmake --install "$BUILD" --prefix "$P" >"$TMP/install.out" 2>&1 && [ -x "$P/bin/gpp-agent" ]; then
    ok "cmake --install into $P"
else
    fail "cmake --install" "$(tail -3 "$TMP/install.out")"
fi

# the job: a small transformer, 3 iterations, metrics and checkpoints in $TMP
cat >"$TMP/cluster.toml" <<EOF
[coordinator]
endpoint = "tcp://127.0.0.1:1"   # replaced by the job script
[cluster]
device = "cpu"
mem_gib = 2
[job]
model = "mmt:branches=2,layers=1,hidden=32,heads=2,seq=8,ffn=64"
batch = 16
micro_batch = 4
iterations = 3
launch = "local"                 # replaced: the agents come from srun
checkpoint_dir = "$TMP/ckpt"
[health]
heartbeat_ms = 250
timeout_ms = 20000
[metrics]
file = "$TMP/metrics.jsonl"
[[nodes]]                        # replaced by the allocation's
host = "somewhere"
slots = 1
EOF

# submit NAME CLUSTER_FILE SBATCH_ARGS...: the job id; its output in $TMP/NAME.out
submit() {
    local name=$1 conf=$2
    shift 2
    sbatch --parsable -D "$TMP" -o "$TMP/$name.out" "$@" \
        "$SRC/scripts/slurm/gpp-job.sbatch" "$conf" 2>"$TMP/$name.sbatch.err"
}
# state JOB: COMPLETED, FAILED, ... while slurmctld remembers it (MinJobAge)
state() { scontrol show job "$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p'; }
exitcode() { scontrol show job "$1" 2>/dev/null | sed -n 's/.* ExitCode=\([0-9:]*\).*/\1/p'; }
finished() { case "$(state "$1")" in PENDING | RUNNING | CONFIGURING | COMPLETING | "") return 1 ;; esac; }

# 4. the job: 2 nodes x 2 tasks -> 4 agents
J=$(submit train "$TMP/cluster.toml" --nodes=2 --ntasks-per-node=2 --export="ALL,GPP_PREFIX=$P,GPP_PLAN=gpp")
JOBS+=("$J")
wait_until 240 finished "$J"
st=$(state "$J")
if [ -n "$J" ] && [ "$st" = COMPLETED ] && [ "$(exitcode "$J")" = 0:0 ] &&
    grep -q "^gpp-job: 2 node(s) x 2 agent(s), coordinator tcp://\($NODE\|localhost\):" "$TMP/train.out" &&
    [ "$(grep -c '^iter [1-3]/3  loss ' "$TMP/train.out")" = 3 ] &&
    [ "$(grep -c '"iteration":' "$TMP/metrics.jsonl")" = 3 ] &&
    grep -q '^{"weights_sha256":"[0-9a-f]\{64\}"}$' "$TMP/metrics.jsonl" &&
    [ "$(grep -c "registered $NODE:[01] (rank" "$TMP/train.out")" = 2 ] &&
    [ "$(grep -c "registered localhost:[01] (rank" "$TMP/train.out")" = 2 ]; then
    ok "sbatch gpp-job.sbatch: job $J COMPLETED, 2 agents on each node registered, 3 iterations, metrics, digest"
else
    fail "the Slurm job '$J' (state '$st', exit '$(exitcode "$J")')" "$(cat "$TMP/train.sbatch.err")" \
        "$(grep -v OpenBLAS "$TMP/train.out" 2>/dev/null | tail -12)"
fi
if grep -q "^endpoint = \"tcp://\($NODE\|localhost\):[0-9]*\"$" "$TMP/gpp-$J.toml" &&
    [ "$(grep -c '^\[\[nodes\]\]' "$TMP/gpp-$J.toml")" = 2 ] && grep -q "^host = \"$NODE\"$" "$TMP/gpp-$J.toml" &&
    grep -q '^host = "localhost"$' "$TMP/gpp-$J.toml" && [ "$(grep -c '^slots = 2$' "$TMP/gpp-$J.toml")" = 2 ] &&
    grep -q '^launch = "external"$' "$TMP/gpp-$J.toml"; then
    ok "the job's cluster file: endpoint and nodes from the allocation"
else
    fail "the job's cluster file gpp-$J.toml" "$(cat "$TMP/gpp-$J.toml" 2>/dev/null)"
fi
# CURVE by default: the job made its own keys, admitted only its 4 agents
# (no plaintext warning), and removed the keys at the end
if grep -q "^key_dir = \"$TMP/gpp-$J.keys\"$" "$TMP/gpp-$J.toml" && [ ! -e "$TMP/gpp-$J.keys" ] &&
    ! grep -q "NOT authenticated" "$TMP/train.out" &&
    [ "$(grep -c "registered .* (rank" "$TMP/train.out")" = 4 ]; then
    ok "CURVE on the job's control plane: per-job keys in gpp-$J.keys, removed after the job"
else
    fail "per-job CURVE keys" "$(grep -i 'key\|curve\|authenticated' "$TMP/train.out" "$TMP/gpp-$J.toml" | tail -6)"
fi

# 5. an allocation smaller than the plan: the coordinator says so, exit 2,
#    the agents' step is ended
sed "s|^checkpoint_dir = .*|checkpoint_dir = \"$TMP/ckpt2\"|" "$TMP/cluster.toml" >"$TMP/small.toml"
J2=$(submit small "$TMP/small.toml" --nodes=1 --ntasks-per-node=2 --export="ALL,GPP_PREFIX=$P,GPP_PLAN=$TMP/ckpt/plan.json")
JOBS+=("$J2")
wait_until 120 finished "$J2"
if [ "$(state "$J2")" = FAILED ] && [ "$(exitcode "$J2")" = 2:0 ] &&
    grep -q "the plan uses 4 devices, but .* has 2 slots" "$TMP/small.out"; then
    ok "an allocation of 2 tasks for a 4-device plan: FAILED, exit 2, the reason in the job's output"
else
    fail "allocation smaller than the plan (state '$(state "$J2")', exit '$(exitcode "$J2")')" \
        "$(grep -v OpenBLAS "$TMP/small.out" 2>/dev/null | tail -6)"
fi
if [ -z "$(squeue -h)" ]; then
    ok "no job left in the queue"
else
    fail "jobs left" "$(squeue)"
fi

gpp_test_end
