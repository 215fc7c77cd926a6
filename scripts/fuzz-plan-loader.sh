#!/usr/bin/env bash
# Builds the plan loader's libFuzzer harness (clang with -fsanitize=fuzzer,
# AddressSanitizer and UBSan) and fuzzes it for $1 seconds (default 180)
# with libFuzzer's seed $2 (default 0: a random one), seeded with the plans
# of the examples. A failing input is written to build/fuzz/ and fails the
# script. Needs a built build/ (scripts/setup.sh, which installs Debian's
# clang and libclang-rt-dev). The test suite runs it for 30 s with seed 1.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-180}
seed=${2:-0}
out=build/fuzz
mkdir -p "$out/corpus"
clang++ -std=c++17 -g -O1 -fsanitize=fuzzer,address,undefined \
  -fno-sanitize-recover=undefined \
  -Iruntime/include -Iruntime/proto -Ibuild/runtime/proto \
  test/fuzz/PlanLoaderFuzzer.cpp runtime/src/Plan.cpp runtime/src/Manifest.cpp \
  runtime/src/Mesh.cpp runtime/src/Tensor.cpp runtime/src/cpu/Kernels.cpp \
  runtime/src/cpu/VectorMath.cpp runtime/src/cpu/ArrayMath.cpp \
  runtime/src/cpu/FusedKernel.cpp runtime/src/cpu/ThreadPool.cpp \
  runtime/proto/PlanChecksum.cpp \
  build/runtime/proto/plan.pb.cc \
  -lprotobuf -lxxhash -lopenblas -lsleef -o "$out/plan-loader-fuzzer"
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
"$out/plan-loader-fuzzer" "$out/corpus" -max_total_time="$seconds" \
  -seed="$seed" -artifact_prefix="$out/" -max_len=65536 -print_final_stats=1
