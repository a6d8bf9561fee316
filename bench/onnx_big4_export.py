# Writes /tmp/big4.onnx for bench_onnx_import (BENCHMARKS.md, "ONNX import"); needs python3-torch.
import torch
from torch import nn
torch.manual_seed(0)
class Net(nn.Module):  # 4 branches of 2 Linear(1024) + ReLU, concat, LayerNorm, head
    def __init__(s):
        super().__init__()
        s.br = nn.ModuleList([nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU()) for _ in range(4)])
        s.ln, s.head = nn.LayerNorm(4096), nn.Linear(4096, 10)
    def forward(s, x0, x1, x2, x3):
        return s.head(s.ln(torch.cat([b(x) for b, x in zip(s.br, (x0, x1, x2, x3))], 1)))
ex = tuple(torch.randn(2, 256) for _ in range(4))
names = [f"x{i}" for i in range(4)]
torch.onnx.export(Net(), ex, "/tmp/big4.onnx", opset_version=17, input_names=names, output_names=["y"],
                  dynamic_axes={k: {0: "batch"} for k in names + ["y"]})
