#!/usr/bin/env bash
# top_end: gpp-top shows how a job ends (issue 33, item 7), in its plain-text
# batch mode (--batch: a frame per interval) on local-launch jobs watched
# through their run directory.
#  1. slot 1's agent is SIGKILLed while training: the coordinator stops the
#     job and, watched by a monitor, keeps answering monitors for [metrics]
#     http_linger_ms (3 s here). gpp-top's frames show the job stopped, the
#     stop reason naming the killed agent, its row down, the others exited,
#     the last iteration; its last frame, once the coordinator is gone, says
#     "coordinator not answering since T (last seen: stopped, iteration
#     N/M)"; exit 0 (the job had ended).
#  2. a job that finishes (with http_port: a short job may end before
#     gpp-top first asks): frames with the job done at its last iteration,
#     the agents exited, then the same line (last seen: done); exit 0.
#  3. the coordinator SIGKILLed mid-job: the last frame keeps what it showed
#     (training) with the line; exit 1 (it went before the job ended). The
#     live screen (in tmux) keeps that frame under the line until q.
# Usage: top_end.sh BUILD_DIR
set -u
. "$(dirname "$0")/../integration/lib/gpp_test.sh"
gpp_test_begin top_end "${1:-}"
COORD=$BUILD/coordinator/gpp-coordinator
TOP=$BUILD/coordinator/gpp-top
MODEL="mmt:branches=2,layers=1,hidden=16,heads=2,seq=4,ffn=32"
TS='[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2} UTC'

