#!/usr/bin/env bash
# cluster_train: training jobs with real processes on loopback — a job that
# finishes (progress lines, JSON metrics, checkpoints, the closing summary),
# an agent killed during training, Ctrl-C during training, and plans that
# cannot run. Weights against single-process training: test_coord_train.
# Usage: cluster_train.sh BUILD_DIR
set -u
. "$(dirname "$0")/lib/gpp_test.sh"
gpp_test_begin cluster_train "${1:-}"
COORD=$BUILD/coordinator/gpp-coordinator
MODEL="mmt:branches=2,layers=1,hidden=32,heads=2,seq=8,ffn=64"

# cluster file: $1 name, $2 slots, $3 iterations; micro-batch 4, metrics
# in $TMP/$1.jsonl
mkconf() {
    cpu_job_conf "$TMP/$1.toml" "$2" "$3" "$TMP/$1.ckpt" "micro_batch = 4" >/dev/null
    printf '[metrics]\nfile = "%s"\n' "$TMP/$1.jsonl" >>"$TMP/$1.toml"
    echo "$TMP/$1.toml"
}
# the coordinator's agents once training has started (at most 30 s)
training_kids() {
    wait_until 30 grep -q "^iter 2/" "$2" 2>/dev/null && pgrep -P "$1" | tr '\n' ' '
}

# 1. a job that finishes
C=$(mkconf ok 4 3)
timeout 120 "$COORD" --plan gpp "$C" >"$TMP/1.out" 2>"$TMP/1.err"; rc=$?
if [ $rc = 0 ] && [ "$(grep -c '^iter [1-3]/3  loss ' "$TMP/1.out")" = 3 ] &&
    grep -q "^  measured .* ms/iteration" "$TMP/1.out" && grep -q "^  simulated .*measured/simulated" "$TMP/1.out" &&
    [ "$(grep -c '"iteration":' "$TMP/ok.jsonl")" = 3 ] && grep -q '"iteration":2,"loss":' "$TMP/ok.jsonl" &&
    [ "$(tail -1 "$TMP/ok.jsonl")" = "{\"weights_sha256\":\"$(sed -n 's/^weights sha256 //p' "$TMP/1.out")\"}" ] &&
    ls "$TMP/ok.ckpt"/set-0000000003/stage0.ckpt "$TMP/ok.ckpt"/set-0000000003/MANIFEST.json \
        "$TMP/ok.ckpt/plan.json" >/dev/null 2>&1; then
    ok "training job: progress, metrics, checkpoints, summary"
else
    fail "training job (rc $rc)"; cat "$TMP/1.out"; grep -v OpenBLAS "$TMP/1.err" | tail -10
fi
# 1a. the summary's memory table: every stage's prediction (its memory
#     plan, which the agents' executors allocate) is the agents' measured
#     device peak to the byte, and both are in the metrics file
rows=$(awk '/^  memory  stage/ { t = 1; next } t && NF == 4 { print }' "$TMP/1.out")
pairs=$(grep '"iteration":' "$TMP/ok.jsonl" | tail -1 |
    grep -o '"mem_predicted_bytes":[0-9]*,"mem_measured_bytes":[0-9]*' | tr -c '0-9\n' ' ')
if [ -n "$rows" ] && echo "$rows" | awk '{ if (!($3 > 0) || $2 != $3 || $4 != 0) bad = 1 }
        END { exit bad }' &&
    [ "$(echo "$rows" | wc -l)" = "$(grep -o '[0-9]* stages' "$TMP/1.out" | tail -1 | cut -d' ' -f1)" ] &&
    [ "$(echo "$pairs" | wc -l)" = "$(echo "$rows" | wc -l)" ] &&
    echo "$pairs" | awk '{ if (!($1 > 0) || $1 != $2) bad = 1 } END { exit bad }'; then
    ok "memory: predicted = measured per stage ($(echo "$pairs" | awk '{ printf "%s%s", s, $2; s = " " }') bytes)"
else
    fail "memory table missing or predicted != measured"; sed -n '/^summary/,$p' "$TMP/1.out"
    echo "$pairs"
fi

