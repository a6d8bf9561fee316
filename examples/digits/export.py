#!/usr/bin/python3
"""Exports scikit-learn's bundled digits (Debian: python3-sklearn; 1797 8x8
images of handwritten digits, UCI ML hand-written digits test set) to .npy
for examples/digits/digits.json: the top four pixel rows feed branch 'top',
the bottom four branch 'bottom', labels go to the loss op 'loss'. A fixed
80/20 split (seed 0): train/ for gpp-train --data, test/ held out.

usage: export.py OUT_DIR"""
import os
import sys

import numpy as np
from sklearn.datasets import load_digits

out = sys.argv[1] if len(sys.argv) > 1 else "digits_data"
d = load_digits()
x = (d.images / 16.0).astype("<f4")          # (1797, 8, 8), pixels 0..16 -> [0, 1]
y = d.target.astype("<i8")
order = np.random.default_rng(0).permutation(len(y))
n_test = len(y) // 5
for part, idx in (("test", order[:n_test]), ("train", order[n_test:])):
    os.makedirs(f"{out}/{part}", exist_ok=True)
    np.save(f"{out}/{part}/top.npy", x[idx, :4, :].reshape(len(idx), 32))
    np.save(f"{out}/{part}/bottom.npy", x[idx, 4:, :].reshape(len(idx), 32))
    np.save(f"{out}/{part}/loss.npy", y[idx])
    print(f"{part}: {len(idx)} samples")
