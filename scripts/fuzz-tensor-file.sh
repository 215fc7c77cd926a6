#!/usr/bin/env bash
# Fuzzes the tensor-file reader for $1 seconds (default 180) with
# libFuzzer's seed $2 (default 0: a random one), seeded with a run's inputs
# and a checkpoint's tensors. A failing input is written to build/fuzz/ and
# fails the script.
# The harness is built by the build with -DTESSERA_BUILD_FUZZERS=ON
# (test/fuzz/CMakeLists.txt says what it instruments); the test suite runs
# it for 30 s with seed 1.
source "$(dirname "$0")/fuzz-common.sh"
corpus="$out/tensor-corpus"
mkdir -p "$corpus"
fuzzer=$(require_fuzzer tensor-file)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
build/bin/tessera compile examples/mlp.mlir --train adamw -o "$out/tensor.plan"
build/bin/tessera-run "$out/tensor.plan" --steps 1 \
  --dump-inputs "$corpus/inputs.tensors" > /dev/null
rm -rf "$out/tensor-checkpoint"
build/bin/tessera-run "$out/tensor.plan" --steps 1 \
  --save-checkpoint "$out/tensor-checkpoint" > /dev/null
cp "$out/tensor-checkpoint/rank-0.tensors" "$corpus/checkpoint.tensors"
"$fuzzer" "$corpus" -max_total_time="$seconds" \
  -seed="$seed" -artifact_prefix="$out/" -max_len=65536 -rss_limit_mb=2048 \
  -print_final_stats=1
