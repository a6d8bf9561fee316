#!/usr/bin/env bash
# test_cuda_train: gpp-train --backend cuda against the CPU run of the same
# model, data and seed: small MMT (attention, layer norm, GELU), DLRM
# (embedding bags with sparse gradients, lazy AdamW) and CANDLE-Uno (MSE),
# 10 iterations each. Both compute in fp32 with different summation orders
# (cuBLASLt vs OpenBLAS, FMA contraction on the GPU); every loss must agree
# within 2e-3 relative (the per-op differences are ~1e-6, test_cuda_ops, and
# grow over the steps through AdamW's normalised updates). Also: save on
# the GPU, load on the CPU (the checkpoint goes through host staging).
# CUDA graphs: --cuda-graphs replays give the eager cuda run bit for bit.
# Precision bf16 (the fused attention core on tensor cores, with packed
# products too, and the default unfused core): MMT within 5e-2 of the fp32
# CPU run.
#
# Without a usable GPU, gpp-train --backend cuda must fail with exit 2 and a
# message naming the reason (never train on the CPU); the test then exits
# 77: skipped. Usage: test_cuda_train.sh BUILD_DIR
set -u
. "$(dirname "$0")/../integration/lib/gpp_test.sh"
gpp_test_begin test_cuda_train "${1:-}"
TRAIN=${GPP_TRAIN:-$BUILD/agent/exec/gpp-train}
. "$SRC/scripts/blas-env.sh"

MMT="mmt:branches=2,layers=2,hidden=64,heads=4,seq=16,ffn=256"
DLRM="dlrm:dense_branches=2,sparse_branches=2,dense_in=32,hidden=64,dense_layers=2,rows=1000,dim=16,bag=8,top_layers=2"
CANDLE="candle_uno:branches=3,layers=2,hidden=64,in=32,doses=1,top_layers=2"
losses() { grep -o 'loss=[0-9.eE+-]*' "$1" | cut -d= -f2; }

. "$(dirname "$0")/gpu_probe.sh"
gpu_probe test_cuda_train "" --model "$MMT"

for spec in "$MMT" "$DLRM" "$CANDLE"; do
    name=${spec%%:*}
    for be in cpu cuda; do
        "$TRAIN" --model "$spec" --backend $be --iterations 10 --batch 32 --micro-batch 16 \
            --lr 0.003 --threads 1 >"$TMP/$name.$be.log" 2>"$TMP/$name.$be.err" ||
            fail "$name on $be: gpp-train failed" "$(cat "$TMP/$name.$be.err")"
    done
    if paste <(losses "$TMP/$name.cpu.log") <(losses "$TMP/$name.cuda.log") |
        awk '{ d = $1 - $2; if (d < 0) d = -d; r = d / ($1 > 0 ? $1 : -$1);
               if (r > m) m = r; if (r > 2e-3) bad = 1 }
             END { printf "max rel loss difference %g over %d iterations\n", m, NR; exit bad || NR != 10 }'; then
        ok "$name: cuda losses match cpu"
    else
        fail "$name: cuda and cpu loss curves differ" "$(paste <(losses "$TMP/$name.cpu.log") <(losses "$TMP/$name.cuda.log"))"
    fi
done

# CUDA graphs (--cuda-graphs): the replayed passes give the eager cuda run's
# losses and weights bit for bit (same kernels, same pointers' contents,
# same order). Micro-batches 12 + 12 + 8 in three slots, each at the
# memory plan's fixed addresses: iteration 1 runs eagerly (the kernels'
# first calls), the second records each slot's forward and backward (6) and
# launches them, the last four replay them (24). DLRM too: its embedding gradients are accumulated on the
# device alone, so its backward passes record like the others.
for spec in "$MMT" "$CANDLE" "$DLRM"; do
    name=${spec%%:*}
    for g in "" --cuda-graphs; do
        "$TRAIN" --model "$spec" --backend cuda --iterations 6 --batch 32 --micro-batch 12 \
            --lr 0.003 $g >"$TMP/$name.g$g.log" 2>"$TMP/$name.g$g.err" ||
            fail "$name on cuda $g: gpp-train failed" "$(cat "$TMP/$name.g$g.err")"
    done
    stats=$(grep '^cuda graphs:' "$TMP/$name.g--cuda-graphs.log")
    if [ "$(losses "$TMP/$name.g.log")" = "$(losses "$TMP/$name.g--cuda-graphs.log")" ] &&
        [ "$(grep '^weights sha256' "$TMP/$name.g.log")" = "$(grep '^weights sha256' "$TMP/$name.g--cuda-graphs.log")" ]; then
        ok "$name: --cuda-graphs gives the eager losses and weights bit for bit ($stats)"
    else
        fail "$name: --cuda-graphs differs from eager ($stats)" \
            "$(paste <(losses "$TMP/$name.g.log") <(losses "$TMP/$name.g--cuda-graphs.log"))"
    fi
    [ "$stats" = "cuda graphs: captured=6 replayed=24" ] &&
        ok "$name: each slot's passes recorded, replayed after" || fail "$name: graphs line" "$stats"
done

