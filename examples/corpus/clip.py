"""A CLIP-like two-tower model, written the ordinary way: a text tower
(nn.Embedding over token ids plus a learned positional embedding, an
nn.TransformerEncoder of two layers, mean pooling) and an image-feature
tower (MLP), their embeddings joined by a linear head."""
import torch
from torch import nn

VOCAB, SEQ, D, FEAT = 50, 8, 16, 12


class Clip(nn.Module):
    def __init__(self, dropout=0.0):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, D)
        self.pos = nn.Parameter(torch.randn(1, SEQ, D) * 0.02)
        layer = nn.TransformerEncoderLayer(D, 2, dim_feedforward=32, dropout=dropout,
                                           batch_first=True)
        self.text = nn.TransformerEncoder(layer, num_layers=2)
        self.img = nn.Sequential(nn.Linear(FEAT, 32), nn.GELU(), nn.Linear(32, D))
        self.head = nn.Linear(2 * D, 4)

    def forward(self, ids, feats):
        t = self.text(self.tok(ids) + self.pos).mean(dim=1)
        v = self.img(feats)
        return self.head(torch.cat([t, v], dim=-1))


INPUTS = [f"ids={SEQ}:int", f"feats={FEAT}"]
LOSS = "ce"
