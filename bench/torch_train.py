#!/usr/bin/env python3
"""PyTorch baseline for bench/bench_train.sh (never used by the product).

Builds the same zoo model as gpp (model/gpp_zoo.c) from the same spec --
MMT (pre-LN transformer branches, concat, linear head, cross-entropy per
token), DLRM (dense MLP branches + sum embedding bags, concat, top MLP,
output 1, MSE) or CANDLE-Uno (MLP branches + dose inputs, concat, top MLP,
output 1, MSE) -- and trains it on CPU with the same batch, optimizer and
thread count, printing samples/s over the timed iterations.

Optimizer: AdamW (lr 1e-3, betas 0.9/0.999, eps 1e-8, weight decay 0) on
dense parameters; embedding tables use sparse gradients and SparseAdam,
which is what gpp's lazy sparse AdamW computes.

With --device cuda the model, inputs and optimizer state live on the GPU
(inputs are drawn there each iteration), --precision picks fp32, tf32
(TF32 tensor-core matrix products) or bf16 (autocast to bfloat16 with fp32
master weights and optimizer state), and the timer waits for the GPU
(torch.cuda.synchronize) at the end of each iteration.

usage: torch_train.py --model SPEC --batch B --iterations N --warmup W --threads T
                      [--device cpu|cuda] [--precision fp32|tf32|bf16]
"""
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

DEV = "cpu"

DEFAULTS = {
    "mmt": dict(branches=4, layers=8, hidden=1024, heads=16, seq=256, ffn=4096, classes=16),
    "dlrm": dict(dense_branches=7, sparse_branches=7, dense_in=4096, hidden=4096,
                 dense_layers=4, rows=1000000, dim=64, bag=100, top_layers=2),
    "candle_uno": dict(branches=7, layers=4, hidden=4096, **{"in": 4096}, doses=1, top_layers=2),
}


def parse_spec(spec):
    name, _, rest = spec.partition(":")
    p = dict(DEFAULTS[name])
    for kv in filter(None, rest.split(",")):
        k, v = kv.split("=")
        assert k in p, f"unknown key {k}"
        p[k] = int(v)
    return name, p


def mlp(n_in, layers, hidden):
    mods = []
    for _ in range(layers):
        mods += [nn.Linear(n_in, hidden), nn.ReLU()]
        n_in = hidden
    return nn.Sequential(*mods), n_in


class Layer(nn.Module):
    """Pre-LN transformer layer as in gpp: x + attn(ln1 x), then + ffn(ln2 .)."""

    def __init__(self, h, heads, ffn):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(h), nn.LayerNorm(h)
        self.attn = nn.MultiheadAttention(h, heads, batch_first=True)
        self.fc1, self.fc2 = nn.Linear(h, ffn), nn.Linear(ffn, h)

    def forward(self, x):
        y = self.ln1(x)
        x = x + self.attn(y, y, y, need_weights=False)[0]
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))


class MMT(nn.Module):
    def __init__(self, p):
        super().__init__()
        h = p["hidden"]
        self.branches = nn.ModuleList(
            nn.Sequential(*[Layer(h, p["heads"], p["ffn"]) for _ in range(p["layers"])],
                          nn.LayerNorm(h))
            for _ in range(p["branches"]))
        self.head = nn.Linear(p["branches"] * h, p["classes"])
        self.p = p

    def batch(self, b):
        p = self.p
        xs = [torch.randn(b, p["seq"], p["hidden"], device=DEV) for _ in range(p["branches"])]
        y = torch.randint(0, p["classes"], (b * p["seq"],), device=DEV)
        return xs, y

    def loss(self, xs, y):
        z = torch.cat([br(x) for br, x in zip(self.branches, xs)], dim=-1)
        logits = self.head(z)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y)


