#!/usr/bin/env bash
# The main job on the local default (make run): plans the default model.
set -euo pipefail
BUILD=${1:-build}
exec "$BUILD/planner/gpp-plan" --model mmt --devices 8 --device v100-16g --gpus-per-node 4 --batch 128
