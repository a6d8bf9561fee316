"""A three-branch residual MLP with Dropout, Tanh and Sigmoid gates: each
branch is Linear -> Tanh -> Dropout -> Linear plus its input, the three
joined and gated by a sigmoid branch, regressed with mean squared error."""
import torch
from torch import nn

IN, H = 10, 16


class Branch(nn.Module):
    def __init__(self, p):
        super().__init__()
        self.inp = nn.Linear(IN, H)
        self.fc1 = nn.Linear(H, H)
        self.drop = nn.Dropout(p)
        self.fc2 = nn.Linear(H, H)

    def forward(self, x):
        h = self.inp(x)
        return h + self.fc2(self.drop(torch.tanh(self.fc1(h))))


class ResMlp(nn.Module):
    def __init__(self, dropout=0.0):
        super().__init__()
        self.a, self.b, self.c = Branch(dropout), Branch(dropout), Branch(dropout)
        self.gate = nn.Sequential(nn.Linear(IN, 3 * H), nn.Sigmoid())
        self.out = nn.Linear(3 * H, 2)

    def forward(self, x, y, z):
        h = torch.cat([self.a(x), self.b(y), self.c(z)], dim=-1)
        return self.out(self.gate(x) + h)


def ResMlpDropout():
    return ResMlp(dropout=0.25)


DROPOUT = "ResMlpDropout"  # the variant the corpus test evaluates (dropout off)


INPUTS = [f"x={IN}", f"y={IN}", f"z={IN}"]
LOSS = "mse"
