#!/usr/bin/env bash
# import_corpus: the figures of the PyTorch corpus (examples/corpus/): per
# model the ops and parameters gpp-export writes, the stages and depth
# gpp-plan chooses at 8 a100-80g devices (batch 256), the worst relative
# difference of 20 AdamW losses gpp vs PyTorch, and the import time
# (gpp-export: trace, map, write, gpp's reader and one CPU step); then the
# CPU training speed of three corpus models, gpp-train vs PyTorch at the
# same thread count (bench/corpus_speed.py). Writes Markdown to stdout.
# usage: bench/import_corpus.sh [BUILD_DIR] [THREADS]   (env: ROUNDS, ITERS, WARMUP, BATCH)
set -eu
BUILD=$(cd "${1:-build}" && pwd)
THREADS=${2:-1}
SRC=$(cd "$(dirname "$0")/.." && pwd)
PY=/usr/bin/python3
. "$SRC/scripts/blas-env.sh"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
echo "## PyTorch corpus: import and parity ($(date -u +%F), commit $(git -C "$SRC" rev-parse --short HEAD), $(nproc) cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'))"
echo
echo '| model | gpp ops | parameters | gpp plan at 8 devices | parity (worst relative loss difference, 20 steps) | import time (s) |'
echo '|---|---|---|---|---|---|'
$PY "$SRC/tests/integration/torch_corpus.py" "$SRC" "$BUILD" "$TMP" --no-cluster \
    --table "$TMP/table.md" >"$TMP/corpus.out" 2>&1 || { cat "$TMP/corpus.out" >&2; exit 1; }
cat "$TMP/table.md"
echo
echo "## CPU training speed, gpp-train vs PyTorch ($THREADS thread(s), AdamW, best of ${ROUNDS:-3})"
echo
echo '| model | batch | threads | gpp samples/s | PyTorch samples/s | gpp / PyTorch |'
echo '|---|---|---|---|---|---|'
$PY "$SRC/bench/corpus_speed.py" "$SRC" "$BUILD" "$TMP" "$THREADS" clip:Clip dlrm:Dlrm vit:Vit \
    2>/dev/null | grep '^|'