# 1b. --plan auto without a profile: rank 0 profiles the ops, then the plan, then training
C=$(mkconf auto 2 2)
timeout 120 "$COORD" --plan auto "$C" >"$TMP/1b.out" 2>"$TMP/1b.err"; rc=$?
if [ $rc = 0 ] && grep -q "profiling the model's ops on 127.0.0.1:0" "$TMP/1b.err" &&
    grep -q "^plan gpp (agent profile)" "$TMP/1b.out" && grep -q "^iter 2/2  loss" "$TMP/1b.out"; then
    ok "auto plan from the agents' own profile"
else
    fail "auto plan with profiling (rc $rc)"; cat "$TMP/1b.out"; grep -v OpenBLAS "$TMP/1b.err" | tail -10
fi

# 2. an agent killed during training: named, the job stops, no one left
C=$(mkconf kill 4 1000000)
"$COORD" --plan spp "$C" >"$TMP/2.out" 2>"$TMP/2.err" &
CP=$!
KIDS=$(training_kids $CP "$TMP/2.out"); track $KIDS
# rank 0 always has a stage (the plan's first device)
VICTIM=$(sed -n 's/.*registered 127.0.0.1:0 (rank 0, pid \([0-9]*\)).*/\1/p' "$TMP/2.err" | head -1)
[ -n "$VICTIM" ] && kill -KILL "$VICTIM"
bwait $CP 30; rc=$?
if [ -n "$VICTIM" ] && [ $rc = 1 ] &&
    grep -q "pid $VICTIM) \(killed by signal 9\|silent\)" "$TMP/2.err" && wait_gone 15 $KIDS; then
    ok "agent killed during training: named, job stopped, agents gone"
else
    fail "agent killed during training (rc $rc, victim '$VICTIM')"; grep -v OpenBLAS "$TMP/2.err" | tail -8
fi

# 3. Ctrl-C during training: agents aborted and reaped, status 130
C=$(mkconf intr 4 1000000)
"$COORD" --plan gpp "$C" >"$TMP/3.out" 2>"$TMP/3.err" &
CP=$!
KIDS=$(training_kids $CP "$TMP/3.out"); track $KIDS
kill -INT $CP
bwait $CP 30; rc=$?
if [ -n "$KIDS" ] && [ $rc = 130 ] && grep -q "interrupted by Interrupt" "$TMP/3.err" &&
    wait_gone 10 $KIDS; then
    ok "SIGINT during training: agents stopped and reaped, status 130"
else
    fail "SIGINT during training (rc $rc)"; grep -v OpenBLAS "$TMP/3.err" | tail -8
fi

# 4. plans that cannot run: status 2 with the reason, no agent started
C=$(mkconf small 2 1)
sed -i -e 's/^model = .*/model = "mmt:branches=2,layers=2,hidden=64,heads=4,seq=16,ffn=128"/' -e 's/^batch = .*/batch = 32/' "$C"
"$COORD" --plan tests/data/plans/mmt2_dp.json "$C" >/dev/null 2>"$TMP/4a.err"; ra=$?
"$COORD" --plan bogus "$C" >/dev/null 2>"$TMP/4b.err"; rb=$?
sed 's/^model = .*/model = "dlrm:dense_branches=2,sparse_branches=2,dense_in=32,hidden=64,dense_layers=2,rows=1000,dim=16,bag=8,top_layers=2"/' "$C" >"$TMP/dlrm.toml"
"$COORD" --plan tests/data/plans/mmt2_dp.json "$TMP/dlrm.toml" >/dev/null 2>"$TMP/4c.err"; rcc=$?
if [ $ra = 2 ] && grep -q "the plan uses 4 devices, but .* has 2 slots" "$TMP/4a.err" &&
    [ $rb = 2 ] && grep -q "use auto, gpp, spp or a gpp-plan/1 FILE.json" "$TMP/4b.err" &&
    [ $rcc = 2 ] && grep -q "mmt2_dp.json: the plan is for model 'mmt' with 39 ops, but the graph is 'dlrm'" "$TMP/4c.err"; then
    ok "unusable plans rejected with the reason"
else
    fail "unusable plans ($ra $rb $rcc)"; cat "$TMP/4a.err" "$TMP/4b.err" "$TMP/4c.err"
fi

gpp_test_end
