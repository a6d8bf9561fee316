#!/usr/bin/env bash
# onnx_torch: the same model in PyTorch and in gpp. A three-branch
# nn.Module (two Linear+ReLU branches and an Embedding summed over its bag,
# joined by a concat, LayerNorm, a Linear head) is exported by
# torch.onnx.export (opset 17) and imported by gpp-train; both train 20
# SGD steps (lr 0.05, momentum 0.9) from the same initial weights (the
# file's initializers) on the same .npy data in file order. The 20 losses
# must agree within 1e-4 relative (fp32 sums in another order; measured
# differences: 4.3e-7 relative), and gpp's trained weights, loaded back under
# PyTorch's names, match PyTorch's within 1e-4 (measured 1.2e-7).
# Two more models, written by scripts/gpp-export, exercise torch's shape
# plumbing: one splits a feature vector into branches (torch.split and
# x[:, 2:], imported as gpp slice ops), one reshapes (unsqueeze, view(size(0),
# -1), squeeze, flatten), one changes the sample's shape ([N, 4, 5] <->
# [N, 20] <-> [N, 3, 4]: gpp reshape ops), and a third is scaled dot-product self-attention
# written out (Q, K, V projections, heads by view/transpose, softmax, output
# projection: one gpp attention op), and a fourth has two branches, an
# nn.MultiheadAttention (torch's own packed export; biases off zero) with a
# residual beside a Linear + ReLU, and nn.TransformerEncoderLayer post- and
# pre-norm (dropout 0: gpp has none) and post-norm with activation="gelu",
# an MLP with nn.GELU() (both torch's exact erf GELU, exported as
# Div/Erf/Add/Mul/Mul: gpp's erf form) and the same MLP with
# nn.GELU(approximate="tanh") (Mul/Add/Tanh arithmetic: gpp's tanh form;
# the three held to 2e-6, see the loop), and causal variants of the written-out
# attention (an additive mask, -inf above the diagonal) and of the
# nn.MultiheadAttention model (attn_mask = triu(-inf, 1)), imported as
# attention ops with causal 1; their 20 losses must agree within the
# same 1e-4 (the GELU models' within 2e-6). The nn.MultiheadAttention model then runs 5 steps on 4 CPU
# agents through the GPP plan, with the losses of one gpp-train process.
# Needs Debian's python3-torch (1.13), which scripts/install-deps.sh installs.
# Usage: onnx_torch.sh BUILD_DIR
set -u
. "$(dirname "$0")/lib/gpp_test.sh"
gpp_test_begin onnx_torch "${1:-}"
TRAIN=$BUILD/agent/exec/gpp-train
export GPP_BUILD=$BUILD # scripts/gpp-export runs gpp's importer from the build under test
. "$SRC/scripts/blas-env.sh"
PY=/usr/bin/python3
if ! $PY -c 'import torch, numpy' 2>/dev/null; then
    fail "python3-torch missing for /usr/bin/python3: run scripts/install-deps.sh"
    gpp_test_end
fi
cat >"$TMP/model.py" <<'PYEOF'
import sys, json, struct, numpy as np, torch
from torch import nn
torch.manual_seed(7)
class Net(nn.Module):
    def __init__(s):
        super().__init__()
        s.fa, s.fb = nn.Linear(8, 16), nn.Linear(6, 12)
        s.emb, s.ln, s.head = nn.Embedding(20, 5), nn.LayerNorm(33), nn.Linear(33, 4)
    def forward(s, a, b, idx):
        h = torch.cat([torch.relu(s.fa(a)), torch.relu(s.fb(b)), s.emb(idx).sum(1)], 1)
        return s.head(s.ln(h))
t, mode = sys.argv[1], sys.argv[2]
net = Net()
with torch.no_grad():  # LayerNorm's affine parameters off their 1 / 0 start
    net.ln.weight.uniform_(0.5, 1.5); net.ln.bias.uniform_(-0.5, 0.5)
