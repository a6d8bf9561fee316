#!/usr/bin/env bash
# npy_cli: gpp-train on NumPy arrays written by numpy.save itself (Debian's
# /usr/bin/python3 with python3-numpy): a learnable regression trains (loss
# falls), a two-branch model with int64 indices and class labels trains, a
# shuffled run repeats exactly from its seed, and the files a user gets
# wrong (float64, Fortran order, short arrays, wrong shape) exit 2 naming
# the file and the field.
# Usage: npy_cli.sh BUILD_DIR
set -u
. "$(dirname "$0")/lib/gpp_test.sh"
gpp_test_begin npy_cli "${1:-}"
TRAIN=$BUILD/agent/exec/gpp-train
. "$SRC/scripts/blas-env.sh"
PY=/usr/bin/python3
losses() { grep -o 'loss=[0-9.eE+-]*' "$1" | cut -d= -f2; }

if ! $PY -c 'import numpy' 2>/dev/null; then
    fail "python3-numpy missing for /usr/bin/python3: run scripts/install-deps.sh"
    gpp_test_end
fi
mkdir -p "$TMP/reg" "$TMP/tb" "$TMP/bad"
$PY - "$TMP" <<'PYEOF'
import sys, numpy as np
t = sys.argv[1]
r = np.random.default_rng(3)
x = r.standard_normal((512, 8)).astype(np.float32)
w = r.standard_normal((8, 2)).astype(np.float32) / np.sqrt(8)
np.save(f"{t}/reg/x.npy", x)
np.save(f"{t}/reg/loss.npy", (x @ w).astype(np.float32))
n = 96
np.save(f"{t}/tb/tokens.npy", r.standard_normal((n, 1, 16)).astype(np.float32))
np.save(f"{t}/tb/ids.npy", r.integers(0, 50, size=(n, 3)))          # int64, numpy's default
np.save(f"{t}/tb/loss.npy", r.integers(0, 5, size=n))
np.save(f"{t}/bad/x64.npy", x.astype(np.float64))
np.save(f"{t}/bad/xf.npy", np.asfortranarray(x))
np.save(f"{t}/bad/xshort.npy", x[:100])
np.save(f"{t}/bad/x7.npy", x[:, :7].copy())
PYEOF
G=$SRC/tests/data/graphs
expect_ok "regression on .npy arrays" "$TRAIN" --model "$G/tiny_mlp.json" --data "$TMP/reg" \
    --iterations 60 --batch 32 --lr 0.01 --threads 1
cp "$TMP/out" "$TMP/reg.log"
read -r first last < <(losses "$TMP/reg.log" | awk '{l[NR]=$1} END {
    for (i = 1; i <= 5; i++) { a += l[i]; b += l[NR - 5 + i] } print a / 5, b / 5 }')
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < 0.5 * a) }' &&
    ok "loss falls on the .npy regression: $first -> $last" ||
    fail "loss did not fall on .npy data: $first -> $last"
grep -q "data: $TMP/reg, 512 samples" "$TMP/reg.log" && ok "sample count reported" ||
    fail "no sample count: $(head -3 "$TMP/reg.log")"
"$TRAIN" --model "$G/tiny_mlp.json" --data "$TMP/reg" --iterations 20 --batch 32 --lr 0.01 \
    --threads 1 >"$TMP/again.log" 2>&1
[ "$(losses "$TMP/again.log")" = "$(losses "$TMP/reg.log" | head -20)" ] &&
    ok "a shuffled run repeats from its seed" || fail "shuffled runs differ"
# the read-ahead (on by default with cuda) reads the same records: 512
# samples at batch 32 cross an epoch every 16 iterations
"$TRAIN" --model "$G/tiny_mlp.json" --data "$TMP/reg" --iterations 20 --batch 32 --lr 0.01 \
    --threads 1 --data-prefetch on --data-threads 2 >"$TMP/ahead.log" 2>&1
grep -q "data read-ahead: on (2 threads)" "$TMP/ahead.log" &&
    [ "$(losses "$TMP/ahead.log")" = "$(losses "$TMP/again.log")" ] &&
    ok "the read-ahead trains the same losses across an epoch" ||
    fail "read-ahead run differs: $(grep -v '^iter' "$TMP/ahead.log" | head -3)"
# the load-ahead (on by default with cuda: the next micro-batch's samples
# copied to the device early) trains the same, shuffled, across the epoch,
# with uneven micro-batches (32 = 12 + 12 + 8)
"$TRAIN" --model "$G/tiny_mlp.json" --data "$TMP/reg" --iterations 20 --batch 32 --lr 0.01 \
    --threads 1 --micro-batch 12 >"$TMP/mb.log" 2>&1
"$TRAIN" --model "$G/tiny_mlp.json" --data "$TMP/reg" --iterations 20 --batch 32 --lr 0.01 \
    --threads 1 --micro-batch 12 --load-ahead on --data-prefetch on >"$TMP/la.log" 2>&1
