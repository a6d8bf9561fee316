#!/usr/bin/env bash
# A two-branch model trained by gpp on a real dataset that Debian ships
# (scikit-learn's digits), then its held-out accuracy from the weights gpp
# wrote. Needs python3-sklearn and python3-numpy (/usr/bin/python3).
# Usage: examples/digits/run.sh BUILD_DIR [OUT_DIR]   (from the source root)
set -eu
BUILD=${1:?usage: run.sh BUILD_DIR [OUT_DIR]}
OUT=${2:-$(mktemp -d /tmp/gpp_digits.XXXXXX)}
HERE=$(dirname "$0")
/usr/bin/python3 "$HERE/export.py" "$OUT"
# 1438 training samples, batch 64: 450 steps = 20 epochs, reshuffled each epoch
"$BUILD/agent/exec/gpp-train" --model "$HERE/digits.json" --data "$OUT/train" \
    --iterations 450 --batch 64 --lr 0.003 --seed 1 --threads 1 \
    --save-weights "$OUT/digits.safetensors" | grep -E '^(data|model|done|saved)|iter=(0|449) '
/usr/bin/python3 "$HERE/evaluate.py" "$OUT/digits.safetensors" "$OUT/test"
