#!/usr/bin/env bash
# Sets up and builds Tessera with its fuzzers, then runs the whole test
# suite through ctest, a test per core: the lit tests, the multi-rank runs
# (test/e2e, test/adversarial), the gtest unit tests and the fuzzers. Its
# arguments go to ctest: `scripts/test.sh -L lit` runs one label (lit,
# e2e, unit, fuzz), `-R NAME` the tests whose names match.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh -DTESSERA_BUILD_FUZZERS=ON
cd build
ctest --output-on-failure -j "$(nproc)" "$@"
