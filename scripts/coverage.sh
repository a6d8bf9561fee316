#!/usr/bin/env bash
# Line coverage of the whole test suite (make coverage): an instrumented
# build (-DGPP_COVERAGE=ON: --coverage; Debug, so -O0 but for the kernels'
# -O3) in its own folder, every ctest test, then gcovr's per-file summary of
# the project's sources (tests/, bench/ and generated files left out),
# weakest files first, also written to BUILD_DIR/coverage.txt. Exit status:
# ctest's (the summary is printed either way). docs/testing.md.
# Usage: scripts/coverage.sh [BUILD_DIR]   (default build-cov)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-cov}
JOBS=${JOBS:-$(nproc)}

cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Debug -DGPP_COVERAGE=ON >/dev/null
MAKEFLAGS= cmake --build "$BUILD" -j "$JOBS" -- --no-print-directory
# counters of this run only (every process adds to the .gcda files)
find "$BUILD" -name '*.gcda' -delete
status=0
(cd "$BUILD" && ctest --output-on-failure -j "$JOBS") || status=$?

# --gcov-ignore-parse-errors: processes that run at once (agents, forked
# children) race on a .gcda's counters, and gcov then prints a negative
# branch count that gcovr 5.2 refuses; line counts are unaffected
gcovr --root . --object-directory "$BUILD" -j "$JOBS" --gcov-ignore-parse-errors \
    --exclude 'tests/' --exclude 'bench/' --exclude "$BUILD/" \
    --sort-percentage --output "$BUILD/coverage.txt"
cat "$BUILD/coverage.txt"
exit $status
