"""torch_corpus: the models of examples/corpus/, written as PyTorch users
write them, through gpp and through PyTorch (Debian's python3-torch 1.13).

usage: torch_corpus.py SRC BUILD TMP [--models a,b] [--no-cluster] [--table FILE]

Per model: scripts/gpp-export writes the graph and the module's initial
weights (the import time is measured); PyTorch, starting from those weights
(loaded with load_state_dict(strict=True) through scripts/gpp_safetensors.py),
and gpp-train train 20 AdamW steps (weight decay 0.01, torch's defaults
otherwise) of 8 samples in file order on the same .npy data: the 20 losses
must agree within 1e-5 relative, gpp's saved weights must load strictly into
the module and match PyTorch's trained ones; then a 4-agent cluster job
trains it through the GPP plan and its stage files, merged by
scripts/gpp-weights-merge, load strictly too. Prints one "ok"/"not ok" line
per check; exit 1 when any failed. --table writes the corpus table (model,
ops, parameters, stages and depth planned at 8 devices, parity, import time)
as Markdown rows."""
import importlib.machinery
import importlib.util
import json
import os
import re
import socket
import subprocess
import sys
import time

import numpy as np
import torch

B, T = 8, 20
SEED = int(os.environ.get("GPP_CORPUS_SEED", "11"))
TOL = 1e-5
# file, factory, learning rate
CORPUS = [("clip", "Clip", 3e-3), ("dlrm", "Dlrm", 1e-2), ("resmlp", "ResMlp", 3e-3),
          ("vit", "Vit", 3e-3), ("xattn", "CrossAttn", 3e-3), ("twomha", "TwoMha", 3e-3),
          ("seqflat", "SeqFlat", 1e-2), ("bilinear", "Bilinear", 3e-3)]

failed = 0


def ok(cond, what, detail=""):
    global failed
    print(f"{'ok' if cond else 'not ok'} - {what}{'' if cond else ': ' + str(detail)}", flush=True)
    failed += not cond
    return cond


def load(path, name):
    loader = importlib.machinery.SourceFileLoader(name, path)  # also a file without .py
    spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def s_keyless(name, d):
    """d without the key projection's bias of an attention's in_proj_bias:
    softmax is invariant to it, so its gradient is rounding noise of either
    side, which AdamW scales to full steps (it never changes a loss)."""
    if name.endswith("in_proj_bias"):
        e = d.shape[0] // 3
        return torch.cat([d[:e], d[2 * e:]])
    return d


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def torch_loss(kind, y, t):
    F = torch.nn.functional
    if kind == "ce":
        return F.cross_entropy(y, t.long())
    if kind == "bce":
        return F.binary_cross_entropy_with_logits(y, t.reshape(y.shape))
    return F.mse_loss(y, t.reshape(y.shape))


