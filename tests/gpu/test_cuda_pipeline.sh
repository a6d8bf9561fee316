#!/usr/bin/env bash
# test_cuda_pipeline: the main job (config/examples/local-cpu.toml: MMT,
# 4 agents) through gpp-coordinator and gpp-agent on one GPU with backend
# cuda (config/examples/gpu-1.toml: 4 agents share GPU 0 and exchange over
# Gloo through host memory), against the same job on CPU agents with the
# same plan (the CPU run's plan.json): every iteration's loss within 2e-3
# relative (the tolerance of test_cuda_train: fp32 with other summation
# orders, grown over AdamW steps). Then the cuda run's checkpoint set loads
# on CPU agents (--resume from it).
#
# Without a usable GPU, gpp-train --backend cuda must fail with exit 2 and
# a message naming the reason; the test then exits 77: skipped.
# Usage: test_cuda_pipeline.sh BUILD_DIR
set -u
. "$(dirname "$0")/../integration/lib/gpp_test.sh"
gpp_test_begin test_cuda_pipeline "${1:-}"
TRAIN=${GPP_TRAIN:-$BUILD/agent/exec/gpp-train}
COORD=$BUILD/coordinator/gpp-coordinator
. "$SRC/scripts/blas-env.sh"

. "$(dirname "$0")/gpu_probe.sh"
gpu_probe test_cuda_pipeline "" --model "mmt:branches=2,layers=1,hidden=32,heads=2,seq=8,ffn=64"

ITERS=10
. "$(dirname "$0")/pipeline_lib.sh"
# the example files with this run's port, iterations and directories,
# checkpoints every 5 iterations
conf() { # $1 example, $2 name
    local c
    c=$(job_conf "$1" "$2")
    sed -i 's|^checkpoint_interval = .*|checkpoint_interval = 5|' "$c"
    echo "$c"
}

timeout 300 "$COORD" --plan gpp "$(conf local-cpu.toml cpu)" >"$TMP/cpu.out" 2>"$TMP/cpu.err" ||
    fail "the main job on CPU agents failed" "$(tail -20 "$TMP/cpu.err")"
timeout 300 "$COORD" --plan "$TMP/cpu.ckpt/plan.json" "$(conf gpu-1.toml cuda)" >"$TMP/cuda.out" 2>"$TMP/cuda.err"
rc=$?
if [ $rc -eq 0 ] && grep -q "GPU 0 .*SMs" "$TMP/cuda.err"; then
    ok "the main job on 4 agents sharing one GPU ran ($(grep -o 'GPU 0: [^,]*' "$TMP/cuda.err" | head -1))"
else
    fail "the main job on cuda (exit $rc)" "$(tail -30 "$TMP/cuda.err")"
fi
echo "stages: $(grep -c '^  stage' "$TMP/cpu.out") (cpu plan), iterations cpu $(losses "$TMP/cpu.out" | wc -l) cuda $(losses "$TMP/cuda.out" | wc -l)"
if losses_close <(losses "$TMP/cpu.out") <(losses "$TMP/cuda.out") $ITERS; then
    ok "cuda pipeline losses match the cpu pipeline"
else
    fail "cuda and cpu pipeline loss curves differ" "$(paste <(losses "$TMP/cpu.out") <(losses "$TMP/cuda.out"))"
fi

# the cuda run's checkpoint set 5 continues on CPU agents: same plan, the
# losses of iterations 6..10 as the cuda run's within the same tolerance
C=$(conf local-cpu.toml resume)
sed -i "s|^checkpoint_dir = .*|checkpoint_dir = \"$TMP/cuda.ckpt\"|" "$C"
rm -rf "$TMP/cuda.ckpt"/set-0000000010
timeout 300 "$COORD" --resume --plan "$TMP/cpu.ckpt/plan.json" "$C" >"$TMP/resume.out" 2>"$TMP/resume.err"
rc=$?
if [ $rc -eq 0 ] && losses_close <(losses "$TMP/cuda.out" | tail -5) <(losses "$TMP/resume.out") 5; then
    ok "the cuda run's checkpoint set loads on CPU agents (iterations 6-10 match)"
else
    fail "resume of the cuda checkpoint on cpu (exit $rc)" "$(tail -20 "$TMP/resume.err"; paste <(losses "$TMP/cuda.out" | tail -5) <(losses "$TMP/resume.out"))"
fi
gpp_test_end
