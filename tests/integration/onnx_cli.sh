#!/usr/bin/env bash
# onnx_cli: an ONNX model through gpp's command lines. The three-branch
# fixture (tests/data/onnx/branches.onnx, make_onnx.py) trains with
# gpp-train on .npy data; its first loss equals a numpy forward pass of the
# ONNX graph from the file's initializers (GELU in the Erf form the file
# has, which gpp now computes exactly, as erf, not as its tanh form), so the
# import's transposes, join order and normalisation are gpp's too; the
# weights written before any step are the initializers under PyTorch's
# names; gpp-plan plans it on 4 devices, and a job of 4 CPU agents through
# the GPP plan trains it with the losses of one process; the errors a user meets (a cut
# file, an unsupported op, a dynamic shape, --loss on a zoo model) exit 2
# naming the place.
# Usage: onnx_cli.sh BUILD_DIR
set -u
. "$(dirname "$0")/lib/gpp_test.sh"
gpp_test_begin onnx_cli "${1:-}"
TRAIN=$BUILD/agent/exec/gpp-train
PLAN=$BUILD/planner/gpp-plan
. "$SRC/scripts/blas-env.sh"
PY=/usr/bin/python3
M=$SRC/tests/data/onnx/branches.onnx
if ! $PY -c 'import numpy, onnx' 2>/dev/null; then
    fail "python3-numpy or python3-onnx missing for /usr/bin/python3: run scripts/install-deps.sh"
    gpp_test_end
fi
mkdir -p "$TMP/d"
# data, and the loss of the first batch of 16 (file order) by numpy
$PY - "$M" "$TMP" <<'PYEOF' >"$TMP/ref"
import math, sys, numpy as np, onnx
from onnx import numpy_helper
m = onnx.load(sys.argv[1]); t = sys.argv[2]
W = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
r = np.random.default_rng(5)
n = 64
a = r.standard_normal((n, 8)).astype(np.float32)
b = r.standard_normal((n, 6)).astype(np.float32)
idx = r.integers(0, 20, size=(n, 3))
y = r.standard_normal((n, 4)).astype(np.float32)
for k, v in (("a", a), ("b", b), ("idx", idx), ("loss", y)):
    np.save(f"{t}/d/{k}.npy", v)
a, b, idx, y = a[:16].astype(np.float64), b[:16].astype(np.float64), idx[:16], y[:16]
ha = np.maximum(a @ W["fa.weight"].T + W["fa.bias"], 0)
hb = b @ W["onnx::MatMul_9"] + W["fb.bias"]
gb = 0.5 * hb * (1 + np.vectorize(math.erf)(hb / np.sqrt(2)))
se = W["emb.weight"][idx].sum(axis=1)
c = np.concatenate([ha, gb, se], axis=1)
mu, var = c.mean(axis=1, keepdims=True), c.var(axis=1, keepdims=True)
nrm = (c - mu) / np.sqrt(var + 1e-5) * W["ln.weight"] + W["ln.bias"]
out = nrm @ W["onnx::Gemm_20"] + W["head.bias"]
print(((out - y) ** 2).mean())
PYEOF
expect_ok "train the imported model on .npy data" "$TRAIN" --model "$M" --data "$TMP/d" \
    --no-shuffle --iterations 40 --batch 16 --lr 0.01 --threads 1
cp "$TMP/out" "$TMP/train.log"
first=$(grep -o 'iter=0 loss=[0-9.eE+-]*' "$TMP/train.log" | cut -d= -f3)
ref=$(cat "$TMP/ref")
awk -v a="$first" -v b="$ref" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-5 * b) }' &&
    ok "first loss $first = numpy's forward pass of the ONNX graph $ref" ||
    fail "first loss $first, numpy says $ref"
read -r l0 l1 < <(grep -o 'loss=[0-9.eE+-]*' "$TMP/train.log" | cut -d= -f2 | awk '{l[NR]=$1} END {
    for (i = 1; i <= 4; i++) { a += l[i]; b += l[NR - 4 + i] } print a / 4, b / 4 }')
awk -v a="$l0" -v b="$l1" 'BEGIN { exit !(b < 0.8 * a) }' && ok "loss falls: $l0 -> $l1" ||
    fail "loss did not fall: $l0 -> $l1"

expect_ok "weights before any step" "$TRAIN" --model "$M" --iterations 0 --batch 4 \
    --save-weights "$TMP/w0.safetensors"
