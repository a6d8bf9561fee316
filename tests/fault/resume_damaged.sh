#!/usr/bin/env bash
# resume_damaged: --resume picks the newest checkpoint set whose every file
# verifies, data checksums included, and says why it passed over newer
# ones; --resume-from N picks set N (issue 33, item 4). A job of 10
# iterations (3 local CPU agents, a set every 2, 5 kept) is killed in the
# save of set 10 (GPP_FAULT=ckpt_kill:4) and one byte inside set 8's
# stage1.ckpt is flipped (its size and trailer stay). Then:
#   a. --resume skips set 8 naming the file and the CRCs, resumes from set
#      6, ends with the fault-free run's weights, and keeps the damaged set
#      moved aside (nothing removed);
#   b. --resume-from 4 (a copy of the directory) resumes from set 4 to the
#      same weights and moves the newer sets 6 and 8 aside;
#   c. --resume-from 8 (damaged) and --resume-from 5 (no such set) are
#      refused with exit 2 naming the set and the file, nothing changed;
#   d. a job.checkpoint_dir every user may write is refused (exit 2);
#   e. the last set's manifest records the final digest; a coordinator
#      SIGKILLed right after committing it (when the kill comes in time),
#      then --resume and --resume=auto print the digest and exit 0.
# Prints the time from the start of --resume to its first iteration.
# Usage: resume_damaged.sh BUILD_DIR
set -u
. "$(dirname "$0")/../integration/lib/gpp_test.sh"
gpp_test_begin resume_damaged "${1:-}"
COORD=$BUILD/coordinator/gpp-coordinator
MODEL="mmt:branches=2,layers=1,hidden=32,heads=2,seq=8,ffn=64"

mkconf() { # NAME: 3 agents, 10 iterations, a set every 2, 5 kept, in $TMP/NAME.ckpt
    cpu_job_conf "$TMP/$1.toml" 3 10 "$TMP/$1.ckpt" "micro_batch = 4
checkpoint_interval = 2
checkpoint_keep = 5" >/dev/null
    echo "$TMP/$1.toml"
}
set_of() { printf '%s/%s.ckpt/set-%010d' "$TMP" "$1" "$2"; }
digest() { sed -n 's/^weights sha256 \([0-9a-f]\{64\}\)$/\1/p' "$1"; }
ms() { echo $(($(date +%s%N) / 1000000)); }
tree_sum() { (cd "$1" && find . -type f ! -name '*.tmp.*' | sort | xargs sha256sum); }
errtail() { grep -v OpenBLAS "$1" | tail -"${2:-4}"; }

timeout 120 "$COORD" --plan gpp "$(mkconf ref)" >"$TMP/ref.out" 2>"$TMP/ref.err"
ref=$(digest "$TMP/ref.out")
[ -n "$ref" ] && ok "fault-free run: weights sha256 $ref" || fail "fault-free run" "$(errtail "$TMP/ref.err")"

C=$(mkconf run)
GPP_FAULT=ckpt_kill:4 timeout 120 "$COORD" --plan gpp "$C" >"$TMP/kill.out" 2>"$TMP/kill.err"
F=$(set_of run 8)/stage1.ckpt
if [ -f "$(set_of run 8)/MANIFEST.json" ] && [ ! -f "$(set_of run 10)/MANIFEST.json" ] && [ -f "$F" ]; then
    size=$(stat -c %s "$F")
    /usr/bin/python3 - "$F" <<'EOF'
