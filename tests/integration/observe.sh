#!/usr/bin/env bash
# observe: what an operator watches, on real processes. Every binary answers
# --version (version and git commit) and refuses a bad GPP_LOG_LEVEL (exit
# 2, naming it); every log line of a real job carries a UTC timestamp, a
# level word, the component and (agents) the rank; the coordinator names
# the agents it waits for; [metrics] http_port serves /metrics, scraped during
# a real run and parsed with Debian's prometheus_client; a port in use is an
# exit-2 error naming it.
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

# ---- Prometheus /metrics during a real run -------------------------------------
PY=/usr/bin/python3 # Debian's, with python3-prometheus-client (scripts/install-deps.sh)
if ! $PY -c 'import prometheus_client' 2>/dev/null; then
    fail "python3-prometheus-client is installed (scripts/install-deps.sh)"
else
    read -r CPORT HPORT <<<"$(free_port 2 | tr '\n' ' ')"
    C=$(cpu_job_conf "$TMP/prom.toml" 3 3000 "" "[metrics]
http_port = $HPORT")
    sed -i "s|^endpoint = .*|endpoint = \"tcp://127.0.0.1:$CPORT\"|" "$C"
    # [metrics] after [job] ends [job]: the [health] lines that follow stay in [health]
    "$COORD" --plan gpp "$C" >"$TMP/prom.out" 2>"$TMP/prom.err" &
    CP=$!
    if $PY "$SRC/tests/integration/lib/scrape_metrics.py" "$HPORT" 120 3 >"$TMP/scrape.out" 2>"$TMP/scrape.err"; then
        ok "/metrics during training: $(cat "$TMP/scrape.out")"
    else
        fail "/metrics during training" "$(cat "$TMP/scrape.err")" "$(tail -2 "$TMP/prom.err")"
    fi
    bwait $CP 120 && ok "the scraped job finishes" || fail "the scraped job finishes" "$(tail -3 "$TMP/prom.err")"
    planned=$(sed -n 's/^plan gpp for .*: \([0-9]*\) stages\{0,1\},.*/\1/p' "$TMP/prom.out" | head -1)
    grep -q ", $planned stages\$" "$TMP/scrape.out" && ok "a series per stage of the plan ($planned)" \
        || fail "a series per stage of the plan" "plan: $planned; scrape: $(cat "$TMP/scrape.out")"

    # a port in use: exit 2 naming it, no agent launched (the holder reuses
    # the address: the scrapes left the port in TIME_WAIT)
    $PY -c 'import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("0.0.0.0", int(sys.argv[1]))); s.listen(1); print("up", flush=True); time.sleep(60)' "$HPORT" >"$TMP/holder.out" &
    HOLDER=$!
    wait_until 10 grep -q up "$TMP/holder.out" || fail "a listener holds port $HPORT"
    expect_fail "http_port in use" "http_port $HPORT: port $HPORT is in use.*set \[metrics\] http_port" \
        "$COORD" --plan gpp "$C"
    kill $HOLDER
fi

gpp_test_end
