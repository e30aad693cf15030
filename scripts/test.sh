#!/usr/bin/env bash
# Builds and runs the whole test suite.
#   scripts/test.sh              Release build in build/, all tests
#   scripts/test.sh --sanitize   ASan+UBSan build in build-asan/, all tests
#   scripts/test.sh --tsan       ThreadSanitizer build in build-tsan/, the multi-threaded subset:
#                                thread pool, model forward with 2 threads, engine, server load
#                                (GTEST_FILTER below; override it to run more)
# Tests needing ../shared/fixtures skip with a message when it is absent; with
# SPECDEC_REQUIRE_FIXTURES=1 (CI) they fail instead.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
mode=${1:-release}
case "$mode" in
  # SPECDEC_TESTS=ON explicitly: build/ is shared with scripts/demo.sh, which turns tests off in
  # the CMake cache (running the demo first otherwise left the test executables unbuilt).
  release|"")   dir=build;      flags=(-DCMAKE_BUILD_TYPE=Release -DSPECDEC_TESTS=ON -DSPECDEC_BENCHMARKS=ON) ;;
  --sanitize)   dir=build-asan; flags=(-DCMAKE_BUILD_TYPE=Release -DSPECDEC_SANITIZE=ON -DSPECDEC_TESTS=ON -DSPECDEC_BENCHMARKS=OFF)
                export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
                export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} ;;
  --tsan)       dir=build-tsan; flags=(-DCMAKE_BUILD_TYPE=Release -DSPECDEC_TSAN=ON -DSPECDEC_TESTS=ON -DSPECDEC_BENCHMARKS=OFF)
                # The multi-threaded parts: thread pool, model forward on 2 threads, engine, and the
                # server under concurrent load (the CLI runs as a child process of test_server).
                # (tests/CMakeLists.txt builds just these files into test_tsan under SPECDEC_TSAN.)
                build_targets=(--target test_tsan specdec_cli)
                export GTEST_FILTER=${GTEST_FILTER:-'MatmulThreadPool.*:*BatchInvariance*2threads*:ResourceLimits.*:Engine.*:ServerLoad.*'}
                # scripts/tsan.supp: reports from uninstrumented cpp-httplib and the /proc/self/fd scan.
                export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/scripts/tsan.supp} ;;
  *) echo "usage: $0 [--sanitize|--tsan]" >&2; exit 2 ;;
esac
t0=$SECONDS
cmake -S . -B "$dir" "${flags[@]}" >/dev/null
cmake --build "$dir" -j "$jobs" ${build_targets[@]+"${build_targets[@]}"}
echo "=== time: build ($dir) $((SECONDS - t0)) s"
t1=$SECONDS
ctest --test-dir "$dir" --output-on-failure -j "$jobs" ${SPECDEC_CTEST_ARGS:-}
echo "=== time: tests ($dir) $((SECONDS - t1)) s"