r = np.random.default_rng(11)
B, T = 16, 20
a = r.standard_normal((B * T, 8)).astype(np.float32)
b = r.standard_normal((B * T, 6)).astype(np.float32)
idx = r.integers(0, 20, size=(B * T, 3))
y = r.standard_normal((B * T, 4)).astype(np.float32)
if mode == "export":
    for k, v in (("a", a), ("b", b), ("idx", idx), ("loss", y)):
        np.save(f"{t}/d/{k}.npy", v)
    ex = (torch.from_numpy(a[:2]), torch.from_numpy(b[:2]), torch.from_numpy(idx[:2]))
    torch.onnx.export(net, ex, f"{t}/m.onnx", input_names=["a", "b", "idx"], output_names=["y"],
                      opset_version=17, dynamic_axes={k: {0: "batch"} for k in ("a", "b", "idx", "y")})
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    for s in range(T):
        sl = slice(s * B, (s + 1) * B)
        loss = nn.functional.mse_loss(net(torch.from_numpy(a[sl]), torch.from_numpy(b[sl]),
                                          torch.from_numpy(idx[sl])), torch.from_numpy(y[sl]))
        opt.zero_grad(); loss.backward(); opt.step()
        print(f"{loss.item():.9g}")
    torch.save(net.state_dict(), f"{t}/torch.pt")
else:  # compare gpp's trained weights with PyTorch's
    sd = torch.load(f"{t}/torch.pt")
    blob = open(f"{t}/w.safetensors", "rb").read()
    (n,) = struct.unpack("<Q", blob[:8]); hdr = json.loads(blob[8:8 + n]); data = blob[8 + n:]
    hdr.pop("__metadata__")
    worst = 0.0
    for k, v in hdr.items():
        g = np.frombuffer(data[v["data_offsets"][0]:v["data_offsets"][1]], "<f4").reshape(v["shape"])
        p = sd[k].numpy()
        assert g.shape == p.shape, (k, g.shape, p.shape)
        worst = max(worst, float(np.abs(g - p).max()))
    assert len(hdr) == len(sd), (sorted(hdr), sorted(sd))
    print(worst)
    assert worst < 1e-4, worst
PYEOF
mkdir -p "$TMP/d"
if $PY "$TMP/model.py" "$TMP" export >"$TMP/torch.losses" 2>"$TMP/torch.err"; then
    ok "PyTorch trains and exports the model"
else
    fail "PyTorch side" "$(tail -3 "$TMP/torch.err")"
    gpp_test_end
fi
expect_ok "gpp-train on the exported model" "$TRAIN" --model "$TMP/m.onnx" --loss mse \
    --data "$TMP/d" --no-shuffle --iterations 20 --batch 16 --optimizer sgd --lr 0.05 \
    --momentum 0.9 --threads 1 --save-weights "$TMP/w.safetensors"
# gpp-train's 20 losses (in $TMP/out) against those in file $1, within
# relative tolerance $2 (default 1e-4)
s_same_losses() {
    grep -o 'iter=[0-9]* loss=[0-9.eE+-]*' "$TMP/out" | cut -d= -f3 >"$TMP/gpp.losses"
    local worst tol=${2:-1e-4}
    worst=$(paste "$TMP/gpp.losses" "$1" | awk '{ d = ($1 - $2) / $2; if (d < 0) d = -d;
        if (d > w) w = d; n++ } END { if (n != 20) print "count " n; else printf "%.3g\n", w }')
    awk -v w="$worst" -v t="$tol" 'BEGIN { exit !(w + 0 == w && w <= t + 0) }' &&
        ok "20 losses match PyTorch's (worst relative difference $worst, tolerance $tol)" ||
        fail "losses differ from PyTorch's: $worst" "$(paste "$TMP/gpp.losses" "$1" | head -5)"
}
s_same_losses "$TMP/torch.losses"
if $PY "$TMP/model.py" "$TMP" compare >"$TMP/cmp" 2>&1; then
    ok "trained weights match PyTorch's (worst $(tail -1 "$TMP/cmp"))"
else
    fail "trained weights differ" "$(tail -3 "$TMP/cmp")"
fi
# scripts/gpp-export: a module file and its factory to a file gpp trains
cat >"$TMP/net.py" <<'PYEOF'
import torch
from torch import nn
class Net(nn.Module):
    def __init__(s):
        super().__init__(); s.a, s.b, s.h = nn.Linear(8, 4), nn.Linear(6, 4), nn.Linear(8, 3)
    def forward(s, x, z):
        return s.h(torch.cat([torch.relu(s.a(x)), torch.relu(s.b(z))], 1))
PYEOF
expect_ok "gpp-export writes a module's ONNX file" $PY "$SRC/scripts/gpp-export" \
    "$TMP/net.py:Net" "$TMP/net.onnx" x=8 z=6
expect_ok "gpp-train trains it with cross-entropy" "$TRAIN" --model "$TMP/net.onnx" --loss ce \
    --iterations 2 --batch 8 --threads 1
