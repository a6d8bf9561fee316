#!/usr/bin/env bash
# bench_train_gpu: single-GPU training, gpp-train --backend cuda against
# PyTorch eager (bench/torch_train.py --device cuda) at the same model,
# shapes, batch, optimizer (AdamW; embedding tables lazy AdamW vs
# SparseAdam) and precision. Needs a GPU and a python with torch (PYTHON,
# default python3). Prints a markdown table: samples/s of each, the ratio,
# and the achieved TFLOP/s and model FLOP utilisation of both, with the
# model FLOPs of one iteration counted by PyTorch's flop counter on the
# same model (forward + backward), against the device's dense peak for the
# precision: PEAK_FP32, PEAK_TF32, PEAK_BF16 (default H100 SXM from NVIDIA's
# datasheet, without sparsity: 66.9, 494.7 and 989.4 TFLOP/s).
#
# Each side runs WARMUP untimed and ITERS timed iterations; gpp's rate is
# the mean over its timed iterations' samples/s (each iteration ends with
# the loss read back from the GPU, so it waits for the GPU). PyTorch draws
# its inputs on the GPU (torch.randn, no teacher); gpp reads them from a
# dataset file written beforehand (gpp-train --write-dataset: inputs and
# teacher labels), so both columns time the training step, not data
# generation. The "synthetic" column is gpp generating inputs and teacher
# labels on the host inside the timed loop (its default without --data).
# The "graphs" column is gpp with --cuda-graphs (each micro-batch's forward
# and backward replayed as CUDA graphs, docs/gpu.md "CUDA graphs"; since
# 2026-11-28 models with embedding tables too). The "fp32-operand attention" column
# is gpp at bf16 with GPP_CUDA_ATTENTION=unfused-fp32 (the attention core's
# batched products over fp32 operands and an fp32 stash, converted inside
# cuBLASLt, instead of the bf16 core's bf16 operands: docs/gpu.md "Fused
# attention"), for models with attention. The "fused attention" column is
# gpp at bf16 with GPP_CUDA_ATTENTION=fused (the FlashAttention-2-style
# core on tensor cores, mma.sync, since 2026-11-28), for models with
# attention: it decides whether `auto` runs it. The "bf16 tensors" column
# is gpp at bf16 with --bf16-tensors (activations between ops kept in bf16,
# off by default until measured: docs/gpu.md "bf16 tensors"): against the
# main column it is what bf16 storage gives. The "no load-ahead" column is gpp with --load-ahead off (each
# micro-batch's inputs copied to the GPU when it runs, the host waiting
# for the stream, instead of during the previous one: docs/executor.md).
#
# usage: bench/bench_train_gpu.sh [BUILD_DIR]
#   env: PYTHON (python3), WARMUP (3), ITERS (10), PRECISIONS ("fp32 tf32 bf16"),
#        MODELS (newline-separated "SPEC BATCH" entries; default below)
set -u
BUILD=${1:-build}
PYTHON=${PYTHON:-python3}
WARMUP=${WARMUP:-3}
ITERS=${ITERS:-10}
PRECISIONS=${PRECISIONS:-fp32 tf32 bf16}
TRAIN=$BUILD/agent/exec/gpp-train
HERE=$(cd "$(dirname "$0")" && pwd)
[ -x "$TRAIN" ] || { echo "bench_train_gpu: no $TRAIN; build first" >&2; exit 2; }

DEFAULT_MODELS="mmt:branches=2,layers=2,hidden=128,heads=4,seq=32,ffn=512,classes=16 32
mmt:branches=2,layers=4,hidden=1024,heads=16,seq=256,ffn=4096,classes=16 8
mmt:branches=2,layers=4,hidden=1024,heads=16,seq=256,ffn=4096,classes=16 32
dlrm:dense_branches=7,sparse_branches=7,dense_in=4096,hidden=4096,dense_layers=4,rows=100000,dim=64,bag=100,top_layers=2 256
candle_uno:branches=7,layers=4,hidden=4096,in=4096,doses=1,top_layers=2 256"
MODELS=${MODELS:-$DEFAULT_MODELS}

peak() {
    case $1 in
    fp32) echo "${PEAK_FP32:-66.9}" ;;
    tf32) echo "${PEAK_TF32:-494.7}" ;;
    bf16) echo "${PEAK_BF16:-989.4}" ;;
    esac
}

gpp_rate() { # spec batch precision [--data FILE] -> samples/s (mean over timed iterations)
    "$TRAIN" --model "$1" --batch "$2" --backend cuda --precision "$3" \
        --iterations $((WARMUP + ITERS)) --threads 8 "${@:4}" 2>"$TMPD/gpp.err" |
        grep '^iter=' | sed 's/.*samples\/s=\([0-9.]*\).*/\1/' |
        awk -v w="$WARMUP" -v b="$2" 'NR > w { t += b / $1; n++ }
            END { if (n) printf "%.1f\n", b * n / t; else print "fail" }'
}

