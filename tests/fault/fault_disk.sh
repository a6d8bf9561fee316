#!/usr/bin/env bash
# fault_disk: a full disk and a read-only directory (issue 12, the fault
# suite), on small tmpfs mounts this test makes (root; skipped, exit 77,
# where it cannot mount). 2 local CPU agents, 6 iterations, a set every 2.
#   1. checkpoints on a full disk: the save of set 4 fails with ENOSPC; the
#      job stops (exit 1) naming the file; set 2 stays complete and set 4
#      has no manifest; once the mount has room, --resume continues from
#      set 2 to the fault-free run's weights digest.
#   2. metrics on a disk that fills mid-run: the job stops (exit 1) naming
#      the file, which holds only whole JSON lines, mode 0600; --resume
#      after the space is back appends after the resume marker.
#   3. a read-only checkpoint directory: refused before any agent starts
#      (exit 2, naming the directory), nothing written.
# Usage: fault_disk.sh BUILD_DIR
set -u
. "$(dirname "$0")/../integration/lib/gpp_test.sh"
gpp_test_begin fault_disk "${1:-}"
COORD=$BUILD/coordinator/gpp-coordinator
MODEL="mmt:branches=2,layers=1,hidden=32,heads=2,seq=8,ffn=64"
PY=/usr/bin/python3

MNT=$TMP/mnt
mkdir -p "$MNT"
if [ "$(id -u)" != 0 ] || ! mount -t tmpfs -o size=300k tmpfs "$MNT" 2>/dev/null; then
    echo "fault_disk: skipped: needs root to mount a tmpfs (CI runs as root)"
    exit 77
fi
cleanup_mounts() {
    umount "$MNT" 2>/dev/null
    umount "$TMP/ro" 2>/dev/null
    gpp_test_cleanup
}
trap cleanup_mounts EXIT

# $1 config name, $2 checkpoint dir, $3 metrics file
mkconf() {
    cpu_job_conf "$TMP/$1.toml" 2 6 "$2" "checkpoint_interval = 2
checkpoint_keep = 10" >/dev/null
    printf '[metrics]\nfile = "%s"\n' "$3" >>"$TMP/$1.toml"
    echo "$TMP/$1.toml"
}
digest() { sed -n 's/^weights sha256 \([0-9a-f]\{64\}\)$/\1/p' "$1"; }
setdir() { printf '%s/set-%010d' "$1" "$2"; }

# 0. the fault-free reference
timeout 120 "$COORD" --plan gpp "$(mkconf ref "$TMP/ref.ckpt" "$TMP/ref.jsonl")" >"$TMP/ref.out" \
    2>"$TMP/ref.err"
ref=$(digest "$TMP/ref.out")
[ -n "$ref" ] && ok "fault-free run: weights sha256 $ref" ||
    fail "fault-free run" "$(grep -v OpenBLAS "$TMP/ref.err" | tail -5)"

# 1. checkpoints on a 300 KiB tmpfs: set 2 (about 150 KB) fits, set 4 not
C1=$(mkconf ck "$MNT/ck" "$TMP/ck.jsonl")
timeout 120 "$COORD" --plan gpp "$C1" >"$TMP/ck.out" 2>"$TMP/ck.err"
rc=$?
if [ $rc = 1 ] && grep -q "saving checkpoint $MNT/ck/set-0000000004/stage[0-9].ckpt.*No space left on device" "$TMP/ck.err" &&
    [ -f "$(setdir "$MNT/ck" 2)/MANIFEST.json" ] && [ ! -e "$(setdir "$MNT/ck" 4)/MANIFEST.json" ] &&
    [ -z "$(find "$MNT/ck" -name '*.tmp.*')" ]; then
    ok "checkpoint save on a full disk: exit 1 naming the file, set 2 complete, set 4 without manifest, no temp file"
else
    fail "checkpoint save on a full disk (rc $rc)" "$(grep -v OpenBLAS "$TMP/ck.err" | grep -i error | tail -3)" \
        "$(find "$MNT/ck" | sort)"
