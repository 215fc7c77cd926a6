#!/usr/bin/env bash
# Sets up and builds Tessera, then runs the whole test suite: the lit tests
# (check-tessera-lit) and the gtest unit tests, all through ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cd build
ctest --output-on-failure
