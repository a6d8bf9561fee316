"""corpus_speed: CPU training speed of corpus models, gpp-train vs PyTorch,
the same model (exported by scripts/gpp-export), batch, data (.npy arrays in
memory for PyTorch, read by gpp), AdamW and thread count.

usage: corpus_speed.py SRC BUILD TMP THREADS MODEL:FACTORY ... (env ROUNDS 3,
ITERS 20, WARMUP 3, BATCH 64)

Per model and side the best of ROUNDS rounds counts (a shared machine
disturbs some); a round times ITERS steps after WARMUP untimed ones:
samples/s = batch x ITERS / their wall time (gpp: from its per-iteration
samples/s lines). Prints Markdown rows."""
import importlib.machinery
import importlib.util
import os
import re
import subprocess
import sys
import time

import numpy as np
import torch

ROUNDS = int(os.environ.get("ROUNDS", 3))
ITERS = int(os.environ.get("ITERS", 20))
WARMUP = int(os.environ.get("WARMUP", 3))
B = int(os.environ.get("BATCH", 64))


def load(path, name):
    loader = importlib.machinery.SourceFileLoader(name, path)
    spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main(argv):
    src, build, tmp, threads = argv[1], argv[2], argv[3], int(argv[4])
    export = load(os.path.join(src, "scripts", "gpp-export"), "gpp_export")
    train = os.path.join(build, "agent", "exec", "gpp-train")
    torch.set_num_threads(threads)
    n = B * (WARMUP + ITERS)
    for spec in argv[5:]:
        fname, factory = spec.split(":")
        mod = load(os.path.join(src, "examples", "corpus", f"{fname}.py"), f"c_{fname}")
        d = os.path.join(tmp, f"speed_{fname}")
        os.makedirs(os.path.join(d, "data"), exist_ok=True)
        gj = os.path.join(d, "m.json")
        torch.manual_seed(1)
        export.main(["gpp-export", "--build", build, "--loss", mod.LOSS,
                     os.path.join(src, "examples", "corpus", f"{fname}.py") + f":{factory}", gj]
                    + mod.INPUTS)
        import json
        ops = [o for o in json.load(open(gj))["ops"] if o["type"] == "input"]
        rng = np.random.default_rng(3)
        ins = []
        for s, op in zip(mod.INPUTS, ops):
            shape = [int(x) for x in s.split("=")[1].split(":")[0].split("x")]
            a = (rng.integers(0, op["table_rows"], size=[n] + shape) if s.endswith(":int")
                 else rng.standard_normal([n] + shape).astype(np.float32))
            np.save(os.path.join(d, "data", f"{op['name']}.npy"),
                    a.reshape(n, shape[0], -1) if a.ndim > 3 else a)
            ins.append(torch.from_numpy(a))
        model = getattr(mod, factory)()
        with torch.no_grad():
            ys = model(*[x[:2] for x in ins]).shape[1:]
        lab = (rng.integers(0, ys[-1], size=n) if mod.LOSS == "ce" else
               (rng.random([n] + list(ys)) < 0.5).astype(np.float32) if mod.LOSS == "bce" else
               rng.standard_normal([n] + list(ys)).astype(np.float32))
        np.save(os.path.join(d, "data", "loss.npy"), lab)
        lab = torch.from_numpy(lab)
        F = torch.nn.functional
        lossf = {"ce": lambda y, t: F.cross_entropy(y, t.long()),
                 "bce": lambda y, t: F.binary_cross_entropy_with_logits(y, t.reshape(y.shape)),
                 "mse": lambda y, t: F.mse_loss(y, t.reshape(y.shape))}[mod.LOSS]
        best_g = best_t = 0.0
        for _ in range(ROUNDS):
            r = subprocess.run([train, "--model", gj, "--data", os.path.join(d, "data"),
                                "--no-shuffle", "--iterations", str(WARMUP + ITERS), "--batch",
                                str(B), "--threads", str(threads)], capture_output=True, text=True)
            sps = [float(x) for x in re.findall(r"iter=\d+ loss=\S+ samples/s=([0-9.]+)", r.stdout)]
            timed = sps[WARMUP:]
            if len(timed) == ITERS:
                best_g = max(best_g, B * ITERS / sum(B / x for x in timed))
            m = getattr(mod, factory)()
            opt = torch.optim.AdamW(m.parameters(), lr=1e-3, weight_decay=0.01)
            for s in range(WARMUP + ITERS):
                if s == WARMUP:
                    t0 = time.perf_counter()
                sl = slice(s * B, (s + 1) * B)
                loss = lossf(m(*[x[sl] for x in ins]), lab[sl])
                opt.zero_grad()
                loss.backward()
                opt.step()
            best_t = max(best_t, B * ITERS / (time.perf_counter() - t0))
        print(f"| {fname} | {B} | {threads} | {best_g:.0f} | {best_t:.0f} | "
              f"{best_g / best_t:.2f}x |", flush=True)


if __name__ == "__main__":
    main(sys.argv)
