#!/usr/bin/env bash
# observe: what an operator watches, on real processes. Every binary answers
# --version (version and git commit) and refuses a bad GPP_LOG_LEVEL (exit
# 2, naming it); every log line of a real job carries a UTC timestamp, a
# level word, the component and (agents) the rank; the coordinator names
# the agents it waits for; [metrics] http_port serves /metrics, scraped during
# a real run and parsed with Debian's prometheus_client; gpp-top watches it
# over the authenticated control plane (the run directory's monitor key),
# in tmux too, and refuses the HTTP port (exit 2: that is for Prometheus);
# a port in use is an exit-2 error naming it.
# Usage: observe.sh BUILD_DIR
set -u
. "$(dirname "$0")/lib/gpp_test.sh"
gpp_test_begin observe "${1:-}"
COORD=$BUILD/coordinator/gpp-coordinator
AGENT=$BUILD/agent/gpp-agent
MODEL="mmt:branches=2,layers=1,hidden=16,heads=2,seq=4,ffn=32"

# ---- --version and GPP_LOG_LEVEL on every binary ------------------------------
for b in coordinator/gpp-coordinator agent/gpp-agent agent/exec/gpp-train planner/gpp-plan coordinator/gpp-top; do
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
# (a checkpoint_dir of its own: the first job's sets are refused without --resume)
sed -e "s|^endpoint = .*|endpoint = \"tcp://127.0.0.1:$PORT\"\ninsecure_plaintext = true|" -e 's/^launch = .*/launch = "external"/' \
    -e "s|^checkpoint_dir = .*|checkpoint_dir = \"$TMP/ext.ckpt\"|" "$TMP/job.toml" >"$TMP/ext.toml"
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

