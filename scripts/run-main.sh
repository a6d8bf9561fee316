#!/usr/bin/env bash
# The main job on the local default (make run): gpp-coordinator plans the
# default multi-branch model, starts one gpp-agent per CPU slot of
# config/examples/local-cpu.toml, trains with progress lines, and ends with
# the plan, the loss, samples/s and the simulated next to the measured
# iteration time. Metrics: run/metrics.jsonl; checkpoints: run/ckpt/.
set -euo pipefail
BUILD=${1:-build}
# A start in a checkpoint_dir that holds a complete set is refused without
# --resume (docs/checkpoints.md, nothing overwritten): a new `make run` moves
# the previous run to run.<UTC time>/ whole and keeps only its profile, so
# the plan stays the one the previous run made (no profiling again).
if compgen -G "run/ckpt/set-*/MANIFEST.json" >/dev/null; then
    old="run.$(date -u +%Y%m%dT%H%M%SZ)"
    mv run "$old"
    mkdir -m 700 run run/ckpt
    if [ -f "$old/ckpt/profile.json" ]; then cp -p "$old/ckpt/profile.json" run/ckpt/; fi
    echo "make run: the previous run is kept in $old/"
fi
exec "$BUILD/coordinator/gpp-coordinator" --plan auto config/examples/local-cpu.toml
