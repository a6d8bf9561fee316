#!/usr/bin/env bash
# cluster_profile: same inputs, same plan. --plan auto with a checkpoint_dir
# keeps the agents' profile as <checkpoint_dir>/profile.json; a second start
# (--resume: the directory holds the first run's checkpoint set) plans from
# it (says so, no profiling) and writes the same plan.json; a kept profile
# measured in another precision, or with bf16 tensors when the job has
# none, is measured again; --reprofile measures again; a kept profile that does not fit the model is
# an error naming the file and suggesting --reprofile (exit 2).
# Usage: cluster_profile.sh BUILD_DIR
set -u
. "$(dirname "$0")/lib/gpp_test.sh"
gpp_test_begin cluster_profile "${1:-}"
COORD=$BUILD/coordinator/gpp-coordinator
MODEL="mmt:branches=2,layers=1,hidden=32,heads=2,seq=8,ffn=64"
CK="$TMP/job.ckpt"

# the cluster file with a fresh port each run
mkconf() { cpu_job_conf "$TMP/job.toml" 2 1 "$CK"; }
# plan.json without its search time (the only figure that may differ)
plan_of() { grep -v '"search_ms"' "$CK/plan.json"; }

# 1. first run: the agents profile; the profile is kept beside the plan
timeout 120 "$COORD" --plan auto "$(mkconf)" >"$TMP/1.out" 2>"$TMP/1.err"; rc=$?
plan_of >"$TMP/plan1.json" 2>/dev/null
if [ $rc = 0 ] && grep -q "profiling the model's ops" "$TMP/1.err" &&
    grep -q '"_gpp"' "$CK/profile.json" && grep -q '"runtime"' "$CK/profile.json" &&
    grep -q '"forward"' "$CK/profile.json" &&
    /usr/bin/python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))["_gpp"]; sys.exit(m.get("precision") != "fp32" or m.get("bf16_tensors") is not False)' "$CK/profile.json"; then
    ok "first run profiles and keeps profile.json (the record says fp32, no bf16 tensors: a CPU agent measured it)"
else
    fail "first run (rc $rc)"; cat "$TMP/1.out"; grep -v OpenBLAS "$TMP/1.err" | tail -10
fi
cp "$CK/profile.json" "$TMP/profile1.json"

# 2. second run, same checkpoint_dir, model, device: plans from the kept file
# (a start in a directory with a complete checkpoint set must be --resume;
# one more iteration to resume with)
timeout 120 "$COORD" --plan auto --resume --iterations 2 "$(mkconf)" >"$TMP/2.out" \
    2>"$TMP/2.err"; rc=$?
if [ $rc = 0 ] && grep -q "^plan: auto, from the profile kept in $CK/profile.json" "$TMP/2.out" &&
    ! grep -q "profiling the model's ops" "$TMP/2.err" && grep -q "^plan gpp (kept profile)" "$TMP/2.out" &&
    plan_of | cmp -s - "$TMP/plan1.json" && cmp -s "$CK/profile.json" "$TMP/profile1.json"; then
    ok "second run reuses the kept profile and writes the same plan.json"
else
    fail "second run (rc $rc)"; cat "$TMP/2.out"; grep -v OpenBLAS "$TMP/2.err" | tail -10
    plan_of | diff - "$TMP/plan1.json" | head -20
fi

# 2b. the kept profile was measured in another precision than the job's:
# the agents measure again rather than plan from the wrong figures
cp "$CK/profile.json" "$TMP/profile-fp32.json"
sed -i 's/"precision":[[:space:]]*"fp32"/"precision": "bf16"/' "$CK/profile.json"
rm -rf "$CK"/set-*
timeout 120 "$COORD" --plan auto "$(mkconf)" >"$TMP/2b.out" 2>"$TMP/2b.err"; rc=$?
if [ $rc = 0 ] && grep -q "^plan: $CK/profile.json was measured for .* in bf16, this job is .* in fp32; the agents profile again" "$TMP/2b.out" &&
    grep -q "profiling the model's ops" "$TMP/2b.err"; then
    ok "a kept profile of another precision is measured again"
else
    fail "kept profile of another precision (rc $rc)"; cat "$TMP/2b.out"; grep -v OpenBLAS "$TMP/2b.err" | tail -10
fi

# 2c. the kept profile was measured with bf16 tensors, which this job does
# not keep: its memory and transfer figures are not this job's; measured again
sed -i 's/"bf16_tensors":[[:space:]]*false/"bf16_tensors": true/' "$CK/profile.json"
rm -rf "$CK"/set-*
timeout 120 "$COORD" --plan auto "$(mkconf)" >"$TMP/2c.out" 2>"$TMP/2c.err"; rc=$?
if [ $rc = 0 ] && grep -q "^plan: $CK/profile.json was measured for .* in fp32 with bf16 tensors, this job is .* in fp32; the agents profile again" "$TMP/2c.out" &&
    grep -q "profiling the model's ops" "$TMP/2c.err" && grep -q '"bf16_tensors":[[:space:]]*false' "$CK/profile.json"; then
    ok "a kept profile measured with bf16 tensors is measured again"
else
    fail "kept profile with bf16 tensors (rc $rc)"; cat "$TMP/2c.out"; grep -v OpenBLAS "$TMP/2c.err" | tail -10
fi

# 3. --reprofile: the agents measure again (a fresh start: the checkpoint
# sets go, the kept profile stays)
rm -rf "$CK"/set-*
timeout 120 "$COORD" --plan auto --reprofile "$(mkconf)" >"$TMP/3.out" 2>"$TMP/3.err"; rc=$?
if [ $rc = 0 ] && grep -q "^plan: --reprofile: not using $CK/profile.json" "$TMP/3.out" &&
    grep -q "profiling the model's ops" "$TMP/3.err" && grep -q "^plan gpp (agent profile)" "$TMP/3.out"; then
    ok "--reprofile profiles again"
else
    fail "--reprofile (rc $rc)"; cat "$TMP/3.out"; grep -v OpenBLAS "$TMP/3.err" | tail -10
fi

# 4. a kept profile naming an op the model does not have: error, exit 2
sed -i '0,/"name":[[:space:]]*"[^"]*"/s//"name": "no_such_op"/' "$CK/profile.json"
rm -rf "$CK"/set-*
timeout 60 "$COORD" --plan auto "$(mkconf)" >"$TMP/4.out" 2>"$TMP/4.err"; rc=$?
if [ $rc = 2 ] && grep -q "$CK/profile.json" "$TMP/4.err" && grep -q "no_such_op" "$TMP/4.err" &&
    grep -q -- "--reprofile" "$TMP/4.err"; then
    ok "kept profile of another model: error naming the file, suggests --reprofile"
else
    fail "mismatched kept profile (rc $rc)"; cat "$TMP/4.out" "$TMP/4.err" | tail -10
fi

gpp_test_end
