#!/usr/bin/env bash
# bench_pipe_gpu: the agents' pipeline (gpp-coordinator forking gpp-agent,
# backend cuda) with CUDA graphs on vs off ([job] cuda_graphs, docs/gpu.md
# "CUDA graphs"): each agent records each pass of its
# stage (forward / backward of each micro-batch slot) as a CUDA graph once
# its memory settles and replays it, against every kernel launched on its
# own. Jobs (JOBS picks them by these words):
#   main    config/examples/gpu-1.toml as it is: 4 agents sharing GPU 0,
#           MMT small, fp32, tensors between agents over Gloo through host
#           memory (the launches of 4 processes on one GPU, plus the
#           exchanges);
#   single  the same file with slots = 1: the whole model as one stage on
#           one agent, no communication (the launch overhead alone);
#   big     single, with a larger MMT (BIG_MODEL, batch BIG_BATCH) at bf16,
#           where kernels are long and launches matter less.
# Each job runs twice on the same plan: graphs on with --plan gpp, then
# graphs off with --plan <the first run's plan.json> (the coordinator
# writes it beside the checkpoints), so both train the same stages and
# micro-batches. Each run: ITERS iterations, on a free port, checkpoints
# and metrics in a temporary folder, one checkpoint set at the end (none
# inside the timed iterations). Reported, a markdown table: the plan, the
# median of the per-iteration ms of the coordinator's "iter" lines after
# the first SKIP iterations (graphs are recorded in iteration 2-3 and
# replayed from the next; the table says when recording came later than
# SKIP), samples/s = batch / that median, the speedup on/off (off ms / on
# ms), whether the two runs' "weights sha256" are equal (graphs replay the
# same kernels: they must be, bit for bit), and how many of the plan's
# agents (stage replicas) logged "CUDA graphs: N passes recorded" (with the
# latest iteration one recorded in; the off run must log none).
#
# Needs only the build folder (no network, no python). Exit status 77
# without a usable GPU (nothing measured), 1 when a run failed, 0
# otherwise (the speedups are printed, not judged).
#
# usage: bench/bench_pipe_gpu.sh [BUILD_DIR]       (default: build)
#   env: ITERS (20), SKIP (5): iterations per run, and how many leading
#          ones the median leaves out;
#        JOBS ("main single big"): which jobs run;
#        BIG_MODEL ("mmt:branches=2,layers=2,hidden=1024,heads=16,seq=256,ffn=4096"),
#        BIG_BATCH (32): the big job's model and batch;
#        TIMEOUT (300): seconds one coordinator run may take;
#        GPP_AGENT: the agent program (read by the coordinator; default
#          ../agent/gpp-agent beside it);
#        TRAIN: the gpp-train that probes for a GPU (default
#          BUILD/agent/exec/gpp-train); on the host emulation
#          GPP_AGENT=BUILD/tests/gpu/gpp-agent-emu TRAIN=BUILD/tests/gpu/gpp-train-emu
#          runs it end to end (the times then mean nothing);
#        KEEP (a folder): keep every run's cluster file, stdout and stderr
#          there as <job>-<on|off>.{toml,out,err}.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/.." && pwd)
BUILD=$(cd "${1:-build}" 2>/dev/null && pwd) ||
    { echo "bench_pipe_gpu: no build folder '${1:-build}'; build first" >&2; exit 2; }
ITERS=${ITERS:-20}
SKIP=${SKIP:-5}
JOBS=${JOBS:-main single big}
BIG_MODEL=${BIG_MODEL:-mmt:branches=2,layers=2,hidden=1024,heads=16,seq=256,ffn=4096}
BIG_BATCH=${BIG_BATCH:-32}
TIMEOUT=${TIMEOUT:-300}
TRAIN=${TRAIN:-$BUILD/agent/exec/gpp-train}
COORD=$BUILD/coordinator/gpp-coordinator
EXAMPLE=$SRC/config/examples/gpu-1.toml
AGENT=${GPP_AGENT:-$BUILD/agent/gpp-agent}
for b in "$COORD" "$AGENT" "$TRAIN"; do
    [ -x "$b" ] || { echo "bench_pipe_gpu: no $b; build first" >&2; exit 2; }
