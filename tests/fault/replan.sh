#!/usr/bin/env bash
# replan: any plan loads any checkpoint set (stage files are keyed by op).
# A job trained 4 iterations on 4 local CPU agents (sets 2 and 4) is
# resumed with --resume --replan on fewer agents, whose plan has other
# stages:
#   - --resume with another plan but without --replan is refused (exit 2,
#     naming --replan) and changes nothing; --replan alone is a usage error;
#   - a set of another optimizer or batch, or whose stage files mix
#     iterations, is refused (exit 2, naming the field or both files);
#   - on 2 agents (the same micro-batch, no data parallelism: the same
#     arithmetic in another split) iterations 5-6 run after the line
#     "re-sharding checkpoint set 4 from plan ...", the losses equal the
#     uninterrupted 4-agent run's and so does the final weights sha256;
#   - on 3 agents with another planner and micro-batch (the gradient sums
#     reassociate) the loss of iteration 5 is within 1e-3 of the
#     uninterrupted run's, and the job finishes.
# Usage: replan.sh BUILD_DIR
set -u
. "$(dirname "$0")/../integration/lib/gpp_test.sh"
gpp_test_begin replan "${1:-}"
COORD=$BUILD/coordinator/gpp-coordinator
MODEL="mmt:branches=2,layers=1,hidden=32,heads=2,seq=8,ffn=64"

# mkconf NAME AGENTS MICRO_BATCH DIR [JOB_LINES]: 6 iterations, a set every
# 2 (all kept) in $TMP/DIR.ckpt, metrics in $TMP/NAME.jsonl
mkconf() {
    cpu_job_conf "$TMP/$1.toml" "$2" 6 "$TMP/$4.ckpt" "micro_batch = $3
checkpoint_interval = 2
checkpoint_keep = 3
${5:-}" >/dev/null
    printf '[metrics]\nfile = "%s"\n' "$TMP/$1.jsonl" >>"$TMP/$1.toml"
    echo "$TMP/$1.toml"
}
set_of() { printf '%s/%s.ckpt/set-%010d' "$TMP" "$1" "$2"; }
digest() { sed -n 's/^weights sha256 \([0-9a-f]\{64\}\)$/\1/p' "$1"; }
tree_sum() { (cd "$1" && find . -type f | sort | xargs sha256sum); }
# loss I FILE: the last loss of iteration I (0-based) in a metrics file
loss() {
    python3 -c 'import json,sys
v=[r["loss"] for r in map(json.loads, open(sys.argv[2])) if r.get("iteration")==int(sys.argv[1])]
print(repr(v[-1]) if v else "")' "$1" "$2"
}

# 1. the uninterrupted reference: 6 iterations on 4 agents
timeout 120 "$COORD" --plan gpp "$(mkconf ref 4 4 ref)" >"$TMP/ref.out" 2>"$TMP/ref.err"; rc=$?
ref=$(digest "$TMP/ref.out")
if [ $rc = 0 ] && [ -n "$ref" ] && grep -q "4 stages" "$TMP/ref.out"; then
    ok "uninterrupted run on 4 agents (4 stages): weights sha256 $ref"
else
    fail "reference run (rc $rc)"; grep -v OpenBLAS "$TMP/ref.err" | tail -10
fi

# 2. the first 4 iterations of the same job: sets 2 and 4
C4=$(mkconf run4 4 4 run)
timeout 120 "$COORD" --plan gpp --iterations 4 "$C4" >"$TMP/run4.out" 2>"$TMP/run4.err"; rc=$?
if [ $rc = 0 ] && [ -f "$(set_of run 4)/MANIFEST.json" ] && [ -f "$(set_of run 4)/stage3.ckpt" ]; then
    ok "4 iterations on 4 agents: set 4 has 4 stage files"
else
    fail "first part (rc $rc)"; grep -v OpenBLAS "$TMP/run4.err" | tail -10
fi
cp -a "$TMP/run.ckpt" "$TMP/run3.ckpt"
before=$(tree_sum "$TMP/run.ckpt")

# 3. another plan without --replan, --replan without --resume: refused
C2=$(mkconf run2 2 4 run)
expect_fail "--resume on 2 agents without --replan" "add --replan to re-shard" \
    timeout 60 "$COORD" --resume --plan gpp "$C2"
expect_fail "--replan without --resume" "goes with --resume" \
    timeout 60 "$COORD" --replan --plan gpp "$C2"
# another optimizer, another batch: refused naming the field
# (the job runs the default optimizer, AdamW: docs/config.md "Optimizer")
expect_fail "--replan with another optimizer" 'job.optimizer = "sgd"; set job.optimizer = "adamw"' \
    timeout 60 "$COORD" --resume --replan --plan gpp "$(mkconf sgd 2 4 run 'optimizer = "sgd"')"
