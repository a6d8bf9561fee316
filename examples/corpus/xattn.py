"""Cross-attention between two branches: token queries (nn.Embedding plus a
positional parameter) attend to a sequence of projected features (keys =
values) with nn.MultiheadAttention; sum pooling, then a regression head."""
import torch
from torch import nn

VOCAB, SQ, SK, F, D = 30, 6, 5, 7, 16


class CrossAttn(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, D)
        self.pos = nn.Parameter(torch.randn(SQ, D) * 0.02)
        self.proj = nn.Linear(F, D)
        self.attn = nn.MultiheadAttention(D, 4, batch_first=True)
        self.norm = nn.LayerNorm(D)
        self.head = nn.Linear(D, 3)

    def forward(self, ids, feats):
        q = self.tok(ids) + self.pos
        kv = torch.relu(self.proj(feats))
        a, _ = self.attn(q, kv, kv, need_weights=False)
        return self.head(self.norm(q + a).sum(dim=1))


INPUTS = [f"ids={SQ}:int", f"feats={SK}x{F}"]
LOSS = "mse"
