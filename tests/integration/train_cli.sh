#!/usr/bin/env bash
# train_cli: gpp-train as a user runs it. Loss decreases on small MMT, DLRM
# and CANDLE-Uno variants; micro-batching does not change the losses; save +
# load resumes exactly; bad input (unknown model or option, corrupted,
# truncated or foreign checkpoint, bad dataset) exits 2 with a message and
# leaves the existing checkpoint untouched; a failed save keeps the old
# file; dataset files and the profile table work end to end; data threads
# and prefetch leave losses and weights unchanged.
# Usage: train_cli.sh BUILD_DIR
set -u
. "$(dirname "$0")/lib/gpp_test.sh"
gpp_test_begin train_cli "${1:-}"
TRAIN=$BUILD/agent/exec/gpp-train
. "$SRC/scripts/blas-env.sh" # OPENBLAS_CORETYPE the CPU supports

MMT="mmt:branches=2,layers=2,hidden=64,heads=4,seq=16,ffn=256"
DLRM="dlrm:dense_branches=2,sparse_branches=2,dense_in=32,hidden=64,dense_layers=2,rows=1000,dim=16,bag=8,top_layers=2"
CANDLE="candle_uno:branches=3,layers=2,hidden=64,in=32,doses=1,top_layers=2"

# losses of a run, one per line
losses() { grep -o 'loss=[0-9.eE+-]*' "$1" | cut -d= -f2; }

# 1. loss decreases: mean of the last 5 iterations < 0.8 x mean of the first 5
for spec in "$MMT" "$DLRM" "$CANDLE"; do
    name=${spec%%:*}
    if ! "$TRAIN" --model "$spec" --iterations 40 --batch 64 --lr 0.003 --threads 1 \
        >"$TMP/$name.log" 2>"$TMP/$name.err"; then
        fail "$name: gpp-train failed: $(cat "$TMP/$name.err")"
        continue
    fi
    read -r first last < <(losses "$TMP/$name.log" | awk '{l[NR]=$1} END {
        for (i = 1; i <= 5; i++) { a += l[i]; b += l[NR - 5 + i] } print a / 5, b / 5 }')
    if awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < 0.8 * a) }'; then
        ok "$name: loss $first -> $last over 40 iterations"
    else
        fail "$name: loss did not decrease enough: $first -> $last"
    fi
    grep -q 'samples/s=' "$TMP/$name.log" || fail "$name: no samples/s printed"
    # predicted vs measured peak device memory, within 10 %
    if awk '$1 == "memory:" && $2 == "0" { e = $5 < 0 ? -$5 : $5; seen = 1; if (!($4 > 0) || e > 10) bad = 1 }
            END { exit bad || !seen }' "$TMP/$name.log"; then
        ok "$name: memory $(awk '$1 == "memory:" && $2 == "0" { print $3 " MiB predicted, " $4 " measured" }' "$TMP/$name.log")"
    else
        fail "$name: memory table missing or off by more than 10 %: $(grep '^memory' "$TMP/$name.log")"
    fi
done

# 2. micro-batches of 4 give the losses of one mini-batch of 16 (rel 1e-4
#    after 5 steps: float sums in another order)
"$TRAIN" --model "$CANDLE" --iterations 5 --batch 16 --threads 1 >"$TMP/full.log" 2>&1
"$TRAIN" --model "$CANDLE" --iterations 5 --batch 16 --micro-batch 4 --threads 1 >"$TMP/mb.log" 2>&1
if paste <(losses "$TMP/full.log") <(losses "$TMP/mb.log") |
    awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > m) m = d; if (d > 1e-4 * $1 + 1e-7) bad = 1 }
         END { printf "max loss difference %g\n", m; exit bad || NR != 5 }'; then
    ok "micro-batch 4 x 4 matches batch 16"
else
    fail "micro-batching changed the losses"
fi

# 3. save after 4 + load and 4 more == 8 straight (exact: same kernels, same data)
"$TRAIN" --model "$MMT" --iterations 8 --batch 8 --threads 1 --optimizer adamw >"$TMP/straight.log" 2>&1
"$TRAIN" --model "$MMT" --iterations 4 --batch 8 --threads 1 --save "$TMP/ck" >"$TMP/a.log" 2>&1
"$TRAIN" --model "$MMT" --iterations 4 --batch 8 --threads 1 --load "$TMP/ck" >"$TMP/b.log" 2>&1
if [ "$(losses "$TMP/straight.log" | tail -4)" = "$(losses "$TMP/b.log")" ] &&
    [ -n "$(losses "$TMP/b.log")" ]; then
    ok "resume from checkpoint reproduces iterations 4..7 exactly"