# precision bf16 (GPP_CUDA_ATTENTION=fused: the tensor-core attention core,
# bf16 products; and with GPP_CUDA_BF16_GEMM=packed; and the default, the
# unfused attention core over bf16 operands and stash): MMT's
# losses against the CPU's fp32 run within 5e-2 relative. bf16 keeps 8
# significant bits (2^-8 = 0.4 % per rounding); the difference builds up
# over two layers, the loss and 10 AdamW steps, so this bound catches a
# wrong kernel (a wrong tile or mask moves the loss by far more), not the
# rounding. Then --cuda-graphs with packed operands: bit for bit the eager
# run (a graph must own the buffers its products pack into).
for v in "fused fast" "fused packed" "auto fast"; do
    read -r att gemm <<<"$v"
    GPP_CUDA_ATTENTION=$att GPP_CUDA_BF16_GEMM=$gemm "$TRAIN" --model "$MMT" --backend cuda \
        --precision bf16 --bf16-tensors --iterations 10 --batch 32 --micro-batch 16 --lr 0.003 \
        >"$TMP/bf16.$att.$gemm.log" 2>"$TMP/bf16.$att.$gemm.err" ||
        fail "mmt bf16 ($v): gpp-train failed" "$(cat "$TMP/bf16.$att.$gemm.err")"
    if paste <(losses "$TMP/mmt.cpu.log") <(losses "$TMP/bf16.$att.$gemm.log") |
        awk '{ d = $1 - $2; if (d < 0) d = -d; r = d / ($1 > 0 ? $1 : -$1);
               if (r > m) m = r; if (r > 5e-2) bad = 1 }
             END { printf "bf16 attention %s, products %s: max rel loss difference from fp32 cpu %g\n", a, p, m;
                   exit bad || NR != 10 }' a="$att" p="$gemm"; then
        ok "mmt bf16 ($v): losses within 5e-2 of the fp32 cpu run"
    else
        fail "mmt bf16 ($v): losses" "$(paste <(losses "$TMP/mmt.cpu.log") <(losses "$TMP/bf16.$att.$gemm.log"))"
    fi
done
# bf16 tensors between ops (--bf16-tensors): the runs above keep
# activations in bf16 (each says how many); without the flag (the default)
# the same losses bound holds and the activations stay fp32
grep -q '^bf16 tensors: [1-9][0-9]* of [0-9]* activations' "$TMP/bf16.auto.fast.log" &&
    ok "mmt bf16: $(grep '^bf16 tensors:' "$TMP/bf16.auto.fast.log")" ||
    fail "mmt bf16: no bf16 tensors" "$(cat "$TMP/bf16.auto.fast.log")"
"$TRAIN" --model "$MMT" --backend cuda --precision bf16 \
    --iterations 10 --batch 32 --micro-batch 16 --lr 0.003 >"$TMP/bf16.f32t.log" 2>&1 ||
    fail "mmt bf16, tensors fp32: gpp-train failed" "$(cat "$TMP/bf16.f32t.log")"
if ! grep -q '^bf16 tensors:' "$TMP/bf16.f32t.log" &&
    paste <(losses "$TMP/mmt.cpu.log") <(losses "$TMP/bf16.f32t.log") |
    awk '{ d = $1 - $2; if (d < 0) d = -d; if (d / ($1 > 0 ? $1 : -$1) > 5e-2) bad = 1 }
         END { exit bad || NR != 10 }'; then
    ok "mmt bf16 without --bf16-tensors: fp32 tensors, losses within 5e-2"
else
    fail "mmt bf16 without --bf16-tensors" "$(cat "$TMP/bf16.f32t.log")"
fi
# DLRM and CANDLE-Uno at bf16: their MLPs, concats, slices and losses keep
# bf16 tensors too (DLRM's embedding bags give fp32); losses within 5e-2
for spec in "$DLRM" "$CANDLE"; do
    name=${spec%%:*}
    "$TRAIN" --model "$spec" --backend cuda --precision bf16 --bf16-tensors --iterations 10 \
        --batch 32 --micro-batch 16 --lr 0.003 >"$TMP/bf16.$name.log" 2>&1 ||
        fail "$name bf16: gpp-train failed" "$(cat "$TMP/bf16.$name.log")"
    if grep -q '^bf16 tensors: [1-9]' "$TMP/bf16.$name.log" &&
        paste <(losses "$TMP/$name.cpu.log") <(losses "$TMP/bf16.$name.log") |
        awk '{ d = $1 - $2; if (d < 0) d = -d; r = d / ($1 > 0 ? $1 : -$1); if (r > m) m = r;
               if (r > 5e-2) bad = 1 }
             END { printf "bf16: max rel loss difference from fp32 cpu %g\n", m; exit bad || NR != 10 }'; then
        ok "$name bf16: losses within 5e-2 of the fp32 cpu run ($(grep '^bf16 tensors:' "$TMP/bf16.$name.log"))"
    else
        fail "$name bf16" "$(paste <(losses "$TMP/$name.cpu.log") <(losses "$TMP/bf16.$name.log"); grep '^bf16 tensors' "$TMP/bf16.$name.log")"
    fi
