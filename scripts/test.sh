#!/usr/bin/env bash
# Builds and runs the whole test suite.
#   scripts/test.sh              Release build in build/, all tests
#   scripts/test.sh --sanitize   ASan+UBSan build in build-asan/, all tests
# Tests needing ../shared/fixtures skip with a message when it is absent; with
# SPECDEC_REQUIRE_FIXTURES=1 (CI) they fail instead.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
mode=${1:-release}
case "$mode" in
  release|"")   dir=build;      flags=(-DCMAKE_BUILD_TYPE=Release) ;;
  --sanitize)   dir=build-asan; flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPECDEC_SANITIZE=ON -DSPECDEC_BENCHMARKS=OFF)
                export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
                export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} ;;
  *) echo "usage: $0 [--sanitize]" >&2; exit 2 ;;
esac
cmake -S . -B "$dir" "${flags[@]}" >/dev/null
cmake --build "$dir" -j "$jobs"
ctest --test-dir "$dir" --output-on-failure -j "$jobs"