C=$(mkconf batch 2 4 run)
sed -i 's/^batch = 16$/batch = 32/' "$C"
expect_fail "--replan with another batch" "set job.batch = 16" \
    timeout 60 "$COORD" --resume --replan --plan gpp "$C"
# a set whose manifest is right but whose stage files mix iterations
mkdir -p "$TMP/mix.ckpt"
cp -a "$(set_of run 2)" "$(set_of run 4)" "$TMP/run.ckpt/plan.json" "$TMP/mix.ckpt/"
cp "$(set_of run 2)/stage1.ckpt" "$(set_of mix 4)/stage1.ckpt"
python3 - "$(set_of mix 4)" <<'EOF'
import json, os, sys
d = sys.argv[1]
m = json.load(open(d + "/MANIFEST.json"))
b = open(d + "/stage1.ckpt", "rb").read()
m["stages"][1]["bytes"], m["stages"][1]["crc32"] = len(b), int.from_bytes(b[-4:], "little")
json.dump(m, open(d + "/MANIFEST.json", "w"))
EOF
expect_fail "a set mixing iterations" "stage1.ckpt holds the state after 2 optimizer steps, .*stage0.ckpt after 4" \
    timeout 60 "$COORD" --resume --replan --plan gpp "$(mkconf mix 2 4 mix)"
after=$(tree_sum "$TMP/run.ckpt")
if [ "$before" = "$after" ]; then
    ok "the refusals changed nothing in the checkpoint directory"
else
    fail "a refusal changed the checkpoint directory"
fi

# 4. --resume --replan on 2 agents: the same arithmetic in 2 stages
timeout 120 "$COORD" --resume --replan --plan gpp "$C2" >"$TMP/r2.out" 2>"$TMP/r2.err"; rc=$?
got=$(digest "$TMP/r2.out")
if [ $rc = 0 ] && grep -q "^replan: re-sharding checkpoint set 4 from plan .* (4 stages on 4 devices: .*) to plan gpp (2 stages on 2 devices: .*)$" "$TMP/r2.out" &&
    grep -q "^iter 5/6 " "$TMP/r2.out" && ! grep -q "^iter [1-4]/6 " "$TMP/r2.out" &&
    [ -f "$(set_of run 6)/MANIFEST.json" ] && [ ! -f "$(set_of run 6)/stage2.ckpt" ]; then
    ok "--resume --replan on 2 agents: re-sharded set 4 (4 stages) to 2 stages, ran iterations 5-6, set 6 has 2 stage files"
else
    fail "--resume --replan on 2 agents (rc $rc)"; grep -v OpenBLAS "$TMP/r2.err" | tail -10
fi
l4r=$(loss 4 "$TMP/ref.jsonl"); l4=$(loss 4 "$TMP/run2.jsonl")
l5r=$(loss 5 "$TMP/ref.jsonl"); l5=$(loss 5 "$TMP/run2.jsonl")
if [ -n "$l4" ] && [ "$l4" = "$l4r" ] && [ "$l5" = "$l5r" ] && [ -n "$got" ] && [ "$got" = "$ref" ]; then
    ok "2 agents: losses of iterations 5-6 ($l4, $l5) and weights sha256 equal to the uninterrupted run's"
else
    fail "2 agents: losses $l4 $l5 vs $l4r $l5r, weights sha256 '$got' vs '$ref'"
fi

# 5. --resume --replan on 3 agents, spp, micro-batch 8: the loss continues
C3=$(mkconf run3 3 8 run3)
timeout 120 "$COORD" --resume --replan --plan spp "$C3" >"$TMP/r3.out" 2>"$TMP/r3.err"; rc=$?
l4=$(loss 4 "$TMP/run3.jsonl")
if [ $rc = 0 ] && grep -q "^replan: re-sharding checkpoint set 4 .* to plan spp (3 stages on 3 devices" "$TMP/r3.out" &&
    python3 -c 'import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); d = abs(a - b) / abs(b)
print("     loss of iteration 5: %.9g vs uninterrupted %.9g, relative difference %.3g" % (a, b, d))
sys.exit(d > 1e-3)' "$l4" "$l4r"; then
    ok "--resume --replan on 3 agents (spp, micro-batch 8): the loss continues"
else
    fail "--resume --replan on 3 agents (rc $rc, loss '$l4' vs '$l4r')"; grep -v OpenBLAS "$TMP/r3.err" | tail -10
fi
gpp_test_end
