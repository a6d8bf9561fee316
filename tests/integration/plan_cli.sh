#!/usr/bin/env bash
# plan_cli: black-box tests of the gpp-plan CLI. Good runs on zoo models,
# a graph file and a cluster file; the JSON plan, strategy file, DOT and
# Chrome trace checked for shape; every bad input exits 2 with a message
# that says what is wrong.
# Usage: plan_cli.sh BUILD_DIR   (ctest passes it)
set -u
BUILD=${1:?usage: plan_cli.sh BUILD_DIR}
SRC=${GPP_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
PLAN=$BUILD/planner/gpp-plan
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
pass=0
fail=0

[ -x "$PLAN" ] || { echo "FAIL: $PLAN not built"; exit 1; }

ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; shift; for l in "$@"; do echo "     $l"; done; fail=$((fail + 1)); }

# expect_ok NAME ARGS...: exit 0
expect_ok() {
    local name=$1; shift
    if "$PLAN" "$@" >"$TMP/out" 2>"$TMP/err"; then
        ok "$name"
    else
        bad "$name" "exit $? from: gpp-plan $*" "$(tail -3 "$TMP/err")"
    fi
}

# expect_bad NAME MESSAGE ARGS...: exit 2 and MESSAGE on stderr
expect_bad() {
    local name=$1 msg=$2; shift 2
    "$PLAN" "$@" >"$TMP/out" 2>"$TMP/err"
    local rc=$?
    if [ $rc -eq 2 ] && grep -qF -- "$msg" "$TMP/err"; then
        ok "$name"
    else
        bad "$name" "want exit 2 and '$msg'; got exit $rc:" "$(head -3 "$TMP/err")"
    fi
}

MMT="mmt:branches=2,layers=2,hidden=64,heads=4,seq=16,ffn=128"

# ---- good runs ----------------------------------------------------------------
expect_ok "list-models" --list-models
grep -q '^mmt' "$TMP/out" && grep -q 'case_study' "$TMP/out" && ok "list-models names the zoo" \
    || bad "list-models names the zoo"

expect_ok "mmt small, all outputs" --model "$MMT" --devices 4 --device a100-80g --batch 32 \
    --json "$TMP/p.json" --dot "$TMP/p.dot" --trace "$TMP/t.json" --strategy "$TMP/p.strategy"
for want in "depth" "bottleneck TPS" "simulated" "samples/s" "search time" "first .. last"; do
    grep -q "$want" "$TMP/out" && ok "text output has '$want'" || bad "text output has '$want'"
done

if python3 - "$TMP/p.json" "$TMP/p.strategy" "$TMP/t.json" "$TMP/p.dot" <<'EOF'
import json, sys
p = json.load(open(sys.argv[1]))
keys = ["format", "planner", "model", "devices", "batch", "micro_batch", "depth",
        "bottleneck_tps_ms", "iteration_ms", "throughput", "search_ms", "stages", "schedule"]
assert list(p.keys()) == keys, list(p.keys())
assert p["format"] == "gpp-plan/1" and p["planner"] == "gpp"
assert p["model"]["name"] == "mmt" and set(p["model"]) == {"name", "ops"}
n_ops, B = p["model"]["ops"], p["batch"]
assert B == 32 and p["iteration_ms"] > 0 and p["throughput"] > 0
skeys = ["id", "ops", "devices", "first_device", "micro_batch", "k", "inflight", "tps_ms",
         "mem_bytes", "succ"]
ops = []
for i, s in enumerate(p["stages"]):
    assert list(s.keys()) == skeys, list(s.keys())
    assert s["id"] == i and B % s["micro_batch"] == 0
    ops += s["ops"]
    for t in s["succ"]:
        assert t > i
sched = p["schedule"]
assert sorted(ops) == list(range(n_ops)), "stages must partition the ops"
assert p["devices"] == 4
devs = [d for s in p["stages"] for d in range(s["first_device"], s["first_device"] + s["devices"])]
assert len(set(devs)) == len(devs) and all(0 <= d < 4 for d in devs), devs
assert len(sched) == len(p["stages"])
for s, order in zip(p["stages"], sched):
    m = B // s["micro_batch"]
    assert sorted(order) == sorted(["F%d" % j for j in range(m)] + ["B%d" % j for j in range(m)])
    assert order.index("F0") < order.index("B0")
# strategy: op count then a stage per op; stage count then 4 numbers per stage
l1, l2 = [list(map(int, l.split())) for l in open(sys.argv[2]).read().splitlines()]
assert l1[0] == n_ops and len(l1) == n_ops + 1
assert l2[0] == len(p["stages"]) and len(l2) == 1 + 4 * l2[0]
for i, s in enumerate(p["stages"]):
    assert l2[1 + 4 * i: 5 + 4 * i] == [s["micro_batch"], s["inflight"], s["k"], s["devices"]]
    for o in s["ops"]:
        assert l1[1 + o] == i
