#!/usr/bin/env bash
# Sets up and builds Tessera, then runs its main job on the built-in example
# as far as the compiler goes today: generate the small GPT in nn IR, verify
# it, and report its parameters, ops and FLOPs; then shard the annotated
# Megatron MLP (examples/mlp_megatron.mlir) on a 2x2 DP x TP mesh: propagate
# its annotations and partition it into the per-device program.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

mkdir -p build/examples
echo "== tessera model gpt (built-in small GPT)"
build/bin/tessera model gpt --layers 2 --hidden 64 --heads 4 --seq 16 \
  --vocab 256 --batch 2 -o build/examples/gpt_small.mlir
build/bin/tessera-opt build/examples/gpt_small.mlir -o /dev/null
echo "== tessera stats build/examples/gpt_small.mlir"
build/bin/tessera stats build/examples/gpt_small.mlir
echo "== examples/mlp_megatron.mlir: --tessera-propagate --tessera-partition"
build/bin/tessera-opt examples/mlp_megatron.mlir --tessera-propagate \
  --tessera-partition
echo "== next stages"
build/bin/tessera compile examples/mlp_megatron.mlir --mesh dp=2,tp=2 ||
  echo "(plan export and the runtime arrive with issue #4)"