grep -q "model $TMP/net.onnx:loss=ce: 9 ops, 91 parameters" "$TMP/out" &&
    ok "two branches, 91 parameters, loss ce" || fail "unexpected model" "$(head -1 "$TMP/out")"
# shape handling from torch's exporter: a feature vector split into branches
# (Split [4, 6] and Slice [2, 10): three gpp slices), and x.unsqueeze(1),
# r.view(r.size(0), -1), squeeze, flatten (Shape -> Gather -> Unsqueeze ->
# Concat -> Reshape, folded at import: no ops), reshapes that change the
# sample ([N, 4, 5] -> [N, 20] by flatten(1) and view(size(0), -1), [N, 12]
# -> [N, 3, 4] by view(-1, 3, 4): gpp reshape ops), and self-attention written
# out (one gpp attention op, its weights the four projections')
cat >"$TMP/shapes.py" <<'PYEOF'
import math, sys, numpy as np, torch
from torch import nn
class Split(nn.Module):
    IN, OUT = (10,), (3,)
    def __init__(s):
        super().__init__()
        torch.manual_seed(5)
        s.a, s.b, s.c, s.h = nn.Linear(4, 8), nn.Linear(6, 8), nn.Linear(8, 5), nn.Linear(21, 3)
    def forward(s, x):
        xa, xb = torch.split(x, [4, 6], dim=1)
        return s.h(torch.cat([torch.relu(s.a(xa)), torch.relu(s.b(xb)), s.c(x[:, 2:])], 1))
class Views(nn.Module):
    IN, OUT = (10,), (3,)
    def __init__(s):
        super().__init__()
        torch.manual_seed(6)
        s.a, s.h = nn.Linear(10, 8), nn.Linear(8, 3)
    def forward(s, x):
        r = torch.relu(s.a(x.unsqueeze(1)))
        return s.h(r.view(r.size(0), -1) + r.squeeze(1).flatten(1))
class Flat(nn.Module):  # reshapes that change the sample: [N, S, C] <-> [N, S*C]
    IN, OUT = (4, 6), (3, 2)
    def __init__(s):
        super().__init__()
        torch.manual_seed(12)
        s.a, s.m, s.o = nn.Linear(6, 5), nn.Linear(20, 12), nn.Linear(4, 2)
    def forward(s, x):
        r = torch.relu(s.a(x))                                      # [N, 4, 5]
        g = torch.relu(s.m(r.flatten(1) + r.view(r.size(0), -1)))  # [N, 20] -> [N, 12]
        return s.o(g.view(-1, 3, 4))                                # [N, 3, 4] -> [N, 3, 2]
class Attn(nn.Module):  # scaled dot-product self-attention written out, 2 heads
    IN, OUT = (4, 8), (4, 3)
    def __init__(s, E=8, H=2):
        super().__init__()
        torch.manual_seed(8)
        s.H, s.D = H, E // H
        s.q, s.k, s.v, s.o = nn.Linear(E, E), nn.Linear(E, E), nn.Linear(E, E), nn.Linear(E, E)
        s.h = nn.Linear(E, 3)
        s.register_buffer("mask", None)
    def forward(s, x):
        B, S, E = x.shape
        q = s.q(x).view(B, S, s.H, s.D).transpose(1, 2)
        k = s.k(x).view(B, S, s.H, s.D).transpose(1, 2)
        v = s.v(x).view(B, S, s.H, s.D).transpose(1, 2)
        sc = q @ k.transpose(-2, -1) / math.sqrt(s.D)
        a = torch.softmax(sc if s.mask is None else sc + s.mask, dim=-1)
        return s.h(s.o((a @ v).transpose(1, 2).reshape(B, S, E)) + x)
class AttnC(Attn):  # the same, causal: an additive mask, -inf above the diagonal
    def __init__(s):
        super().__init__()
        s.mask = torch.triu(torch.full((4, 4), float("-inf")), 1)
class MHA(nn.Module):  # two branches: nn.MultiheadAttention's own export, and a Linear
    IN, OUT = (4, 8), (4, 3)
    def __init__(s, E=8, H=2):
        super().__init__()
        torch.manual_seed(9)
        s.mha = nn.MultiheadAttention(E, H, batch_first=True)
        s.a, s.h = nn.Linear(E, 6), nn.Linear(E + 6, 3)
        with torch.no_grad():  # biases off their zero start, so that their mapping counts
            s.mha.in_proj_bias.uniform_(-0.5, 0.5); s.mha.out_proj.bias.uniform_(-0.5, 0.5)
        s.register_buffer("mask", None)
    def forward(s, x):
        att = s.mha(x, x, x, attn_mask=s.mask, need_weights=False)[0]
        return s.h(torch.cat([att + x, torch.relu(s.a(x))], -1))
