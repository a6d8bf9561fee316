# gpu_probe.sh: sourced by the GPU test scripts after gpp_test_begin, with
# TRAIN set (gpp-train, or gpp-train-emu on the host emulation).
#
# gpu_probe NAME NEED ARGS...: one step of `gpp-train --backend cuda ARGS...`
# must train. Where it cannot because the GPU is missing (exit 2, a message
# naming why, no loss line: never a CPU run) the test prints SKIPPED with
# NEED (what it needs, may be empty) and exits 77, which ctest reports as
# skipped; any other failure fails the test.
gpu_probe() {
    local name=$1 need=$2 rc
    shift 2
    "$TRAIN" --backend cuda --iterations 1 --batch 4 "$@" >"$TMP/probe.log" 2>"$TMP/probe.err"
    rc=$?
    [ $rc -eq 0 ] && return 0
    if [ $rc -eq 2 ] && grep -Eq 'no usable GPU|built without CUDA|CUDA device\(s\) visible' "$TMP/probe.err" &&
        ! grep -q 'loss=' "$TMP/probe.log"; then
        echo "$name: SKIPPED${need:+ ($need)}: $(cat "$TMP/probe.err")"
        exit 77
    fi
    fail "gpp-train --backend cuda $* failed (exit $rc) without naming a missing GPU" "$(cat "$TMP/probe.err")"
    gpp_test_end
}
