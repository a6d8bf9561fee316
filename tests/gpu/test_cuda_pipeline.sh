#!/usr/bin/env bash
# test_cuda_pipeline: the main job (config/examples/local-cpu.toml: MMT,
# 4 agents) through gpp-coordinator and gpp-agent on one GPU with backend
# cuda (config/examples/gpu-1.toml: 4 agents share GPU 0 and exchange over
# Gloo through host memory), against the same job on CPU agents with the
# same plan (the CPU run's plan.json): every iteration's loss within 2e-3
# relative (the tolerance of test_cuda_train: fp32 with other summation
# orders, grown over AdamW steps); with CUDA graphs and without, the same
# weights. DLRM with its embedding stage on 2 replicas, graphs recorded
# there too. Then the cuda run's checkpoint set loads on CPU agents
# (--resume from it). Then too little device memory: a
# cluster.mem_gib below every plan; on the emulation (GPP_EMU_MEM_MB) a
# GPU too small for any plan, a plan file larger than the agents' share of
# their GPU, and one that runs out of memory while training: each stops
# cleanly with the figures and the fix named, the checkpoint sets intact.
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
C=$(conf gpu-1.toml cuda)
sed -i 's|^\[job\]|[job]\ncuda_graphs = true|' "$C"
timeout 300 "$COORD" --plan "$TMP/cpu.ckpt/plan.json" "$C" >"$TMP/cuda.out" 2>"$TMP/cuda.err"
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

# CUDA graphs (cuda_graphs = true): every stage recorded its passes once its
# memory settled and replayed them; the same job with cuda_graphs = false
# runs the same kernels one by one: the same weights, bit for bit
rec=$(grep -c 'stage [0-9] replica [0-9]: CUDA graphs: [0-9]* passes recorded in iteration [0-9]' "$TMP/cuda.err")
C=$(conf gpu-1.toml eager)
sed -i 's|^\[job\]|[job]\ncuda_graphs = false|' "$C"
timeout 300 "$COORD" --plan "$TMP/cpu.ckpt/plan.json" "$C" >"$TMP/eager.out" 2>"$TMP/eager.err"
rc=$?
sha() { sed -n 's/^weights sha256 //p' "$1"; }
stages=$(grep -o '^  *[0-9]  *[0-9]* ops' "$TMP/cpu.out" | sort -u | wc -l) # the plan, printed twice
if [ "$rec" = "$stages" ] && [ $rc -eq 0 ] &&
    ! grep -q 'CUDA graphs' "$TMP/eager.err" && [ -n "$(sha "$TMP/cuda.out")" ] &&
    [ "$(sha "$TMP/cuda.out")" = "$(sha "$TMP/eager.out")" ]; then
    ok "every stage replayed CUDA graphs ($rec); cuda_graphs = false gives the same weights bit for bit"
else
    fail "CUDA graphs of the stages ($rec recorded, eager exit $rc)" "$(grep 'CUDA graphs' "$TMP/cuda.err"; sha "$TMP/cuda.out"; sha "$TMP/eager.out"; tail -5 "$TMP/eager.err")"
fi

