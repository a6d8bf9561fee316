#!/usr/bin/env bash
# elastic_time: from a device lost for good to training again on the
# devices that remain, with gpp-coordinator --elastic (docs/checkpoints.md,
# Elastic re-plan), on the `make run` job (config/examples/local-cpu.toml:
# 4 local CPU agents, a set every 10 iterations), run for 60 iterations.
# Per trial: once set 10 is committed, the agent of slot 3 is SIGKILLed;
# with --max-restarts 0 --elastic the coordinator drops the slot at once,
# re-plans on 3 devices (the kept profile or the cluster file's planner),
# re-shards the newest set to the new plan and trains on. Reported: the
# time from the kill to the log line "all 3 agents ready; training", the
# re-planning time the coordinator prints, and the largest relative
# difference of a resumed iteration's loss from an uninterrupted run's.
# Usage: bench/elastic_time.sh BUILD_DIR [TRIALS]
set -euo pipefail
BUILD=${1:-build}
TRIALS=${2:-5}
COORD=$BUILD/coordinator/gpp-coordinator
SRC=$(cd "$(dirname "$0")/.." && pwd)
TMP=$(mktemp -d "${TMPDIR:-/tmp}/gpp_elastic_time.XXXXXX")
trap '[ "${GPP_KEEP:-0}" = 1 ] || rm -rf "$TMP"' EXIT

conf() { # conf NAME: the make-run job with its own port and checkpoints
    sed -e "s|^endpoint = .*|endpoint = \"tcp://127.0.0.1:$("$BUILD/tests/gpp-test-port")\"|" \
        -e "s|^checkpoint_dir = .*|checkpoint_dir = \"$TMP/$1.ckpt\"|" \
        "$SRC/config/examples/local-cpu.toml" >"$TMP/$1.toml"
    echo "$TMP/$1.toml"
}
ms() { date -d "$(echo "$1" | cut -c1-23)" +%s%3N; } # a log line's time, ms

"$COORD" --plan auto --iterations 60 --metrics "$TMP/ref.jsonl" "$(conf ref)" >"$TMP/ref.out" 2>/dev/null
times=()
plans=()
worst=0
for t in $(seq 1 "$TRIALS"); do
    C=$(conf "t$t")
    "$COORD" --plan auto --iterations 60 --metrics "$TMP/t$t.jsonl" --max-restarts 0 --elastic \
        "$C" >"$TMP/t.out" \
        2>"$TMP/t.err" &
    cp=$!
    kill_ms=
    while kill -0 $cp 2>/dev/null; do
        if [ -z "$kill_ms" ] && [ -f "$TMP/t$t.ckpt/set-0000000010/MANIFEST.json" ]; then
            for p in $(pgrep -P $cp); do
                if tr '\0' ' ' <"/proc/$p/cmdline" | grep -q -- "--slot 3 " &&
                    kill -KILL "$p" 2>/dev/null; then
                    kill_ms=$(date +%s%3N)
                fi
            done
        fi
        sleep 0.005
    done
    wait $cp
    train_line=$(grep "all 3 agents ready; training" "$TMP/t.err" | tail -1)
    times+=($(($(ms "$train_line") - kill_ms)))
    plans+=($(sed -n 's/^elastic: planned for 3 devices in \([0-9.]*\) ms$/\1/p' "$TMP/t.out"))
    worst=$(python3 - "$TMP/ref.jsonl" "$TMP/t$t.jsonl" "$worst" <<'EOF'
import json, sys
def losses(p):
    d = {}
    for r in map(json.loads, open(p)):
        if "iteration" in r:
            d[r["iteration"]] = r["loss"]
    return d
ref, got = losses(sys.argv[1]), losses(sys.argv[2])
w = max([abs(got[i] - ref[i]) / abs(ref[i]) for i in ref] + [float(sys.argv[3])])
print("%.3g" % w)
EOF
)
done
sorted=($(printf '%s\n' "${times[@]}" | sort -n))
n=${#sorted[@]}
echo "elastic_time: the make-run job (config/examples/local-cpu.toml), 4 -> 3 agents, $(nproc) cores, $TRIALS trials"
echo "  kill -> training again on 3 agents: median ${sorted[$((n / 2))]} ms, min ${sorted[0]} ms, max ${sorted[$((n - 1))]} ms"
echo "  re-planning (the coordinator's gpp_job_new): ${plans[*]} ms"
echo "  largest relative loss difference from the uninterrupted run: $worst"
