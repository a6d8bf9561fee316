"""Token ids embedded and flattened (flatten(1) of [N, S, D]) into an MLP
beside a max-pooled branch with Tanh, one logit for binary
cross-entropy."""
import torch
from torch import nn

VOCAB, S, D = 25, 5, 6


class SeqFlat(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, D)
        self.flat = nn.Flatten()
        self.mlp = nn.Sequential(nn.Linear(S * D, 16), nn.ReLU())
        self.pool = nn.Linear(D, 16)
        self.out = nn.Linear(32, 1)

    def forward(self, ids):
        e = self.emb(ids)
        a = self.mlp(self.flat(e))
        b = torch.tanh(self.pool(torch.amax(e, dim=1)))
        return self.out(torch.cat([a, b], dim=-1))


INPUTS = [f"ids={S}:int"]
LOSS = "bce"