def main(argv):
    src, build, tmp = argv[1:4]
    only, cluster, table = None, True, None
    i = 4
    while i < len(argv):
        if argv[i] == "--models":
            only, i = set(argv[i + 1].split(",")), i + 1
        elif argv[i] == "--no-cluster":
            cluster = False
        elif argv[i] == "--table":
            table, i = argv[i + 1], i + 1
        i += 1
    sys.path.insert(0, os.path.join(src, "scripts"))
    import gpp_safetensors
    export = load(os.path.join(src, "scripts", "gpp-export"), "gpp_export")
    train = os.path.join(build, "agent", "exec", "gpp-train")
    rows = []
    torch.set_num_threads(1)
    for fname, factory, lr in CORPUS:
        if only and fname not in only:
            continue
        path = os.path.join(src, "examples", "corpus", f"{fname}.py")
        mod = load(path, f"corpus_{fname}")
        d = os.path.join(tmp, fname)
        os.makedirs(os.path.join(d, "data"), exist_ok=True)
        gj = os.path.join(d, "m.json")
        torch.manual_seed(SEED)  # the module's initial weights
        t0 = time.monotonic()
        try:
            export.main(["gpp-export", "--build", build, "--loss", mod.LOSS, f"{path}:{factory}",
                         gj] + mod.INPUTS)
        except SystemExit as e:
            ok(False, f"{fname}: gpp-export", f"exit {e.code}")
            continue
        t_import = time.monotonic() - t0
        graph = json.load(open(gj))
        ok(True, f"{fname}: gpp-export writes {len(graph['ops'])} ops in {t_import:.2f} s")
        # the same data for both: inputs in range, labels of the loss's kind
        rng = np.random.default_rng(SEED)
        n = B * T
        ins = []
        for spec, op in zip(mod.INPUTS, [o for o in graph["ops"] if o["type"] == "input"]):
            shape = [int(x) for x in spec.split("=")[1].split(":")[0].split("x")]
            if spec.endswith(":int"):
                a = rng.integers(0, op["table_rows"], size=[n] + shape)
            else:
                a = rng.standard_normal([n] + shape).astype(np.float32)
            np.save(os.path.join(d, "data", f"{op['name']}.npy"),  # an image: (N, C, H W)
                    a.reshape(n, shape[0], -1) if a.ndim > 3 else a)
            ins.append(a)
        model = getattr(mod, factory)()
        w0 = gpp_safetensors.load_file(os.path.join(d, "m.safetensors"))
        model.load_state_dict(w0, strict=True)
        with torch.no_grad():
            yshape = model(*[torch.from_numpy(a[:2]) for a in ins]).shape[1:]
        if mod.LOSS == "ce":
            lab = rng.integers(0, yshape[-1], size=n)
        elif mod.LOSS == "bce":
            lab = (rng.random([n] + list(yshape)) < 0.5).astype(np.float32)
        else:
            lab = rng.standard_normal([n] + list(yshape)).astype(np.float32)
        np.save(os.path.join(d, "data", "loss.npy"), lab)
        # PyTorch: 20 AdamW steps from the exported weights
        opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
        model.train()
        tl = []
        for s in range(T):
            sl = slice(s * B, (s + 1) * B)
            loss = torch_loss(mod.LOSS, model(*[torch.from_numpy(a[sl]) for a in ins]),
                              torch.from_numpy(lab[sl]))
            opt.zero_grad()
            loss.backward()
            opt.step()
            tl.append(loss.item())
        # gpp-train: the same
        ws = os.path.join(d, "w.safetensors")
        r = subprocess.run([train, "--model", gj, "--data", os.path.join(d, "data"),
                            "--no-shuffle", "--iterations", str(T), "--batch", str(B),
                            "--optimizer", "adamw", "--lr", str(lr), "--weight-decay", "0.01",
                            "--threads", "1", "--save-weights", ws],
                           capture_output=True, text=True)
        if not ok(r.returncode == 0, f"{fname}: gpp-train trains it", r.stderr[-500:]):
            continue
        gl = [float(x) for x in re.findall(r"iter=\d+ loss=([0-9.eE+-]+)", r.stdout)]
        worst = max(abs(a - b) / abs(b) for a, b in zip(gl, tl)) if len(gl) == T else float("inf")
        ok(worst <= TOL, f"{fname}: 20 losses match PyTorch's (worst relative difference "
           f"{worst:.2g}, tolerance {TOL:g}; {tl[0]:.4f} -> {tl[-1]:.4f})",
           list(zip(gl[:4], tl[:4])))
        fresh = getattr(mod, factory)()
        try:
            fresh.load_state_dict(gpp_safetensors.load_file(ws), strict=True)
            dws = {k: float(s_keyless(k, fresh.state_dict()[k] - v).abs().max())
                   for k, v in model.state_dict().items()}
            dw = max(dws.values())
            ok(dw < 1e-4, f"{fname}: gpp's weights load strictly and match PyTorch's "
               f"(worst {dw:.2g})", dw)
        except RuntimeError as e:
            ok(False, f"{fname}: gpp's weights load strictly", str(e)[:300])
        st = plan8(build, gj) if table else ""
        rows.append((fname, len(graph["ops"]), sum(p.numel() for p in model.parameters()),
                     st, worst, t_import))
        if cluster:
            run_cluster(src, build, d, gj, fname, getattr(mod, factory), gpp_safetensors)
        if hasattr(mod, "DROPOUT"):
            dropout_eval(export, train, build, path, mod, d, ins, lab, gpp_safetensors)
    if table:
        with open(table, "w") as f:
            for name, nops, npar, st, worst, ti in rows:
                f.write(f"| {name} | {nops} | {npar} | {st} | {worst:.2g} | {ti:.2f} |\n")
    return 1 if failed else 0