# device memory: agent 0 reported its backend's layouts before the plan
# file's prediction (no profile from the GPU), so the prediction holds the
# CUDA attention's own stash and workspace: the stage's memory plan is
# what its executor allocates (on the emulation, whose allocator is the
# backend's, to the byte, eager and with graphs; on a GPU never below it)
# mem_errs OUT: the error % of each stage of the memory table
mem_errs() { awk '/^  memory  stage/ { t = 1; next } t && NF == 4 { print $4; next } { t = 0 }' "$1"; }
eager_exact=$(mem_errs "$TMP/eager.out" | awk '$1 != "+0.00" && $1 != "-0.00" { bad = 1 } END { print NR && !bad }')
graphs_above=$(mem_errs "$TMP/cuda.out" | awk '$1 < 0 { bad = 1 } END { print NR && !bad }')
graphs_exact=$(mem_errs "$TMP/cuda.out" | awk '$1 != "+0.00" && $1 != "-0.00" { bad = 1 } END { print NR && !bad }')
if grep -q "memory figures of [0-9]* ops from" "$TMP/eager.err" && [ "$graphs_above" = 1 ] &&
    { [ "$eager_exact" = 1 ] && [ "$graphs_exact" = 1 ] || [ "${GPP_AGENT#*emu}" = "${GPP_AGENT:-}" ]; }; then
    ok "device memory: predicted = measured, eager and with graphs$([ "${GPP_AGENT#*emu}" = "${GPP_AGENT:-}" ] && echo " (not required off the emulation; within the prediction)")"
else
    fail "device memory predicted vs measured (eager exact: $eager_exact, graphs exact: $graphs_exact, within: $graphs_above)" "$(grep -A5 '^  memory  stage' "$TMP/eager.out" "$TMP/cuda.out"; grep figures "$TMP/eager.err")"
fi

# precision bf16 (eager): inside each stage the agents keep bf16 tensors
# (docs/gpu.md "bf16 tensors"), what crosses between stages stays fp32; the
# agents' memory figures carry each op's output bytes, so the prediction
# still equals the measure (on the emulation, to the byte); losses within
# 5e-2 of the fp32 CPU pipeline (test_cuda_train's bf16 bound)
C=$(conf gpu-1.toml bf16)
sed -i -e 's|^\[job\]|[job]\ncuda_graphs = false\nbf16_tensors = true|' -e 's|^precision = .*|precision = "bf16"|' "$C"
timeout 300 "$COORD" --plan "$TMP/cpu.ckpt/plan.json" "$C" >"$TMP/bf16.out" 2>"$TMP/bf16.err"
rc=$?
bf16_exact=$(mem_errs "$TMP/bf16.out" | awk '$1 != "+0.00" && $1 != "-0.00" { bad = 1 } END { print NR && !bad }')
if [ $rc -eq 0 ] && { [ "$bf16_exact" = 1 ] || [ "${GPP_AGENT#*emu}" = "${GPP_AGENT:-}" ]; } &&
    grep -q 'stage [0-9]: bf16 tensors: [1-9]' "$TMP/bf16.err" &&
    paste <(losses "$TMP/cpu.out") <(losses "$TMP/bf16.out") |
    awk -v n=$ITERS '{ d = $1 - $2; if (d < 0) d = -d; r = d / ($1 > 0 ? $1 : -$1); if (r > m) m = r;
                       if (r > 5e-2 || NF != 2) bad = 1 }
                     END { printf "bf16: max rel loss difference %g over %d iterations\n", m, NR; exit bad || NR != n }'; then
    ok "bf16 pipeline: losses within 5e-2 of the cpu pipeline, device memory predicted = measured ($(grep -o 'stage [0-9]: bf16 tensors: [0-9]* of [0-9]*' "$TMP/bf16.err" | sort | tr '\n' ';'))"
else
    fail "bf16 pipeline (exit $rc, memory exact: $bf16_exact)" "$(grep -A5 '^  memory  stage' "$TMP/bf16.out"; paste <(losses "$TMP/cpu.out") <(losses "$TMP/bf16.out"); tail -5 "$TMP/bf16.err")"
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

