#!/usr/bin/env bash
# Fuzzes the training files' readers (safetensors weights, a sharded
# checkpoint's index and token files) for $1 seconds (default 180) with
# libFuzzer's seed $2 (default 0: a random one), seeded with a saved
# safetensors file, an index and a packed token file. A
# failing input is written to build/fuzz/ and fails the script.
# The harness is built by the build with -DTESSERA_BUILD_FUZZERS=ON
# (test/fuzz/CMakeLists.txt says what it instruments); the test suite runs
# it for 30 s with seed 1.
source "$(dirname "$0")/fuzz-common.sh"
corpus="$out/training-corpus"
mkdir -p "$corpus"
fuzzer=$(require_fuzzer training-files)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
build/bin/tessera compile examples/mlp.mlir --train adamw -o "$out/training.plan" > /dev/null
build/bin/tessera-run "$out/training.plan" \
  --save-weights "$corpus/weights.safetensors" > /dev/null
printf 'a small text to pack into tokens' > "$out/training.txt"
build/bin/tessera data pack "$out/training.txt" -o "$corpus/text.tokens" > /dev/null
printf '{"metadata":{"total_size":16},"weight_map":{"w":"x.safetensors"}}' \
  > "$corpus/index.json"
"$fuzzer" "$corpus" -max_total_time="$seconds" \
  -seed="$seed" -artifact_prefix="$out/" -max_len=65536 -rss_limit_mb=2048 \
  -print_final_stats=1
