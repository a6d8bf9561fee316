"""Batched products between activations written with @ on 3-d tensors: two
branches project a sequence, their [S, S] similarity (a @ b.transpose)
mixes the values (@ again), the rows pooled and stacked with a third
branch's features."""
import torch
from torch import nn

S, D, F = 4, 8, 5


class Bilinear(nn.Module):
    def __init__(self):
        super().__init__()
        self.qa = nn.Linear(D, D)
        self.kb = nn.Linear(D, D)
        self.vb = nn.Linear(D, D)
        self.side = nn.Linear(F, D)
        self.head = nn.Linear(2 * D, 3)

    def forward(self, x, f):
        sim = self.qa(x) @ self.kb(x).transpose(1, 2)       # [N, S, S]
        mixed = torch.tanh(sim) @ self.vb(x)                # [N, S, D]
        st = torch.stack([mixed.mean(dim=1), torch.relu(self.side(f))], dim=1)  # [N, 2, D]
        return self.head(st.flatten(1))


INPUTS = [f"x={S}x{D}", f"f={F}"]
LOSS = "mse"
