#!/usr/bin/env bash
# systemd_units: the units as `cmake --install` writes them into a scratch
# prefix: paths of that prefix, `systemd-analyze verify` clean, and an
# exposure of 4.0 or less from `systemd-analyze security --offline=yes` for
# the coordinator and an agent instance; systemd-sysusers creating gpp; then the
# Type=notify protocol with the real programs: a coordinator and an agent
# started with NOTIFY_SOCKET (as systemd starts them) send READY=1 (the
# coordinator once bound, the agent once registered) and STATUS lines; an
# agent unit without its environment file (empty --coordinator) stops with
# exit status 2 naming agent.env. Usage: systemd_units.sh BUILD_DIR
set -u
. "$(dirname "$0")/lib/gpp_test.sh"
gpp_test_begin systemd_units "${1:-}"
COORD=$BUILD/coordinator/gpp-coordinator
AGENT=$BUILD/agent/gpp-agent
P=$TMP/prefix
UNITS=$P/lib/systemd/system
MAX_EXPOSURE=4.0 # issue 11: "an exposure of 4.0 or less" for both units

if cmake --install "$BUILD" --prefix "$P" >"$TMP/install.out" 2>&1; then
    ok "cmake --install into $P"
else
    fail "cmake --install" "$(tail -3 "$TMP/install.out")"
fi
for f in bin/gpp-coordinator bin/gpp-agent bin/gpp-top lib/systemd/system/gpp-coordinator.service \
    lib/systemd/system/gpp-agent@.service lib/systemd/system/gpp-agents.target \
    lib/sysusers.d/gpp.conf share/gpp/examples/agent.env share/doc/gpp/operations.md; do
    [ -e "$P/$f" ] || fail "installed: $f missing"
done
if grep -q "^ExecStart=$P/bin/gpp-coordinator .* $P/etc/gpp/cluster.toml$" "$UNITS/gpp-coordinator.service" &&
    grep -q "^ExecStart=$P/bin/gpp-agent " "$UNITS/gpp-agent@.service" &&
    grep -q "^EnvironmentFile=-$P/etc/gpp/agent.env$" "$UNITS/gpp-agent@.service" &&
    ! grep -q "@GPP_\|/usr/local" "$UNITS"/gpp-*; then
    ok "units name the install prefix's programs and configuration"
else
    fail "unit paths" "$(grep -h "^ExecStart\|^EnvironmentFile" "$UNITS"/gpp-*)"
fi
# systemd-sysusers, as at install, on a scratch root: creates user and group gpp
R=$TMP/root
mkdir -p "$R/etc" "$R/usr/lib/sysusers.d"
cp "$P/lib/sysusers.d/gpp.conf" "$R/usr/lib/sysusers.d/"
if systemd-sysusers --root="$R" >"$TMP/sysusers.out" 2>&1 &&
    grep -q "^gpp:x:[0-9]*:[0-9]*:[^:]*:/var/lib/gpp:" "$R/etc/passwd" && grep -q "^gpp:x:" "$R/etc/group"; then
    ok "systemd-sysusers creates the units' user and group gpp"
else
    fail "systemd-sysusers gpp.conf" "$(cat "$TMP/sysusers.out")"
fi

# an instance of the agent template, as systemctl would load gpp-agent@0
V=$TMP/verify
mkdir -p "$V"
cp "$UNITS/gpp-coordinator.service" "$UNITS/gpp-agents.target" "$V/"
cp "$UNITS/gpp-agent@.service" "$V/gpp-agent@0.service"
for u in gpp-coordinator.service gpp-agent@0.service gpp-agents.target; do
    # verify prints nothing for a clean unit (warnings and errors otherwise)
    if out=$(SYSTEMD_LOG_LEVEL=notice systemd-analyze verify --man=no "$V/$u" 2>&1) && [ -z "$out" ]; then
        ok "systemd-analyze verify $u: clean"
    else
        fail "systemd-analyze verify $u" "$out"
    fi
done
for u in gpp-coordinator.service gpp-agent@0.service; do
    systemd-analyze security --offline=yes --no-pager "$V/$u" >"$TMP/sec.out" 2>&1
    e=$(sed -n "s/^→ Overall exposure level for $u: \([0-9.]*\) .*/\1/p" "$TMP/sec.out")
    if [ -n "$e" ] && awk -v e="$e" -v m="$MAX_EXPOSURE" 'BEGIN { exit !(e <= m) }'; then
        ok "systemd-analyze security $u: exposure $e <= $MAX_EXPOSURE"
    else
        fail "systemd-analyze security $u: exposure '$e' > $MAX_EXPOSURE" "$(tail -5 "$TMP/sec.out")"
    fi
done