class MHAC(MHA):  # the same, causal: attn_mask = triu(-inf, 1)
    def __init__(s):
        super().__init__()
        s.mask = torch.triu(torch.full((4, 4), float("-inf")), 1)
class TEL(nn.Module):  # nn.TransformerEncoderLayer, post-norm (attention, LayerNorm, FFN)
    IN, OUT, PRE = (4, 8), (4, 8), False
    def __init__(s):
        super().__init__()
        torch.manual_seed(10)
        s.l = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0,
                                         batch_first=True, norm_first=s.PRE)
    def forward(s, x):
        return s.l(x)
class TELpre(TEL):  # the same, pre-norm
    PRE = True
class TELgelu(TEL):  # the same, post-norm, activation="gelu" (F.gelu: the exact erf form)
    def __init__(s):
        super().__init__()
        torch.manual_seed(14)
        s.l = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0,
                                         activation="gelu", batch_first=True)
class Gelu(nn.Module):  # an MLP with nn.GELU() (erf; exported as Div, Erf, Add, Mul, Mul)
    IN, OUT = (10,), (3,)
    def __init__(s):
        super().__init__()
        torch.manual_seed(13)
        s.a, s.b, s.h, s.g = nn.Linear(10, 16), nn.Linear(16, 16), nn.Linear(16, 3), nn.GELU()
        with torch.no_grad():  # pre-activations of sd ~1.8: over [-4, 4], where the forms differ
            s.a.weight.uniform_(-1, 1); s.b.weight.uniform_(-0.5, 0.5)
    def forward(s, x):
        return s.h(s.g(s.b(s.g(s.a(x)))))
class GeluT(Gelu):  # the same with nn.GELU(approximate="tanh"): Mul/Add/Tanh arithmetic
    def __init__(s):
        super().__init__()
        s.g = nn.GELU(approximate="tanh")
class NewGELU(nn.Module):  # Hugging Face's NewGELUActivation: Mul(x, 0.5) first, Pow(x, 3)
    def forward(s, x):
        return 0.5 * x * (1.0 + torch.tanh(0.7978845608028654 *
                                           (x + 0.044715 * torch.pow(x, 3.0))))
class GeluHF(Gelu):  # the MLP with that tanh form
    def __init__(s):
        super().__init__()
        s.g = NewGELU()
class LN(nn.Module):  # two nn.LayerNorm (weights not 1/0); at opset 13 torch writes them
    IN, OUT = (10,), (3,)  # out: ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add
    def __init__(s):
        super().__init__()
        torch.manual_seed(15)
        s.a, s.b, s.h = nn.Linear(10, 16), nn.Linear(16, 16), nn.Linear(16, 3)
        s.n1, s.n2 = nn.LayerNorm(16), nn.LayerNorm(16)
        with torch.no_grad():
            for n in (s.n1, s.n2):
                n.weight.uniform_(0.5, 1.5); n.bias.uniform_(-0.5, 0.5)
    def forward(s, x):
        return s.h(s.n2(torch.relu(s.b(s.n1(torch.relu(s.a(x)))))))
class LN13(LN):  # the same model; the loop exports it at opset 13 (the written-out form)
    pass
def train(name, d):  # the data in d, 20 SGD steps of PyTorch, a loss a line
    r, B, T, M = np.random.default_rng(3), 16, 20, globals()[name]
    x = r.standard_normal((B * T,) + M.IN).astype(np.float32)
    y = r.standard_normal((B * T,) + M.OUT).astype(np.float32)
    np.save(f"{d}/x.npy", x); np.save(f"{d}/loss.npy", y)
    net = M()
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    for s in range(T):
        loss = nn.functional.mse_loss(net(torch.from_numpy(x[s * B:(s + 1) * B])),
                                      torch.from_numpy(y[s * B:(s + 1) * B]))
        opt.zero_grad(); loss.backward(); opt.step()
        print(f"{loss.item():.9g}")
# LayerNorms written out (opset 13) that gpp's layernorm cannot be: another
# epsilon, no weight (refused by gpp-export below)
class LNeps(LN):
    def __init__(s):
        super().__init__()
        s.n1 = nn.LayerNorm(16, eps=1e-6)
class LNnoaff(LN):
    def __init__(s):
        super().__init__()
        s.n2 = nn.LayerNorm(16, elementwise_affine=False)
