#!/usr/bin/python3
"""Held-out accuracy of digits.json with the weights gpp-train wrote
(--save-weights), computed in numpy from the safetensors file.

usage: evaluate.py WEIGHTS.safetensors TEST_DIR"""
import json
import struct
import sys

import numpy as np


def load(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    hdr = json.loads(blob[8:8 + n])
    hdr.pop("__metadata__", None)
    return {k: np.frombuffer(blob[8 + n + t["data_offsets"][0]:8 + n + t["data_offsets"][1]],
                             dtype="<f4").reshape(t["shape"]) for k, t in hdr.items()}


w = load(sys.argv[1])
t = sys.argv[2]


def lin(x, name):
    return x @ w[f"{name}.weight"].T + w[f"{name}.bias"]


def branch(x, b):
    return np.maximum(lin(np.maximum(lin(x, f"{b}.fc1"), 0), f"{b}.fc2"), 0)


top, bottom, y = (np.load(f"{t}/{n}.npy") for n in ("top", "bottom", "loss"))
logits = lin(np.concatenate([branch(top, "top"), branch(bottom, "bottom")], axis=1), "head")
acc = float((logits.argmax(axis=1) == y).mean())
print(f"held-out accuracy {acc:.4f} ({int(round(acc * len(y)))}/{len(y)})")