class DLRM(nn.Module):
    def __init__(self, p):
        super().__init__()
        self.dense = nn.ModuleList(mlp(p["dense_in"], p["dense_layers"], p["hidden"])[0]
                                   for _ in range(p["dense_branches"]))
        self.emb = nn.ModuleList(nn.EmbeddingBag(p["rows"], p["dim"], mode="sum", sparse=True)
                                 for _ in range(p["sparse_branches"]))
        n = p["dense_branches"] * p["hidden"] + p["sparse_branches"] * p["dim"]
        self.top, n = mlp(n, p["top_layers"], p["hidden"])
        self.out = nn.Linear(n, 1)
        self.p = p

    def batch(self, b):
        p = self.p
        xs = [torch.randn(b, p["dense_in"], device=DEV) for _ in range(p["dense_branches"])]
        xs += [torch.randint(0, p["rows"], (b, p["bag"]), device=DEV) for _ in range(p["sparse_branches"])]
        return xs, torch.randn(b, 1, device=DEV)

    def loss(self, xs, y):
        nd = len(self.dense)
        z = [m(x) for m, x in zip(self.dense, xs[:nd])] + [e(x) for e, x in zip(self.emb, xs[nd:])]
        return F.mse_loss(self.out(self.top(torch.cat(z, dim=1))), y)


class Candle(nn.Module):
    def __init__(self, p):
        super().__init__()
        self.feat = nn.ModuleList(mlp(p["in"], p["layers"], p["hidden"])[0]
                                  for _ in range(p["branches"]))
        n = p["branches"] * p["hidden"] + p["doses"]
        self.top, n = mlp(n, p["top_layers"], p["hidden"])
        self.out = nn.Linear(n, 1)
        self.p = p

    def batch(self, b):
        p = self.p
        xs = [torch.randn(b, p["in"], device=DEV) for _ in range(p["branches"])]
        xs += [torch.randn(b, 1, device=DEV) for _ in range(p["doses"])]
        return xs, torch.randn(b, 1, device=DEV)

    def loss(self, xs, y):
        nb = len(self.feat)
        z = [m(x) for m, x in zip(self.feat, xs[:nb])] + list(xs[nb:])
        return F.mse_loss(self.out(self.top(torch.cat(z, dim=1))), y)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--precision", choices=["fp32", "tf32", "bf16"], default="fp32")
    a = ap.parse_args()
    global DEV
    DEV = a.device
    if a.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = a.precision == "tf32"
        torch.backends.cudnn.allow_tf32 = a.precision == "tf32"
    elif a.precision != "fp32":
        ap.error("--precision tf32|bf16 needs --device cuda")
    sync = torch.cuda.synchronize if a.device == "cuda" else (lambda: None)
    autocast = (lambda: torch.autocast("cuda", dtype=torch.bfloat16)) if a.precision == "bf16" \
        else (lambda: torch.autocast(a.device, enabled=False))
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    name, p = parse_spec(a.model)
    model = {"mmt": MMT, "dlrm": DLRM, "candle_uno": Candle}[name](p).to(DEV)
    sparse = [m.weight for m in model.modules() if isinstance(m, nn.EmbeddingBag)]
    dense = [q for q in model.parameters() if all(q is not s for s in sparse)]
    opts = [torch.optim.AdamW(dense, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0)]
    if sparse:
        opts.append(torch.optim.SparseAdam(sparse, lr=1e-3, betas=(0.9, 0.999), eps=1e-8))
    # Model FLOPs of one training iteration (forward + backward, matrix
    # products and attention as PyTorch's flop counter counts them), from
    # one untimed iteration: the numerator of model FLOP utilisation.
    flops = 0
    try:
        from torch.utils.flop_counter import FlopCounterMode
        xs, y = model.batch(a.batch)
        with FlopCounterMode(display=False) as fc:
            with autocast():
                loss = model.loss(xs, y)
            loss.backward()
        flops = fc.get_total_flops()
        for q in model.parameters():
            q.grad = None
    except ImportError:
        pass
    elapsed = cpu = 0.0
    for it in range(a.warmup + a.iterations):
        t0, c0 = time.perf_counter(), time.process_time()
        xs, y = model.batch(a.batch)
        for o in opts:
            o.zero_grad(set_to_none=True)
        with autocast():
            loss = model.loss(xs, y)
        loss.backward()
        for o in opts:
            o.step()
        sync()
        dt, dc = time.perf_counter() - t0, time.process_time() - c0
        if it >= a.warmup:
            elapsed += dt
            cpu += dc
    print(f"torch model={name} batch={a.batch} threads={a.threads} device={a.device} "
          f"precision={a.precision} flops/iter={flops} "
          f"tflop/s={flops * a.iterations / elapsed / 1e12:.2f} "
          f"samples/s={a.batch * a.iterations / elapsed:.1f} "
          f"cpu_samples/s={a.batch * a.iterations / cpu:.1f} loss={loss.item():.4f}")


if __name__ == "__main__":
    main()