else
    fail "resumed losses differ: $(losses "$TMP/straight.log" | tail -4 | tr '\n' ' ') vs $(losses "$TMP/b.log" | tr '\n' ' ')"
fi

# 4. bad input: exit 2, a message, the checkpoint untouched
sum0=$(sha256sum <"$TMP/ck")
expect_fail "unknown model" "unknown model 'nosuch'" "$TRAIN" --model nosuch
expect_fail "unknown zoo key" "unknown parameter 'wings'" "$TRAIN" --model mmt:wings=2
expect_fail "unknown option" "unknown or incomplete option" "$TRAIN" --model "$MMT" --frobnicate
expect_fail "bad number" "--batch: expected an integer >= 1, got 'x'" "$TRAIN" --model "$MMT" --batch x
expect_fail "no model" "--model SPEC is required" "$TRAIN" --iterations 3
expect_fail "wrong model" "is for model" "$TRAIN" --model "$CANDLE" --iterations 1 --load "$TMP/ck"
expect_fail "wrong optimizer" "pass --optimizer adamw" "$TRAIN" --model "$MMT" --optimizer sgd --iterations 1 --load "$TMP/ck"
cp "$TMP/ck" "$TMP/corrupt"
size=$(stat -c %s "$TMP/corrupt")
printf '\x5a' | dd of="$TMP/corrupt" bs=1 seek=$((size / 2)) conv=notrunc status=none
expect_fail "corrupted checkpoint" "checksum mismatch" "$TRAIN" --model "$MMT" --iterations 1 --load "$TMP/corrupt"
head -c $((size - 100)) "$TMP/ck" >"$TMP/trunc"
expect_fail "truncated checkpoint" "checksum mismatch" "$TRAIN" --model "$MMT" --iterations 1 --load "$TMP/trunc"
expect_fail "missing checkpoint" "cannot open" "$TRAIN" --model "$MMT" --iterations 1 --load "$TMP/none"
# a failed load must not overwrite the --save target
expect_fail "bad load keeps save target" "checksum mismatch" "$TRAIN" --model "$MMT" --iterations 1 --load "$TMP/corrupt" --save "$TMP/ck"
# a save that fails midway (fault injection: disk full after 4 KiB)
expect_fail "failed save" "untouched" env GPP_FAULT=atomic_write:4096 "$TRAIN" --model "$MMT" --iterations 1 --batch 8 --threads 1 --save "$TMP/ck"
[ "$(sha256sum <"$TMP/ck")" = "$sum0" ] && ok "checkpoint untouched by every failure" ||
    fail "checkpoint changed"
ls "$TMP"/ck.tmp.* >/dev/null 2>&1 && fail "temp file left behind" || ok "no temp file left"
"$TRAIN" --model "$MMT" --iterations 1 --batch 8 --threads 1 --load "$TMP/ck" >/dev/null 2>&1 &&
    ok "old checkpoint still loads" || fail "old checkpoint no longer loads"

# a model too large for memory fails cleanly (half-built executor torn down)
expect_fail "out of memory" "out of memory" env ASAN_OPTIONS=allocator_may_return_null=1 "$TRAIN" \
    --model "dlrm:dense_branches=1,sparse_branches=2,dense_in=4,hidden=4,dense_layers=1,rows=1000000000000,dim=4,bag=2" --iterations 1

# 4b. a graph JSON file trains; an unknown op type is a clear error
cat >"$TMP/g.json" <<'EOF'
{"format": "gpp-graph/1", "name": "tiny", "ops": [
 {"id": 0, "name": "x", "type": "input", "inputs": [], "rows": 1, "cols": 8, "input_kind": "dense"},
 {"id": 1, "name": "fc", "type": "linear", "inputs": [0], "out_features": 16, "bias": 1},
 {"id": 2, "name": "act", "type": "gelu", "inputs": [1]},
 {"id": 3, "name": "out", "type": "linear", "inputs": [2], "out_features": 2, "bias": 1},
 {"id": 4, "name": "loss", "type": "loss_mse", "inputs": [3]}]}
EOF
"$TRAIN" --model "$TMP/g.json" --iterations 3 --batch 8 --threads 1 >"$TMP/json.log" 2>&1 &&
    [ "$(losses "$TMP/json.log" | wc -l)" -eq 3 ] && ok "graph JSON model trains" ||
    fail "graph JSON model: $(cat "$TMP/json.log")"
# same file name, other shapes: the per-tensor shape check answers
"$TRAIN" --model "$TMP/g.json" --iterations 1 --batch 8 --threads 1 --save "$TMP/gck" >/dev/null 2>&1
sed -i 's/"out_features": 16/"out_features": 32/' "$TMP/g.json"
expect_fail "checkpoint shape mismatch" "the model needs \[32, 8\]" "$TRAIN" --model "$TMP/g.json" --iterations 1 --load "$TMP/gck"
sed 's/"gelu"/"frobnicate"/' "$TMP/g.json" >"$TMP/bad.json"
expect_fail "unknown op type" "field .type. must be one of" "$TRAIN" --model "$TMP/bad.json" --iterations 1

