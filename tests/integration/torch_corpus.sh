#!/usr/bin/env bash
# torch_corpus: PyTorch models as users write them (examples/corpus/: a
# CLIP-like two-tower model, a DLRM-like model, a residual MLP with
# Dropout/Tanh/Sigmoid, a ViT with a patch Conv2d, cross-attention, two
# nn.MultiheadAttention beside an nn.TransformerEncoderLayer, a flattened
# embedding with one logit, batched products with @) through
# scripts/gpp-export (torch.fx), each trained 20 AdamW steps in gpp and in
# PyTorch from the same weights and data (losses within 1e-5 relative),
# its weights loaded back strictly, and trained as a 4-agent cluster job
# whose merged weights load strictly (tests/integration/torch_corpus.py).
# Then the refusals: a module with a general Conv2d, an LSTM, a BatchNorm, a
# Softmax and a constant scale exits 2 naming every one of them and writes
# nothing; bad files and data exit 2 naming the file, the array and the fix.
# Needs Debian's python3-torch (scripts/install-deps.sh installs it).
# Usage: torch_corpus.sh BUILD_DIR
set -u
. "$(dirname "$0")/lib/gpp_test.sh"
gpp_test_begin torch_corpus "${1:-}"
TRAIN=$BUILD/agent/exec/gpp-train
. "$SRC/scripts/blas-env.sh"
PY=/usr/bin/python3
EXPORT="$PY $SRC/scripts/gpp-export --build $BUILD"
if ! $PY -c 'import torch, numpy' 2>/dev/null; then
    fail "python3-torch missing for /usr/bin/python3: run scripts/install-deps.sh"
    gpp_test_end
fi
$PY "$SRC/tests/integration/torch_corpus.py" "$SRC" "$BUILD" "$TMP" >"$TMP/corpus.out" 2>&1
while IFS= read -r line; do
    case "$line" in
    "ok - "*) ok "${line#ok - }" ;;
    "not ok - "*) fail "${line#not ok - }" ;;
    esac
done <"$TMP/corpus.out"
grep -q "^ok - bilinear: the cluster job's weights" "$TMP/corpus.out" ||
    fail "the corpus run ended early" "$(tail -5 "$TMP/corpus.out")"

# refusals: every node, its module path and the fix; nothing written
R=$SRC/tests/data/torch/refused.py
echo keep >"$TMP/r.json"
expect_fail "gpp-export refuses a module gpp cannot train" "5 node(s)" $EXPORT "$R:Refused" \
    "$TMP/r.json" img=3x4x4 seq=5x6 x=6
for w in "module conv: nn.Conv2d" "module rnn: module LSTM" "module bn: module BatchNorm1d" \
    "use nn.LayerNorm" "module soft: module Softmax" "function mul"; do
    grep -q "$w" "$TMP/err" && ok "the refusal names: $w" || fail "no '$w'" "$(cat "$TMP/err")"
done
[ "$(cat "$TMP/r.json")" = keep ] && [ ! -e "$TMP/r.safetensors" ] &&
    ok "nothing written, the earlier file kept" || fail "files changed"
expect_fail "float inputs where the module wants ids" "forward() fails.*Long, Int" $EXPORT \
    "$R:Good" "$TMP/g.json" ids=4
expect_ok "the good module exports" $EXPORT "$R:Good" "$TMP/g.json" ids=4:int
# bad files: a truncated weights file, garbage instead of a graph
cp "$TMP/g.safetensors" "$TMP/full.safetensors"
head -c 100 "$TMP/full.safetensors" >"$TMP/g.safetensors"
expect_fail "a truncated weights file" "g.safetensors.*truncated" "$TRAIN" --model "$TMP/g.json" \
    --iterations 1 --batch 2
out=$($PY -c "import sys; sys.path.insert(0, '$SRC/scripts'); import gpp_safetensors as s
try:
    s.load_file('$TMP/g.safetensors'); print('loaded')
except ValueError as e:
    print(e)" 2>&1)
case "$out" in *"g.safetensors: header length"*"truncated"*) ok "gpp_safetensors.load_file: $out" ;;
*) fail "gpp_safetensors.load_file on a truncated file" "$out" ;; esac
cp "$TMP/full.safetensors" "$TMP/g.safetensors"
w=$($PY -c "import sys; sys.path.insert(0, '$SRC/scripts'); import gpp_safetensors as s, numpy as np
a = {'x.weight': np.arange(6, dtype=np.float32).reshape(2, 3), 'ids': np.array([1, 2], np.int64)}
s.save_file(a, '$TMP/rt.safetensors', {'k': 'v'})
b = s.load_file('$TMP/rt.safetensors', framework='np')
print(all((a[k] == b[k]).all() and a[k].dtype == b[k].dtype for k in a), s.read_header('$TMP/rt.safetensors')[1])")
[ "$w" = "True {'k': 'v'}" ] && ok "gpp_safetensors: save_file / load_file round trip" ||
    fail "gpp_safetensors round trip" "$w"
expect_fail "gpp-weights-merge: a tensor in two files" "tensor 'emb.weight' is in" \
    $PY "$SRC/scripts/gpp-weights-merge" "$TMP/m.safetensors" "$TMP/g.safetensors" \
    "$TMP/full.safetensors"
[ ! -e "$TMP/m.safetensors" ] && ok "gpp-weights-merge writes nothing then" ||
    fail "a merged file was written"
head -c 300 /dev/urandom >"$TMP/bad.onnx"
expect_fail "a garbage ONNX file" "bad.onnx: not a valid ONNX file" "$TRAIN" \
    --model "$TMP/bad.onnx" --iterations 1
# data: an id outside the table, a float array for ids, a wrong shape
mkdir -p "$TMP/d1" "$TMP/d2" "$TMP/d3"
$PY - "$TMP" <<'PYEOF'
import sys, numpy as np
t = sys.argv[1]
ids = np.zeros((4, 4), np.int64); ids[2, 1] = 10
np.save(f"{t}/d1/ids.npy", ids); np.save(f"{t}/d1/loss.npy", np.zeros((4, 2), np.float32))
np.save(f"{t}/d2/ids.npy", ids.astype(np.float32)); np.save(f"{t}/d2/loss.npy", np.zeros((4, 2), np.float32))
np.save(f"{t}/d3/ids.npy", np.zeros((4, 5), np.int64)); np.save(f"{t}/d3/loss.npy", np.zeros((4, 2), np.float32))
PYEOF
expect_fail "an id outside the table" "ids.npy: record 2 element 1: value 10 outside" "$TRAIN" --model "$TMP/g.json" \
    --data "$TMP/d1" --no-shuffle --iterations 1 --batch 4
expect_fail "float ids" "ids.npy.*<i4\|ids.npy.*descr" "$TRAIN" --model "$TMP/g.json" \
    --data "$TMP/d2" --iterations 1 --batch 4
expect_fail "ids of another length" "ids.npy.*(N, 4)\|ids.npy.*shape" "$TRAIN" \
    --model "$TMP/g.json" --data "$TMP/d3" --iterations 1 --batch 4
gpp_test_end
