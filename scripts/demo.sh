#!/usr/bin/env bash
# Main job: builds specdec (Release) and runs a speculative generation with the demo model pair
# under models/, comparing against plain decoding in the same run. If the pair is missing (a
# partial checkout), falls back to the shared stories260K model with prompt lookup, and says so.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DSPECDEC_TESTS=OFF -DSPECDEC_BENCHMARKS=OFF >/dev/null
cmake --build build -j "$jobs" --target specdec_cli
if [ -f models/demo-target.gguf ] && [ -f models/demo-draft.gguf ]; then
  prompt=$'import os\nimport sys\n\n\ndef main(argv):\n    """Parse the command line and run."""\n'
  target=models/demo-target.gguf draft=models/demo-draft.gguf
  # The 7M-parameter pair is cache-resident, so a verify row costs compute, not memory traffic:
  # on a CPU with AVX-512 VNNI an F16 row (conversions and float FMAs) costs several int8 dot
  # products, and the F16 pair measured 0.5-0.9x there against 1.1-1.6x for the same pair in
  # Q8_0 (docs/BENCHMARKS.md 17e). So on such a CPU the pair runs quantized to Q8_0 (made once
  # here by specdec quantize, next to the build); elsewhere it runs as committed (F16).
  if grep -qw avx512_vnni /proc/cpuinfo 2>/dev/null && [ "${SPECDEC_ISA:-avx512}" = avx512 ]; then
    mkdir -p build/demo
    for m in target draft; do
      if [ ! build/demo/demo-$m-q8_0.gguf -nt models/demo-$m.gguf ]; then
        build/specdec quantize models/demo-$m.gguf build/demo/demo-$m-q8_0.gguf Q8_0 >/dev/null
      fi
    done
    target=build/demo/demo-target-q8_0.gguf draft=build/demo/demo-draft-q8_0.gguf
    echo "demo: this CPU has AVX-512 VNNI: running the demo pair quantized to Q8_0 ($target, $draft)" >&2
  fi
  # One thread: the pair's matmuls are too small to split (2 threads measured 5-10x slower on a
  # busy 2-core machine; models/README.md).
  exec build/specdec generate -m "$target" -md "$draft" -p "$prompt" -n 200 --temp 0 --compare-plain -t 1
fi
stories=../shared/fixtures/models/stories260K.gguf
if [ ! -f "$stories" ]; then
  echo "demo: the demo model pair (models/demo-target.gguf, models/demo-draft.gguf) is not in this" >&2
  echo "checkout yet, and the fallback model $stories is missing too." >&2
  echo "Provide either one to run the demo." >&2
  exit 1
fi
echo "demo: models/demo-target.gguf + models/demo-draft.gguf not found; using $stories with prompt lookup" >&2
exec build/specdec generate -m "$stories" --spec lookup -p "Once upon a time" -n 100 --temp 0 --compare-plain