$PY - "$M" "$TMP/w0.safetensors" <<'PYEOF' >"$TMP/cmp" 2>&1 && ok "safetensors = the initializers, PyTorch's names" || fail "weights differ" "$(tail -3 "$TMP/cmp")"
import json, struct, sys, numpy as np, onnx
from onnx import numpy_helper
W = {i.name: numpy_helper.to_array(i) for i in onnx.load(sys.argv[1]).graph.initializer}
blob = open(sys.argv[2], "rb").read()
(n,) = struct.unpack("<Q", blob[:8]); hdr = json.loads(blob[8:8 + n]); data = blob[8 + n:]
hdr.pop("__metadata__")
got = {k: np.frombuffer(data[v["data_offsets"][0]:v["data_offsets"][1]], "<f4").reshape(v["shape"])
       for k, v in hdr.items()}
want = {"fa.weight": W["fa.weight"], "fa.bias": W["fa.bias"], "fb.weight": W["onnx::MatMul_9"].T,
        "fb.bias": W["fb.bias"], "emb.weight": W["emb.weight"], "ln.weight": W["ln.weight"],
        "ln.bias": W["ln.bias"], "head.weight": W["onnx::Gemm_20"].T, "head.bias": W["head.bias"]}
assert sorted(got) == sorted(want), (sorted(got), sorted(want))
for k in want:
    assert np.array_equal(got[k], want[k]), k
PYEOF

expect_ok "gpp-plan plans it on 4 devices" "$PLAN" --model "$M" --loss mse --devices 4 \
    --device a100-80g --batch 64
grep -qi "stage" "$TMP/out" && ok "a plan with stages" || fail "no plan" "$(head -5 "$TMP/out")"

# 4 CPU agents through the GPP plan: the same losses as one process
COORD=$BUILD/coordinator/gpp-coordinator
MODEL=$M
cpu_job_conf "$TMP/c.toml" 4 3 "$TMP/ck" "data = \"$TMP/d\"
micro_batch = 4
optimizer = \"sgd\"
lr = 0.05
momentum = 0.9" >/dev/null
timeout 120 "$COORD" --plan gpp "$TMP/c.toml" >"$TMP/c.out" 2>"$TMP/c.err"; rc=$?
grep -q "4 stages, .* 4 of 4 devices" "$TMP/c.out" && [ $rc = 0 ] && ok "a 4-stage job on 4 agents" ||
    fail "cluster job: exit $rc" "$(grep -m3 -i error "$TMP/c.out" "$TMP/c.err")"
"$TRAIN" --model "$M" --data "$TMP/d" --iterations 3 --batch 16 --micro-batch 4 --optimizer sgd \
    --lr 0.05 --momentum 0.9 --threads 1 >"$TMP/one.log" 2>&1
cl=$(grep -o '^iter [0-9]*/3  loss [0-9.]*' "$TMP/c.out" | awk '{print $4}' | tr '\n' ' ')
one=$(grep -o 'iter=[0-9]* loss=[0-9.]*' "$TMP/one.log" | cut -d= -f3 | tr '\n' ' ')
[ -n "$one" ] && [ "$cl" = "$one" ] && ok "its 3 losses are gpp-train's: $cl" ||
    fail "cluster losses '$cl', one process '$one'"

# errors
head -c 1000 "$M" >"$TMP/cut.onnx"
expect_fail "a cut file" "cut.onnx" "$TRAIN" --model "$TMP/cut.onnx" --iterations 1
$PY - "$TMP" <<'PYEOF'
import sys, onnx
from onnx import TensorProto, helper
t = sys.argv[1]
def save(name, node, shape):
    g = helper.make_graph([node], name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), f"{t}/{name}.onnx")
save("softmax", helper.make_node("Softmax", ["x"], ["y"], name="/out/Softmax"), ["N", 4])
save("dynamic", helper.make_node("Relu", ["x"], ["y"], name="/Relu"), ["N", "feat"])
PYEOF
expect_fail "an unsupported op" "node 0 '/out/Softmax' (Softmax): unsupported op Softmax" \
    "$TRAIN" --model "$TMP/softmax.onnx" --iterations 1
expect_fail "the same from gpp-plan" "unsupported op Softmax" "$PLAN" --model "$TMP/softmax.onnx" \
    --devices 2 --device a100-80g --batch 8
expect_fail "a dynamic shape" "dimension 1 is 'feat'" "$TRAIN" --model "$TMP/dynamic.onnx"
expect_fail "--loss on a zoo model" "only an ONNX model" "$TRAIN" --model mmt --loss ce
expect_fail "--loss of another kind" "use mse, ce or bce" "$TRAIN" --model "$M" --loss l1
gpp_test_end
