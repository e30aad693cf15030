#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan + coverage) and runs each for a while.
#   scripts/fuzz.sh [SECONDS] [TARGET...]     default: 60 s each, all targets in turn
# Targets: fuzz_gguf fuzz_llama2c fuzz_tokenizer fuzz_chat_template fuzz_request (see fuzz/*.cpp).
# Environment:
#   SPECDEC_FUZZ_BUILD     build folder (default build-fuzz)
#   SPECDEC_FUZZ_NO_BUILD  set: do not configure/build (the CMake `fuzz` target sets it)
#   SPECDEC_FUZZ_PARALLEL  set: run the targets at the same time instead of one after another
#   SPECDEC_FIXTURES       fixtures folder (default ../shared/fixtures): seeds and vocabularies
#   FUZZ_NICE              nice level for the fuzzers (default 19: the machine may be shared)
# Corpora grow across runs in $SPECDEC_FUZZ_BUILD/fuzz-work/corpus/<target>; seeds come from
# fuzz/seeds/<target> (hand-made, committed) and from the fixtures (copied at run time).
# Crashes, leaks and timeouts are written to fuzz-work/artifacts/ and make the script fail.
# Needs: clang, libclang-rt-14-dev (libFuzzer): `scripts/install-deps.sh --fuzz`; python3 (seed generation).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
[ $# -gt 0 ] && shift
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_gguf fuzz_llama2c fuzz_tokenizer fuzz_chat_template fuzz_request)
build=${SPECDEC_FUZZ_BUILD:-build-fuzz}
fixtures=${SPECDEC_FIXTURES:-../shared/fixtures}
nice_level=${FUZZ_NICE:-19}

if [ -z "${SPECDEC_FUZZ_NO_BUILD:-}" ]; then
  CC=clang CXX=clang++ cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPECDEC_FUZZ=ON \
    -DSPECDEC_TESTS=OFF -DSPECDEC_BENCHMARKS=OFF >/dev/null
  nice -n "$nice_level" cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)" --target "${targets[@]}"
fi

work=$build/fuzz-work
mkdir -p "$work/artifacts" "$work/logs" "$work/fixture-seeds"
if [ -d "$fixtures" ]; then
  python3 fuzz/seeds/make_seeds.py fixtures "$fixtures" "$work/fixture-seeds"
else
  echo "fuzz.sh: $fixtures absent: hand-made seeds only" >&2
fi

run_one() {
  local t=$1 extra=()
  mkdir -p "$work/corpus/$t" "$work/fixture-seeds/$t"
  [ -f "fuzz/$t.dict" ] && extra+=("-dict=fuzz/$t.dict")
  [ "$t" = fuzz_tokenizer ] && extra+=(-max_len=4096)
  [ "$t" = fuzz_llama2c ] && extra+=(-max_len=16384)
  [ "$t" = fuzz_chat_template ] && extra+=(-max_len=4096)
  [ "$t" = fuzz_request ] && extra+=(-max_len=8192)
  SPECDEC_FIXTURES=$fixtures nice -n "$nice_level" "$build/fuzz/$t" \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2560 -print_final_stats=1 \
    -artifact_prefix="$work/artifacts/$t-" "${extra[@]}" \
    "$work/corpus/$t" "fuzz/seeds/$t" "$work/fixture-seeds/$t" >"$work/logs/$t.log" 2>&1 || true
}

start=$(date +%s)
if [ -n "${SPECDEC_FUZZ_PARALLEL:-}" ]; then
  for t in "${targets[@]}"; do run_one "$t" & done
  wait
else
  for t in "${targets[@]}"; do run_one "$t"; done
fi

status=0
printf '%-16s %8s %12s %8s %8s %10s %s\n' target seconds executions cov ft corpus result
for t in "${targets[@]}"; do
  log=$work/logs/$t.log
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  last=$(grep -E '^#[0-9]+[[:space:]]+(DONE|pulse|NEW|REDUCE|INITED)' "$log" | tail -1 || true)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  corp=$(sed -n 's/.* corp: \([^ ]*\).*/\1/p' <<<"$last")
  result=ok
  # Slow units (> 10 s, reported but not failures) also write a "Test unit"; crashes, leaks,
  # timeouts, OOMs and broken properties print one of these.
  if grep -qE 'ERROR: (libFuzzer|AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer)|runtime error:|fuzz property violated' "$log"; then
    result="FAILED (see $log)"
    status=1
  fi
  printf '%-16s %8s %12s %8s %8s %10s %s\n' "$t" "$seconds" "${execs:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}" "$result"
done
echo "fuzz.sh: done in $(( $(date +%s) - start )) s; logs in $work/logs, artifacts in $work/artifacts"
exit $status
