#!/usr/bin/env bash
# Sets up and builds Tessera, then runs its main job on the built-in example:
# the annotated Megatron MLP (examples/mlp_megatron.mlir) on a 2x2 DP x TP
# mesh of CPU ranks. It shows the per-device program the compiler makes,
# compiles it to a plan, runs the plan on 4 MPI ranks, and checks the sharded
# run against the single-device program.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

example=examples/mlp_megatron.mlir
mkdir -p build/examples
echo "== the per-device program: tessera compile $example --emit=partitioned"
build/bin/tessera compile "$example" --mesh dp=2,tp=2 --emit=partitioned -o -
echo "== tessera compile $example --mesh dp=2,tp=2 -o build/examples/mlp.plan"
build/bin/tessera compile "$example" --mesh dp=2,tp=2 \
  -o build/examples/mlp.plan
echo "== tessera run build/examples/mlp.plan --ranks 4"
build/bin/tessera run build/examples/mlp.plan --ranks 4
echo "== tessera verify $example --mesh dp=2,tp=2"
build/bin/tessera verify "$example" --mesh dp=2,tp=2
