#!/usr/bin/env bash
# weights_cli: trained weights out in the safetensors format. gpp-train
# --save-weights on a two-branch model (attention, layer norm, embedding
# bag, linear with and without bias) is read back with Debian's
# /usr/bin/python3 + numpy (scripts/gpp-weights-compare, no safetensors or
# torch package) and matches the checkpoint of the same run bit for bit,
# names and shapes included; an unwritable path exits 2 and leaves an
# existing file alone. (The coordinator's per-stage files: npy_cli.sh.)
# Usage: weights_cli.sh BUILD_DIR
set -u
. "$(dirname "$0")/lib/gpp_test.sh"
gpp_test_begin weights_cli "${1:-}"
TRAIN=$BUILD/agent/exec/gpp-train
. "$SRC/scripts/blas-env.sh"
G=$SRC/tests/data/graphs
if ! /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
    fail "python3-numpy missing for /usr/bin/python3: run scripts/install-deps.sh"
    gpp_test_end
fi
expect_ok "train and save weights" "$TRAIN" --model "$G/two_branch.json" --iterations 5 \
    --batch 16 --threads 1 --save "$TMP/ck" --save-weights "$TMP/w.safetensors"
grep -q "saved weights $TMP/w.safetensors" "$TMP/out" && ok "gpp-train reports the file" ||
    fail "no 'saved weights' line"
if /usr/bin/python3 "$SRC/scripts/gpp-weights-compare" "$TMP/ck" "$TMP/w.safetensors" \
    >"$TMP/cmp" 2>&1; then
    ok "safetensors = checkpoint: $(tail -1 "$TMP/cmp")"
else
    fail "safetensors differ from the checkpoint" "$(cat "$TMP/cmp")"
fi
grep -q "^attn.in_proj_weight: \[48, 16\] ok" "$TMP/cmp" && grep -q "^ln.weight: \[16\] ok" "$TMP/cmp" &&
    grep -q "^emb.weight: \[50, 8\] ok" "$TMP/cmp" && ! grep -q "^pool.bias" "$TMP/cmp" &&
    ok "torch names and layouts: [out, in] matrices, 1-d vectors, no bias where bias = 0" ||
    fail "names or shapes" "$(cat "$TMP/cmp")"
cp "$TMP/w.safetensors" "$TMP/keep"
expect_fail "unwritable weights path" "saving weights /nonexistent-dir/w.safetensors" \
    "$TRAIN" --model "$G/two_branch.json" --iterations 1 --batch 16 --threads 1 \
    --save-weights /nonexistent-dir/w.safetensors
cmp -s "$TMP/w.safetensors" "$TMP/keep" && ok "the earlier file is untouched" ||
    fail "the earlier file changed"
gpp_test_end