done
[ -r "$EXAMPLE" ] || { echo "bench_pipe_gpu: no $EXAMPLE" >&2; exit 2; }
case $ITERS:$SKIP in
*[!0-9:]* | :* | *:) echo "bench_pipe_gpu: ITERS and SKIP must be numbers" >&2; exit 2 ;;
esac
[ "$SKIP" -lt "$ITERS" ] || { echo "bench_pipe_gpu: SKIP ($SKIP) leaves no timed iteration of ITERS ($ITERS)" >&2; exit 2; }
for j in $JOBS; do
    case $j in
    main | single | big) ;;
    *) echo "bench_pipe_gpu: unknown job '$j' in JOBS (main, single, big)" >&2; exit 2 ;;
    esac
done
[ -f "$SRC/scripts/blas-env.sh" ] && . "$SRC/scripts/blas-env.sh"
# the runs choose graphs in their cluster file; the env would override it
unset GPP_CUDA_GRAPHS

TMPD=$(mktemp -d)
trap 'rm -rf "$TMPD"' EXIT
[ -n "${KEEP:-}" ] && mkdir -p "$KEEP"

# the probe: one step of gpp-train --backend cuda must train; exit 2 naming
# a missing GPU (never a CPU run) is a skip, any other failure a failure
"$TRAIN" --backend cuda --iterations 1 --batch 4 \
    --model "mmt:branches=2,layers=1,hidden=32,heads=2,seq=8,ffn=64" >"$TMPD/probe.out" 2>"$TMPD/probe.err"
rc=$?
if [ $rc -ne 0 ]; then
    if [ $rc -eq 2 ] && grep -Eq 'no usable GPU|built without CUDA|CUDA device\(s\) visible' "$TMPD/probe.err" &&
        ! grep -q 'loss=' "$TMPD/probe.out"; then
        echo "bench_pipe_gpu: SKIPPED: $(grep -Em1 'no usable GPU|built without CUDA|CUDA device\(s\) visible' "$TMPD/probe.err")"
        exit 77
    fi
    echo "bench_pipe_gpu: the GPU probe ($TRAIN --backend cuda) failed (exit $rc) without naming a missing GPU:" >&2
    tail -5 "$TMPD/probe.err" >&2
    exit 1
fi

# free_port: a TCP port on 127.0.0.1 the kernel says is free now
free_port() {
    if [ -x "$BUILD/tests/gpp-test-port" ]; then
        "$BUILD/tests/gpp-test-port"
        return
    fi
    local p _
    for _ in $(seq 100); do
        p=$((20000 + RANDOM % 40000))
        (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return 0; }
    done
    return 1
}

# conf JOB MODE: writes $TMPD/JOB-MODE.toml, gpu-1.toml with this run's
# port, ITERS, checkpoints and metrics in $TMPD, one checkpoint set at the
# end, cuda_graphs (MODE on or off), and the job's slots / model / batch /
# precision; prints its path, or fails when the example's lines moved
conf() {
    local job=$1 mode=$2 c=$TMPD/$1-$2.toml graphs=true port
    [ "$mode" = off ] && graphs=false
    port=$(free_port) || { echo "bench_pipe_gpu: no free port" >&2; return 1; }
    local -a e=(-e "s|^endpoint = .*|endpoint = \"tcp://127.0.0.1:$port\"|"
        -e "s|^iterations = .*|iterations = $ITERS|"
        -e "s|^checkpoint_dir = .*|checkpoint_dir = \"$TMPD/$job-$mode.ckpt\"|"
        -e "s|^checkpoint_interval = .*|checkpoint_interval = $ITERS|"
        -e "s|^file = .*|file = \"$TMPD/$job-$mode.jsonl\"|"
        -e "s|^\[job\]|[job]\ncuda_graphs = $graphs|")
    case $job in
    single) e+=(-e "s|^slots = .*|slots = 1|") ;;
    big) e+=(-e "s|^slots = .*|slots = 1|" -e "s|^model = .*|model = \"$BIG_MODEL\"|"
        -e "s|^batch = .*|batch = $BIG_BATCH|" -e "s|^precision = .*|precision = \"bf16\"|") ;;
    esac
    sed "${e[@]}" "$EXAMPLE" >"$c" || return 1
    local want
    for want in "endpoint = \"tcp://127.0.0.1:$port\"" "iterations = $ITERS" \
        "checkpoint_dir = \"$TMPD/$job-$mode.ckpt\"" "checkpoint_interval = $ITERS" \
        "file = \"$TMPD/$job-$mode.jsonl\"" "cuda_graphs = $graphs"; do
        grep -qxF "$want" "$c" || { echo "bench_pipe_gpu: $EXAMPLE has no line to make '$want' of" >&2; return 1; }
    done
    echo "$c"
}