import os, sys
p = sys.argv[1]
with open(p, "r+b") as f:
    f.seek(os.path.getsize(p) // 2)
    b = f.read(1)
    f.seek(-1, 1)
    f.write(bytes([b[0] ^ 0x10]))
EOF
    [ "$(stat -c %s "$F")" = "$size" ] &&
        ok "killed in the save of set 10; one byte of set 8's stage1.ckpt flipped (size $size kept)" ||
        fail "flipping a byte changed the size"
else
    fail "the killed run left no complete set 8" "$(errtail "$TMP/kill.err")"
fi
cp -a "$TMP/run.ckpt" "$TMP/from4.ckpt"
cp -a "$TMP/run.ckpt" "$TMP/bad.ckpt"
damaged=$(sha256sum <"$F")

# a. --resume: set 6, the damaged set 8 named and kept aside
t0=$(ms)
timeout 120 "$COORD" --resume --plan gpp "$C" >"$TMP/res.out" 2>"$TMP/res.err" &
RP=$!
wait_until 120 grep -q "^iter 7/10 " "$TMP/res.out"
t1=$(ms)
wait $RP
rc=$?
aside=$(ls -d "$TMP/run.ckpt"/set-0000000008.superseded-* 2>/dev/null | head -1)
if [ $rc = 0 ] && grep -q "skipping set 8: $F: its data has CRC [0-9a-f]\{8\}, the file's trailer records [0-9a-f]\{8\}: the file is corrupted" "$TMP/res.err" &&
    grep -q "resuming from checkpoint set 6 " "$TMP/res.err" && ! grep -q "^iter [1-6]/10 " "$TMP/res.out" &&
    [ "$(digest "$TMP/res.out")" = "$ref" ]; then
    ok "--resume skipped the damaged set 8 (named), ran from set 6 to the fault-free weights; first iteration $((t1 - t0)) ms after the start"
else
    fail "--resume with a damaged newest set (rc $rc)" "$(errtail "$TMP/res.err")"
fi
if [ -n "$aside" ] && [ "$(sha256sum <"$aside/stage1.ckpt")" = "$damaged" ] &&
    [ -f "$(set_of run 8)/MANIFEST.json" ] && [ -f "$(set_of run 10)/MANIFEST.json" ]; then
    ok "the damaged set kept as ${aside##*/}; this run committed its own sets 8 and 10"
else
    fail "damaged set not kept aside ('$aside')" "$(ls "$TMP/run.ckpt")"
fi

# b. --resume-from 4
C4=$(mkconf from4)
timeout 120 "$COORD" --resume-from 4 --plan gpp "$C4" >"$TMP/r4.out" 2>"$TMP/r4.err"
rc=$?
n_aside=$(ls -d "$TMP/from4.ckpt"/set-*.superseded-* 2>/dev/null | wc -l)
if [ $rc = 0 ] && grep -q "resuming from checkpoint set 4 " "$TMP/r4.err" &&
    grep -q "^iter 5/10 " "$TMP/r4.out" && [ "$(digest "$TMP/r4.out")" = "$ref" ] &&
    grep -q "set 6 is newer than set 4, which the job resumes from: moved aside" "$TMP/r4.err" &&
    [ "$n_aside" -ge 2 ]; then
    ok "--resume-from 4: ran from set 4 to the fault-free weights; $n_aside newer sets moved aside"
else
    fail "--resume-from 4 (rc $rc, $n_aside aside)" "$(errtail "$TMP/r4.err")"
fi

# c. --resume-from a damaged set, and a set that is not there: exit 2, nothing changed
CB=$(mkconf bad)
before=$(tree_sum "$TMP/bad.ckpt")
expect_fail "--resume-from 8 (damaged)" "--resume-from 8: checkpoint set 8 in .*bad.ckpt/set-0000000008/stage1.ckpt: its data has CRC" \
    timeout 60 "$COORD" --resume-from 8 --plan gpp "$CB"
expect_fail "--resume-from 5 (no such set)" "--resume-from 5: checkpoint set 5 .*set-0000000005 is incomplete" \
    timeout 60 "$COORD" --resume-from 5 --plan gpp "$CB"
expect_fail "--resume-from 0" "--resume-from 0: expected a checkpoint set's iteration count" \
    timeout 60 "$COORD" --resume-from 0 --plan gpp "$CB"
# d. a checkpoint_dir every user may write is refused (as a key_dir is)
chmod 0777 "$TMP/bad.ckpt"
expect_fail "a world-writable checkpoint_dir" "job.checkpoint_dir .*bad.ckpt is writable by every user (mode 0777).*chmod o-w" \
    timeout 60 "$COORD" --resume --plan gpp "$CB"
[ "$before" = "$(tree_sum "$TMP/bad.ckpt")" ] && ok "refusals changed nothing in the directory" ||
    fail "a refused --resume-from changed the directory"

# e. a coordinator SIGKILLed with its agents right after committing the
#    last set: the set's manifest holds the final digest, so --resume and
#    --resume=auto print it and exit 0 (issue 33, item 6)
CF=$(mkconf fin)
"$COORD" --plan gpp "$CF" >"$TMP/fin.out" 2>"$TMP/fin.err" &
CP=$!
track $CP
wait_until 120 grep -q "checkpoint set 10 committed" "$TMP/fin.err"
kids=$(pgrep -P $CP || true)
running $CP && killed=1 || killed=0
kill -KILL $CP $kids 2>/dev/null
wait $CP 2>/dev/null
if grep -q "\"weights_sha256\":[[:space:]]*\"$ref\"" "$(set_of fin 10)/MANIFEST.json"; then
    ok "set 10's manifest records the final weights digest (committed with the set)"
else
    fail "set 10's manifest has no weights_sha256 $ref" "$(tail -5 "$(set_of fin 10)/MANIFEST.json")"
fi
for how in --resume --resume=auto; do
    timeout 60 "$COORD" $how --plan gpp "$CF" >"$TMP/fin2.out" 2>"$TMP/fin2.err"
    rc=$?
    if [ $rc = 0 ] && [ "$(digest "$TMP/fin2.out")" = "$ref" ] &&
        grep -q "^resume: the job finished at iteration 10 (checkpoint set 10)$" "$TMP/fin2.out"; then
        ok "$how of a job whose coordinator was SIGKILLed after the last set (killed: $killed): exit 0 with the fault-free digest"
    else
        fail "$how after the last set (rc $rc, killed $killed)" "$(tail -2 "$TMP/fin2.err")"
    fi
done

gpp_test_end
