#!/usr/bin/python3
"""make_mha.py: writes the nn.MultiheadAttention fixtures of gpp's import
tests with Debian's python3-torch (1.13) and torch.onnx.export, opset 17,
the batch symbolic. Checked in, so that the tests run where torch is not
installed (CI's default set); run it again only to change them.

usage: make_mha.py OUT_DIR

  mha.onnx         x [N,4,8] -> nn.MultiheadAttention(8, 2, batch_first=True)
                   self-attention (q = k = v = x, need_weights=False), its
                   biases drawn off their zero start -> y [N,4,8]: torch's
                   packed in-projection (MatMul by W_in^T [8, 24], Add b_in,
                   three Slices), heads by Reshape/Transpose time-first, q
                   divided by sqrt(4), out_proj a Gemm (transB=1)
  mha_nobias.onnx  the same with bias=False: no Add, out_proj a MatMul by
                   W_o^T
  mha_mask.onnx    mha.onnx with a causal attn_mask (an Add before the
                   Softmax), which gpp refuses"""
import sys

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, bias, mask):
        super().__init__()
        self.mha = nn.MultiheadAttention(8, 2, batch_first=True, bias=bias)
        self.mask = torch.triu(torch.ones(4, 4, dtype=torch.bool), 1) if mask else None

    def forward(self, x):
        return self.mha(x, x, x, attn_mask=self.mask, need_weights=False)[0]


def main(out):
    for name, bias, mask in (("mha", True, False), ("mha_nobias", False, False),
                             ("mha_mask", True, True)):
        torch.manual_seed(13)
        net = Net(bias, mask).eval()
        if bias:
            with torch.no_grad():
                net.mha.in_proj_bias.uniform_(-0.5, 0.5)
                net.mha.out_proj.bias.uniform_(-0.5, 0.5)
        torch.onnx.export(net, (torch.randn(2, 4, 8),), f"{out}/{name}.onnx", opset_version=17,
                          input_names=["x"], output_names=["y"],
                          dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
        print(f"wrote {out}/{name}.onnx")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
