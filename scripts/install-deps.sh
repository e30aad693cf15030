#!/usr/bin/env bash
# Installs everything specdec needs to build, test and benchmark, from Debian 12 packages
# (and npm, pinned by tests/clients/package-lock.json, for the JavaScript API test client).
# Run as root (or with sudo). Idempotent. Nothing is downloaded at build or run time.
#   scripts/install-deps.sh          build, tests, benchmarks, sanitizers (gcc)
#   scripts/install-deps.sh --fuzz   also clang + libFuzzer for scripts/fuzz.sh
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

packages=(
  build-essential cmake pkg-config git
  libgtest-dev libgmock-dev libbenchmark-dev
  libcpp-httplib-dev nlohmann-json3-dev libcli11-dev libpcre2-dev libhwy-dev
  curl                          # streaming tests against the server
)
if [ "${1:-}" = "--fuzz" ]; then
  packages+=(clang libclang-rt-14-dev)  # libFuzzer (scripts/fuzz.sh); not needed by CI
elif [ -n "${1:-}" ]; then
  echo "usage: $0 [--fuzz]" >&2; exit 2
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  $SUDO apt-get update
  $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
fi
# Node.js for the OpenAI SDK client tests (skip when a node is already on PATH).
if ! command -v node >/dev/null 2>&1; then
  $SUDO apt-get update
  $SUDO apt-get install -y --no-install-recommends nodejs npm
fi
here="$(cd "$(dirname "$0")/.." && pwd)"
if [ -f "$here/tests/clients/package-lock.json" ] && [ ! -d "$here/tests/clients/node_modules" ]; then
  (cd "$here/tests/clients" && npm ci --no-audit --no-fund)
fi
echo "install-deps: all dependencies present"