# start NAME SLOTS ITERS [METRICS_LINES]: a job watched from its start by
# gpp-top --batch (every 200 ms) through its run directory; sets CP, TP, PORT
start() {
    local c
    c=$(cpu_job_conf "$TMP/$1.toml" "$2" "$3" "" "[metrics]
http_linger_ms = 3000
${4:-}")
    PORT=$(sed -n 's|^endpoint = "tcp://127.0.0.1:\([0-9]*\)"$|\1|p' "$c")
    "$COORD" --plan gpp "$c" >"$TMP/$1.out" 2>"$TMP/$1.err" &
    CP=$!
    track $CP
    NAME=$1
    rundir() { RUNDIR=$(sed -n 's/.* monitor: gpp-top --run-dir \([^ ]*\) .*/\1/p' "$TMP/$NAME.err" | head -1); [ -n "$RUNDIR" ]; }
    wait_until 30 rundir || fail "$1: the coordinator names its run directory" "$(tail -3 "$TMP/$1.err")"
    "$TOP" --batch --interval-ms 200 --run-dir "${RUNDIR:-/nonexistent}" >"$TMP/$1.top" 2>"$TMP/$1.toperr" &
    TP=$!
    track $TP
}
# last_frame NAME: gpp-top's last frame (from its last header line)
last_frame() { awk '/^gpp-top  /{f=""} {f=f $0 "\n"} END{printf "%s", f}' "$TMP/$1.top"; }
# frames NAME PATTERN: frames that hold PATTERN (an ERE) and answer (no
# "not answering" line)
frames() {
    PAT=$2 awk '/^gpp-top  /{if (f && m && !n) c++; f=1; m=0; n=0}
        /^coordinator not answering/{n=1} $0 ~ ENVIRON["PAT"] {m=1}
        END{if (f && m && !n) c++; print c+0}' "$TMP/$1.top"
}
# row FRAME HOSTSLOT: the agent row's STATE word
row() { echo "$1" | WHO=$2 awk '$2 == ENVIRON["WHO"] && $1 ~ /^[0-9]+$/ {print $5; exit}'; }

# ---- 1. an agent killed while training -------------------------------------
start kill 3 1000000
wait_until 120 grep -q "^iter 5/1000000 " "$TMP/kill.out"
# answered once before the end: the coordinator lingers for it
wait_until 30 grep -q "^job training" "$TMP/kill.top"
A=$(pgrep -f -- "--coordinator tcp://127.0.0.1:$PORT --host 127.0.0.1 --slot 1 ")
[ -n "$A" ] && kill -KILL $A
bwait $CP 60
rc=$?
bwait $TP 30
trc=$?
last=$(grep '^iter ' "$TMP/kill.out" | tail -1 | sed 's|^iter \([0-9]*\)/.*|\1|')
F=$(last_frame kill)
stopped=$(frames kill '^stopped: agent 127\.0\.0\.1:1 \(rank [0-9], pid '"$A"'\) killed by signal 9')
if [ -n "$A" ] && [ $rc = 1 ] && [ $trc = 0 ] && [ -n "$last" ] && [ "$stopped" -ge 2 ] &&
    echo "$F" | grep -Eq "^coordinator not answering since $TS \(last seen: stopped, iteration $last/1000000\)$" &&
    echo "$F" | grep -Eq "^job stopped +iteration $last/1000000 " &&
    echo "$F" | grep -Eq '^stopped: agent 127\.0\.0\.1:1 \(rank [0-9], pid '"$A"'\) killed by signal 9' &&
    [ "$(row "$F" 127.0.0.1:1)" = down ] && [ "$(row "$F" 127.0.0.1:0)" = exited ] &&
    [ "$(row "$F" 127.0.0.1:2)" = exited ]; then
    ok "agent killed: $stopped answered frames of the stopped job (reason, slot 1 down, others exited, iteration $last), then 'not answering'; exit 0"
else
    fail "agent killed (job $rc, gpp-top $trc, killed '$A', last iteration '$last', $stopped stopped frames)" \
        "$F" "$(tail -3 "$TMP/kill.toperr")" "$(grep 'job stopped' "$TMP/kill.err" | tail -1)"
fi
grep -q "serving the job's final state to monitors for 3.0 s more" "$TMP/kill.err" &&
    ok "the coordinator says it lingers for monitors" ||
    fail "the coordinator's linger line" "$(grep -i 'final state' "$TMP/kill.err")"

# ---- 2. a job that finishes --------------------------------------------------
# (with http_port it lingers whether or not gpp-top asked before the end:
# a short job may end before gpp-top starts)
start done 2 40 "http_port = $(free_port)"
bwait $CP 120
rc=$?
bwait $TP 30
trc=$?
F=$(last_frame done)
done_frames=$(frames done '^job done +iteration 40/40 ')
if [ $rc = 0 ] && [ $trc = 0 ] && [ "$done_frames" -ge 2 ] &&
    echo "$F" | grep -Eq "^coordinator not answering since $TS \(last seen: done, iteration 40/40\)$" &&
    ! echo "$F" | grep -q '^stopped:' &&
    [ "$(row "$F" 127.0.0.1:0)" = exited ] && [ "$(row "$F" 127.0.0.1:1)" = exited ]; then
    ok "job finished: $done_frames answered frames 'job done, iteration 40/40', agents exited, then 'not answering'; exit 0"
else
    fail "job finished (job $rc, gpp-top $trc, $done_frames done frames)" "$F" "$(tail -3 "$TMP/done.toperr")"
fi

# ---- 3. the coordinator killed mid-job ---------------------------------------
start crash 2 1000000
wait_until 120 grep -q "^iter 3/1000000 " "$TMP/crash.out"
KIDS=$(pgrep -P $CP | tr '\n' ' ')
track $KIDS
wait_until 10 grep -q "^job training" "$TMP/crash.top"
"$TOP" --batch --frames 2 --interval-ms 100 --run-dir "$RUNDIR" >"$TMP/frames.out" 2>&1
rc=$?
[ $rc = 0 ] && [ "$(grep -c '^gpp-top  ' "$TMP/frames.out")" = 2 ] &&
    [ "$(grep -c '^job training' "$TMP/frames.out")" = 2 ] &&
    ok "gpp-top --batch --frames 2: two frames of the job training, exit 0" ||
    fail "gpp-top --batch --frames 2 (exit $rc)" "$(head -5 "$TMP/frames.out")"
# the screen too, in tmux: it keeps the frame under the line, and q quits
TM="tmux -L gpp_top_end_$$"
pane() { $TM capture-pane -p >"$TMP/pane.txt" 2>/dev/null; grep -q "$1" "$TMP/pane.txt"; }
$TM new-session -d -x 160 -y 40 "$TOP --interval-ms 200 --run-dir $RUNDIR; echo gpp-top-exit-\$?; sleep 30" ||
    fail "tmux starts (scripts/install-deps.sh)"
wait_until 20 pane "^job training" || fail "gpp-top in tmux: the job training" "$(cat "$TMP/pane.txt")"
kill -KILL $CP
bwait $TP 30
trc=$?
F=$(last_frame crash)
kept() { pane "^coordinator not answering since .* (last seen: training, iteration [0-9]*/1000000)" &&
    grep -q "^job training  *iteration [0-9]*/1000000 " "$TMP/pane.txt" && grep -q "  up  " "$TMP/pane.txt"; }
if wait_until 20 kept && sleep 1 && ! pane gpp-top-exit; then
    ok "gpp-top's screen keeps the last frame under 'coordinator not answering since'"
else
    fail "gpp-top's screen after the coordinator went" "$(cat "$TMP/pane.txt")"
fi
$TM send-keys q
wait_until 10 pane "gpp-top-exit-0" && ok "gpp-top: 'q' quits with status 0 after that" ||
    fail "gpp-top: 'q' after the coordinator went" "$(cat "$TMP/pane.txt")"
$TM kill-server 2>/dev/null
if [ $trc = 1 ] &&
    echo "$F" | grep -Eq "^coordinator not answering since $TS \(last seen: training, iteration [0-9]+/1000000\)$" &&
    echo "$F" | grep -Eq "^  why: no answer from tcp://127\.0\.0\.1:$PORT within 3 s" &&
    echo "$F" | grep -Eq '^job training +iteration [0-9]+/1000000 ' &&
    [ "$(row "$F" 127.0.0.1:0)" = up ]; then
    ok "coordinator killed: the last frame keeps what it showed, with 'not answering' and why; exit 1"
else
    fail "coordinator killed (gpp-top $trc)" "$F" "$(tail -3 "$TMP/crash.toperr")"
fi
kill -KILL $KIDS 2>/dev/null

gpp_test_end