done
for g in "" --cuda-graphs; do
    GPP_CUDA_BF16_GEMM=packed "$TRAIN" --model "$MMT" --backend cuda --precision bf16 \
        --iterations 6 --batch 32 --micro-batch 12 --lr 0.003 $g >"$TMP/bf16p.g$g.log" 2>&1 ||
        fail "mmt bf16 packed $g: gpp-train failed" "$(cat "$TMP/bf16p.g$g.log")"
done
if [ "$(losses "$TMP/bf16p.g.log")" = "$(losses "$TMP/bf16p.g--cuda-graphs.log")" ] &&
    [ "$(grep '^weights sha256' "$TMP/bf16p.g.log")" = "$(grep '^weights sha256' "$TMP/bf16p.g--cuda-graphs.log")" ]; then
    ok "mmt bf16 packed: --cuda-graphs gives the eager run bit for bit ($(grep '^cuda graphs:' "$TMP/bf16p.g--cuda-graphs.log"))"
else
    fail "mmt bf16 packed: --cuda-graphs differs from eager" \
        "$(paste <(losses "$TMP/bf16p.g.log") <(losses "$TMP/bf16p.g--cuda-graphs.log"))"
fi

# the stage's memory plan (with the backend's kernel stashes and stream
# workspaces, the arena and state rounded as the caching allocator rounds
# them) is the backend's peak to the byte: fp32 (the unfused attention core;
# DLRM's sparse gradient scratch, the cross-entropy's row losses) and bf16
# with the fused and the unfused core (docs/executor.md "Memory"); with
# graphs too (the plan's feeds; micro-batches of 12 and 8 in one lane)
for log in "$TMP/mmt.cuda.log" "$TMP/dlrm.cuda.log" "$TMP/candle_uno.cuda.log" "$TMP"/bf16.*.log \
    "$TMP/mmt.g--cuda-graphs.log" "$TMP/candle_uno.g--cuda-graphs.log" \
    "$TMP/dlrm.g--cuda-graphs.log"; do
    line=$(grep '^memory_bytes:' "$log")
    pred=$(echo "$line" | grep -o 'predicted=[0-9]*' | cut -d= -f2)
    meas=$(echo "$line" | grep -o 'measured=[0-9]*' | cut -d= -f2)
    if [ -n "$pred" ] && [ "$pred" = "$meas" ]; then
        ok "$(basename "$log" .log): predicted device memory = measured ($meas bytes)"
    else
        fail "$(basename "$log" .log): predicted device memory differs from measured" "$line"
    fi
done

# a profile measured on the device records what its kernels keep: with
# GPP_CUDA_ATTENTION=fused, the fused attention core's stash (qkv, ctx, one log-sum-exp per row and head) for
# every attention op, below the CPU's (the op table's, with the seq x seq
# probabilities); every other op the same on both (docs/planner.md); and
# the workspace the attention kernels ask, which differs from the CPU's
for b in cpu cuda; do
    GPP_CUDA_ATTENTION=fused "$TRAIN" --model "$MMT" --backend $b --batch 4 --threads 1 --profile-out "$TMP/prof.$b.json" \
        >"$TMP/prof.$b.log" 2>&1 || fail "gpp-train --profile-out on $b" "$(cat "$TMP/prof.$b.log")"
done
if /usr/bin/python3 - "$TMP/prof.cpu.json" "$TMP/prof.cuda.json" <<'PY'
import json, sys
cpu, cuda = (json.load(open(p)) for p in sys.argv[1:3])
att = [k for k, e in cpu.items() if not k.startswith("_") and e["name"].endswith(".attn")]
other = [k for k in cpu if not k.startswith("_") and k not in att]
print("kernel stash per sample of %s: cpu %d, cuda %d" % (att[0], cpu[att[0]]["kernel_stash"], cuda[att[0]]["kernel_stash"]))
print("workspace of %s: cpu %s, cuda %s" % (att[0], cpu[att[0]]["workspace"], cuda[att[0]]["workspace"]))
sys.exit(not att or any(cuda[k]["kernel_stash"] >= cpu[k]["kernel_stash"] for k in att) or
         any(cuda[k]["kernel_stash"] != cpu[k]["kernel_stash"] for k in other) or
         any(cuda[k]["workspace"] == cpu[k]["workspace"] for k in att))
PY
then
    ok "a cuda profile records the fused attention's smaller kernel stash, and its own workspace"
else
    fail "kernel_stash of the cuda profile" "$(head -c 2000 "$TMP/prof.cuda.json")"
fi

# checkpoint written from device memory, read back on the CPU
"$TRAIN" --model "$MMT" --backend cuda --iterations 3 --batch 8 --save "$TMP/ck" >"$TMP/s.log" 2>&1 &&
    "$TRAIN" --model "$MMT" --backend cpu --iterations 1 --batch 8 --load "$TMP/ck" --threads 1 >"$TMP/l.log" 2>&1
if [ -n "$(losses "$TMP/l.log")" ]; then
    ok "a checkpoint saved on cuda loads on cpu"
else
    fail "cuda -> cpu checkpoint" "$(cat "$TMP/s.log" "$TMP/l.log")"
fi
gpp_test_end
