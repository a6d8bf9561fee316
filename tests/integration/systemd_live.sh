#!/usr/bin/env bash
# systemd_live: the units under a live systemd (issue 11, "systemd, for
# real"). Boots /lib/systemd/systemd as PID 1 of its own PID, mount, UTS,
# IPC, network and cgroup namespaces (container=gpp-live, as a container
# manager would) on an overlay of this machine's / whose upper layer is a
# tmpfs, so nothing of the host is written: a fresh cgroup2 subtree of this
# process's cgroup, /proc/sys read-only, a minimal /dev, only loopback, host
# name gpplive, booted into a target of sysinit.target alone (journald,
# tmpfiles; none of the services the host image has enabled). Inside, as an
# operator does (docs/operations.md, "Running under systemd"):
# `cmake --install BUILD` (prefix /usr/local), systemd-sysusers, a cluster
# file and agent.env in /usr/local/etc/gpp, `systemctl enable
# gpp-agent@{0..3}`, `systemctl start gpp-coordinator.service
# gpp-agents.target`. Checks: both units are Type=notify and reached active
# (systemd saw READY=1), the job trained (coordinator journal, the metrics
# file in /var/lib/gpp written by user gpp), each agent took its slot from
# its instance name, nothing failed or restarted, log levels became
# journald priorities; then the watchdog: an agent stopped with SIGSTOP is
# killed by systemd after WatchdogSec (a drop-in shortens it to 3 s) and
# started again, and the coordinator (--max-restarts 1) takes it back and
# finishes the job. At the end SIGRTMIN+4 (poweroff): systemd, its
# namespaces, the overlay and the cgroup are gone, no process is left, the
# host's /etc is as before. On a failure the units' status and journal are
# printed. Exit 77 (skip) when this machine cannot host it: not root, no
# systemd or util-linux tools, no writable cgroup2, namespaces, mounts or
# overlayfs not permitted, or a systemd that does not boot (the reason is
# printed).
# Usage: systemd_live.sh BUILD_DIR
set -u
. "$(dirname "$0")/lib/gpp_test.sh"
gpp_test_begin systemd_live "${1:-}"
BUILD=$(cd "$BUILD" && pwd) # the container runs `cmake --install` from /
SYSTEMD=/lib/systemd/systemd
SLOTS=4
ITERS=3
HOSTNAME_CT=gpplive

skip() {
    echo "SKIP: $*"
    exit 77
}
[ "$(id -u)" = 0 ] || skip "booting systemd in namespaces needs root (CI runs this test as root)"
[ -x "$SYSTEMD" ] || skip "$SYSTEMD missing (Debian systemd: scripts/install-deps.sh)"
for b in unshare nsenter pivot_root findmnt mount ip cmake; do
    command -v $b >/dev/null || skip "$b not installed (util-linux, mount, iproute2, cmake: scripts/install-deps.sh)"
done

# the cgroup2 hierarchy (hybrid: /sys/fs/cgroup/unified; unified: /sys/fs/cgroup)
# and this process's place in it: the container gets a fresh child of it
CG_MNT=$(findmnt -n -o TARGET -t cgroup2 | head -1)
[ -n "$CG_MNT" ] || skip "no cgroup2 hierarchy mounted (systemd 252 needs one to track its units)"
CG=$CG_MNT$(sed -n 's/^0:://p' /proc/self/cgroup)
CG=${CG%/}/gpp_live.$$
mkdir "$CG" 2>"$TMP/cg.err" || skip "cannot create a cgroup under $CG_MNT: $(cat "$TMP/cg.err")"

UPID= # unshare's PID (--kill-child: its death kills the container's PID 1)
SDPID= # systemd, PID 1 of the container, as this machine sees it
# nothing left behind, also on failure: the container's PID 1 (and with it
# its PID namespace) first, then any process still in its cgroup, then the
# cgroup itself
live_cleanup() {
    [ -n "$UPID" ] && kill -KILL "$UPID" 2>/dev/null && { wait "$UPID"; } 2>/dev/null
    [ -n "$SDPID" ] && kill -KILL "$SDPID" 2>/dev/null
    if [ -d "$CG" ]; then
        [ -e "$CG/cgroup.kill" ] && echo 1 >"$CG/cgroup.kill" 2>/dev/null
        wait_until 5 sh -c "grep -q 'populated 0' '$CG/cgroup.events'"
        find "$CG" -depth -type d -exec rmdir {} + 2>/dev/null
    fi
    gpp_test_cleanup
}
trap live_cleanup EXIT

