#!/usr/bin/env bash
# dev-bundle: pack a CUDA build and the Debian shared libraries its
# programs need into .dev/bundle.tgz, for running the GPU suite on a GPU
# machine that lacks our Debian packages (the device tool's machines:
# docs/gpu.md, "Running on a lent GPU machine"; scripts/gpu-remote.sh
# unpacks and runs it there). Debug info is stripped and object files left
# out to stay small. .dev/ is ignored by git (.gitignore).
#   scripts/dev-bundle.sh [BUILD_DIR]     (default: build)
set -eu
BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
cp -a "$BUILD" "$STAGE/build"
find "$STAGE/build" \( -name '*.o' -o -name '*.a' -o -name Testing -o -name '*.d' \) -prune -exec rm -rf {} +
rm -rf "$STAGE/build/CMakeFiles"
# what a GPU machine runs: the gpu-labelled tests and the programs the GPU
# scripts call (gpp-coordinator, gpp-agent, gpp-train, gpp-plan, the
# benchmarks, gpp-test-port); not the unit, fuzz and emulation binaries,
# which CI runs here (the 64 MiB carry limit: 60 MB with them, 2026-11-28)
find "$STAGE/build/tests" -type f -perm -u+x ! -path '*/tests/gpu/*' ! -name gpp-test-port -delete
find "$STAGE/build" -type f -perm -u+x \( -name '*_emu' -o -name '*-emu' -o -name '*_emu_*' \) -delete
find "$STAGE/build" -name CMakeFiles -type d -prune -exec sh -c 'find "$1" -type f ! -name "*.cmake" -delete' _ {} \;
mkdir -p "$STAGE/lib"
find "$STAGE/build" -type f -perm -u+x | while read -r f; do
    file -b "$f" | grep -q ELF || continue
    strip --strip-debug "$f"
    ldd "$f" 2>/dev/null
done | awk '/=>/ { print $1, $3 }' | sort -u |
    grep -Ev '^(libc|libm|libdl|libpthread|librt|libresolv|libgcc_s|libstdc\+\+)\.so' |
    while read -r n p; do cp -L "$p" "$STAGE/lib/$n"; done
# where the build was made: its CTest files name these paths, which
# scripts/gpu-remote.sh rewrites to wherever the bundle is unpacked
printf '%s %s\n' "$ROOT" "$(cd "$BUILD" && pwd)" >"$STAGE/paths"
mkdir -p "$ROOT/.dev"
tar czf "$ROOT/.dev/bundle.tgz" -C "$STAGE" build lib paths
ls -la "$ROOT/.dev/bundle.tgz"