t = json.load(open(sys.argv[3]))
spans = [e for e in t["traceEvents"] if e["ph"] == "X"]
assert spans and all({"name", "ts", "dur", "pid", "tid"} <= set(e) for e in spans)
assert {e["tid"] for e in spans if e["pid"] == 0} == set(devs)
d = open(sys.argv[4]).read()
assert d.startswith("digraph") and d.count("->") == sum(len(s["succ"]) for s in p["stages"])
EOF
then ok "json / strategy / trace / dot shapes"; else bad "json / strategy / trace / dot shapes"; fi

# --schedule: one "stage N  F0 ... B<m-1>" line per stage, as in the JSON's schedule
expect_ok "schedule" --model "$MMT" --devices 4 --device a100-80g --batch 32 --schedule \
    --json "$TMP/s.json"
if python3 - "$TMP/s.json" "$TMP/out" <<'EOF'
import json, sys
p = json.load(open(sys.argv[1]))
text = open(sys.argv[2]).read().split("\nschedule (", 1)[1].splitlines()[1:]
assert len(text) == len(p["stages"]), text
for i, (line, order) in enumerate(zip(text, p["schedule"])):
    assert line.split() == ["stage", str(i)] + order, (line, order)
EOF
then ok "schedule text matches the plan"; else bad "schedule text matches the plan"; fi

expect_ok "spp baseline" --model "$MMT" --devices 4 --device a100-80g --batch 32 --planner spp \
    --json "$TMP/spp.json"
python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); assert p["planner"]=="spp"; \
assert all(len(s["succ"]) <= 1 for s in p["stages"])' "$TMP/spp.json" \
    && ok "spp plan is a chain" || bad "spp plan is a chain"

expect_ok "per-stage micro-batch + kFkB" --model "$MMT" --devices 4 --device v100-32g --batch 32 \
    --per-stage-mbs --kfkb --json "$TMP/k.json"
expect_ok "fixed micro-batch, --opt=value form" --model=case_study --devices=4 --device=a100-80g \
    --batch=64 --micro-batch=8
expect_ok "candle_uno on 8" --model candle_uno --devices 8 --device a100-80g --batch 1024
expect_ok "dlrm on 8 over 2 nodes" --model dlrm --devices 8 --gpus-per-node 4 --device a100-80g \
    --batch 512

cat >"$TMP/g.json" <<'EOF'
{"format": "gpp-graph/1", "name": "tiny", "ops": [
  {"id": 0, "name": "x", "type": "input", "inputs": [], "rows": 1, "cols": 64},
  {"id": 1, "name": "l1", "type": "linear", "inputs": [0], "out_features": 64},
  {"id": 2, "name": "l2", "type": "linear", "inputs": [0], "out_features": 64},
  {"id": 3, "name": "cat", "type": "concat", "inputs": [1, 2]},
  {"id": 4, "name": "loss", "type": "loss_mse", "inputs": [3]}]}
EOF
expect_ok "graph file" --graph "$TMP/g.json" --devices 2 --device a100-80g --batch 16

cat >"$TMP/profile.json" <<'EOF'
{"0": {"name": "x", "inputs": [], "weight_size": 0, "runtime": {"1": 0.01, "16": 0.05}},
 "1": {"name": "a", "inputs": [0], "input_size": [4096], "weight_size": 4194304,
       "runtime": {"1": 0.2, "16": 1.0}},
 "2": {"name": "b", "inputs": [1], "input_size": [4096], "weight_size": 4194304,
       "runtime": {"1": 0.2, "16": 1.0}},
 "3": {"name": "c", "inputs": [1], "input_size": [4096], "weight_size": 4194304,
       "runtime": {"1": 0.2, "16": 1.0}},
 "4": {"name": "out", "inputs": [2, 3], "input_size": [4096, 4096], "weight_size": 0,
       "runtime": {"1": 0.01, "16": 0.02}}}
EOF
expect_ok "profile file" --profile "$TMP/profile.json" --devices 4 --device v100-16g --batch 16 \
    --json "$TMP/prof.json"
printf '{"0": {"name": "x", "inputs": [], "weight_size": 0, "runtime": {"1": "fast"}}}\n' \
    >"$TMP/badprof.json"