fi
mount -o remount,size=16m "$MNT"
timeout 120 "$COORD" --plan gpp --resume "$C1" >"$TMP/ck2.out" 2>"$TMP/ck2.err"
rc=$?
if [ $rc = 0 ] && grep -q "resumed from checkpoint set 2" "$TMP/ck2.out" && [ "$(digest "$TMP/ck2.out")" = "$ref" ]; then
    ok "--resume once the disk has room: from set 2, weights sha256 equal to the fault-free run's"
else
    fail "--resume after the full disk (rc $rc, digest $(digest "$TMP/ck2.out"))" \
        "$(grep -v OpenBLAS "$TMP/ck2.err" | tail -4)"
fi
umount "$MNT"

# 2. metrics on a tmpfs with one free page (a few lines fit, then ENOSPC)
mount -t tmpfs -o size=12k tmpfs "$MNT"
dd if=/dev/zero of="$MNT/fill" bs=1k count=6 2>/dev/null
C2=$(mkconf m "$TMP/m.ckpt" "$MNT/m.jsonl")
sed -i 's/^iterations = 6$/iterations = 40/' "$C2"
timeout 120 "$COORD" --plan gpp "$C2" >"$TMP/m.out" 2>"$TMP/m.err"
rc=$?
whole() { # every line of $1 parses as JSON; prints the count
    "$PY" -c 'import json,sys
n = 0
for l in open(sys.argv[1]):
    json.loads(l); n += 1
print(n)' "$1"
}
n=$(whole "$MNT/m.jsonl" 2>/dev/null)
if [ $rc = 1 ] && grep -q "metrics file '$MNT/m.jsonl': cannot write iteration metrics: No space left on device" "$TMP/m.err" &&
    [ -n "$n" ] && [ "$n" -ge 1 ] && [ "$n" -lt 40 ] && [ "$(stat -c %a "$MNT/m.jsonl")" = 600 ]; then
    ok "metrics on a full disk: exit 1 naming the file; $n whole JSON lines, no half line; mode 0600"
else
    fail "metrics on a full disk (rc $rc, lines '$n')" "$(grep -v OpenBLAS "$TMP/m.err" | grep -i error | tail -3)"
fi
rm -f "$MNT/fill"
mount -o remount,size=16m "$MNT"
timeout 120 "$COORD" --plan gpp --resume "$C2" >"$TMP/m2.out" 2>"$TMP/m2.err"
rc=$?
n2=$(whole "$MNT/m.jsonl" 2>/dev/null)
if [ $rc = 0 ] && grep -q '^{"resumed_at_iteration":[0-9]*}$' "$MNT/m.jsonl" && [ -n "$n2" ] && [ "$n2" -gt "$n" ] &&
    grep -q '^{"weights_sha256":"[0-9a-f]\{64\}"}$' "$MNT/m.jsonl"; then
    ok "--resume with room again: the metrics file goes on after the resume marker ($n -> $n2 lines)"
else
    fail "--resume after full metrics (rc $rc, lines '$n2')" "$(grep -v OpenBLAS "$TMP/m2.err" | tail -4)"
fi
umount "$MNT"

# 3. a read-only checkpoint directory (a read-only mount: root ignores mode bits)
mkdir -p "$TMP/ro"
mount -t tmpfs -o size=64k,ro tmpfs "$TMP/ro"
C3=$(mkconf ro "$TMP/ro/ck" "$TMP/ro.jsonl")
timeout 60 "$COORD" --plan gpp "$C3" >"$TMP/ro.out" 2>"$TMP/ro.err"
rc=$?
if [ $rc = 2 ] && grep -q "job.checkpoint_dir: .*$TMP/ro/ck.*Read-only file system" "$TMP/ro.err" &&
    ! grep -q "registered" "$TMP/ro.err" && [ -z "$(ls -A "$TMP/ro")" ]; then
    ok "read-only checkpoint directory: exit 2 before any agent starts, naming it"
else
    fail "read-only checkpoint directory (rc $rc)" "$(grep -v OpenBLAS "$TMP/ro.err" | tail -3)"
fi

gpp_test_end