# within SECONDS CMD...: runs CMD every 0.2 s until it succeeds; 0 when it
# did within SECONDS of wall-clock time. (gpp_test.sh's wait_until counts
# tries, 10 a second: a CMD that is an nsenter + systemctl and takes a
# second on a loaded machine would stretch its bound tenfold.)
within() {
    local end=$((SECONDS + $1))
    shift
    until "$@"; do
        [ $SECONDS -ge $end ] && return 1
        sleep 0.2
    done
}

# in_ct CMD...: CMD in the container (all its namespaces, its root)
in_ct() { nsenter -t "$SDPID" -m -u -i -n -p -C -r -w -- "$@"; }
rootfs() { echo "/proc/$SDPID/root"; }

# what the container writes must not reach the host: these stay as they are
host_state() {
    sha256sum /etc/passwd /etc/group /etc/hostname /etc/hosts 2>&1
    ls -lA /etc/systemd/system /etc/systemd/system/*.wants /usr/local/etc 2>&1
}
host_state >"$TMP/host.before"

# --- 1. the container ---
# boot.sh runs as PID 1 of the new PID namespace, in the new mount, UTS,
# IPC and network namespaces, and ends in `exec systemd`
cat >"$TMP/boot.sh" <<'EOF'
set -eu
T=$1 CG=$2 HN=$3
exec 2>"$T/boot.err"
echo 0 >"$CG/cgroup.procs" # into the container's cgroup, which becomes its root below
mount --make-rprivate /
mkdir -p "$T/ovl" "$T/root"
mount -t tmpfs -o mode=0755 gpp-live "$T/ovl"
U=$T/ovl/upper
mkdir -p "$U/etc/systemd/system" "$T/ovl/work"
# boot into sysinit.target alone: journald, tmpfiles, sysusers; nothing the
# host enabled (multi-user.target.wants, timers); no clock or kernel tunables
cat >"$U/etc/systemd/system/gpp-live-boot.target" <<EOT
[Unit]
Description=gpp systemd_live test boot
Requires=sysinit.target
After=sysinit.target
AllowIsolate=yes
EOT
for u in systemd-timesyncd.service systemd-sysctl.service systemd-modules-load.service \
    systemd-pstore.service systemd-binfmt.service; do
    ln -s /dev/null "$U/etc/systemd/system/$u"
done
echo "$HN" >"$U/etc/hostname"
# loopback is the container's only interface: its name is 127.0.0.1 (the
# coordinator binds to what the endpoint's name resolves to, which must be
# an address of the host; 127.0.1.1, Debian's usual line, is not one)
{ grep -v "[[:space:]]$HN\$" /etc/hosts || true; echo "127.0.0.1 $HN"; } >"$U/etc/hosts"
mount -t overlay -o "lowerdir=/,upperdir=$U,workdir=$T/ovl/work" gpp-live "$T/root"
R=$T/root
mount -t proc proc "$R/proc"
mount --bind "$R/proc/sys" "$R/proc/sys"
mount -o remount,bind,ro "$R/proc/sys"
mount --bind /proc/sysrq-trigger "$R/proc/sysrq-trigger" 2>/dev/null &&
    mount -o remount,bind,ro "$R/proc/sysrq-trigger"
mount -t sysfs -o ro sysfs "$R/sys"
mount -t tmpfs -o mode=0755,nosuid tmpfs "$R/dev"
for d in null zero full random urandom tty; do
    touch "$R/dev/$d"
    mount --bind "/dev/$d" "$R/dev/$d"
done
mkdir "$R/dev/pts" "$R/dev/shm"
mount -t devpts -o newinstance,ptmxmode=0666,mode=0620 devpts "$R/dev/pts"
ln -s pts/ptmx "$R/dev/ptmx"
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$R/dev/shm"
mount -t tmpfs -o mode=0755,nosuid,nodev tmpfs "$R/run"
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$R/tmp"
# the source and build trees (cmake --install reads both) where the
# container would not see them: on a mount of their own (a CI volume), or
# under /tmp, which the container's own tmpfs hides (a clone in /tmp): an
# overlay of their mount (or of the directory under /tmp), so the container
# sees them and what it writes there (install_manifest.txt) stays in tmpfs
shift 3
n=0
done_dirs=
for d in "$@"; do
    m=$(findmnt -n -o TARGET -T "$d")
    case "$d/" in
    /tmp/*) m=$d ;;
    *) [ "$m" = / ] && continue ;;
    esac
    for x in $done_dirs; do
        case "$m/" in "$x"/*) m= ;; esac
    done
    if [ -z "$m" ] || mountpoint -q "$R$m"; then continue; fi
    n=$((n + 1))
    mkdir -p "$T/ovl/upper$n" "$T/ovl/work$n" "$R$m"
    mount -t overlay -o "lowerdir=$m,upperdir=$T/ovl/upper$n,workdir=$T/ovl/work$n" gpp-live "$R$m"
    done_dirs="$done_dirs $m"
done
ip link set lo up
mkdir -p "$R/.oldroot"
# a cgroup namespace rooted at $CG, and its cgroup2 at /sys/fs/cgroup (the
# unified layout: systemd finds cgroup2 there and manages only its subtree)
exec unshare --cgroup -- sh -c '
set -e
mount -t cgroup2 cgroup2 "$1/sys/fs/cgroup"
cd "$1"
pivot_root . .oldroot
umount -l /.oldroot
rmdir /.oldroot
exec env -i container=gpp-live TERM=dumb PATH=/usr/sbin:/usr/bin:/sbin:/bin "$2" --unit=gpp-live-boot.target
' sh "$R" /lib/systemd/systemd
EOF
unshare --pid --fork --mount --uts --ipc --net --kill-child -- \
    bash "$TMP/boot.sh" "$TMP" "$CG" "$HOSTNAME_CT" "$SRC" "$BUILD" >"$TMP/console.log" 2>&1 &
UPID=$!
# booted: 0 once systemd (unshare's child, after the execs) says it is up
booted() {
    local p
    p=$(awk '{ print $1 }' "/proc/$UPID/task/$UPID/children" 2>/dev/null)
    [ -n "$p" ] && [ "$(cat "/proc/$p/comm" 2>/dev/null)" = systemd ] || return 1
    SDPID=$p
    case "$(in_ct systemctl is-system-running 2>/dev/null)" in running | degraded) true ;; *) false ;; esac
}
# (a setup that fails ends unshare at once: no 30 s wait then)
boot_over() { booted || ended "$UPID"; }
within 30 boot_over
if ! booted; then
    why=$(cat "$TMP/boot.err" "$TMP/console.log" 2>/dev/null | tail -3)
    [ -n "$SDPID" ] && why="$why $(in_ct systemctl is-system-running 2>&1; in_ct journalctl -b -p err --no-pager 2>&1 | tail -3)"
    skip "systemd does not boot in namespaces here: ${why:-no output}"
fi
PIDNS=$(readlink "/proc/$SDPID/ns/pid")
ok "systemd $(systemctl --version | awk 'NR == 1 { print $2 }') booted as PID 1 in its own namespaces ($PIDNS, host pid $SDPID, cgroup $CG): $(in_ct systemctl is-system-running)"

# dump: the units' status and journal, for a failure's output
dump() {
    echo "---- systemctl status (container) ----"
    in_ct systemctl status --no-pager --lines=0 'gpp-*' 2>&1 | head -60
    echo "---- journal (container), gpp units ----"
    in_ct journalctl --no-pager -o short-monotonic -u gpp-coordinator.service -u 'gpp-agent@*' 2>&1 | tail -60
}
FAILED_DUMP=0
fail_dump() {
    fail "$@"
    [ $FAILED_DUMP = 1 ] && return
    FAILED_DUMP=1
    dump
}
# prop UNIT PROPERTY: the value of a unit property
prop() { in_ct systemctl show -P "$2" "$1" 2>/dev/null; }
# props P1,P2,... UNIT...: one line per unit, "P1=v1 P2=v2 ..." in the
# order asked (one systemctl call: each costs an nsenter)
props() {
    local p=$1
    shift
    in_ct systemctl show -p "$p" "$@" 2>/dev/null | awk -v want="$p" '
        BEGIN { n = split(want, w, ",") }
        /^$/ { out(); next }
        { k = substr($0, 1, index($0, "=") - 1); v[k] = substr($0, index($0, "=") + 1) }
        END { out() }
        function out(   i, l) {
            if (!length(v)) return
            for (i = 1; i <= n; i++) l = l (i > 1 ? " " : "") w[i] "=" v[w[i]]
            print l
            delete v
        }'
}

# --- 2. installed as an operator installs it ---
if in_ct cmake --install "$BUILD" >"$TMP/install.out" 2>&1 && in_ct test -x /usr/local/bin/gpp-agent &&
    in_ct test -f /usr/local/lib/systemd/system/gpp-agent@.service; then
    ok "cmake --install $BUILD inside the container (prefix /usr/local)"
else
    fail "cmake --install inside the container" "$(tail -3 "$TMP/install.out")"
fi
if in_ct systemd-sysusers >"$TMP/sysusers.out" 2>&1 && in_ct getent passwd gpp | grep -q ':/var/lib/gpp:'; then
    ok "systemd-sysusers: $(in_ct getent passwd gpp)"
else
    fail "systemd-sysusers" "$(cat "$TMP/sysusers.out")"
fi
# the job: external launch, the agents are gpp-agent@0..3 of this host;
# state (metrics, checkpoints) in the units' StateDirectory
ETC=$(rootfs)/usr/local/etc/gpp
mkdir -p "$ETC"
cat >"$ETC/cluster.toml" <<EOF
[coordinator]
endpoint = "tcp://$HOSTNAME_CT:5555"
key_dir = "/usr/local/etc/gpp/keys"
[cluster]
device = "cpu"
mem_gib = 2
[[nodes]]
host = "$HOSTNAME_CT"
slots = $SLOTS
[job]
model = "mmt:branches=2,layers=1,hidden=32,heads=2,seq=8,ffn=64"
batch = 16
micro_batch = 4
iterations = $ITERS
launch = "external"
checkpoint_dir = "/var/lib/gpp/ckpt"
[health]
heartbeat_ms = 250
timeout_ms = 20000
[metrics]
file = "/var/lib/gpp/metrics.jsonl"
EOF
# CURVE keys as an operator makes them (docs/operations.md, Security), for
# the units' user gpp; every agent instance takes its own with --key-dir
if in_ct /usr/local/bin/gpp-coordinator --keygen /usr/local/etc/gpp/keys --agents $SLOTS \
    >"$TMP/keygen.out" 2>&1 && in_ct chown -R gpp:gpp /usr/local/etc/gpp/keys; then
    ok "gpp-coordinator --keygen /usr/local/etc/gpp/keys --agents $SLOTS, owned by gpp"
else
    fail "keygen" "$(cat "$TMP/keygen.out")"
fi
# the installed example agent.env with the coordinator's endpoint and the
# keys set; GPP_HOST stays the default, the host name (%H)
sed -e "s|^GPP_COORDINATOR=.*|GPP_COORDINATOR=tcp://$HOSTNAME_CT:5555|" \
    -e "s|^#GPP_AGENT_ARGS=--key-dir .*|GPP_AGENT_ARGS=--key-dir /usr/local/etc/gpp/keys|" \
    "$(rootfs)/usr/local/share/gpp/examples/agent.env" >"$ETC/agent.env"
grep -q "^GPP_AGENT_ARGS=--key-dir" "$ETC/agent.env" || fail "agent.env: no --key-dir line to enable"
# the cost-model planner: no profiling phase (the test's time goes to systemd)
echo "GPP_PLAN=gpp" >"$ETC/coordinator.env"
# OpenBLAS's kernels for this CPU (scripts/blas-env.sh), as the other tests
# run gpp: a drop-in, the way an operator adds environment to a unit
. "$SRC/scripts/blas-env.sh"
if [ -n "${OPENBLAS_CORETYPE:-}" ]; then
    for u in gpp-agent@ gpp-coordinator; do
        mkdir -p "$(rootfs)/etc/systemd/system/$u.service.d"
        printf '[Service]\nEnvironment=OPENBLAS_CORETYPE=%s\n' "$OPENBLAS_CORETYPE" \
            >"$(rootfs)/etc/systemd/system/$u.service.d/50-blas.conf"
    done
fi
in_ct systemctl daemon-reload
if in_ct systemctl enable gpp-agent@{0..3}.service >"$TMP/enable.out" 2>&1 &&
    [ "$(in_ct systemctl show -P Wants gpp-agents.target | wc -w)" = $SLOTS ]; then
    ok "systemctl enable gpp-agent@{0..3}.service: gpp-agents.target wants $(prop gpp-agents.target Wants)"
else
    fail_dump "systemctl enable" "$(cat "$TMP/enable.out")"
fi

# --- 3. the job ---
START=$(date +%s)
if timeout 60 nsenter -t "$SDPID" -m -u -i -n -p -C -r -w -- \
    systemctl start gpp-coordinator.service gpp-agents.target >"$TMP/start.out" 2>&1; then
    ok "systemctl start gpp-coordinator.service gpp-agents.target returned 0 after $(($(date +%s) - START)) s"
else
    fail_dump "systemctl start" "$(cat "$TMP/start.out")"
fi
AGENTS=()
for i in $(seq 0 $((SLOTS - 1))); do AGENTS+=("gpp-agent@$i.service"); done
UNITS=(gpp-coordinator.service "${AGENTS[@]}")
# done: every unit left active (the job ends: the coordinator exits 0, then its agents)
finished() {
    [ "$(props LoadState,ActiveState "${UNITS[@]}" |
        grep -c '^LoadState=loaded ActiveState=\(inactive\|failed\)$')" = ${#UNITS[@]} ]
}
JOB_ENDED=0
if within 90 finished; then
    JOB_ENDED=1
    ok "job ended after $(($(date +%s) - START)) s: every unit inactive"
else
    fail_dump "job not finished within 90 s" "$(props Id,ActiveState,StatusText "${UNITS[@]}")"
fi
# reached active with READY=1: Type=notify units are active only once their
# READY=1 came (ActiveEnterTimestampMonotonic set), then ended with status 0
props Id,Type,ActiveEnterTimestampMonotonic,Result,ExecMainStatus,NRestarts "${UNITS[@]}" >"$TMP/units"
bad=$(grep -v '^Id=[^ ]* Type=notify ActiveEnterTimestampMonotonic=[1-9][0-9]* Result=success ExecMainStatus=0 NRestarts=0$' "$TMP/units")
if [ -z "$bad" ] && [ "$(wc -l <"$TMP/units")" = ${#UNITS[@]} ]; then
    ok "all ${#UNITS[@]} units Type=notify, reached active (READY=1), exited 0, no restart"
else
    fail_dump "units not started and ended as expected" "$bad"
fi
JC=$TMP/coord.journal
in_ct journalctl --no-pager -o cat -u gpp-coordinator.service >"$JC" 2>&1
if [ "$(grep -c "^iter [1-$ITERS]/$ITERS  loss " "$JC")" = $ITERS ] && grep -q "^iter $ITERS/$ITERS  loss [0-9.]*" "$JC"; then
    ok "coordinator journal: $ITERS iterations ($(grep "^iter $ITERS/$ITERS" "$JC" | head -c 60))"
else
    fail_dump "coordinator journal: no $ITERS iterations" "$(tail -5 "$JC")"
fi
M=$(rootfs)/var/lib/gpp/metrics.jsonl
if [ "$(grep -c '"iteration":' "$M" 2>/dev/null)" = $ITERS ] &&
    grep -q '^{"weights_sha256":"[0-9a-f]\{64\}"}$' "$M" && [ "$(in_ct stat -c %U /var/lib/gpp/metrics.jsonl)" = gpp ]; then
    ok "metrics file /var/lib/gpp/metrics.jsonl: $ITERS iterations and the weights digest, written by user gpp"
else
    fail_dump "metrics file" "$(ls -l "$M" 2>&1)" "$(tail -3 "$M" 2>/dev/null)"
fi
# slots from the instance names: the coordinator registered host:N for
# every instance, and each instance's journal says it is slot N
bad=
for i in $(seq 0 $((SLOTS - 1))); do
    grep -q "coordinator: registered $HOSTNAME_CT:$i (" "$JC" || bad="$bad coordinator:$i"
    in_ct journalctl --no-pager -o cat -u "gpp-agent@$i.service" | grep -q "$HOSTNAME_CT:$i" || bad="$bad agent@$i"
done
if [ -z "$bad" ]; then
    ok "slots from the instance names: $HOSTNAME_CT:0..$((SLOTS - 1)) registered, one per gpp-agent@N"
else
    fail_dump "slots not from the instance names:$bad" "$(grep registered "$JC")"
fi
# under journald (JOURNAL_STREAM) a log line's level is the entry's priority
if in_ct journalctl --no-pager -o cat -u gpp-coordinator.service -p info..info | grep -q "coordinator: CURVE on .*$SLOTS admitted agent keys" &&
    in_ct journalctl --no-pager -o cat -u gpp-coordinator.service -p info..info | grep -q "coordinator: registered" &&
    ! in_ct journalctl --no-pager -o cat -u gpp-coordinator.service -p err | grep -q .; then
    ok "journald priorities: CURVE with $SLOTS agent keys and the registrations at 'info', nothing at 'err'"
else
    fail_dump "journal priorities" "$(in_ct journalctl --no-pager -o verbose -u gpp-coordinator.service | grep -m6 'PRIORITY\|MESSAGE=')"
fi

# --- 4. the watchdog: an agent stopped with SIGSTOP misses its pings, and
# systemd kills it (SIGABRT) and starts it again; the coordinator, with
# --max-restarts, waits for it and the job completes. WatchdogSec=30 in the
# unit (15 s between pings): a drop-in makes it 3 s, RestartSec=2 (under the
# default start limit, 5 starts in 10 s, also if a start is refused), no core
# file; the job's heartbeat timeout 2 s, so that the coordinator has given
# the silent agent up when its successor registers.
watchdog_phase() {
    D=$(rootfs)/etc/systemd/system/gpp-agent@.service.d
    printf '[Service]\nWatchdogSec=3\nRestartSec=2\nLimitCORE=0\n' >"$D/60-watchdog-test.conf"
    echo "GPP_COORDINATOR_ARGS=--max-restarts 1" >>"$ETC/coordinator.env"
    sed -i 's/^timeout_ms = .*/timeout_ms = 2000/' "$ETC/cluster.toml"
    in_ct systemctl daemon-reload
    # a new job: --resume=auto would refuse to continue the finished one (exit 2)
    in_ct rm -rf /var/lib/gpp/ckpt /var/lib/gpp/metrics.jsonl
    CUR=$(in_ct journalctl --show-cursor -n 0 -q 2>/dev/null | sed -n 's/^-- cursor: //p')
    if in_ct timeout 30 systemctl start gpp-coordinator.service gpp-agent@0.service >"$TMP/start2.out" 2>&1 &&
        [ "$(prop gpp-agent@0.service WatchdogUSec)" = 3s ]; then
        ok "a new job: coordinator and gpp-agent@0 active (WatchdogSec=3 from a drop-in)"
    else
        fail_dump "second start" "$(cat "$TMP/start2.out")"
    fi
    PID0=$(prop gpp-agent@0.service MainPID)
    in_ct systemctl kill --kill-whom=main --signal=SIGSTOP gpp-agent@0.service
    restarted() {
        props NRestarts,ActiveState,MainPID gpp-agent@0.service | grep -q "^NRestarts=[1-9][0-9]* ActiveState=active MainPID=" &&
            [ "$(prop gpp-agent@0.service MainPID)" != "$PID0" ]
    }
    J0=$TMP/agent0.journal
    if within 30 restarted; then
        in_ct journalctl --no-pager -o cat -u gpp-agent@0.service --after-cursor="$CUR" >"$J0" 2>&1
        if grep -q "gpp-agent@0.service: Watchdog timeout (limit 3s)!" "$J0" &&
            grep -q "gpp-agent@0.service: Killing process $PID0 (gpp-agent) with signal SIGABRT" "$J0"; then
            ok "watchdog: gpp-agent@0 (pid $PID0) stopped, killed with SIGABRT after 3 s, restarted as pid $(prop gpp-agent@0.service MainPID) and registered again"
        else
            fail_dump "watchdog: restarted, but the journal does not say why" "$(grep -i 'watchdog\|killing' "$J0")"
        fi
    else
        fail_dump "watchdog: gpp-agent@0 (pid $PID0) not restarted within 30 s" \
            "$(props NRestarts,ActiveState,Result gpp-agent@0.service)"
    fi
    in_ct timeout 30 systemctl start gpp-agents.target >"$TMP/start3.out" 2>&1
    within 60 finished
    JC2=$TMP/coord2.journal
    in_ct journalctl --no-pager -o cat -u gpp-coordinator.service --after-cursor="$CUR" >"$JC2" 2>&1
    if [ "$(prop gpp-coordinator.service Result)" = success ] && [ "$(grep -c '"iteration":' "$M" 2>/dev/null)" = $ITERS ] &&
        grep -q "restart: agents died" "$JC2" && [ "$(grep -c "coordinator: registered $HOSTNAME_CT:0 (" "$JC2")" = 2 ]; then
        ok "the coordinator waited for the restarted agent (--max-restarts 1), the job completed: $ITERS iterations, exit 0"
    else
        fail_dump "the job after the watchdog restart" "$(props Id,ActiveState,Result gpp-coordinator.service)" \
            "$(cat "$TMP/start3.out")" "$(grep 'restart\|registered\|stopped' "$JC2")"
    fi
}
# (after a job that did not end the units are in an unknown state: the
# phase would only add its timeouts to the failure's)
if [ $JOB_ENDED = 1 ]; then
    watchdog_phase
else
    echo "skipped the watchdog phase: the first job did not end"
fi

# --- 5. teardown: SIGRTMIN+4 is poweroff for systemd (systemd(1)), as a
# container manager sends it; PID 1 exits, and its namespaces with it
kill -s RTMIN+4 "$SDPID"
if wait_until 30 ended "$UPID"; then
    wait "$UPID"
    rc=$?
    UPID=
    # processes still in the container's PID namespace (one find: a
    # readlink per process is seconds on a loaded machine)
    left=$(find /proc/[0-9]*/ns/pid -maxdepth 0 -lname "pid:?${PIDNS//[^0-9]/}?" 2>/dev/null | cut -d/ -f3 | tr '\n' ' ')
    mounts=$(grep -c " $TMP/" /proc/self/mountinfo)
    host_state >"$TMP/host.after"
    # systemd-shutdown ends with reboot(2), which in a PID namespace ends
    # the namespace's PID 1 with SIGINT (reboot(2), "Behavior inside PID
    # namespaces"); unshare dies of the same signal: 130
    if [ "$rc" = 130 ] && [ -z "$left" ] && grep -q "populated 0" "$CG/cgroup.events" && [ "$mounts" = 0 ] &&
        find "$CG" -depth -type d -exec rmdir {} + && [ ! -d "$CG" ] && cmp -s "$TMP/host.before" "$TMP/host.after"; then
        ok "poweroff: PID 1 ended by SIGINT from reboot(2) (exit $rc), no process left in $PIDNS, no mount left, cgroup $CG removed, host's /etc untouched"
    else
        fail "poweroff: exit $rc; left behind: processes [$left], cgroup $(tr '\n' ' ' <"$CG/cgroup.events" 2>/dev/null), $mounts mounts" \
            "$(diff "$TMP/host.before" "$TMP/host.after")"
    fi
    SDPID=
else
    fail_dump "systemd did not power off within 30 s"
fi
gpp_test_end
