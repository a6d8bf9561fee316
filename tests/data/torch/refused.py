"""Modules gpp refuses, each for a reason gpp-export must name: a general
Conv2d, an LSTM, a BatchNorm whose statistics would change under
micro-batching, a Softmax before the loss and a scale by a constant."""
import torch
from torch import nn


class Refused(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.rnn = nn.LSTM(6, 6, batch_first=True)
        self.bn = nn.BatchNorm1d(6)
        self.fc = nn.Linear(6, 3)
        self.cfc = nn.Linear(64, 3)
        self.soft = nn.Softmax(dim=-1)

    def forward(self, img, seq, x):
        c = self.conv(img).flatten(1)
        h, _ = self.rnn(seq)
        y = self.fc(self.bn(x) * 2.0 + h.mean(dim=1)) + self.cfc(c)
        return self.soft(y)


class Good(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 4)
        self.fc = nn.Linear(4, 2)

    def forward(self, ids):
        return self.fc(self.emb(ids).mean(dim=1))