def dropout_eval(export, train, build, path, mod, d, ins, lab, gpp_safetensors):
    """The model's Dropout variant (mod.DROPOUT names its factory): gpp's
    evaluation mode (gpp-train --eval-batches) gives torch's model.eval()
    loss; a training step's loss (a mask drawn) differs from it."""
    gj = os.path.join(d, "drop.json")
    torch.manual_seed(SEED)
    try:
        export.main(["gpp-export", "--build", build, "--loss", mod.LOSS,
                     f"{path}:{mod.DROPOUT}", gj] + mod.INPUTS)
    except SystemExit as e:
        ok(False, f"{mod.DROPOUT}: gpp-export", f"exit {e.code}")
        return
    model = getattr(mod, mod.DROPOUT)()
    model.load_state_dict(gpp_safetensors.load_file(os.path.join(d, "drop.safetensors")),
                          strict=True)
    model.eval()
    with torch.no_grad():
        te = torch_loss(mod.LOSS, model(*[torch.from_numpy(a[:B]) for a in ins]),
                        torch.from_numpy(lab[:B])).item()
    common = [train, "--model", gj, "--data", os.path.join(d, "data"), "--no-shuffle",
              "--batch", str(B), "--threads", "1"]
    r = subprocess.run(common + ["--iterations", "0", "--eval-batches", "1"],
                       capture_output=True, text=True)
    m = re.search(r"eval: batches=1 samples=\d+ loss=([0-9.eE+-]+)", r.stdout)
    ge = float(m.group(1)) if m else float("nan")
    ok(m is not None and abs(ge - te) <= TOL * abs(te),
       f"{mod.DROPOUT}: gpp's evaluation loss is torch's model.eval() one ({ge:.6f}, "
       f"{te:.6f}): dropout off", r.stdout[-300:] + r.stderr[-300:])
    r = subprocess.run(common + ["--iterations", "1"], capture_output=True, text=True)
    m = re.search(r"iter=0 loss=([0-9.eE+-]+)", r.stdout)
    gt = float(m.group(1)) if m else float("nan")
    ok(m is not None and abs(gt - ge) > 1e-3 * abs(ge),
       f"{mod.DROPOUT}: in training the mask is drawn (loss {gt:.6f}, evaluation {ge:.6f})",
       r.stderr[-300:])


def plan8(build, gj):
    """Stages and depth gpp-plan chooses at 8 a100-80g devices, batch 256."""
    r = subprocess.run([os.path.join(build, "planner", "gpp-plan"), "--graph", gj, "--devices",
                        "8", "--device", "a100-80g", "--batch", "256"],
                       capture_output=True, text=True)
    st = re.search(r"^stages\s+(\d+)", r.stdout, re.M)
    dp = re.search(r"^depth\s+(\d+)", r.stdout, re.M)
    return f"{st.group(1)} stages, depth {dp.group(1)}" if st and dp else "?"


def run_cluster(src, build, d, gj, fname, factory, st):
    ck = os.path.join(d, "ck")
    conf = os.path.join(d, "c.toml")
    with open(conf, "w") as f:
        f.write(f"""[coordinator]
endpoint = "tcp://127.0.0.1:{free_port()}"
[cluster]
device = "cpu"
mem_gib = 2
[[nodes]]
host = "127.0.0.1"
slots = 4
[job]
model = "{gj}"
batch = 16
micro_batch = 4
iterations = 3
launch = "local"
checkpoint_dir = "{ck}"
data = "{os.path.join(d, 'data')}"
[health]
heartbeat_ms = 100
timeout_ms = 20000
""")
    r = subprocess.run(["timeout", "120", os.path.join(build, "coordinator", "gpp-coordinator"),
                        "--plan", "gpp", conf], capture_output=True, text=True)
    m = re.search(r"plan gpp for .*?: (\d+) stages", r.stdout)
    if not ok(r.returncode == 0, f"{fname}: a {m.group(1) if m else '?'}-stage cluster job on "
              "4 agents", (r.stdout + r.stderr)[-600:]):
        return
    merged = os.path.join(d, "merged.safetensors")
    r = subprocess.run([sys.executable, os.path.join(src, "scripts", "gpp-weights-merge"), merged,
                        ck], capture_output=True, text=True)
    if not ok(r.returncode == 0, f"{fname}: gpp-weights-merge joins the stage files",
              r.stderr[-300:]):
        return
    try:
        factory().load_state_dict(st.load_file(merged), strict=True)
        ok(True, f"{fname}: the cluster job's weights load strictly into the module")
    except RuntimeError as e:
        ok(False, f"{fname}: the cluster job's weights load strictly", str(e)[:300])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
