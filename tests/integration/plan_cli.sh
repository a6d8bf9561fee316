#!/usr/bin/env bash
# plan_cli: black-box tests of the gpp-plan CLI. Good runs on zoo models,
# a graph file and a cluster file; the JSON plan, strategy file, DOT and
# Chrome trace checked for shape; every bad input exits 2 with a message
# that says what is wrong.
# Usage: plan_cli.sh BUILD_DIR   (ctest passes it)
set -u
. "$(dirname "$0")/lib/gpp_test.sh"
gpp_test_begin plan_cli "${1:-}"
PLAN=$BUILD/planner/gpp-plan

[ -x "$PLAN" ] || { fail "$PLAN not built"; gpp_test_end; }

MMT="mmt:branches=2,layers=2,hidden=64,heads=4,seq=16,ffn=128"

# ---- good runs ----------------------------------------------------------------
expect_ok "list-models" "$PLAN" --list-models
grep -q '^mmt' "$TMP/out" && grep -q 'case_study' "$TMP/out" && ok "list-models names the zoo" \
    || fail "list-models names the zoo"

expect_ok "mmt small, all outputs" "$PLAN" --model "$MMT" --devices 4 --device a100-80g --batch 32 \
    --schedule 1f1b --json "$TMP/p.json" --dot "$TMP/p.dot" --trace "$TMP/t.json" --strategy "$TMP/p.strategy"
for want in "depth" "bottleneck TPS" "simulated" "samples/s" "search time" "first .. last"; do
    grep -q "$want" "$TMP/out" && ok "text output has '$want'" || fail "text output has '$want'"
done

if python3 - "$TMP/p.json" "$TMP/p.strategy" "$TMP/t.json" "$TMP/p.dot" <<'EOF'
import json, sys
p = json.load(open(sys.argv[1]))
keys = ["format", "planner", "model", "devices", "batch", "micro_batch", "chain", "depth",
        "bottleneck_tps_ms", "iteration_ms", "throughput", "search_ms", "stages", "schedule"]
assert list(p.keys()) == keys, list(p.keys())
assert p["format"] == "gpp-plan/1" and p["planner"] == "gpp"
assert p["model"]["name"] == "mmt" and set(p["model"]) == {"name", "ops"}
n_ops, B = p["model"]["ops"], p["batch"]
assert B == 32 and p["iteration_ms"] > 0 and p["throughput"] > 0
skeys = ["id", "ops", "devices", "first_device", "micro_batch", "k", "inflight", "tps_ms",
         "mem_bytes", "succ"] + (["dep"] if p["chain"] else [])
assert isinstance(p["chain"], bool)
ops = []
for i, s in enumerate(p["stages"]):
    assert list(s.keys()) == skeys, list(s.keys())
    assert s["id"] == i and B % s["micro_batch"] == 0
    ops += s["ops"]
    for t in s["succ"]:
        assert t > i
    if p["chain"]:  # a chain: each stage feeds the next; deps are succ edges without data
        assert i + 1 == len(p["stages"]) or i + 1 in s["succ"]
        assert set(s["dep"]) <= set(s["succ"]) and all(t == i + 1 for t in s["dep"])
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
then ok "json / strategy / trace / dot shapes"; else fail "json / strategy / trace / dot shapes"; fi

# --print-schedule: one "stage N  F0 ... B<m-1>" line per stage, as in the JSON's schedule
expect_ok "print-schedule" "$PLAN" --model "$MMT" --devices 4 --device a100-80g --batch 32 \
    --print-schedule --json "$TMP/s.json"
if python3 - "$TMP/s.json" "$TMP/out" <<'EOF'
import json, sys
p = json.load(open(sys.argv[1]))
text = open(sys.argv[2]).read().split("\nschedule (", 1)[1].splitlines()[1:]
assert len(text) == len(p["stages"]), text
for i, (line, order) in enumerate(zip(text, p["schedule"])):
    assert line.split() == ["stage", str(i)] + order, (line, order)
EOF
then ok "schedule text matches the plan"; else fail "schedule text matches the plan"; fi

