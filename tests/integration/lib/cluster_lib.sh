# cluster_lib: what the cluster_*.sh black-box tests share — a scratch folder
# and a list of processes cleaned up on exit, pass/fail counting, and waiting
# for processes with a bound. Sourced, not run (tests/CMakeLists.txt runs
# only tests/integration/*.sh, so this folder is not a test).
#
#   . "$(dirname "$0")/lib/cluster_lib.sh"
#   cluster_begin NAME     # TMP, FAILS=0, PIDS=(); cleanup on exit
#   ...; PIDS+=($pid); pass "what" | fail "what"
#   cluster_end            # prints the tally, exits 1 when any case failed

# cluster_begin NAME: a scratch folder $TMP (/tmp/gpp_NAME.XXXXXX), the
# failure count $FAILS and $PIDS, every process the test started or learnt
# about: on exit each is resumed (a stopped one cannot die otherwise) and
# killed, and $TMP removed.
cluster_begin() {
    CLUSTER_NAME=$1
    TMP=$(mktemp -d "/tmp/gpp_$1.XXXXXX")
    FAILS=0
    PIDS=()
    trap cluster_cleanup EXIT
}

cluster_cleanup() {
    for p in "${PIDS[@]}"; do kill -CONT "$p" 2>/dev/null; kill -KILL "$p" 2>/dev/null; done
    wait 2>/dev/null
    rm -rf "$TMP"
}

cluster_end() {
    [ $FAILS = 0 ] && echo "$CLUSTER_NAME: all passed" || echo "$CLUSTER_NAME: $FAILS failed"
    exit $((FAILS > 0))
}

fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
pass() { echo "ok   $*"; }

# 0 when pid $1 runs (a zombie does not: an orphan's zombie may wait long for its reaper)
running() {
    [ -r "/proc/$1/stat" ] || return 1
    [ "$(sed 's/^.*) \(.\).*$/\1/' "/proc/$1/stat" 2>/dev/null)" != Z ]
}

# waits up to $1 seconds for every pid in the rest to be gone; 0 when they are
wait_gone() {
    local t=$(($1 * 10)); shift
    while [ $t -gt 0 ]; do
        local alive=0
        for p in "$@"; do running "$p" && alive=1; done
        [ $alive = 0 ] && return 0
        sleep 0.1; t=$((t - 1))
    done
    return 1
}

# waits for child $1 at most $2 seconds (then kills it); returns its status
bwait() {
    local t=$(($2 * 10))
    while kill -0 "$1" 2>/dev/null && [ $t -gt 0 ]; do sleep 0.1; t=$((t - 1)); done
    kill -0 "$1" 2>/dev/null && { echo "  (pid $1 still running after $2 s: killed)"; kill -KILL "$1"; }
    wait "$1"
}
