#!/usr/bin/env bash
# observe: what an operator watches, on real processes. Every binary answers
# --version (version and git commit) and refuses a bad GPP_LOG_LEVEL (exit
# 2, naming it); every log line of a real job carries a UTC timestamp, a
# level word, the component and (agents) the rank.
# Usage: observe.sh BUILD_DIR
set -u
. "$(dirname "$0")/lib/gpp_test.sh"
gpp_test_begin observe "${1:-}"
COORD=$BUILD/coordinator/gpp-coordinator
AGENT=$BUILD/agent/gpp-agent
MODEL="mmt:branches=2,layers=1,hidden=16,heads=2,seq=4,ffn=32"

# ---- --version and GPP_LOG_LEVEL on every binary ------------------------------
for b in coordinator/gpp-coordinator agent/gpp-agent agent/exec/gpp-train planner/gpp-plan; do
    name=${b##*/}
    out=$("$BUILD/$b" --version 2>&1)
    rc=$?
    if [ $rc = 0 ] && [[ "$out" =~ ^$name\ [0-9]+\.[0-9]+\.[0-9]+\ \(git\ ([0-9a-f]{12}(-dirty)?|unknown)\)$ ]]; then
        ok "$name --version: $out"
    else
        fail "$name --version" "exit $rc: $out"
    fi
    GPP_LOG_LEVEL=chatty expect_fail "$name with GPP_LOG_LEVEL=chatty" "GPP_LOG_LEVEL='chatty'.*debug, info, warn or error" \
        "$BUILD/$b" --help
done

# ---- every log line of a real job: timestamp, level, component, rank ---------
C=$(cpu_job_conf "$TMP/job.toml" 2 2 "$TMP/ckpt")
if GPP_LOG_LEVEL=debug "$COORD" --plan gpp "$C" >"$TMP/job.out" 2>"$TMP/job.err"; then
    ok "a 2-agent job at GPP_LOG_LEVEL=debug"
else
    fail "a 2-agent job at GPP_LOG_LEVEL=debug" "$(tail -3 "$TMP/job.err")"
fi
TS='[0-9]{4}-[01][0-9]-[0-3][0-9]T[0-2][0-9]:[0-5][0-9]:[0-6][0-9]\.[0-9]{3}Z'
bad=$(grep -Ev "^$TS (error|warn |info |debug) (gpp-coordinator|gpp-agent(\[[0-9]+\])?) " "$TMP/job.err" | head -3)
[ -z "$bad" ] && [ -s "$TMP/job.err" ] && ok "every stderr line has timestamp, level, component" \
    || fail "every stderr line has timestamp, level, component" "$bad"
for r in 0 1; do
    grep -Eq "^$TS (info |debug) gpp-agent\[$r\] " "$TMP/job.err" && ok "agent rank $r names its rank" \
        || fail "agent rank $r names its rank"
done
grep -Eq "^$TS debug gpp-coordinator " "$TMP/job.err" && ok "debug lines at GPP_LOG_LEVEL=debug" \
    || fail "debug lines at GPP_LOG_LEVEL=debug"

# ---- no silence while waiting: the missing agent is named every 1.5-2 s -------
PORT=$(free_port)
sed -e "s|^endpoint = .*|endpoint = \"tcp://127.0.0.1:$PORT\"|" -e 's/^launch = .*/launch = "external"/' \
    "$TMP/job.toml" >"$TMP/ext.toml"
"$COORD" --plan gpp --start-timeout-ms 6000 "$TMP/ext.toml" >"$TMP/wait.out" 2>"$TMP/wait.err" &
CP=$!
"$AGENT" --coordinator "tcp://127.0.0.1:$PORT" --host 127.0.0.1 --slot 0 --heartbeat-ms 100 \
    --timeout-ms 3000 >"$TMP/a0.out" 2>"$TMP/a0.err" &
A0=$!
track $A0
bwait $CP 30
rc=$?
bwait $A0 10 >/dev/null
n=$(grep -c "coordinator: waiting for agents: 1 of 2 registered after .*; missing 127.0.0.1:1\$" "$TMP/wait.err")
if [ "$rc" = 1 ] && [ "$n" -ge 2 ] && grep -q "timed out after 6.0 s waiting for agents: missing 127.0.0.1:1" "$TMP/wait.err"; then
    ok "waiting for agents: $n progress lines name the missing one"
else
    fail "waiting for agents: progress lines name the missing one" "exit $rc, $n lines" "$(tail -4 "$TMP/wait.err")"
fi

gpp_test_end