# --schedule zb-h1: a gpp-plan/2 file with the kind, W delays and W passes,
# every micro-batch once as F, B and W; the text names the kind
expect_ok "schedule zb-h1" "$PLAN" --model "$MMT" --devices 4 --device a100-80g --batch 32 \
    --micro-batch 4 --schedule zb-h1 --print-schedule --json "$TMP/zb.json"
grep -q "^schedule          zb-h1 (W delay per stage:" "$TMP/out" && ok "text names zb-h1" \
    || fail "text names zb-h1"
if python3 - "$TMP/zb.json" "$TMP/out" <<'EOF'
import json, sys
p = json.load(open(sys.argv[1]))
assert p["format"] == "gpp-plan/2" and p["schedule_kind"] == "zb-h1"
B = p["batch"]
for s, order in zip(p["stages"], p["schedule"]):
    m = B // s["micro_batch"]
    assert 0 <= s["w_delay"] <= m
    assert sorted(order) == sorted(["%s%d" % (c, j) for c in "FBW" for j in range(m)])
    for j in range(m):
        assert order.index("F%d" % j) < order.index("B%d" % j) < order.index("W%d" % j)
text = open(sys.argv[2]).read().split("\nschedule (", 1)[1].splitlines()[1:]
for i, (line, order) in enumerate(zip(text, p["schedule"])):
    assert line.split() == ["stage", str(i)] + order, (line, order)
EOF
then ok "zb-h1 plan file and text"; else fail "zb-h1 plan file and text"; fi
# --schedule auto (the default): the least simulated time of the three
expect_ok "schedule auto" "$PLAN" --model "$MMT" --devices 4 --device a100-80g --batch 32 \
    --micro-batch 4
grep -q "^schedule          \(1f1b\|zb-h1\|zb-h2\)" "$TMP/out" && ok "auto names its pick" \
    || fail "auto names its pick"

expect_ok "spp baseline" "$PLAN" --model "$MMT" --devices 4 --device a100-80g --batch 32 --planner spp \
    --json "$TMP/spp.json"
python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); assert p["planner"]=="spp"; \
assert all(len(s["succ"]) <= 1 for s in p["stages"])' "$TMP/spp.json" \
    && ok "spp plan is a chain" || fail "spp plan is a chain"

expect_ok "per-stage micro-batch + kFkB" "$PLAN" --model "$MMT" --devices 4 --device v100-32g --batch 32 \
    --per-stage-mbs --kfkb --json "$TMP/k.json"
expect_ok "fixed micro-batch, --opt=value form" "$PLAN" --model=case_study --devices=4 --device=a100-80g \
    --batch=64 --micro-batch=8
expect_ok "candle_uno on 8" "$PLAN" --model candle_uno --devices 8 --device a100-80g --batch 1024
expect_ok "dlrm on 8 over 2 nodes" "$PLAN" --model dlrm --devices 8 --gpus-per-node 4 --device a100-80g \
    --batch 512

cat >"$TMP/g.json" <<'EOF'
{"format": "gpp-graph/1", "name": "tiny", "ops": [
  {"id": 0, "name": "x", "type": "input", "inputs": [], "rows": 1, "cols": 64},
  {"id": 1, "name": "l1", "type": "linear", "inputs": [0], "out_features": 64},
  {"id": 2, "name": "l2", "type": "linear", "inputs": [0], "out_features": 64},
  {"id": 3, "name": "cat", "type": "concat", "inputs": [1, 2]},
  {"id": 4, "name": "loss", "type": "loss_mse", "inputs": [3]}]}
EOF
expect_ok "graph file" "$PLAN" --graph "$TMP/g.json" --devices 2 --device a100-80g --batch 16

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
expect_ok "profile file" "$PLAN" --profile "$TMP/profile.json" --devices 4 --device v100-16g --batch 16 \
    --json "$TMP/prof.json"
! grep -q '^note:' "$TMP/out" && ok "a profile covering 1..batch: no note" \
    || fail "a profile covering 1..batch: no note"
