#!/usr/bin/env bash
# gpu-remote: the GPU machine's half of a GPU run where that machine lacks
# our Debian packages (the device tool's lent machines: docs/gpu.md,
# "Running on a lent GPU machine"). Here: `scripts/dev-bundle.sh build`
# packs the CUDA build and its shared libraries into .dev/bundle.tgz. There,
# in the copy of the repository: `bash scripts/gpu-remote.sh [BENCHES]`
# unpacks it into .dev/, points its CTest files at this copy (they name the
# paths it was built at), puts its libraries on LD_LIBRARY_PATH and runs
# bench/gpu_check.sh (the GPU tests, then the benchmarks BENCHES, default
# "ops train sim"; "-" for the tests alone), and copies the result file to
# $OUT (as gpu-DATE-BENCHES.txt) when that is set. Exit status:
# gpu_check's. The device tool's commands stop at 10 minutes: run the
# tests and "ops" in one call, "train" and "sim" in others.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
D=$ROOT/.dev
[ -f "$D/bundle.tgz" ] ||
    { echo "gpu-remote: no $D/bundle.tgz: run scripts/dev-bundle.sh build where the build is, and bring .dev/ along" >&2; exit 2; }
rm -rf "$D/build" "$D/lib" "$D/paths"
tar xzf "$D/bundle.tgz" -C "$D" || { echo "gpu-remote: cannot unpack $D/bundle.tgz" >&2; exit 2; }
read -r SRC_AT BUILD_AT <"$D/paths" || { echo "gpu-remote: the bundle has no paths record" >&2; exit 2; }
# the build folder first: it lies inside the source root
find "$D/build" -name CTestTestfile.cmake -exec sed -i "s#$BUILD_AT#$D/build#g; s#$SRC_AT#$ROOT#g" {} +
export LD_LIBRARY_PATH=$D/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
BENCHES=${1-ops train sim}
[ "$BENCHES" = - ] && BENCHES=
cd "$ROOT" || exit 2
GPU_CHECK_BENCH=$BENCHES bash bench/gpu_check.sh "$D/build"
rc=$?
if [ -n "${OUT:-}" ]; then
    name=gpu-$(date -u +%Y-%m-%d)-$(echo "${BENCHES:-tests}" | tr ' ' '-').txt
    cp bench/results/gpu-"$(date -u +%Y-%m-%d)".txt "$OUT/$name" 2>/dev/null ||
        echo "gpu-remote: no result file to copy to $OUT" >&2
fi
exit $rc
