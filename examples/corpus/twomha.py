"""Two branches, each with its own nn.MultiheadAttention (their biases
start equal, which torch's ONNX exporter would share) and a residual, a
third through an nn.TransformerEncoderLayer; mean pooling of each, joined."""
import torch
from torch import nn

S, D = 6, 12


class TwoMha(nn.Module):
    def __init__(self):
        super().__init__()
        self.mha_a = nn.MultiheadAttention(D, 3, batch_first=True)
        self.mha_b = nn.MultiheadAttention(D, 2, batch_first=True)
        self.enc = nn.TransformerEncoderLayer(D, 2, dim_feedforward=24, dropout=0.0,
                                              batch_first=True)
        self.head = nn.Linear(3 * D, 4)

    def forward(self, a, b, c):
        ha = a + self.mha_a(a, a, a)[0]
        hb = b + self.mha_b(b, b, b, need_weights=False)[0]
        hc = self.enc(c)
        return self.head(torch.cat([ha.mean(1), hb.mean(1), hc.mean(1)], dim=1))


INPUTS = [f"a={S}x{D}", f"b={S}x{D}", f"c={S}x{D}"]
LOSS = "ce"
