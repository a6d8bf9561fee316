#!/usr/bin/env bash
# scale_agents: the main job (make run's model and 30 MiB per agent) with 8
# and with 16 local CPU agents on one box: --plan auto profiles, plans (over
# every agent, or fewer when the measured profile says fewer are faster:
# each agent left out is told so and shut down), trains 3 iterations,
# prints the memory table (one row per stage) and the weights digest, and
# leaves no agent behind (issue 11, "Scale on one box"). 16 agents on 2
# cores take about 5 s.
# Usage: scale_agents.sh BUILD_DIR
set -u
. "$(dirname "$0")/lib/gpp_test.sh"
gpp_test_begin scale_agents "${1:-}"
COORD=$BUILD/coordinator/gpp-coordinator
# the main job's model (config/examples/local-cpu.toml)
MODEL="mmt:branches=2,layers=2,hidden=256,heads=4,seq=16,ffn=1024"

for n in 8 16; do
    C=$(cpu_job_conf "$TMP/c$n.toml" "$n" 3 "$TMP/ck$n" "optimizer = \"adamw\"
lr = 1e-3")
    sed -i 's/^mem_gib = .*/mem_gib = 0.03/; s/^batch = .*/batch = 32/' "$C"
    timeout 240 "$COORD" --plan auto "$C" >"$TMP/$n.out" 2>"$TMP/$n.err" &
    pid=$!
    track "$pid"
    wait "$pid"; rc=$?
    stages=$(sed -n 's/^plan gpp .*: \([0-9]*\) stages, .* \([0-9]*\) of \([0-9]*\) devices.*/\1/p' "$TMP/$n.out" | tail -1)
    used=$(sed -n 's/^plan gpp .* \([0-9]*\) of \([0-9]*\) devices.*/\1 \2/p' "$TMP/$n.out" | tail -1)
    rows=$(awk '/^  memory  stage/ { t = 1; next } t && NF == 4 { print }' "$TMP/$n.out" | wc -l)
    u=${used%% *}
    idle=$(grep -c "has no stage in the plan; shutting it down" "$TMP/$n.err")
    if [ $rc = 0 ] && [ "$(grep -c '^iter [1-3]/3  loss ' "$TMP/$n.out")" = 3 ] &&
        [ "${used#* }" = "$n" ] && [ "${u:-0}" -ge 2 ] && [ "$idle" = $((n - ${u:-0})) ] &&
        [ -n "$stages" ] && [ "$rows" = "$stages" ] &&
        grep -q '^weights sha256 [0-9a-f]\{64\}$' "$TMP/$n.out" &&
        ! pgrep -f "gpp-agent .*$(sed -n 's/^endpoint = "\(.*\)"/\1/p' "$C")" >/dev/null; then
        ok "$n agents: $stages stages over $u of $n devices ($idle left out and shut down), 3 iterations, memory table, digest, agents gone"
    else
        fail "$n agents (rc $rc, stages '$stages', devices '$used', memory rows $rows)" \
            "$(tail -20 "$TMP/$n.out")" "$(grep -v OpenBLAS "$TMP/$n.err" | tail -10)"
    fi
done

gpp_test_end
