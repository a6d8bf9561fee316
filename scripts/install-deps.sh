#!/usr/bin/env bash
# Installs every Debian package gpp needs to build, test and benchmark.
# Idempotent: when everything is present it prints nothing and exits 0.
set -euo pipefail

PKGS=(
  build-essential cmake pkg-config
  libczmq-dev libzmq3-dev          # control plane (ZeroMQ + CZMQ)
  libprotobuf-c-dev protobuf-c-compiler  # wire protocol
  libopenblas-dev                  # CPU kernels
  libgloo-dev                      # CPU collectives (TCP)
  libtomlplusplus-dev              # cluster.toml parsing (behind a C shim)
  libcjson-dev                     # graph / profile / plan JSON
  zlib1g-dev                       # crc32 of checkpoints and dataset files
  libncurses-dev                   # gpp-top
  libsystemd-dev                   # sd_notify: Type=notify units (common/gpp_notify.c)
  libsodium-dev                    # SHA-256 of the weights digest (common/gpp_sha256.c)
  libmicrohttpd-dev                # Prometheus /metrics ([coordinator] http_port)
  python3-prometheus-client tmux   # tests: parse /metrics, drive gpp-top
  systemd                          # tests: systemd-analyze verify|security on the units;
                                   # systemd_live boots it as PID 1 in namespaces
  util-linux mount                 # tests: systemd_live (unshare, nsenter, pivot_root, findmnt)
  python3-jsonschema               # test_graph_schema, scripts/gpp-graph-check (/usr/bin/python3)
  python3-numpy                    # tests reading .npy datasets and .safetensors weights
  iproute2                         # tests: multihost_netns (ip netns, veth, bridge)
  slurm-wlm munge                  # tests: slurm_local runs munged, slurmctld, slurmd here
                                   # (apt-get install: 18 s on the dev VM, 2026-11)
  python3-onnx                     # ONNX fixtures of the import tests (tests/data/onnx/make_onnx.py; 1.12)
  libonnx-dev                      # onnx/onnx-ml.proto: model/ generates its ONNX decoder from it
  python3-torch                    # scripts/gpp-export (torch.fx, torch.onnx), the PyTorch parity
                                   # tests (onnx_torch, torch_corpus) and the CPU speed benchmark;
                                   # 1.13, about 590 MB installed (apt-get install: 5.5 min here)
)
# Example-only (examples/digits): scikit-learn's bundled digits data set.
if [ "${GPP_EXAMPLE_DEPS:-0}" = 1 ]; then PKGS+=(python3-sklearn); fi
# Coverage-only (make coverage): the line-coverage summary of gcov's counters.
if [ "${GPP_COVERAGE_DEPS:-0}" = 1 ]; then PKGS+=(gcovr); fi

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