PYEOF
# One Python process runs every gpp-export call and every PyTorch side below
# (torch takes seconds to import): batch.py runs the jobs of a file, one a
# line, "K export ARGS..." (scripts/gpp-export's main in this process) or
# "K torch MODEL DIR" (shapes.py's train), and keeps each one's stdout,
# stderr and exit status in $TMP/job.K.{out,err,rc}; `recorded K` gives
# them back as if the job ran now, so expect_ok / expect_fail read them.
cat >"$TMP/batch.py" <<'PYEOF'
import contextlib, importlib.machinery, importlib.util, shlex, sys
def load(name, path):
    spec = importlib.util.spec_from_loader(name, importlib.machinery.SourceFileLoader(name, path))
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m
export, shapes = load("gpp_export", sys.argv[2]), load("shapes", sys.argv[3])
for line in open(sys.argv[1]):
    k, what, *args = shlex.split(line)
    base = f"{sys.argv[4]}/job.{k}"
    rc = 0
    with open(base + ".out", "w") as o, open(base + ".err", "w") as e, \
            contextlib.redirect_stdout(o), contextlib.redirect_stderr(e):
        try:
            if what == "export":
                export.main(["gpp-export"] + args)
            else:
                shapes.train(*args)
        except SystemExit as x:
            rc = x.code if isinstance(x.code, int) else 1
        except Exception as x:
            print(f"{type(x).__name__}: {x}", file=sys.stderr)
            rc = 1
    open(base + ".rc", "w").write(f"{rc}\n")
PYEOF
recorded() {
    cat "$TMP/job.$1.out"
    cat "$TMP/job.$1.err" >&2
    return "$(cat "$TMP/job.$1.rc")"
}
# model, ops, parameters, input shape[, loss tolerance]. The GELU models
# are held to 2e-6: gpp computes the form the file has, and their worst
# relative differences measured 4.1e-7 (Gelu: nn.GELU(), erf), 3.1e-7
# (TELgelu: activation="gelu", erf) and 7.3e-7 (GeluT: approximate="tanh"),
# as the other models' (up to 6.7e-7); gpp's tanh form in place of erf, as
# before the erf form existed, measured 1.35e-4 (Gelu) and 5.4e-6 (TELgelu),
# and GeluT's tanh arithmetic was not imported at all.
SPECS=("Split 12 207 10" "Views 6 115 10" "Flat 11 297 4x6" "Attn 5 315 4x8"
    "TEL 10 600 4x8" "TELpre 10 600 4x8" "TELgelu 10 600 4x8 2e-6" "Gelu 7 499 10 2e-6"
    "GeluT 7 499 10 2e-6" "AttnC 5 315 4x8" "MHAC 8 387 4x8" "LN 9 563 10" "LN13 9 563 10 - 13"
    "GeluHF 7 499 10 2e-6" "MHA 8 387 4x8")
REFUSED=("LNeps:node .* '/n1/Add' (Add): epsilon 1e-06: gpp's layernorm uses 1e-5"
    "LNnoaff:'/n2/ReduceMean' (ReduceMean): a LayerNorm written out without a weight")
: >"$TMP/jobs"
for spec in "${SPECS[@]}"; do
    set -- $spec
    mkdir -p "$TMP/ds-$1"
    echo "$1.x export --opset ${6:-17} $TMP/shapes.py:$1 $TMP/$1.onnx x=$4" >>"$TMP/jobs"
    echo "$1.t torch $1 $TMP/ds-$1" >>"$TMP/jobs"
done
for m in "${REFUSED[@]}"; do
    echo "${m%%:*}.x export --opset 13 $TMP/shapes.py:${m%%:*} $TMP/${m%%:*}.onnx x=10" >>"$TMP/jobs"
done
echo "nope.x export $TMP/net.py:Nope $TMP/n.onnx x=8" >>"$TMP/jobs"
echo "opset9.x export --opset 9 $TMP/net.py:Net $TMP/n.onnx x=8" >>"$TMP/jobs"
$PY "$TMP/batch.py" "$TMP/jobs" "$SRC/scripts/gpp-export" "$TMP/shapes.py" "$TMP" 2>"$TMP/batch.err" ||
    fail "the Python jobs did not run" "$(tail -5 "$TMP/batch.err")"
