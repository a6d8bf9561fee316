#!/usr/bin/env bash
# weights_digest: gpp-train ends with "weights sha256 <64 hex digits>" (all
# parameters in op order, gpp_ckpt.h); two identical runs print the same
# digest, another seed another one, and 2 iterations + save + load + 2
# iterations print the digest of 4 straight iterations (resume is
# bit-identical).
# Usage: weights_digest.sh BUILD_DIR
set -u
. "$(dirname "$0")/lib/gpp_test.sh"
gpp_test_begin weights_digest "${1:-}"
TRAIN=$BUILD/agent/exec/gpp-train
. "$SRC/scripts/blas-env.sh"
MODEL="dlrm:dense_branches=1,sparse_branches=2,dense_in=8,hidden=16,dense_layers=1,rows=50,dim=4,bag=3,top_layers=1"

digest() { # digest NAME ARGS...: the digest gpp-train prints, "" when none
    "$TRAIN" --model "$MODEL" --batch 8 --threads 1 --optimizer adamw "${@:2}" >"$TMP/$1.out" 2>"$TMP/$1.err"
    sed -n 's/^weights sha256 \([0-9a-f]\{64\}\)$/\1/p' "$TMP/$1.out"
}
a=$(digest a --iterations 4 --seed 3)
b=$(digest b --iterations 4 --seed 3)
c=$(digest c --iterations 4 --seed 4)
if [ -n "$a" ] && [ "$a" = "$b" ] && [ -n "$c" ] && [ "$a" != "$c" ]; then
    ok "two identical runs: the same digest $a; another seed: another"
else
    fail "digests: '$a' '$b' (seed 4: '$c')"; cat "$TMP/a.err"
fi
h=$(digest h1 --iterations 2 --seed 3 --save "$TMP/half.ckpt")
r=$(digest h2 --iterations 2 --seed 3 --load "$TMP/half.ckpt")
if [ -n "$h" ] && [ "$h" != "$a" ] && [ "$r" = "$a" ]; then
    ok "2 + save + load + 2 iterations: the digest of 4 straight iterations"
else
    fail "resumed digest '$r' vs '$a'"; cat "$TMP/h2.err"
fi
gpp_test_end