# ---- Prometheus /metrics and gpp-top against a real run ------------------------
# one long job: scraped, watched with gpp-top (--once, and live in tmux),
# then stopped with SIGTERM
PY=/usr/bin/python3 # Debian's, with python3-prometheus-client (scripts/install-deps.sh)
TOP=$BUILD/coordinator/gpp-top
read -r CPORT HPORT <<<"$(free_port 2 | tr '\n' ' ')"
# [metrics] after the [job] lines ends [job]; the [health] that follows is its own
C=$(cpu_job_conf "$TMP/prom.toml" 3 1000000 "" "[metrics]
http_port = $HPORT")
sed -i "s|^endpoint = .*|endpoint = \"tcp://127.0.0.1:$CPORT\"|" "$C"
"$COORD" --plan gpp "$C" >"$TMP/prom.out" 2>"$TMP/prom.err" &
CP=$!
# the run directory the coordinator names: gpp-top's key and endpoint
rundir() { RUNDIR=$(sed -n 's/.* monitor: gpp-top --run-dir \([^ ]*\) .*/\1/p' "$TMP/prom.err" | head -1); [ -n "$RUNDIR" ]; }
wait_until 30 rundir
RUNDIR=${RUNDIR:-/nonexistent}
training() { "$TOP" --once --run-dir "$RUNDIR" 2>/dev/null | grep -q "^job training  *iteration [1-9]"; }
wait_until 120 training && ok "gpp-top --once --run-dir sees the job training (CURVE)" \
    || fail "gpp-top --once --run-dir sees the job training" "$(tail -3 "$TMP/prom.err")"
KIDS=$(pgrep -P $CP | tr '\n' ' ')
track $KIDS
[ "$(stat -c %a "$RUNDIR")" = 700 ] && [ "$(stat -c %a "$RUNDIR/monitor.key_secret")" = 600 ] &&
    [ "$(cat "$RUNDIR/endpoint")" = "tcp://127.0.0.1:$CPORT" ] &&
    ok "run directory $RUNDIR: 0700, monitor key 0600, the control endpoint" ||
    fail "run directory" "$(ls -la "$RUNDIR" 2>&1)"
expect_fail "gpp-top given the HTTP port: exit 2, naming the control endpoint" \
    "http_port serves Prometheus scrapers, not gpp-top" "$TOP" --once "127.0.0.1:$HPORT"

if ! $PY -c 'import prometheus_client' 2>/dev/null; then
    fail "python3-prometheus-client is installed (scripts/install-deps.sh)"
elif $PY "$SRC/tests/integration/lib/scrape_metrics.py" "$HPORT" 60 3 >"$TMP/scrape.out" 2>"$TMP/scrape.err"; then
    ok "/metrics during training: $(cat "$TMP/scrape.out")"
    planned=$(sed -n 's/^plan gpp for .*: \([0-9]*\) stages\{0,1\},.*/\1/p' "$TMP/prom.out" | head -1)
    grep -q ", $planned stages\$" "$TMP/scrape.out" && ok "a series per stage of the plan ($planned)" \
        || fail "a series per stage of the plan" "plan: $planned; scrape: $(cat "$TMP/scrape.out")"
else
    fail "/metrics during training" "$(cat "$TMP/scrape.err")" "$(tail -2 "$TMP/prom.err")"
fi

# gpp-top --once over the control plane: one frame, a row per agent and per stage
"$TOP" --once --run-dir "$RUNDIR" >"$TMP/top.out" 2>&1
rows=$(grep -Ec '^ +[0-9]+  127\.0\.0\.1:[0-9] +cpu:[0-9] +[0-9]+  up ' "$TMP/top.out")
srows=$(grep -Ec '^ +[0-9]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+%$' "$TMP/top.out")
# W: a zero-bubble plan's parameter-gradient passes (auto may pick one)
grows=$(grep -Ec '^stage +[0-9]+ \|[FBW>.AS ]{80}\|$' "$TMP/top.out")
[ "$rows" = 3 ] && [ "$srows" = "${planned:-x}" ] && [ "$grows" = "$srows" ] && grep -q "loss [0-9]" "$TMP/top.out" &&
    grep -Eq '^stage +[0-9]+ \|.*F.*B' "$TMP/top.out" \
    && ok "gpp-top --once: 3 agent rows, $srows stage rows, $grows Gantt rows, the loss" \
    || fail "gpp-top --once: agent, stage and Gantt rows" "$(cat "$TMP/top.out")"

# gpp-top live, driven in tmux: the frame, the stages-only view, q quits
TM="tmux -L gpp_observe_$$"
if $TM new-session -d -x 120 -y 40 "$TOP --interval-ms 200 --run-dir $RUNDIR; echo gpp-top-exit-\$?; sleep 30"; then
    pane() { $TM capture-pane -p >"$TMP/pane.txt" 2>/dev/null; grep -q "$1" "$TMP/pane.txt"; }
    wait_until 20 pane "^job training" && pane "RANK  AGENT" && pane "STAGE  COMPUTE" &&
        ok "gpp-top in tmux: job, agents and stages" || fail "gpp-top in tmux: job, agents and stages" "$(cat "$TMP/pane.txt")"
    $TM send-keys s
    stages_only() { pane "STAGE  COMPUTE" && ! grep -q "RANK  AGENT" "$TMP/pane.txt"; }
    wait_until 10 stages_only && ok "gpp-top: 's' shows the stages only" || fail "gpp-top: 's' shows the stages only" "$(cat "$TMP/pane.txt")"
    $TM send-keys g
    gantt_only() { pane "^GANTT of iteration" && ! grep -q "STAGE  COMPUTE" "$TMP/pane.txt"; }
    wait_until 10 gantt_only && ok "gpp-top: 'g' shows the Gantt chart" || fail "gpp-top: 'g' shows the Gantt chart" "$(cat "$TMP/pane.txt")"
    $TM send-keys q
    wait_until 10 pane "gpp-top-exit-0" && ok "gpp-top: 'q' quits with status 0" || fail "gpp-top: 'q' quits" "$(cat "$TMP/pane.txt")"
    $TM kill-server 2>/dev/null
else
    fail "tmux starts (scripts/install-deps.sh)"
fi

kill -TERM $CP
bwait $CP 60
rc=$?
[ $rc = 143 ] && wait_gone 20 $KIDS && [ ! -e "$RUNDIR" ] &&
    ok "the watched job stops on SIGTERM, agents and run directory gone" \
    || fail "the watched job stops on SIGTERM, agents and run directory gone" "exit $rc" "$(tail -2 "$TMP/prom.err")"
"$TOP" --once --run-dir "$RUNDIR" >/dev/null 2>"$TMP/top.err"
rc=$?
[ $rc = 1 ] && grep -q "cannot read $RUNDIR/endpoint" "$TMP/top.err" &&
    ok "gpp-top --run-dir of a finished job: exit 1 naming the directory" ||
    fail "gpp-top --run-dir of a finished job (exit $rc)" "$(cat "$TMP/top.err")"
expect_fail "gpp-top: a bad endpoint" "tcp://HOST:PORT" "$TOP" --once nonsense
"$TOP" --once "tcp://127.0.0.1:$CPORT" >/dev/null 2>"$TMP/top.err"
rc=$?
[ $rc = 1 ] && grep -q "no answer from tcp://127.0.0.1:$CPORT within 3 s" "$TMP/top.err" \
    && ok "gpp-top --once without a coordinator: exit 1 naming the endpoint" \
    || fail "gpp-top --once without a coordinator" "exit $rc: $(cat "$TMP/top.err")"

# a job that ends: /metrics serves its final state for [metrics]
# http_linger_ms after the end (issue 33, item 8), then the coordinator exits 0
read -r CPORT2 HPORT2 <<<"$(free_port 2 | tr '\n' ' ')"
C2=$(cpu_job_conf "$TMP/end.toml" 2 4 "" "[metrics]
http_port = $HPORT2
http_linger_ms = 4000")
sed -i "s|^endpoint = .*|endpoint = \"tcp://127.0.0.1:$CPORT2\"|" "$C2"
"$COORD" --plan gpp "$C2" >"$TMP/end.out" 2>"$TMP/end.err" &
CP=$!
track $CP
wait_until 120 grep -q "serving the job's final state on port $HPORT2 for 4.0 s" "$TMP/end.err"
sleep 1 # a scrape a moment after the end
final=$($PY -c 'import sys, urllib.request
t = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=5).read().decode()
print(" ".join(l for l in t.splitlines() if l.startswith(("gpp_job_state{state=\"done\"}", "gpp_iterations_completed_total"))))' "$HPORT2" 2>&1)
running $CP
alive=$?
bwait $CP 30
rc=$?
if [ $alive = 0 ] && [ $rc = 0 ] && echo "$final" | grep -q 'gpp_job_state{state="done"} 1' &&
    echo "$final" | grep -q "gpp_iterations_completed_total 4"; then
    ok "after the job ended /metrics still served its final state ($final), then exit 0"
else
    fail "final state on /metrics (alive $alive, rc $rc)" "$final" "$(tail -2 "$TMP/end.err")"
fi

# a port in use: exit 2 naming it, no agent launched (the holder reuses
# the address: the scrapes left the port in TIME_WAIT)
$PY -c 'import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("0.0.0.0", int(sys.argv[1]))); s.listen(1); print("up", flush=True); time.sleep(60)' "$HPORT" >"$TMP/holder.out" &
HOLDER=$!
wait_until 10 grep -q up "$TMP/holder.out" || fail "a listener holds port $HPORT"
expect_fail "http_port in use" "http_port $HPORT: port $HPORT is in use.*set \[metrics\] http_port" \
    "$COORD" --plan gpp "$C"
kill $HOLDER

gpp_test_end