# DLRM with its embedding stage data-parallel (tests/data/plans/dlrm_emb_dp.json:
# ops 0-9, both tables and the dense branches, on agents 0-1; 4
# micro-batches of 8): the tables' sparse gradients are accumulated on the
# device and summed over the replicas by the touched rows (the all-gather
# of pipeline.c), and every stage, the embedding one too, records its
# passes. The same job with cuda_graphs = false: the same weights bit for
# bit; CPU agents: the same losses within the tolerance.
DLRM_SPEC="dlrm:dense_branches=2,sparse_branches=2,dense_in=16,hidden=32,dense_layers=2,rows=500,dim=8,bag=4,top_layers=1"
DLRM_PLAN="$SRC/tests/data/plans/dlrm_emb_dp.json"
for run in dlrm-cpu dlrm-graphs dlrm-eager; do
    case $run in
    dlrm-cpu) C=$(conf local-cpu.toml $run) ;;
    *) C=$(conf gpu-1.toml $run) ;;
    esac
    sed -i "s|^model = .*|model = \"$DLRM_SPEC\"|" "$C"
    [ $run = dlrm-graphs ] && sed -i 's|^\[job\]|[job]\ncuda_graphs = true|' "$C"
    timeout 300 "$COORD" --plan "$DLRM_PLAN" "$C" >"$TMP/$run.out" 2>"$TMP/$run.err" ||
        fail "DLRM, embedding stage data-parallel: the $run job failed" "$(tail -20 "$TMP/$run.err")"
done
rec=$(grep -c 'stage [0-9] replica [0-9]: CUDA graphs: [0-9]* passes recorded' "$TMP/dlrm-graphs.err")
if [ "$rec" = 4 ] && ! grep -q 'CUDA graphs off' "$TMP/dlrm-graphs.err" &&
    [ -n "$(sha "$TMP/dlrm-graphs.out")" ] &&
    [ "$(sha "$TMP/dlrm-graphs.out")" = "$(sha "$TMP/dlrm-eager.out")" ] &&
    losses_close <(losses "$TMP/dlrm-cpu.out") <(losses "$TMP/dlrm-graphs.out") $ITERS; then
    ok "DLRM, embedding stage on 2 replicas: all 4 agents replayed CUDA graphs, the eager run's weights bit for bit, the CPU run's losses"
else
    fail "DLRM, embedding stage data-parallel ($rec agents recorded)" "$(grep 'CUDA graphs' "$TMP/dlrm-graphs.err"; sha "$TMP/dlrm-graphs.out"; sha "$TMP/dlrm-eager.out"; paste <(losses "$TMP/dlrm-cpu.out") <(losses "$TMP/dlrm-graphs.out"))"
fi

# Too little device memory: each a clean stop with a message that names
# the figures and the fix, every agent reaped (no hang), and a checkpoint
# directory resumed from left as it was.
# stopped NAME: the run NAME stopped (exit != 0, no iteration ran)
stopped() { [ "$1" != 0 ] && ! grep -q '^iter ' "$TMP/$2.out"; }
# digest DIR [SUB]: one line of the sha256 of every file under DIR (or of
# its checkpoint sets, set-*)
digest() { (cd "$1" && find . -type f -path "./${2:-}*" | sort | xargs sha256sum | sha256sum); }
# cluster.mem_gib below the smallest plan (any machine)
C=$(conf gpu-1.toml small)
sed -i 's|^\[cluster\]|[cluster]\nmem_gib = 0.001|' "$C"
timeout 120 "$COORD" --plan gpp "$C" >"$TMP/small.out" 2>"$TMP/small.err"
rc=$?
if stopped $rc small && grep -q 'no plan fits cluster.mem_gib = 1 MiB per device: the smallest plan needs [0-9]* MiB' "$TMP/small.err"; then
    ok "cluster.mem_gib below every plan: stopped (exit $rc), the least plan's memory named"
else
    fail "cluster.mem_gib below every plan (exit $rc)" "$(tail -5 "$TMP/small.err")"