TMPD=$(mktemp -d)
trap 'rm -rf "$TMPD"' EXIT
echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
echo "# warmup $WARMUP, timed $ITERS iterations; MFU against dense peak fp32 $(peak fp32), tf32 $(peak tf32), bf16 $(peak bf16) TFLOP/s"
printf '| model | batch | precision | gpp samples/s | PyTorch samples/s | gpp / PyTorch | model GFLOP/iter | gpp TFLOP/s (MFU) | PyTorch TFLOP/s (MFU) | gpp synthetic samples/s | gpp --cuda-graphs samples/s (/ PyTorch) | gpp fp32-operand attention samples/s | gpp fused attention samples/s | gpp bf16 tensors samples/s | gpp no load-ahead samples/s |\n'
printf '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n'
while read -r spec batch; do
    [ -n "$spec" ] || continue
    "$TRAIN" --model "$spec" --write-dataset "$TMPD/ds.bin" --samples $((batch * (WARMUP + ITERS))) \
        >/dev/null 2>"$TMPD/ds.err" || { sed 's/^/# dataset: /' "$TMPD/ds.err"; continue; }
    for prec in $PRECISIONS; do
        t=$("$PYTHON" "$HERE/torch_train.py" --model "$spec" --batch "$batch" --device cuda \
            --precision "$prec" --iterations "$ITERS" --warmup "$WARMUP" 2>"$TMPD/torch.err")
        trate=$(echo "$t" | sed -n 's/.* samples\/s=\([0-9.]*\).*/\1/p')
        flops=$(echo "$t" | sed -n 's/.* flops\/iter=\([0-9]*\).*/\1/p')
        [ -n "$trate" ] || { trate=fail; flops=0; sed 's/^/# torch: /' "$TMPD/torch.err" | tail -3; }
        grate=$(gpp_rate "$spec" "$batch" "$prec" --data "$TMPD/ds.bin" --no-shuffle)
        [ "$grate" = fail ] && sed 's/^/# gpp: /' "$TMPD/gpp.err" | tail -3
        srate=$(gpp_rate "$spec" "$batch" "$prec")
        crate=$(gpp_rate "$spec" "$batch" "$prec" --data "$TMPD/ds.bin" --no-shuffle --cuda-graphs)
        [ "$crate" = fail ] && sed 's/^/# gpp --cuda-graphs: /' "$TMPD/gpp.err" | tail -3
        urate=-
        frate=-
        case $prec:$spec in
        bf16:mmt* | bf16:*attention*)
            urate=$(GPP_CUDA_ATTENTION=unfused-fp32 gpp_rate "$spec" "$batch" "$prec" --data "$TMPD/ds.bin" --no-shuffle)
            [ "$urate" = fail ] && sed 's/^/# gpp fp32-operand attention: /' "$TMPD/gpp.err" | tail -3
            frate=$(GPP_CUDA_ATTENTION=fused gpp_rate "$spec" "$batch" "$prec" --data "$TMPD/ds.bin" --no-shuffle)
            [ "$frate" = fail ] && sed 's/^/# gpp fused attention: /' "$TMPD/gpp.err" | tail -3
            ;;
        esac
        lrate=$(gpp_rate "$spec" "$batch" "$prec" --data "$TMPD/ds.bin" --no-shuffle --load-ahead off)
        [ "$lrate" = fail ] && sed 's/^/# gpp --load-ahead off: /' "$TMPD/gpp.err" | tail -3
        xrate=-
        if [ "$prec" = bf16 ]; then
            xrate=$(gpp_rate "$spec" "$batch" "$prec" --data "$TMPD/ds.bin" --no-shuffle --bf16-tensors)
            [ "$xrate" = fail ] && sed 's/^/# gpp bf16 tensors: /' "$TMPD/gpp.err" | tail -3
        fi
        awk -v s="$spec" -v b="$batch" -v p="$prec" -v g="$grate" -v t="$trate" -v f="$flops" -v pk="$(peak "$prec")" -v sr="$srate" -v cr="$crate" -v ur="$urate" -v fr="$frate" -v xr="$xrate" -v lr="$lrate" 'BEGIN {
            gf = (g + 0 > 0) ? sprintf("%.2f (%.1f %%)", f * g / b / 1e12, 100 * f * g / b / 1e12 / pk) : "-";
            tf = (t + 0 > 0) ? sprintf("%.2f (%.1f %%)", f * t / b / 1e12, 100 * f * t / b / 1e12 / pk) : "-";
            r = (g + 0 > 0 && t + 0 > 0) ? sprintf("%.2fx", g / t) : "-";
            c = (cr + 0 > 0 && t + 0 > 0) ? sprintf("%s (%.2fx)", cr, cr / t) : cr;
            printf "| `%s` | %d | %s | %s | %s | %s | %.1f | %s | %s | %s | %s | %s | %s | %s | %s |\n", s, b, p, g, t, r, f / 1e9, gf, tf, sr, c, ur, fr, xr, lr }'
    done
    rm -f "$TMPD/ds.bin"
done <<<"$MODELS"
