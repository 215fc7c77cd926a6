#!/usr/bin/env bash
# Builds the ONNX importer's libFuzzer harness (clang with -fsanitize=fuzzer,
# AddressSanitizer and UndefinedBehaviorSanitizer on the importer's sources;
# the nn dialect, MLIR and libonnx linked as built) and fuzzes it for $1
# seconds (default 180) with libFuzzer's seed $2 (default 0: a random one),
# seeded with the models of the importer's tests and ONNX's node tests.
# Needs a configured and built build/ (scripts/setup.sh) and Debian's clang
# and libclang-rt-dev. The test suite runs it for 30 s with seed 1.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-180}
seed=${2:-0}
out=build/fuzz
mkdir -p "$out/onnx-corpus"
llvm=/usr/lib/llvm-22
clang++ -std=c++17 -g -O1 -fsanitize=fuzzer,address,undefined \
  -fno-sanitize-recover=undefined -fno-rtti \
  -DONNX_ML=1 -DONNX_NAMESPACE=onnx -I. -Iinclude -Ibuild -Ibuild/include \
  -isystem "$llvm/include" \
  test/fuzz/ONNXImportFuzzer.cpp lib/Import/ONNX/*.cpp \
  build/lib/libTesseraNN.a build/lib/libTesseraInterfaces.a \
  -L"$llvm/lib" -Wl,-rpath,"$llvm/lib" -lMLIR -lLLVM \
  -lonnx -lonnx_proto -lprotobuf -o "$out/onnx-import-fuzzer"
# Seeds: the importer's test models and a sample of ONNX's node tests.
for model in mlp shape_subgraph matmul embedding rope_tables rms_norm \
    layer_norm inference_dropout unsupported fused_qkv computed_trig; do
  /usr/bin/python3 test/Import/ONNX/Inputs/make_model.py "$model" \
    "$out/onnx-corpus/$model.onnx"
done
for test in gemm_default_matrix_bias reshape_negative_dim slice gather_1 \
    layer_normalization_4d_axis1 softmax_axis_1 where_example; do
  cp "/usr/share/libonnx-testdata/data/node/test_$test/model.onnx" \
    "$out/onnx-corpus/$test.onnx"
done
mkdir -p "$out/onnx-findings"
"$out/onnx-import-fuzzer" "$out/onnx-corpus" -seed="$seed" \
  -artifact_prefix="$out/onnx-findings/" -max_total_time="$seconds" \
  -max_len=16384 -rss_limit_mb=4096 -print_final_stats=1
