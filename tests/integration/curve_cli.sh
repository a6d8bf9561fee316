#!/usr/bin/env bash
# curve_cli: the authenticated control plane with real processes on
# loopback (control-only jobs): gpp-coordinator --keygen (files, modes,
# nothing overwritten), external agents admitted by [coordinator] key_dir,
# an intruder with an unknown key refused and named in the coordinator's
# log, an intruder without keys, loose key file modes refused (exit 2), and
# a local launch that an outside process cannot join; monitors: gpp-top over
# CURVE with a monitor key, an unknown key, an agent key and no key refused
# (exit 1, bounded), a monitor key that tries to register as an agent
# refused while the job goes on; external agents without key_dir refused
# unless plaintext is opted into (with a warning). Usage: curve_cli.sh
# BUILD_DIR
set -u
. "$(dirname "$0")/lib/gpp_test.sh"
gpp_test_begin curve_cli "${1:-}"
COORD=$BUILD/coordinator/gpp-coordinator
AGENT=$BUILD/agent/gpp-agent
TOP=$BUILD/coordinator/gpp-top

# cluster file: $1 name, $2 port, $3 slots, $4 launch, $5 extra [coordinator] line
mkconf() {
    cat >"$TMP/$1.toml" <<EOF
[coordinator]
endpoint = "tcp://127.0.0.1:$2"
${5:-}
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
mode() { stat -c %a "$1" 2>/dev/null; }
pubkey() { sed -n 's/^ *public-key = "\(.*\)"$/\1/p' "$1"; }

# 1. keys: the coordinator's pair and one per agent, secrets 0600 in a 0700 dir
expect_ok "keygen --agents 2" "$COORD" --keygen "$TMP/keys" --agents 2
K=$TMP/keys
if [ "$(mode "$K")" = 700 ] && [ "$(mode "$K/agents")" = 700 ] &&
    [ "$(mode "$K/coordinator.key_secret")" = 600 ] && [ "$(mode "$K/agent-0.key_secret")" = 600 ] &&
    [ "$(mode "$K/agent-1.key_secret")" = 600 ] && [ -f "$K/coordinator.key" ] &&
    [ "$(ls "$K/agents")" = "$(printf 'agent-0.key\nagent-1.key')" ] &&
    [ "$(ls "$K/monitors")" = monitor-0.key ] && [ "$(mode "$K/monitor-0.key_secret")" = 600 ] &&
    ! grep -q secret-key "$K/coordinator.key" "$K/agents/agent-0.key"; then
    ok "keygen: files and modes (dir 700, secrets 600, public certs without secrets, one monitor)"
else
    fail "keygen files" "$(ls -lR "$K")"
fi
expect_fail "keygen never overwrites" "already holds keys" "$COORD" --keygen "$K" --agents 2
expect_fail "keygen needs a count" "needs --agents N or one cluster file" "$COORD" --keygen "$TMP/k0"
C=$(mkconf three 1 3 external)
"$COORD" --keygen "$TMP/k3" "$C" >/dev/null 2>&1
[ "$(ls "$TMP/k3/agents" | wc -l)" = 3 ] && ok "keygen from a cluster file: one pair per device" ||
    fail "keygen from a cluster file" "$(ls "$TMP/k3/agents")"

# 2. external agents with keys; before them, an intruder that knows the
#    coordinator's public key but holds a key nobody listed, and one without
#    keys: both refused (the first named in the log), the job unharmed
P=$(free_port); C=$(mkconf ext $P 2 external "key_dir = \"$K\"")
"$COORD" --control-only --barriers 3 "$C" >"$TMP/2.out" 2>"$TMP/2.err" &
CP=$!
"$AGENT" --coordinator tcp://127.0.0.1:$P --host 127.0.0.1 --slot 0 --control-barriers 3 \
    --heartbeat-ms 100 --timeout-ms 2000 --coordinator-key "$K/coordinator.key" \
    --key "$TMP/k3/agent-0.key_secret" 2>"$TMP/2x.err" &
X1=$!
"$AGENT" --coordinator tcp://127.0.0.1:$P --host 127.0.0.1 --slot 1 --control-barriers 3 \
    --heartbeat-ms 100 --timeout-ms 2000 2>"$TMP/2y.err" &
X2=$!
STRANGER=$(pubkey "$TMP/k3/agents/agent-0.key")
if wait_until 20 grep -qF "refused a connection from 127.0.0.1: CURVE key $STRANGER is not an admitted agent or monitor key" "$TMP/2.err"; then
    ok "an unknown key is refused and the coordinator names its address and key"
else
    fail "unknown key not logged" "$(cat "$TMP/2.err")"
fi
bwait $X1 20; rx1=$?; bwait $X2 20; rx2=$?
if [ $rx1 = 1 ] && [ $rx2 = 1 ] && ! grep -q "registered as rank" "$TMP/2x.err" "$TMP/2y.err" &&
    grep -q "refused this agent's CURVE key (ZAP status 400)" "$TMP/2x.err" &&
    grep -q "it requires CURVE keys; pass --coordinator-key and --key" "$TMP/2y.err"; then
    ok "intruders (unknown key, no keys) never register, give up and are told why"
else
    fail "intruders (exit $rx1 $rx2)" "$(cat "$TMP/2x.err" "$TMP/2y.err")"
fi
for s in 0 1; do
    "$AGENT" --coordinator tcp://127.0.0.1:$P --host 127.0.0.1 --slot $s --control-barriers 3 \
        --heartbeat-ms 100 --timeout-ms 3000 --coordinator-key "$K/coordinator.key" \
        --key "$K/agent-$s.key_secret" 2>"$TMP/2a$s.err" &
    eval A$s=$!
done
bwait $CP 30; rc=$?; bwait $A0 10; r0=$?; bwait $A1 10; r1=$?
if [ $rc = 0 ] && [ $r0 = 0 ] && [ $r1 = 0 ] && grep -q "CURVE on .*: 2 admitted agent keys" "$TMP/2.err"; then
    ok "external agents with their keys run the job (exit 0)"
else
    fail "keyed external agents (rc $rc, agents $r0 $r1)" "$(tail -5 "$TMP/2.err")" \
        "$(tail -3 "$TMP/2a0.err")"
fi

# 2b. keys under a path whose coordinator.key is exactly 40 characters of the
#     Z85 alphabet (mktemp -d's usual name makes it so): a path that exists
#     is a file, never a key's text (issue 33)
D40=$(mktemp -d /tmp/gppck40-XXXXXX)
"$COORD" --keygen "$D40/keys" --agents 2 >/dev/null 2>&1
P=$(free_port); C=$(mkconf k40 $P 2 external "key_dir = \"$D40/keys\"")
"$COORD" --control-only --barriers 2 "$C" >"$TMP/2b.out" 2>"$TMP/2b.err" &
CP=$!
"$AGENT" --coordinator tcp://127.0.0.1:$P --host 127.0.0.1 --slot 0 --control-barriers 2 \
    --heartbeat-ms 100 --timeout-ms 3000 --key-dir "$D40/keys" 2>"$TMP/2b0.err" &
A0=$!
"$AGENT" --coordinator tcp://127.0.0.1:$P --host 127.0.0.1 --slot 1 --control-barriers 2 \
    --heartbeat-ms 100 --timeout-ms 3000 --coordinator-key "$D40/keys/coordinator.key" \
    --key "$D40/keys/agent-1.key_secret" 2>"$TMP/2b1.err" &
A1=$!
bwait $CP 20; rc=$?; bwait $A0 10; r0=$?; bwait $A1 10; r1=$?
if [ ${#D40} = 19 ] && [ $rc = 0 ] && [ $r0 = 0 ] && [ $r1 = 0 ]; then
    ok "a 40-character key path is read as the file (--key-dir and --coordinator-key)"
else
    fail "40-character key path ${#D40} (rc $rc, agents $r0 $r1)" "$(tail -3 "$TMP/2b.err")" \
        "$(tail -3 "$TMP/2b0.err")"
fi
rm -rf "$D40"

# 2c. an agent key admits the slot its allow-list cert binds (--keygen:
#     agent-i, slot i): agent-1's key registering for slot 0 is rejected
#     with the reason, and the real agents of slots 0 and 1 then run the
#     job (issue 33, item 5)
if grep -q 'slot = "1"' "$K/agents/agent-1.key"; then
    ok "keygen binds agent-1's public cert to slot 1 (metadata slot = \"1\")"
else
    fail "agent-1.key has no slot metadata" "$(cat "$K/agents/agent-1.key")"
fi
P=$(free_port); C=$(mkconf bind $P 2 external "key_dir = \"$K\"")
"$COORD" --control-only --barriers 2 "$C" >"$TMP/2c.out" 2>"$TMP/2c.err" &
CP=$!
"$AGENT" --coordinator tcp://127.0.0.1:$P --host 127.0.0.1 --slot 0 --control-barriers 2 \
    --heartbeat-ms 100 --timeout-ms 3000 --coordinator-key "$K/coordinator.key" \
    --key "$K/agent-1.key_secret" 2>"$TMP/2cx.err" &
X1=$!
bwait $X1 20; rx=$?
if [ $rx = 1 ] && grep -q "rejected by the coordinator: its CURVE key (agent-1) admits slot 1 only, but it registered for slot 0: start it with --slot 1, or give it slot 0's key (agent-0.key_secret)" "$TMP/2cx.err" &&
    grep -q "rejected a registration from 127.0.0.1:0" "$TMP/2c.err"; then
    ok "agent-1's key registering for slot 0 is rejected, both sides say why"
else
    fail "a key for the wrong slot (exit $rx)" "$(tail -2 "$TMP/2cx.err")" "$(tail -2 "$TMP/2c.err")"
fi
for s in 0 1; do
    "$AGENT" --coordinator tcp://127.0.0.1:$P --host 127.0.0.1 --slot $s --control-barriers 2 \
        --heartbeat-ms 100 --timeout-ms 3000 --key-dir "$K" 2>"$TMP/2c$s.err" &
    eval A$s=$!
done
bwait $CP 30; rc=$?; bwait $A0 10; r0=$?; bwait $A1 10; r1=$?
if [ $rc = 0 ] && [ $r0 = 0 ] && [ $r1 = 0 ]; then
    ok "the real agents of slots 0 and 1 then run the job (exit 0)"
else
    fail "agents after a wrong-slot key (rc $rc, agents $r0 $r1)" "$(tail -3 "$TMP/2c.err")"
fi

# 3. key files others may read, and half a key configuration: exit 2 with the fix
cp "$K/agent-1.key_secret" "$TMP/loose.key_secret"
chmod 644 "$TMP/loose.key_secret"
expect_fail "agent: a world-readable secret" "chmod 600 $TMP/loose.key_secret" \
    "$AGENT" --coordinator tcp://127.0.0.1:1 --slot 0 --coordinator-key "$K/coordinator.key" \
    --key "$TMP/loose.key_secret"
expect_fail "agent: --coordinator-key without --key" "go together" \
    "$AGENT" --coordinator tcp://127.0.0.1:1 --slot 0 --coordinator-key "$K/coordinator.key"
expect_fail "agent: a bad --coordinator-key" "neither a readable certificate (No such file or directory)" \
    "$AGENT" --coordinator tcp://127.0.0.1:1 --slot 0 --coordinator-key "$TMP/none" \
    --key "$K/agent-0.key_secret"
cp -rp "$K" "$TMP/kloose"
chmod 640 "$TMP/kloose/coordinator.key_secret"
C=$(mkconf loose $(free_port) 2 external "key_dir = \"$TMP/kloose\"")
expect_fail "coordinator: a group-readable secret" "chmod 600" "$COORD" --control-only "$C"
C=$(mkconf nodir $(free_port) 2 external "key_dir = \"$TMP/none\"")
expect_fail "coordinator: a missing key_dir" "gpp-coordinator --keygen $TMP/none" \
    "$COORD" --control-only "$C"

# 4. a local launch: an outside process that registers for slot 0 first
#    (the attack of FINDINGS faults #13) gets nowhere; the forked agents,
#    with the keys handed to them, finish the job
P=$(free_port); C=$(mkconf local $P 2 local)
"$AGENT" --coordinator tcp://127.0.0.1:$P --host 127.0.0.1 --slot 0 --control-barriers 3 \
    --heartbeat-ms 100 --timeout-ms 4000 2>"$TMP/4x.err" &
X=$!
"$COORD" --control-only --barriers 3 "$C" >"$TMP/4.out" 2>"$TMP/4.err" &
CP=$!
bwait $CP 30; rc=$?; bwait $X 20; rx=$?
if [ $rc = 0 ] && [ $rx = 1 ] && ! grep -q "registered as rank" "$TMP/4x.err" &&
    grep -q "registered 127.0.0.1:0" "$TMP/4.err"; then
    ok "local launch: only the forked agents register (intruder exit $rx, job exit 0)"
else
    fail "local launch with an intruder (job $rc, intruder $rx)" "$(tail -5 "$TMP/4.err")" \
        "$(tail -3 "$TMP/4x.err")"
fi
# 5. monitors on a running job with keys (an endless control-only job)
P=$(free_port); C=$(mkconf mon $P 2 external "key_dir = \"$K\"")
"$COORD" --control-only --barriers 100000000 "$C" >"$TMP/5.out" 2>"$TMP/5.err" &
CP=$!
track $CP
for s in 0 1; do
    "$AGENT" --coordinator tcp://127.0.0.1:$P --host 127.0.0.1 --slot $s --control-barriers 100000000 \
        --heartbeat-ms 100 --timeout-ms 3000 --coordinator-key "$K/coordinator.key" \
        --key "$K/agent-$s.key_secret" 2>"$TMP/5a$s.err" &
    eval A$s=$!
    track $!
done
watching() {
    "$TOP" --once --key-dir "$K" tcp://127.0.0.1:$P >"$TMP/5top.out" 2>&1 &&
        grep -q "^job training" "$TMP/5top.out" &&
        [ "$(grep -Ec '^ +[0-9]+  127\.0\.0\.1:[01] +cpu:[01] +- +up ' "$TMP/5top.out")" = 2 ]
}
wait_until 30 watching && grep -q "tcp://127.0.0.1:$P (CURVE)" "$TMP/5top.out" &&
    ok "gpp-top --key-dir over CURVE: the job training, both agents up" ||
    fail "gpp-top --key-dir over CURVE" "$(cat "$TMP/5top.out")" "$(tail -3 "$TMP/5.err")"
# refused monitors: exit 1 with the reason, within the 3 s answer timeout
top_refused() { # $1 what, $2 pattern, then gpp-top's key options
    local what=$1 pat=$2
    shift 2
    timeout 20 "$TOP" --once "$@" tcp://127.0.0.1:$P >"$TMP/5r.out" 2>&1
    local rc=$?
    [ $rc = 1 ] && grep -q "$pat" "$TMP/5r.out" && ok "gpp-top, $what: exit 1, $(cat "$TMP/5r.out")" ||
        fail "gpp-top, $what (exit $rc)" "$(cat "$TMP/5r.out")"
}
top_refused "an unknown monitor key" "refused this monitor's CURVE key" \
    --key "$TMP/k3/monitor-0.key_secret" --server-key "$K/coordinator.key"
grep -qF "CURVE key $(pubkey "$TMP/k3/monitors/monitor-0.key") is not an admitted agent or monitor key" "$TMP/5.err" &&
    ok "the coordinator logs the unknown monitor key" || fail "unknown monitor key not logged" "$(tail -3 "$TMP/5.err")"
top_refused "an agent's key" "refused the request: monitor_request: a monitor_request needs a monitor's CURVE key" \
    --key "$K/agent-1.key_secret" --server-key "$K/coordinator.key"
top_refused "no key" "requires CURVE keys: pass --key-dir"
# a monitor key that registers as an agent (the slot of a running agent):
# rejected, and the job goes on
timeout 20 "$AGENT" --coordinator tcp://127.0.0.1:$P --host 127.0.0.1 --slot 0 --heartbeat-ms 100 \
    --timeout-ms 3000 --coordinator-key "$K/coordinator.key" --key "$K/monitor-0.key_secret" \
    >/dev/null 2>"$TMP/5m.err"
rc=$?
if [ $rc = 1 ] && grep -q "rejected by the coordinator: register: a monitor key may only send monitor_request" "$TMP/5m.err" &&
    grep -q "dropped a message from an unregistered peer .*: register: a monitor key may only" "$TMP/5.err" &&
    running $CP && running $A0 && watching; then
    ok "a monitor key cannot register as an agent (exit $rc); the job goes on"
else
    fail "a monitor key registering (exit $rc)" "$(cat "$TMP/5m.err")" "$(tail -3 "$TMP/5.err")"
fi
kill -TERM $CP
bwait $CP 30; rc=$?
[ $rc = 143 ] && wait_gone 20 $A0 $A1 && ok "the monitored job stops on SIGTERM, agents gone" ||
    fail "the monitored job stops on SIGTERM (exit $rc)" "$(tail -3 "$TMP/5.err")"

# 6. external agents without key_dir: refused unless plaintext is opted
#    into, and then a warning at every start
C=$(mkconf plain $(free_port) 1 external)
expect_fail "external without key_dir" "without \[coordinator\] key_dir.*gpp-coordinator --keygen DIR.*insecure_plaintext = true or pass --insecure" \
    "$COORD" --control-only "$C"
for how in flag key; do
    P=$(free_port)
    if [ $how = flag ]; then
        C=$(mkconf plain$how $P 1 external); args=(--insecure)
    else
        C=$(mkconf plain$how $P 1 external "insecure_plaintext = true"); args=()
    fi
    "$COORD" --control-only --barriers 2 "${args[@]}" "$C" >"$TMP/6$how.out" 2>"$TMP/6$how.err" &
    CP=$!
    "$AGENT" --coordinator tcp://127.0.0.1:$P --host 127.0.0.1 --slot 0 --control-barriers 2 \
        --heartbeat-ms 100 --timeout-ms 3000 2>"$TMP/6$how.a.err" &
    AP=$!
    bwait $CP 30; rc=$?; bwait $AP 10; ra=$?
    want=$([ $how = flag ] && printf '%s' --insecure || printf '%s' 'insecure_plaintext = true')
    if [ $rc = 0 ] && [ $ra = 0 ] && grep -q "warn .*control: INSECURE: .*$want).*NOT authenticated" "$TMP/6$how.err"; then
        ok "plaintext opted into by $want: the job runs, with a warning"
    else
        fail "plaintext by $want (job $rc, agent $ra)" "$(tail -3 "$TMP/6$how.err")"
    fi
done

# 7. bad input: a --run-dir others may enter, a --run-dir that is a link, a
#    non-boolean insecure_plaintext: exit 2 before any agent runs
mkdir -m 755 "$TMP/open.run"
C=$(mkconf rd $(free_port) 1 local)
expect_fail "--run-dir open to others" "--run-dir $TMP/open.run: owned by uid [0-9]* with mode 0755; it must be this user's" \
    "$COORD" --control-only --run-dir "$TMP/open.run" "$C"
ln -s "$TMP/k3" "$TMP/link.run"
expect_fail "--run-dir a link" "--run-dir $TMP/link.run: not a directory (a link or a file is never followed)" \
    "$COORD" --control-only --run-dir "$TMP/link.run" "$C"
[ ! -e "$TMP/k3/endpoint" ] && ok "nothing written through the link" || fail "a file written through the link"
C=$(mkconf bool $(free_port) 1 external 'insecure_plaintext = "yes"')
expect_fail "insecure_plaintext not a boolean" "coordinator.insecure_plaintext: expected true or false" \
    "$COORD" --control-only "$C"
gpp_test_end
