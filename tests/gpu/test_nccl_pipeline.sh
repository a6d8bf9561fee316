#!/usr/bin/env bash
# test_nccl_pipeline: the main job (config/examples/gpu-1.toml's model)
# through gpp-coordinator and gpp-agent with backend cuda and NCCL between
# the agents (comm = "nccl", gpus = 0: one GPU per agent, 4 agents), against
# the same job on CPU agents with the same plan: every iteration's loss
# within 2e-3 relative (the tolerance of test_cuda_pipeline). Two plans: the
# CPU run's own (4 stages: point-to-point only) and
# tests/data/plans/mmt2_dp.json (stage 0 on 2 data-parallel replicas: the
# gradient all-reduce on a group communicator), and DLRM on
# tests/data/plans/dlrm_emb_dp.json (its embedding stage on 2 replicas:
# the sparse gradients' all-gather on a group communicator). Then an agent killed during
# training: the job stops with an error (no hang: the survivors' receives
# fail when the peer's connections end) and every agent is reaped.
# Label gpu: needs 4 GPUs, else exit 77 (skipped).
# Label emu: the same on the host emulation (GPP_EMU_DEVICES=4, the emulated
# gpp-agent and gpp-train: tests/emu/, NCCL between the agent
# processes over Unix sockets).
# Usage: test_nccl_pipeline.sh BUILD_DIR
set -u
. "$(dirname "$0")/../integration/lib/gpp_test.sh"
gpp_test_begin test_nccl_pipeline "${1:-}"
TRAIN=${GPP_TRAIN:-$BUILD/agent/exec/gpp-train}
COORD=$BUILD/coordinator/gpp-coordinator
. "$SRC/scripts/blas-env.sh"

# 4 GPUs: device 3 must exist
. "$(dirname "$0")/gpu_probe.sh"
gpu_probe test_nccl_pipeline "4 GPUs needed" --model "mmt:branches=2,layers=1,hidden=32,heads=2,seq=8,ffn=64" \
    --device 3

# about 4 s per iteration on the emulation (2 shared cores): few iterations
ITERS=4
. "$(dirname "$0")/pipeline_lib.sh"
nccl_conf() { # $1 name: gpu-1.toml with one GPU per agent and comm nccl
    local c
    c=$(job_conf gpu-1.toml "$1")
    sed -i -e 's|^gpus = .*|gpus = 0|' -e 's|^backend = "cuda".*|backend = "cuda"\ncomm = "nccl"|' "$c"
    echo "$c"
}