for spec in "${SPECS[@]}"; do
    set -- $spec
    tol=${5:-}
    [ "$tol" = - ] && tol=
    expect_ok "gpp-export writes the $1 model (opset ${6:-17})" recorded "$1.x"
    if recorded "$1.t" >"$TMP/$1.losses" 2>"$TMP/torch.err"; then
        ok "PyTorch trains the $1 model"
    else
        fail "PyTorch side of the $1 model" "$(tail -3 "$TMP/torch.err")"
    fi
    expect_ok "gpp-train on the $1 model" "$TRAIN" --model "$TMP/$1.onnx" --loss mse \
        --data "$TMP/ds-$1" --no-shuffle --iterations 20 --batch 16 --optimizer sgd --lr 0.05 \
        --momentum 0.9 --threads 1
    grep -q "model $TMP/$1.onnx:loss=mse: $2 ops, $3 parameters" "$TMP/out" &&
        ok "$1: $2 ops, $3 parameters" || fail "unexpected $1 model" "$(grep -m1 'ops,' "$TMP/out")"
    s_same_losses "$TMP/$1.losses" "$tol"
done
# the nn.MultiheadAttention model (its data in $TMP/ds-MHA) on 4 CPU agents
# through the GPP plan: the losses of one gpp-train process (which shuffles
# the same way; the cluster has no --no-shuffle) within 1e-4
COORD=$BUILD/coordinator/gpp-coordinator
MODEL=$TMP/MHA.onnx
# not a fault test: a 20 s heartbeat timeout instead of the fault tests' 3 s,
# so that a loaded machine (this test beside others under ctest -j) cannot
# end the job (the suite failed in this test once on 2026-11-25, not
# reproduced in 8 runs under load; the output was lost with the test's
# temporary folder)
HEALTH_TIMEOUT_MS=20000 cpu_job_conf "$TMP/c.toml" 4 5 "$TMP/ck" "data = \"$TMP/ds-MHA\"
micro_batch = 4
optimizer = \"sgd\"
lr = 0.05
momentum = 0.9" >/dev/null
timeout 120 "$COORD" --plan gpp "$TMP/c.toml" >"$TMP/c.out" 2>"$TMP/c.err"; rc=$?
# the planner's choice (3 or 4 stages) follows the cost model: any pipeline
# of at least two stages is the case under test
nst=$(sed -n 's/^plan gpp for .*: \([0-9]*\) stages, .* of 4 devices.*/\1/p' "$TMP/c.out" | head -1)
[ -n "$nst" ] && [ "$nst" -ge 2 ] && [ $rc = 0 ] &&
    ok "the MHA model: a $nst-stage GPP job on 4 agents" ||
    fail "cluster job: exit $rc" "$(grep -m3 -i error "$TMP/c.out" "$TMP/c.err")"
"$TRAIN" --model "$MODEL" --data "$TMP/ds-MHA" --iterations 5 --batch 16 --micro-batch 4 \
    --optimizer sgd --lr 0.05 --momentum 0.9 --threads 1 >"$TMP/one.log" 2>&1
grep -o '^iter [0-9]*/5  loss [0-9.]*' "$TMP/c.out" | awk '{print $4}' >"$TMP/cl.losses"
grep -o 'iter=[0-9]* loss=[0-9.]*' "$TMP/one.log" | cut -d= -f3 >"$TMP/one.losses"
worst=$(paste "$TMP/cl.losses" "$TMP/one.losses" | awk '{ d = ($1 - $2) / $2; if (d < 0) d = -d;
    if (d > w) w = d; n++ } END { if (n != 5) print "count " n; else printf "%.3g\n", w }')
awk -v w="$worst" 'BEGIN { exit !(w + 0 == w && w <= 1e-4) }' &&
    ok "its 5 losses are gpp-train's (worst relative difference $worst)" ||
    fail "cluster losses differ: $worst" "$(paste "$TMP/cl.losses" "$TMP/one.losses")"
expect_fail "gpp-export: a missing factory" "has no 'Nope'" recorded nope.x
expect_fail "gpp-export: an opset torch cannot write" "give 13 to 17" recorded opset9.x
# the written-out LayerNorms gpp's layernorm cannot be: each refused by
# gpp-export (exit 2) naming the node and the fix, nothing left behind
for m in "${REFUSED[@]}"; do
    expect_fail "gpp-export refuses the ${m%%:*} model (opset 13) with gpp's reason" "${m#*:}" \
        recorded "${m%%:*}.x"
    [ ! -e "$TMP/${m%%:*}.onnx" ] && ok "no ${m%%:*}.onnx left behind" ||
        fail "gpp-export left ${m%%:*}.onnx"
done
gpp_test_end