fi
case ${GPP_AGENT:-} in
*emu*) # the emulated GPU's memory is set by GPP_EMU_MEM_MB (tests/emu)
    # a GPU of 64 MiB shared by the 4 agents: no plan fits the share, and
    # the message says what the agents reported and what would fit
    timeout 120 env GPP_EMU_MEM_MB=64 "$COORD" --plan gpp "$(conf gpu-1.toml tiny)" >"$TMP/tiny.out" 2>"$TMP/tiny.err"
    rc=$?
    if stopped $rc tiny && grep -q 'no plan fits the device memory: 16 MiB per device (the smallest the agents reported: 127.0.0.1:[0-9] .*GPU 0 .*64 MiB, shared by the agents on that GPU) .*fewer agents per GPU' "$TMP/tiny.err"; then
        ok "a GPU too small for any plan: stopped (exit $rc) naming the agents' memory and the fix"
    else
        fail "a GPU too small for any plan (exit $rc)" "$(grep -m1 'job stopped' "$TMP/tiny.err")"
    fi
    # a plan file whose stages need more than each agent's share of a 40 MiB
    # GPU, resumed from the cuda run's last checkpoint set: refused before
    # training, the set untouched
    cp -r "$TMP/cuda.ckpt" "$TMP/keep.ckpt"
    before=$(digest "$TMP/keep.ckpt")
    sets=$(digest "$TMP/keep.ckpt" set-)
    C=$(conf gpu-1.toml share)
    sed -i -e "s|^checkpoint_dir = .*|checkpoint_dir = \"$TMP/keep.ckpt\"|" -e 's|^iterations = .*|iterations = 12|' "$C"
    timeout 120 env GPP_EMU_MEM_MB=40 "$COORD" --resume --plan "$TMP/cpu.ckpt/plan.json" "$C" >"$TMP/share.out" 2>"$TMP/share.err"
    rc=$?
    if stopped $rc share && [ "$(digest "$TMP/keep.ckpt")" = "$before" ] &&
        grep -q 'stage [0-9] needs [0-9]* MiB of device memory, but agent 127.0.0.1:[0-9] .* has 10 MiB: GPU 0 (gpp host emulator, 40 MiB) on host 127.0.0.1 is shared by 4 agents' "$TMP/share.err"; then
        ok "a plan larger than the agents' share of their GPU: refused (exit $rc), checkpoints intact"
    else
        fail "a plan larger than the GPU share (exit $rc)" "$(grep "job stopped" "$TMP/share.err")"
    fi
    # one 40 MiB GPU per agent: the plan fits, with less than the context
    # reserve left (a warning); the cuBLASLt workspace then runs out at
    # run time: the agent's error names it, the device's free memory and
    # the GPU; everyone stops, the checkpoint sets untouched (the plan
    # beside them is this run's)
    C=$(conf gpu-1.toml oom)
    sed -i -e "s|^checkpoint_dir = .*|checkpoint_dir = \"$TMP/keep.ckpt\"|" -e 's|^gpus = .*|gpus = 0|' -e 's|^iterations = .*|iterations = 12|' "$C"
    timeout 120 env GPP_EMU_DEVICES=4 GPP_EMU_MEM_MB=40 "$COORD" --resume --plan "$TMP/cpu.ckpt/plan.json" "$C" >"$TMP/oom.out" 2>"$TMP/oom.err"
    rc=$?
    if stopped $rc oom && [ "$(digest "$TMP/keep.ckpt" set-)" = "$sets" ] &&
        grep -q 'it may run out' "$TMP/oom.err" &&
        grep -q 'job stopped: agent 127.0.0.1:[0-9] .*reported an error: .*backend cuda:[0-3] (gpp host emulator): out of device memory allocating [0-9]* bytes for .*MiB free on the device' "$TMP/oom.err" &&
        [ "$(grep -c 'exited with status' "$TMP/oom.err")" = 4 ]; then
        ok "out of device memory while training: stopped (exit $rc), agent, GPU and free memory named, 4 agents reaped"
    else
        fail "out of device memory while training (exit $rc)" "$(grep 'it may run out' "$TMP/oom.err"; grep -v "^ " "$TMP/oom.err" | tail -n 4)"
    fi
    ;;
esac
gpp_test_end