# 5. dataset file: write, train from it, reject broken ones
if "$TRAIN" --model "$DLRM" --write-dataset "$TMP/ds" --samples 256 >"$TMP/ds.log" 2>&1 &&
    "$TRAIN" --model "$DLRM" --data "$TMP/ds" --iterations 3 --batch 64 --threads 1 >"$TMP/dsrun.log" 2>&1 &&
    [ "$(losses "$TMP/dsrun.log" | wc -l)" -eq 3 ]; then
    ok "dataset written and trained from"
else
    fail "dataset round trip: $(cat "$TMP/ds.log" "$TMP/dsrun.log")"
fi
# the file holds the synthetic samples: same losses as the generator
"$TRAIN" --model "$DLRM" --iterations 3 --batch 64 --threads 1 >"$TMP/synrun.log" 2>&1
[ "$(losses "$TMP/dsrun.log")" = "$(losses "$TMP/synrun.log")" ] &&
    ok "dataset losses equal generator losses" || fail "dataset and generator losses differ"
# data threads and prefetch change nothing: the same losses and weights
"$TRAIN" --model "$DLRM" --iterations 3 --batch 64 --micro-batch 16 --threads 1 \
    --data-threads 1 --data-prefetch off >"$TMP/dt1.log" 2>&1
"$TRAIN" --model "$DLRM" --iterations 3 --batch 64 --micro-batch 16 --threads 1 \
    --data-threads 3 --data-prefetch on >"$TMP/dt3.log" 2>&1
w1=$(grep '^weights sha256' "$TMP/dt1.log") w3=$(grep '^weights sha256' "$TMP/dt3.log")
[ -n "$w1" ] && [ "$w1" = "$w3" ] && [ "$(losses "$TMP/dt1.log")" = "$(losses "$TMP/dt3.log")" ] &&
    grep -q 'synthetic data: 3 threads, prefetch on' "$TMP/dt3.log" &&
    ok "--data-threads 3 --data-prefetch on: same losses and weights as 1 thread" ||
    fail "data threads or prefetch changed the run: $(cat "$TMP/dt1.log" "$TMP/dt3.log")"
expect_fail "bad data threads" "--data-threads: expected an integer >= 1, got '0'" "$TRAIN" --model "$DLRM" --data-threads 0
expect_fail "bad data prefetch" "--data-prefetch 'maybe': use on or off" "$TRAIN" --model "$DLRM" --data-prefetch maybe
cp "$TMP/ds" "$TMP/ds_bad"
printf 'XX' | dd of="$TMP/ds_bad" bs=1 seek=0 conv=notrunc status=none
expect_fail "dataset bad magic" "bad magic" "$TRAIN" --model "$DLRM" --data "$TMP/ds_bad" --iterations 1
head -c 3000 "$TMP/ds" >"$TMP/ds_trunc"
expect_fail "dataset truncated" "truncated" "$TRAIN" --model "$DLRM" --data "$TMP/ds_trunc" --iterations 1
expect_fail "dataset wrong model" "another model" "$TRAIN" --model "$CANDLE" --data "$TMP/ds" --iterations 1
expect_fail "dataset without samples" "needs --samples" "$TRAIN" --model "$DLRM" --write-dataset "$TMP/x"

# 6. profile table in the planner's schema
if "$TRAIN" --model "$MMT" --profile-out "$TMP/prof.json" --profile-max-mb 4 --threads 1 >"$TMP/prof.log" 2>&1 &&
    python3 - "$TMP/prof.json" <<'EOF'
import json, sys
p = json.load(open(sys.argv[1]))
meta = p.pop("_gpp")  # what was measured where
assert meta == {"model": meta["model"], "device": "cpu", "ops": 39, "backend": "cpu",
                "precision": "fp32", "bf16_tensors": False}, meta
assert meta["model"].startswith("mmt:"), meta
assert len(p) == 39, len(p)  # every op of the MMT variant
for k, e in p.items():
    assert set(e) >= {"name", "inputs", "input_size", "weight_size", "runtime"}, e
    assert sorted(e["runtime"], key=int) == ["1", "2", "4"], e["runtime"]
    assert len(e["inputs"]) == len(e["input_size"])
    assert all(v >= 0 for v in e["runtime"].values())
EOF
then
    ok "profile.json written in the planner's schema"
else
    fail "profile: $(cat "$TMP/prof.log")"
fi

gpp_test_end