grep -q "^load-ahead: 1[0-9][0-9] loads from the device copy, 2 read then" "$TMP/la.log" &&
    [ "$(losses "$TMP/la.log")" = "$(losses "$TMP/mb.log")" ] &&
    [ "$(grep '^weights sha256' "$TMP/la.log")" = "$(grep '^weights sha256' "$TMP/mb.log")" ] &&
    ok "the load-ahead trains the same losses and weights" ||
    fail "load-ahead run differs: $(grep -v '^iter' "$TMP/la.log" | head -4)"
"$TRAIN" --model "$G/tiny_mlp.json" --data "$TMP/reg" --iterations 20 --batch 32 --lr 0.01 \
    --threads 1 --no-shuffle >"$TMP/ordered.log" 2>&1
[ "$(losses "$TMP/ordered.log")" != "$(losses "$TMP/again.log")" ] &&
    ok "--no-shuffle reads another order" || fail "--no-shuffle changed nothing"
expect_ok "two branches, int64 indices and classes" "$TRAIN" --model "$G/two_branch.json" \
    --data "$TMP/tb" --iterations 4 --batch 32 --threads 1
B=$TMP/bad
expect_fail "float64 array" "x64.npy: header field 'descr' is '<f8'.*astype('<f4')" \
    "$TRAIN" --model "$G/tiny_mlp.json" --data "x=$B/x64.npy,loss=$TMP/reg/loss.npy" --iterations 1
expect_fail "Fortran order" "xf.npy: header field 'fortran_order' is True" \
    "$TRAIN" --model "$G/tiny_mlp.json" --data "x=$B/xf.npy,loss=$TMP/reg/loss.npy" --iterations 1
expect_fail "row counts differ" "loss.npy: field 'shape' holds 512 samples, $B/xshort.npy holds 100" \
    "$TRAIN" --model "$G/tiny_mlp.json" --data "x=$B/xshort.npy,loss=$TMP/reg/loss.npy" --iterations 1
expect_fail "features differ" "x7.npy: field 'shape' is (512, 7); the input op 'x'" \
    "$TRAIN" --model "$G/tiny_mlp.json" --data "x=$B/x7.npy,loss=$TMP/reg/loss.npy" --iterations 1
cp "$TMP/reg/x.npy" "$B/x.npy"
expect_fail "missing array" "no loss.npy for the labels of loss op 'loss'" \
    "$TRAIN" --model "$G/tiny_mlp.json" --data "$B" --iterations 1

# the cluster file names the data: 2 CPU agents (data-parallel or pipelined,
# as the planner picks) train the .npy regression; a broken array fails the job
COORD=$BUILD/coordinator/gpp-coordinator
MODEL=$G/tiny_mlp.json
C=$(cpu_job_conf "$TMP/c.toml" 2 3 "$TMP/ckpt" "data = \"$TMP/reg\"")
timeout 120 "$COORD" --plan gpp "$C" >"$TMP/c.out" 2>"$TMP/c.err"; rc=$?
[ $rc = 0 ] && [ "$(grep -c '^iter [1-3]/3  loss ' "$TMP/c.out")" = 3 ] &&
    ok "cluster job trains on job.data" ||
    fail "cluster job on .npy data (rc $rc)" "$(grep -v OpenBLAS "$TMP/c.err" | tail -5)"
# the final weights of every stage, next to its checkpoint, as safetensors
# (checkpoints live in sets, set-<N>/stage<S>.ckpt: docs/checkpoints.md; the newest is the last)
ck=$(ls "$(ls -d "$TMP"/ckpt/set-* | tail -1)"/stage*.ckpt | paste -sd,)
st=$(ls "$TMP"/ckpt/stage*.safetensors | paste -sd,)
/usr/bin/python3 "$SRC/scripts/gpp-weights-compare" "$ck" "$st" >"$TMP/ccmp" 2>&1 &&
    grep -q "^4 tensors" "$TMP/ccmp" &&
    ok "every stage's weights in the run directory: $(tail -1 "$TMP/ccmp")" ||
    fail "cluster safetensors ($st)" "$(cat "$TMP/ccmp")"
C=$(cpu_job_conf "$TMP/cb.toml" 2 3 "$TMP/ckptb" "data = \"x=$B/x7.npy,loss=$TMP/reg/loss.npy\"")
timeout 120 "$COORD" --plan gpp "$C" >"$TMP/cb.out" 2>"$TMP/cb.err"; rc=$?
[ $rc = 2 ] && grep -q "x7.npy: field 'shape' is (512, 7)" "$TMP/cb.err" &&
    ok "cluster job with a bad array fails naming it (rc $rc: bad input)" ||
    fail "cluster job with a bad array (rc $rc)" "$(grep -v OpenBLAS "$TMP/cb.err" | tail -5)"
gpp_test_end