# run JOB MODE PLAN: one coordinator run; its output in $TMPD/JOB-MODE.{out,err}
run() {
    local job=$1 mode=$2 plan=$3 c rc
    c=$(conf "$job" "$mode") || return 1
    timeout "$TIMEOUT" "$COORD" --plan "$plan" "$c" >"$TMPD/$job-$mode.out" 2>"$TMPD/$job-$mode.err"
    rc=$?
    if [ -n "${KEEP:-}" ]; then
        cp "$c" "$KEEP/$job-$mode.toml"
        cp "$TMPD/$job-$mode.out" "$TMPD/$job-$mode.err" "$KEEP/"
    fi
    if [ $rc -ne 0 ]; then
        [ $rc -eq 124 ] && echo "# $job, graphs $mode: no end within TIMEOUT=$TIMEOUT s"
        echo "# $job, graphs $mode: gpp-coordinator --plan $plan failed (exit $rc):"
        { grep -v " info  " "$TMPD/$job-$mode.err" | grep . || cat "$TMPD/$job-$mode.err"; } | tail -5 | sed "s/^/#   /"
        return 1
    fi
    local n
    n=$(iter_ms "$job-$mode" | wc -l)
    if [ "$n" -ne "$ITERS" ] || [ -z "$(sha "$job-$mode")" ]; then
        echo "# $job, graphs $mode: gpp-coordinator printed $n of $ITERS iter lines and $(sha "$job-$mode" | grep -c .) weights sha256"
        return 1
    fi
}

# iter_ms RUN: "i ms" of each "iter i/N  loss L  X samples/s  T ms ..." line
iter_ms() {
    sed -n 's/^iter \([0-9]*\)\/[0-9]*  loss .*  [0-9.]* samples\/s  \([0-9.]*\) ms.*/\1 \2/p' "$TMPD/$1.out"
}
# median_ms RUN: the median ms of the iterations after SKIP
median_ms() {
    iter_ms "$1" | awk -v s="$SKIP" '$1 > s { t[n++] = $2 }
        END { if (!n) exit 1
              for (i = 0; i < n; i++) for (j = i + 1; j < n; j++)
                  if (t[j] < t[i]) { x = t[i]; t[i] = t[j]; t[j] = x }
              printf "%.3f\n", n % 2 ? t[int(n / 2)] : (t[n / 2 - 1] + t[n / 2]) / 2 }'
}
sha() { sed -n 's/^weights sha256 //p' "$TMPD/$1.out" | tail -1; }
# recorded RUN: how many agents logged their passes recorded, and the
# latest iteration one recorded in ("N I", "0 -" for none)
recorded() {
    sed -n 's/.*stage [0-9]* replica [0-9]*: CUDA graphs: [0-9]* passes recorded in iteration \([0-9]*\).*/\1/p' \
        "$TMPD/$1.err" | awk '{ n++; if ($1 > m) m = $1 } END { print n + 0, n ? m : "-" }'
}
# plan_of RUN: "STAGES AGENTS MICRO-BATCHES BATCH" from the first stage
# table the coordinator printed (micro-batches distinct, joined by /)
plan_of() {
    awk '/^plan .* stages?, depth/ && !seen { seen = 1; inp = 1
             for (i = 1; i <= NF; i++) if ($i == "batch") b = $(i + 1)
             next }
         inp && /^  stage  ops/ { next }
         inp && /^ +[0-9]+ +[0-9]+ ops / {
             sub(/^.*\) +/, "")   # after "N ops (a..b)": agents micro-batch k in-flight succ
             n++
             split($1, a, "-"); ag += (2 in a) ? a[2] - a[1] + 1 : 1
             if (!(($2) in mbs)) { mbs[$2] = 1; mb = mb (mb == "" ? "" : "/") $2 }
             next }
         inp { inp = 0 }
         END { if (!n) exit 1; print n, ag, mb, b }' "$TMPD/$1.out"
}

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    device=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -1)
else
    device="$(sed -n 's/.*backend \(cuda:[0-9]*: .* GiB\),.*/\1/p' "$TMPD/probe.err" | head -1) (no nvidia-smi; as gpp-train reports it)"
