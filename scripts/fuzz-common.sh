# Sourced by scripts/fuzz-*.sh: their arguments (seconds, default 180;
# libFuzzer's seed, default 0: a random one), the output folder build/fuzz,
# and require_fuzzer NAME, which answers the harness the build made or
# stops with how to build it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
seconds=${1:-180}
seed=${2:-0}
out=build/fuzz
mkdir -p "$out"

require_fuzzer() {
  local fuzzer="$out/$1-fuzzer"
  if [[ ! -x "$fuzzer" ]]; then
    echo "error: $fuzzer is not built; configure with" \
      "-DTESSERA_BUILD_FUZZERS=ON and build (scripts/test.sh does)" >&2
    exit 1
  fi
  echo "$fuzzer"
}
