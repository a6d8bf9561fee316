#!/usr/bin/env bash
# The main job on the local default (make run): gpp-coordinator plans the
# default multi-branch model, starts one gpp-agent per CPU slot of
# config/examples/local-cpu.toml, trains with progress lines, and ends with
# the plan, the loss, samples/s and the simulated next to the measured
# iteration time. Metrics: run/metrics.jsonl; checkpoints: run/ckpt/.
set -euo pipefail
BUILD=${1:-build}
exec "$BUILD/coordinator/gpp-coordinator" --plan auto config/examples/local-cpu.toml