expect_ok "profile file, larger batch" "$PLAN" --profile "$TMP/profile.json" --devices 4 \
    --device v100-16g --batch 64
grep -q "^note: profile $TMP/profile.json times 5 ops at micro-batch sizes 1..16 only; .*1..64.* v100-16g curve" \
    "$TMP/out" && ok "sizes beyond the profile: a note names file, ops, sizes and preset" \
    || fail "sizes beyond the profile: a note names file, ops, sizes and preset"
printf '{"0": {"name": "x", "inputs": [], "weight_size": 0, "runtime": {"1": "fast"}}}\n' \
    >"$TMP/badprof.json"

expect_ok "cluster file" "$PLAN" --cluster "$SRC/config/examples/multi-node-a100.toml" \
    --model "$MMT" --batch 64
grep -q "a100-80g" "$TMP/out" && ok "cluster file sets the device" || fail "cluster file sets the device"
grep -q "^schedule          1f1b (auto: the cuda agents have no split backward)$" "$TMP/out" &&
    ok "cuda cluster file: auto is 1f1b, what its agents run, and says so" ||
    fail "cuda cluster file: auto is 1f1b, what its agents run, and says so" "$(grep '^schedule' "$TMP/out")"
# a cpu cluster file: auto plans all three schedules and keeps the least
# simulated time (each named schedule's plan is one auto considered)
for s in auto 1f1b zb-h1 zb-h2; do
    expect_ok "cpu cluster file, schedule $s" "$PLAN" --cluster "$SRC/config/examples/local-cpu.toml" \
        --schedule "$s"
    cp "$TMP/out" "$TMP/cpu-$s.out"
done
if out=$(python3 - "$TMP" <<'EOF2' 2>&1
import re, sys
def get(s):
    t = open("%s/cpu-%s.out" % (sys.argv[1], s)).read()
    return (re.search(r"^schedule +(\S+)", t, re.M).group(1),
            float(re.search(r"^simulated +([0-9.]+) ms/iteration", t, re.M).group(1)))
pick, ms = get("auto")
best = min(get(s)[1] for s in ("1f1b", "zb-h1", "zb-h2"))
assert pick in ("1f1b", "zb-h1", "zb-h2") and ms <= best + 1e-3, (pick, ms, best)
print("%s, %.3f ms (best named %.3f ms)" % (pick, ms, best))
EOF2
); then ok "cpu cluster file: auto picks the least simulated time: $out"
else fail "cpu cluster file: auto picks the least simulated time" "$out"; fi

# ---- bad input: exit 2 with a message -------------------------------------------
A=(--devices 4 --device a100-80g --batch 32)
expect_fail "no arguments" "give the model" "$PLAN"
expect_fail "unknown model" "unknown model 'nosuch'" "$PLAN" --model nosuch "${A[@]}"
expect_fail "unknown model parameter" "unknown parameter 'wings'" "$PLAN" --model mmt:wings=2 "${A[@]}"
expect_fail "bad model parameter value" "must be an integer" "$PLAN" --model mmt:layers=x "${A[@]}"
expect_fail "unknown schedule" "--schedule 'zb-v': use auto, 1f1b, zb-h1 or zb-h2" \
    "$PLAN" --model "$MMT" "${A[@]}" --schedule zb-v
# zb-h2 holds more than 1F1B: under a bound the 1F1B plan meets (15.7 MiB of
# 17.4) its stages need 22.7 MiB
expect_fail "zb-h2 over the memory bound" "no zb-h2 plan of 'mmt' fits .*use schedule 1f1b, zb-h1 or auto" \
    "$PLAN" --model mmt:branches=2,layers=2,hidden=256,heads=4,seq=64,ffn=512 --devices 4 \
    --device a100-80g --batch 64 --micro-batch 2 --mem-gib 0.017 --schedule zb-h2
expect_fail "zero-bubble for cuda agents" "schedule zb-h1: the cuda backend .* has no split backward.*use schedule 1f1b or auto, or backend = \"cpu\"" \
    "$PLAN" --cluster "$SRC/config/examples/multi-node-a100.toml" --model "$MMT" --batch 64 \
    --schedule zb-h1
