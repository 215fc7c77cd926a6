#!/usr/bin/env bash
# Fuzzes the plan loader (parse, then validate) for $1 seconds (default
# 180) with libFuzzer's seed $2 (default 0: a random one), seeded with the
# plans of the examples. A failing input is written to build/fuzz/ and fails
# the script.
# The harness is built by the build with -DTESSERA_BUILD_FUZZERS=ON
# (test/fuzz/CMakeLists.txt says what it instruments); the test suite runs
# it for 30 s with seed 1.
source "$(dirname "$0")/fuzz-common.sh"
mkdir -p "$out/corpus"
fuzzer=$(require_fuzzer plan-loader)
for example in mlp_megatron gpt_block; do
  build/bin/tessera compile "examples/$example.mlir" --mesh dp=2,tp=2 \
    -o "$out/corpus/$example.plan"
done
# A train step with views (reshapes), events and waits (the overlap schedule).
build/bin/tessera compile examples/mlp_megatron.mlir --mesh dp=2,tp=2 \
  --train adamw --zero 3 --overlap -o "$out/corpus/mlp_zero3_overlap.plan"
# Pipeline stages: one program per stage, sends, receives, source indices.
build/bin/tessera compile examples/mlp_megatron.mlir --mesh pp=2,dp=2,tp=1 \
  --pp 2 --microbatches 2 --train adamw -o "$out/corpus/mlp_pipeline.plan"
"$fuzzer" "$out/corpus" -max_total_time="$seconds" \
  -seed="$seed" -artifact_prefix="$out/" -max_len=65536 -print_final_stats=1
