"""A DLRM-like model, written the ordinary way: a bottom MLP over dense
features, two nn.EmbeddingBag tables (sum and mean, fixed bags), the
pairwise dot interaction (torch.stack, torch.bmm with a transpose, the upper
triangle through torch.triu_indices), a top MLP and one logit trained with
binary cross-entropy on logits."""
import torch
from torch import nn

DENSE, D, ROWS_A, ROWS_B, BAG = 6, 8, 40, 30, 3


class Dlrm(nn.Module):
    def __init__(self):
        super().__init__()
        self.bottom = nn.Sequential(nn.Linear(DENSE, 16), nn.ReLU(), nn.Linear(16, D), nn.ReLU())
        self.emb_a = nn.EmbeddingBag(ROWS_A, D, mode="sum")
        self.emb_b = nn.EmbeddingBag(ROWS_B, D, mode="mean")
        self.top = nn.Sequential(nn.Linear(D + 3, 16), nn.ReLU(), nn.Linear(16, 1))

    def forward(self, dense, cat_a, cat_b):
        x = self.bottom(dense)
        t = torch.stack([x, self.emb_a(cat_a), self.emb_b(cat_b)], dim=1)  # [N, 3, D]
        z = torch.bmm(t, t.transpose(1, 2))                                 # [N, 3, 3]
        li, lj = torch.triu_indices(3, 3, offset=1)
        inter = z[:, li, lj]                                                # [N, 3]
        return self.top(torch.cat([x, inter], dim=1))


INPUTS = [f"dense={DENSE}", f"cat_a={BAG}:int", f"cat_b={BAG}:int"]
LOSS = "bce"
