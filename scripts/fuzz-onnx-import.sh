#!/usr/bin/env bash
# Fuzzes the ONNX importer for $1 seconds (default 180) with libFuzzer's
# seed $2 (default 0: a random one), seeded with the models of the
# importer's tests, ONNX's node tests and a model with external data (whose
# locations, offsets and lengths the fuzzer mutates with the data file).
# The harness is built by the build with -DTESSERA_BUILD_FUZZERS=ON
# (test/fuzz/CMakeLists.txt says what it instruments); the test suite runs
# it for 30 s with seed 1.
source "$(dirname "$0")/fuzz-common.sh"
mkdir -p "$out/onnx-corpus"
fuzzer=$(require_fuzzer onnx-import)
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
# A model whose weights are external data, framed as the harness reads it:
# "EXT", the model's length (4 bytes, little-endian), the model, its data.
/usr/bin/python3 test/Import/ONNX/Inputs/make_model.py external_data \
  "$out/onnx-external.onnx"
/usr/bin/python3 test/Import/ONNX/Inputs/make_model.py relocate \
  "$out/onnx-relocated.onnx" "$out/onnx-external.onnx" weights.data
/usr/bin/python3 - "$out" <<'PYTHON'
import struct, sys
out = sys.argv[1]
model = open(out + "/onnx-relocated.onnx", "rb").read()
data = open(out + "/onnx-external.onnx.data", "rb").read()
with open(out + "/onnx-corpus/external.bin", "wb") as framed:
    framed.write(b"EXT" + struct.pack("<I", len(model)) + model + data)
PYTHON
mkdir -p "$out/onnx-findings"
"$fuzzer" "$out/onnx-corpus" -seed="$seed" \
  -artifact_prefix="$out/onnx-findings/" -max_total_time="$seconds" \
  -max_len=16384 -rss_limit_mb=4096 -print_final_stats=1