# --- sd_notify from the real programs ---
# notify_listen SOCKET OUT: collects the datagrams sent to SOCKET into OUT
# (one per line, newlines inside as '|') until killed
notify_listen() {
    python3 -u -c '
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
with open(sys.argv[2], "w") as out:
    print("bound", file=out, flush=True)
    while True:
        print(s.recv(4096).decode().replace("\n", "|"), file=out, flush=True)
' "$1" "$2" &
    track $!
    wait_until 5 grep -qs bound "$2"
}
notify_listen "$TMP/coord.sock" "$TMP/coord.notify"
notify_listen "$TMP/agent.sock" "$TMP/agent.notify"
PORT=$(free_port)
cat >"$TMP/c.toml" <<EOT
[coordinator]
endpoint = "tcp://127.0.0.1:$PORT"
insecure_plaintext = true
[[nodes]]
host = "127.0.0.1"
slots = 1
[job]
model = "mmt:branches=2,layers=1,hidden=16,heads=2,seq=4,ffn=32"
batch = 8
iterations = 1
launch = "external"
[health]
heartbeat_ms = 100
timeout_ms = 3000
EOT
NOTIFY_SOCKET=$TMP/coord.sock WATCHDOG_USEC=400000 "$COORD" --control-only --barriers 3 \
    "$TMP/c.toml" >"$TMP/coord.out" 2>"$TMP/coord.err" &
CP=$!
track $CP
if wait_until 10 grep -q "^READY=1|STATUS=listening on port $PORT" "$TMP/coord.notify"; then
    ok "coordinator: READY=1 once bound ($(grep -m1 READY "$TMP/coord.notify"))"
else
    fail "coordinator: no READY=1" "$(cat "$TMP/coord.notify")" "$(tail -3 "$TMP/coord.err")"
fi
grep -q READY "$TMP/agent.notify" && fail "agent READY before it started"
# the first heartbeat tick pings and says the state: wait for it, so the
# job cannot end before (the check is below)
wait_until 10 grep -q "^WATCHDOG=1$" "$TMP/coord.notify"
NOTIFY_SOCKET=$TMP/agent.sock "$AGENT" --coordinator "tcp://127.0.0.1:$PORT" --host 127.0.0.1 \
    --slot 0 --heartbeat-ms 100 --control-barriers 3 >"$TMP/agent.out" 2>"$TMP/agent.err" &
AP=$!
track $AP
bwait $CP 30
crc=$?
bwait $AP 30
arc=$?
if [ $crc = 0 ] && [ $arc = 0 ]; then
    ok "control-only job with notify sockets finished"
else
    fail "job: coordinator exit $crc, agent exit $arc" "$(tail -3 "$TMP/coord.err")" "$(tail -3 "$TMP/agent.err")"
fi
# (the listener may still be writing what was sent just before the exit)
if wait_until 5 grep -q "^STOPPING=1$" "$TMP/agent.notify" &&
    grep -q "^READY=1|STATUS=registered with tcp://127.0.0.1:$PORT as rank 0 of 1$" "$TMP/agent.notify"; then
    ok "agent: READY=1 once registered, STOPPING=1 at shutdown"
else
    fail "agent notify messages" "$(cat "$TMP/agent.notify")"
fi
# the coordinator's heartbeat timer (100 ms) pings at half of WATCHDOG_USEC
if wait_until 5 grep -q "^STATUS=job finished$" "$TMP/coord.notify" &&
    grep -q "^WATCHDOG=1$" "$TMP/coord.notify" && grep -q "^STATUS=waiting$" "$TMP/coord.notify"; then
    ok "coordinator: WATCHDOG=1 pings, STATUS on state changes and at the end"
else
    fail "coordinator notify messages" "$(cat "$TMP/coord.notify")"
fi

# launch = "local" under the unit: the forked agents are not the main
# process (NotifyAccess=main): they get no NOTIFY_SOCKET, so the one READY
# is the coordinator's
notify_listen "$TMP/local.sock" "$TMP/local.notify"
sed -e "s/$PORT/$(free_port)/" -e 's/slots = 1/slots = 2/' -e 's/"external"/"local"/' \
    "$TMP/c.toml" >"$TMP/local.toml"
NOTIFY_SOCKET=$TMP/local.sock timeout 60 "$COORD" --control-only --barriers 3 "$TMP/local.toml" \
    >"$TMP/local.out" 2>"$TMP/local.err"
rc=$?
wait_until 5 grep -q "^STATUS=job finished$" "$TMP/local.notify"
n=$(grep -c "^READY=1" "$TMP/local.notify")
if [ $rc = 0 ] && [ "$n" = 1 ] && grep -q "^STATUS=job finished$" "$TMP/local.notify"; then
    ok "local launch: one READY=1 (the coordinator's), none from its agents"
else
    fail "local launch: exit $rc, $n READY lines" "$(cat "$TMP/local.notify")" "$(tail -3 "$TMP/local.err")"
fi

# gpp-agent@N without agent.env: ExecStart passes --coordinator ''
expect_fail "agent unit without agent.env" "agent.env" "$AGENT" --coordinator "" --host h --slot 0
gpp_test_end