fi
echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) device: $device; commit $(git -C "$SRC" rev-parse --short HEAD 2>/dev/null || echo unknown)"
echo "# agents: $AGENT; $ITERS iterations per run, median of iterations $((SKIP + 1))..$ITERS; graphs on: --plan gpp, graphs off: the on run's plan.json"
for j in $JOBS; do
    case $j in
    main) echo "# main: config/examples/gpu-1.toml (4 agents on GPU 0, exchange over Gloo through host memory)" ;;
    single) echo "# single: gpu-1.toml with slots = 1 (the whole model as one stage, no communication)" ;;
    big) echo "# big: slots = 1, model $BIG_MODEL, batch $BIG_BATCH, bf16" ;;
    esac
done
printf '| job | precision | plan: stages (agents), micro-batch | graphs on ms/iter | on samples/s | graphs off ms/iter | off samples/s | on/off speedup | weights sha256 on = off | agents that recorded graphs (latest iteration) |\n'
printf '|---|---|---|---|---|---|---|---|---|---|\n'
status=0
for job in $JOBS; do
    prec=$(sed -n 's/^precision = "\([a-z0-9]*\)".*/\1/p' "$EXAMPLE")
    [ "$job" = big ] && prec=bf16
    if ! run "$job" on gpp; then
        status=1
        echo "| $job | $prec | - | fail | - | - | - | - | - | - |"
        continue
    fi
    plan=$TMPD/$job-on.ckpt/plan.json
    if [ ! -s "$plan" ]; then
        echo "# $job: the graphs-on run wrote no $plan"
        status=1
        echo "| $job | $prec | - | fail | - | - | - | - | - | - |"
        continue
    fi
    read -r stages agents mbs batch <<<"$(plan_of "$job-on")"
    on=$(median_ms "$job-on")
    read -r rec_n rec_it <<<"$(recorded "$job-on")"
    off=fail
    same=-
    if run "$job" off "$plan"; then
        off=$(median_ms "$job-off")
        if [ "$(sha "$job-on")" = "$(sha "$job-off")" ]; then same=yes; else same=NO; fi
        read -r off_n _ <<<"$(recorded "$job-off")"
        [ "$off_n" -eq 0 ] || echo "# $job: the graphs-off run logged $off_n recordings"
        [ "$same" = yes ] || echo "# $job: the weights differ: on $(sha "$job-on"), off $(sha "$job-off")"
    else
        status=1
    fi
    [ "$rec_it" != - ] && [ "$rec_it" -gt "$SKIP" ] &&
        echo "# $job: graphs recorded as late as iteration $rec_it: timed iterations $((SKIP + 1))..$rec_it ran without them"
    [ "$rec_n" -eq "${agents:-0}" ] || echo "# $job: $rec_n of ${agents:-?} agents recorded graphs"
    awk -v j="$job" -v p="$prec" -v st="$stages" -v ag="$agents" -v mb="$mbs" -v b="$batch" \
        -v on="$on" -v off="$off" -v same="$same" -v rn="$rec_n" -v ri="$rec_it" 'BEGIN {
        sps_on = on + 0 > 0 ? sprintf("%.1f", 1000 * b / on) : "-"
        sps_off = off + 0 > 0 ? sprintf("%.1f", 1000 * b / off) : "-"
        sp = (on + 0 > 0 && off + 0 > 0) ? sprintf("%.2fx", off / on) : "-"
        printf "| %s | %s | %d (%d), %s | %s | %s | %s | %s | %s | %s | %d of %d (%s) |\n",
            j, p, st, ag, mb, on, sps_on, off, sps_off, sp, same, rn, ag, ri == "-" ? "none" : "iteration " ri }'
done
exit $status