expect_fail "unknown flag" "unknown argument '--bogus'" "$PLAN" --model "$MMT" "${A[@]}" --bogus
expect_fail "duplicate flag" "--batch given twice" "$PLAN" --model "$MMT" "${A[@]}" --batch 16
expect_fail "duplicate switch" "--kfkb given twice" "$PLAN" --model "$MMT" "${A[@]}" --kfkb --kfkb
expect_fail "missing value" "--batch needs a value" "$PLAN" --model "$MMT" --devices 4 --device a100-80g --batch
expect_fail "non-numeric batch" "--batch: expected an integer >= 1, got 'many'" "$PLAN" \
    --model "$MMT" --devices 4 --device a100-80g --batch many
expect_fail "zero devices" "--devices: expected an integer >= 1, got '0'" "$PLAN" \
    --model "$MMT" --devices 0 --device a100-80g --batch 32
expect_fail "non-numeric memory" "--mem-gib: expected a positive number, got '12GB'" "$PLAN" \
    --model "$MMT" "${A[@]}" --mem-gib 12GB
expect_fail "unknown device preset" "--device tpu9" "$PLAN" --model "$MMT" --devices 4 --device tpu9 --batch 32
expect_fail "missing batch" "give the mini-batch" "$PLAN" --model "$MMT" --devices 4 --device a100-80g
expect_fail "missing cluster" "give the cluster" "$PLAN" --model "$MMT" --batch 32
expect_fail "two models" "only one of --model, --graph and --profile" "$PLAN" \
    --model "$MMT" --graph "$TMP/g.json" "${A[@]}"
expect_fail "cluster and devices" "--cluster replaces" "$PLAN" --cluster "$TMP/c.toml" --model "$MMT" "${A[@]}"
expect_fail "bad planner" "--planner: expected gpp or spp, got 'xpp'" "$PLAN" --model "$MMT" "${A[@]}" --planner xpp
expect_fail "micro-batch not dividing" "--micro-batch 5 does not divide --batch 32" "$PLAN" \
    --model "$MMT" "${A[@]}" --micro-batch 5
expect_fail "missing graph file" "$TMP/none.json" "$PLAN" --graph "$TMP/none.json" "${A[@]}"
printf '{"format": "gpp-graph/1",\n "name": "x",\n "ops": [ {"id": 0,, } ]}\n' >"$TMP/bad.json"
expect_fail "malformed graph JSON names file:line" "$TMP/bad.json:3:" "$PLAN" --graph "$TMP/bad.json" "${A[@]}"
printf '{"format": "gpp-plan/1"}\n' >"$TMP/notgraph.json"
expect_fail "wrong graph format" "field 'format' must be" "$PLAN" --graph "$TMP/notgraph.json" "${A[@]}"
expect_fail "bad profile field" "$TMP/badprof.json" "$PLAN" --profile "$TMP/badprof.json" "${A[@]}"
expect_fail "infeasible memory names the bound that fits" "the smallest memory that fits is" "$PLAN" \
    --model mmt --devices 2 --device a100-80g --batch 64 --mem-gib 0.5
fits=$(sed -n 's/.*(--mem-gib \([0-9.]*\)).*/\1/p' "$TMP/err")
expect_ok "the suggested --mem-gib $fits fits" "$PLAN" --model mmt --devices 2 --device a100-80g \
    --batch 64 --mem-gib "${fits:-missing}"
expect_fail "unwritable output" "/nonexistent-dir/p.json" "$PLAN" --model "$MMT" "${A[@]}" \
    --json /nonexistent-dir/p.json
printf '[cluster]\ndevice = "a100-80g"\nmem_gib = = 4\n' >"$TMP/bad.toml"
expect_fail "malformed TOML names file:line" "bad.toml:3" "$PLAN" --cluster "$TMP/bad.toml" \
    --model "$MMT" --batch 32

gpp_test_end
