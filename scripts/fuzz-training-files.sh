#!/usr/bin/env bash
# Builds the training files' libFuzzer harness (safetensors weights and
# token files: clang with -fsanitize=fuzzer, AddressSanitizer and UBSan) and
# fuzzes it for $1 seconds (default 180) with libFuzzer's seed $2 (default
# 0: a random one), seeded with a saved safetensors file and a packed token
# file. A failing input is written to build/fuzz/ and fails the script.
# Needs a built build/ (scripts/setup.sh). The test suite runs it for 30 s
# with seed 1.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-180}
seed=${2:-0}
out=build/fuzz
corpus="$out/training-corpus"
mkdir -p "$corpus"
clang++ -std=c++17 -g -O1 -fsanitize=fuzzer,address,undefined \
  -fno-sanitize-recover=undefined -Iruntime/include \
  test/fuzz/TrainingFilesFuzzer.cpp runtime/src/Safetensors.cpp \
  runtime/src/TokenFile.cpp runtime/src/Tensor.cpp runtime/src/Status.cpp \
  -lprotobuf -o "$out/training-files-fuzzer"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
build/bin/tessera compile examples/mlp.mlir --train adamw -o "$out/training.plan" > /dev/null
build/bin/tessera-run "$out/training.plan" \
  --save-weights "$corpus/weights.safetensors" > /dev/null
printf 'a small text to pack into tokens' > "$out/training.txt"
build/bin/tessera data pack "$out/training.txt" -o "$corpus/text.tokens" > /dev/null
"$out/training-files-fuzzer" "$corpus" -max_total_time="$seconds" \
  -seed="$seed" -artifact_prefix="$out/" -max_len=65536 -rss_limit_mb=2048 \
  -print_final_stats=1