CLUSTER="$SRC/config/examples/multi-node-a100.toml"
if "$PLAN" --help | grep -q -- --cluster && [ -f "$CLUSTER" ]; then
    if "$PLAN" --cluster "$CLUSTER" --model "$MMT" --batch 64 >"$TMP/out" 2>"$TMP/err"; then
        ok "cluster file"
        grep -q "a100-80g" "$TMP/out" && ok "cluster file sets the device" \
            || bad "cluster file sets the device"
    elif grep -q "need the config library" "$TMP/err"; then
        ok "cluster file refused without the config library"
    else
        bad "cluster file" "$(head -3 "$TMP/err")"
    fi
fi

# ---- bad input: exit 2 with a message -------------------------------------------
A=(--devices 4 --device a100-80g --batch 32)
expect_bad "no arguments" "give the model"
expect_bad "unknown model" "unknown model 'nosuch'" --model nosuch "${A[@]}"
expect_bad "unknown model parameter" "unknown parameter 'wings'" --model mmt:wings=2 "${A[@]}"
expect_bad "bad model parameter value" "must be an integer" --model mmt:layers=x "${A[@]}"
expect_bad "unknown flag" "unknown argument '--bogus'" --model "$MMT" "${A[@]}" --bogus
expect_bad "duplicate flag" "--batch given twice" --model "$MMT" "${A[@]}" --batch 16
expect_bad "duplicate switch" "--kfkb given twice" --model "$MMT" "${A[@]}" --kfkb --kfkb
expect_bad "missing value" "--batch needs a value" --model "$MMT" --devices 4 --device a100-80g --batch
expect_bad "non-numeric batch" "--batch: expected an integer >= 1, got 'many'" \
    --model "$MMT" --devices 4 --device a100-80g --batch many
expect_bad "zero devices" "--devices: expected an integer >= 1, got '0'" \
    --model "$MMT" --devices 0 --device a100-80g --batch 32
expect_bad "non-numeric memory" "--mem-gib: expected a positive number, got '12GB'" \
    --model "$MMT" "${A[@]}" --mem-gib 12GB
expect_bad "unknown device preset" "--device tpu9" --model "$MMT" --devices 4 --device tpu9 --batch 32
expect_bad "missing batch" "give the mini-batch" --model "$MMT" --devices 4 --device a100-80g
expect_bad "missing cluster" "give the cluster" --model "$MMT" --batch 32
expect_bad "two models" "only one of --model, --graph and --profile" \
    --model "$MMT" --graph "$TMP/g.json" "${A[@]}"
expect_bad "cluster and devices" "--cluster replaces" --cluster "$TMP/c.toml" --model "$MMT" "${A[@]}"
expect_bad "bad planner" "--planner: expected gpp or spp, got 'xpp'" --model "$MMT" "${A[@]}" --planner xpp
expect_bad "micro-batch not dividing" "--micro-batch 5 does not divide --batch 32" \
    --model "$MMT" "${A[@]}" --micro-batch 5
expect_bad "missing graph file" "$TMP/none.json" --graph "$TMP/none.json" "${A[@]}"
printf '{"format": "gpp-graph/1",\n "name": "x",\n "ops": [ {"id": 0,, } ]}\n' >"$TMP/bad.json"
expect_bad "malformed graph JSON names file:line" "$TMP/bad.json:3:" --graph "$TMP/bad.json" "${A[@]}"
printf '{"format": "gpp-plan/1"}\n' >"$TMP/notgraph.json"
expect_bad "wrong graph format" "field 'format' must be" --graph "$TMP/notgraph.json" "${A[@]}"
expect_bad "bad profile field" "$TMP/badprof.json" --profile "$TMP/badprof.json" "${A[@]}"
expect_bad "infeasible memory names the bound that fits" "the smallest memory that fits is" \
    --model mmt --devices 2 --device a100-80g --batch 64 --mem-gib 0.5
fits=$(sed -n 's/.*(--mem-gib \([0-9.]*\)).*/\1/p' "$TMP/err")
expect_ok "the suggested --mem-gib $fits fits" --model mmt --devices 2 --device a100-80g \
    --batch 64 --mem-gib "${fits:-missing}"
expect_bad "unwritable output" "/nonexistent-dir/p.json" --model "$MMT" "${A[@]}" \
    --json /nonexistent-dir/p.json
if "$PLAN" --help | grep -q -- --cluster; then
    printf '[cluster]\ndevice = "a100-80g"\nmem_gib = = 4\n' >"$TMP/bad.toml"
    "$PLAN" --cluster "$TMP/bad.toml" --model "$MMT" --batch 32 >"$TMP/out" 2>"$TMP/err"
    rc=$?
    if [ $rc -eq 2 ] && { grep -q "bad.toml:3" "$TMP/err" || grep -q "need the config library" "$TMP/err"; }; then
        ok "malformed TOML names file:line"
    else
        bad "malformed TOML names file:line" "exit $rc" "$(head -3 "$TMP/err")"
    fi
fi

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