# run_pair NAME PLAN [MODEL]: the job (the example's model, or MODEL) on
# CPU agents (PLAN: gpp, or a plan file), then with comm nccl on the CPU
# run's plan; both loss curves compared
run_pair() {
    local name=$1 plan=$2 model=${3:-} rc n_nccl cc nc
    cc=$(job_conf local-cpu.toml "$name-cpu")
    nc=$(nccl_conf "$name-nccl")
    [ -n "$model" ] && sed -i "s|^model = .*|model = \"$model\"|" "$cc" "$nc"
    timeout 300 "$COORD" --plan "$plan" "$cc" >"$TMP/$name-cpu.out" \
        2>"$TMP/$name-cpu.err" ||
        fail "$name: the job on CPU agents failed" "$(tail -20 "$TMP/$name-cpu.err")"
    timeout 300 "$COORD" --plan "$TMP/$name-cpu.ckpt/plan.json" "$nc" \
        >"$TMP/$name-nccl.out" 2>"$TMP/$name-nccl.err"
    rc=$?
    n_nccl=$(grep -c 'transfers in the blocking-stream order .* on nccl' "$TMP/$name-nccl.err")
    if [ $rc -eq 0 ] && [ "$n_nccl" -eq 4 ] &&
        grep -q 'all 4 agents brought up their communicators' "$TMP/$name-nccl.err"; then
        ok "$name: the job on 4 agents with NCCL between them ran ($(grep -o 'GPU 3 [^,]*' "$TMP/$name-nccl.err" | head -1))"
    else
        fail "$name: the job with comm nccl (exit $rc, $n_nccl agents on nccl)" "$(tail -30 "$TMP/$name-nccl.err")"
    fi
    echo "$name: $(sed -n 1p "$TMP/$name-nccl.out")"
    if losses_close <(losses "$TMP/$name-cpu.out") <(losses "$TMP/$name-nccl.out") $ITERS; then
        ok "$name: nccl pipeline losses match the cpu pipeline"
    else
        fail "$name: nccl and cpu pipeline loss curves differ" \
            "$(paste <(losses "$TMP/$name-cpu.out") <(losses "$TMP/$name-nccl.out"))"
    fi
}
run_pair pipeline gpp
ITERS=3
run_pair dp "$SRC/tests/data/plans/mmt2_dp.json"
# precision bf16 on the data-parallel plan: activations and their
# gradients cross between stages in bf16 (docs/gpu.md "bf16 tensors"), over
# NCCL from device buffers, re-sharded between 2 replicas and 1; losses
# within test_cuda_train's bf16 bound of the fp32 CPU run
nc=$(nccl_conf dp-bf16)
sed -i -e 's|^precision = .*|precision = "bf16"|' -e 's|^\[job\]|[job]\nbf16_tensors = true|' "$nc"
timeout 300 "$COORD" --plan "$TMP/dp-cpu.ckpt/plan.json" "$nc" >"$TMP/dp-bf16.out" 2>"$TMP/dp-bf16.err"
rc=$?
if [ $rc -eq 0 ] && paste <(losses "$TMP/dp-cpu.out") <(losses "$TMP/dp-bf16.out") |
    awk -v n=$ITERS '{ d = $1 - $2; if (d < 0) d = -d; r = d / ($1 > 0 ? $1 : -$1); if (r > m) m = r;
                       if (r > 5e-2 || NF != 2) bad = 1 }
                     END { printf "bf16: max rel loss difference %g over %d iterations\n", m, NR; exit bad || NR != n }'; then
    ok "dp bf16: bf16 transfers over nccl, losses within 5e-2 of the cpu pipeline"
else
    fail "dp bf16 (exit $rc)" "$(paste <(losses "$TMP/dp-cpu.out") <(losses "$TMP/dp-bf16.out"); tail -10 "$TMP/dp-bf16.err")"
fi
# DLRM with its embedding stage on 2 replicas: the tables' sparse gradients
# accumulated on the device, all-gathered over the group communicator
run_pair dlrm-dp "$SRC/tests/data/plans/dlrm_emb_dp.json" \
    "dlrm:dense_branches=2,sparse_branches=2,dense_in=16,hidden=32,dense_layers=2,rows=500,dim=8,bag=4,top_layers=1"

# an agent (stage 1) killed during training: the job fails, nobody hangs
ITERS=50
C=$(nccl_conf kill)
timeout 120 "$COORD" --plan "$SRC/tests/data/plans/mmt2_dp.json" "$C" >"$TMP/kill.out" 2>"$TMP/kill.err" &
CP=$!
track $CP
for _ in $(seq 600); do
    grep -q '^iter 1/' "$TMP/kill.out" && break
    kill -0 $CP 2>/dev/null || break
    sleep 0.1
done
PIDS=$(sed -n 's/.*registered 127.0.0.1:[0-9]* (rank [0-9]*, pid \([0-9]*\)).*/\1/p' "$TMP/kill.err")
VICTIM=$(sed -n 's/.*registered 127.0.0.1:2 (rank 2, pid \([0-9]*\)).*/\1/p' "$TMP/kill.err")
track $PIDS
[ -n "$VICTIM" ] && kill -KILL "$VICTIM"
wait $CP
rc=$?
alive=0
for p in $PIDS; do kill -0 "$p" 2>/dev/null && alive=$((alive + 1)); done
if [ -n "$VICTIM" ] && [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $alive -eq 0 ] &&
    grep -q 'job stopped' "$TMP/kill.err"; then
    ok "an agent killed during training: the job stopped ($(grep -m1 -o 'job stopped.*' "$TMP/kill.err" | cut -c1-160))"
else
    fail "an agent killed during training (exit $rc, victim '$VICTIM', $alive agents left)" "$(tail -20 "$TMP/kill.err")"
fi
gpp_test_end
