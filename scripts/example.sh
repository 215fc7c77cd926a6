#!/usr/bin/env bash
# Sets up and builds Tessera, then runs its main job on the built-in example:
# the small GPT (examples/gpt_small.mlir, Megatron-annotated) compiled into
# an AdamW training step for a 2x2 DP x TP mesh, trained for 20 steps on 4
# CPU ranks (MPI), with the per-step losses checked against the
# single-device program.
set -euo pipefail
cd "$(dirname "$0")/.."
# The README walk-through test runs this inside a built tree.
[ "${TESSERA_SKIP_SETUP:-0}" = 1 ] || bash scripts/setup.sh

example=examples/gpt_small.mlir
mkdir -p build/examples
echo "== tessera compile $example --mesh dp=2,tp=2 --train adamw --lr 0.01"
build/bin/tessera compile "$example" --mesh dp=2,tp=2 --train adamw --lr 0.01 \
  -o build/examples/gpt_small.train.plan
echo "== tessera run build/examples/gpt_small.train.plan --ranks 4 --steps 20"
build/bin/tessera run build/examples/gpt_small.train.plan --ranks 4 --steps 20
echo "== tessera verify $example --mesh dp=2,tp=2 --train adamw --lr 0.01 --steps 20"
build/bin/tessera verify "$example" --mesh dp=2,tp=2 --train adamw --lr 0.01 \
  --steps 20 --tolerance 1e-4 | grep -v "^step\|^result"
