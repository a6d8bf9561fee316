# gpp_test.sh: what every black-box test in tests/integration/*.sh shares —
# pass/fail counting with the closing "N passed, M failed" line of the C
# tests, one scratch folder removed at exit, every process the test started
# killed at exit (also on Ctrl-C or a failed command), free ports from the
# kernel, and bounded waiting. Sourced, not run (tests/CMakeLists.txt runs
# only tests/integration/*.sh, so this folder is not a test).
#
#   . "$(dirname "$0")/lib/gpp_test.sh"
#   gpp_test_begin NAME BUILD_DIR   # $TMP, $BUILD, the traps
#   cmd & track $!                  # killed at exit if still there
#   ok "what"  |  fail "what" [detail lines...]
#   expect_ok NAME CMD...           # exit status 0
#   expect_fail NAME WORDS CMD...   # exit status 2 and WORDS (a grep pattern) on stderr
#   gpp_test_end                    # "N passed, M failed"; status 1 when any failed
#
# Scratch: $TMP is ${TMPDIR:-/tmp}/gpp_NAME.XXXXXX, the one root of every
# file the test writes; GPP_TEST_KEEP=1 keeps it (its path is printed).

# gpp_test_begin NAME BUILD_DIR
gpp_test_begin() {
    GPP_TEST_NAME=$1
    BUILD=${2:?usage: $GPP_TEST_NAME.sh BUILD_DIR}
    SRC=${GPP_SRC:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)}
    GPP_TEST_PASSED=0
    GPP_TEST_FAILED=0
    GPP_TEST_PIDS=()
    TMP=$(mktemp -d "${TMPDIR:-/tmp}/gpp_$1.XXXXXX")
    trap gpp_test_cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
}

# Kills what the test started (a stopped process is resumed first: it cannot
# die otherwise), reaps it, removes $TMP.
gpp_test_cleanup() {
    local p
    for p in "${GPP_TEST_PIDS[@]}" $(jobs -p); do
        kill -CONT "$p" 2>/dev/null
        kill -KILL "$p" 2>/dev/null
    done
    wait 2>/dev/null
    if [ "${GPP_TEST_KEEP:-0}" = 1 ]; then
        echo "$GPP_TEST_NAME: files kept in $TMP"
    else
        rm -rf "$TMP"
    fi
}

# track PID...: processes killed at exit (children of this shell are anyway;
# name the others, e.g. the agents a coordinator forked)
track() { GPP_TEST_PIDS+=("$@"); }

ok() {
    echo "ok   $1"
    GPP_TEST_PASSED=$((GPP_TEST_PASSED + 1))
}
# fail WHAT [DETAIL...]: each detail on its own indented line
fail() {
    echo "FAIL $1"
    shift
    local l
    for l in "$@"; do echo "     $l"; done
    GPP_TEST_FAILED=$((GPP_TEST_FAILED + 1))
}

gpp_test_end() {
    echo "$GPP_TEST_PASSED passed, $GPP_TEST_FAILED failed"
    exit $((GPP_TEST_FAILED > 0))
}

# expect_ok NAME CMD...: exit status 0 (output in $TMP/out, $TMP/err)
expect_ok() {
    local name=$1
    shift
    if "$@" >"$TMP/out" 2>"$TMP/err"; then
        ok "$name"
    else
        fail "$name" "exit $? from: $*" "$(tail -3 "$TMP/err")"
    fi
}

# expect_fail NAME WORDS CMD...: exit status 2 (bad input) and the grep
# pattern WORDS on stderr (output in $TMP/out, $TMP/err)
expect_fail() {
    local name=$1 words=$2
    shift 2
    "$@" >"$TMP/out" 2>"$TMP/err"
    local rc=$?
    if [ $rc -eq 2 ] && grep -q -e "$words" "$TMP/err"; then
        ok "$name: $(grep -m1 . "$TMP/err" | head -c 160)"
    else
        fail "$name" "want exit 2 and '$words'; got exit $rc:" "$(head -3 "$TMP/err")"
    fi
}

# free_port [N]: N (default 1) distinct TCP ports on 127.0.0.1 the kernel
# says are free now, one per line
free_port() { "$BUILD/tests/gpp-test-port" "$@"; }

# cpu_job_conf PATH SLOTS ITERATIONS CKPT_DIR [JOB_LINES]: writes a cluster
# file for a local-launch training job of $MODEL (batch 16) on SLOTS CPU
# agents of 127.0.0.1, a free coordinator port (the data-plane rendezvous
# runs on it too), fast heartbeats (a dead agent is found within
# HEALTH_TIMEOUT_MS, default 3000, what the fault tests wait on); JOB_LINES
# go into [job]. Prints PATH.
cpu_job_conf() {
    cat >"$1" <<EOF
[coordinator]
endpoint = "tcp://127.0.0.1:$(free_port 1)"
[cluster]
device = "cpu"
mem_gib = 2
[[nodes]]
host = "127.0.0.1"
slots = $2
[job]
model = "$MODEL"
batch = 16
iterations = $3
launch = "local"
checkpoint_dir = "$4"
${5:-}
[health]
heartbeat_ms = 100
timeout_ms = ${HEALTH_TIMEOUT_MS:-3000}
EOF
    echo "$1"
}

# running PID: 0 when it runs (a zombie does not: an orphan's zombie may wait
# long for its reaper)
running() {
    [ -r "/proc/$1/stat" ] || return 1
    [ "$(sed 's/^.*) \(.\).*$/\1/' "/proc/$1/stat" 2>/dev/null)" != Z ]
}

# wait_until SECONDS CMD...: runs CMD every 0.1 s until it succeeds; 0 when
# it did within SECONDS
wait_until() {
    local t=$(($1 * 10))
    shift
    while ! "$@"; do
        [ $t -le 0 ] && return 1
        sleep 0.1
        t=$((t - 1))
    done
}

# wait_gone SECONDS PID...: 0 when every PID is gone within SECONDS
all_gone() {
    local p
    for p in "$@"; do running "$p" && return 1; done
    return 0
}
wait_gone() {
    local s=$1
    shift
    wait_until "$s" all_gone "$@"
}

# bwait PID SECONDS: waits for child PID at most SECONDS (then kills it);
# returns its status
ended() { ! kill -0 "$1" 2>/dev/null; }
bwait() {
    wait_until "$2" ended "$1" || { echo "  (pid $1 still running after $2 s: killed)"; kill -KILL "$1"; }
    wait "$1"
}
