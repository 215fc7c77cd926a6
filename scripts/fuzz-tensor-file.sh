#!/usr/bin/env bash
# Builds the tensor-file reader's libFuzzer harness (clang with
# -fsanitize=fuzzer, AddressSanitizer and UBSan) and fuzzes it for $1
# seconds (default 180) with libFuzzer's seed $2 (default 0: a random one),
# seeded with a run's inputs and a checkpoint's tensors. A failing input is
# written to build/fuzz/ and fails the script. Needs a built build/
# (scripts/setup.sh, which installs Debian's clang and libclang-rt-dev).
# The test suite runs it for 30 s with seed 1.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-180}
seed=${2:-0}
out=build/fuzz
corpus="$out/tensor-corpus"
mkdir -p "$corpus"
clang++ -std=c++17 -g -O1 -fsanitize=fuzzer,address,undefined \
  -fno-sanitize-recover=undefined -Iruntime/include \
  test/fuzz/TensorFileFuzzer.cpp runtime/src/Dump.cpp runtime/src/Tensor.cpp \
  runtime/src/Status.cpp -o "$out/tensor-file-fuzzer"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
build/bin/tessera compile examples/mlp.mlir --train adamw -o "$out/tensor.plan"
build/bin/tessera-run "$out/tensor.plan" --steps 1 \
  --dump-inputs "$corpus/inputs.tensors" > /dev/null
rm -rf "$out/tensor-checkpoint"
build/bin/tessera-run "$out/tensor.plan" --steps 1 \
  --save-checkpoint "$out/tensor-checkpoint" > /dev/null
cp "$out/tensor-checkpoint/rank-0.tensors" "$corpus/checkpoint.tensors"
"$out/tensor-file-fuzzer" "$corpus" -max_total_time="$seconds" \
  -seed="$seed" -artifact_prefix="$out/" -max_len=65536 -rss_limit_mb=2048 \
  -print_final_stats=1
