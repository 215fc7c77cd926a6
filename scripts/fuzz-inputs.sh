#!/usr/bin/env bash
# Fuzzes the planner's and the report's JSON inputs (machine files, merged
# traces, scaling curves) for $1 seconds (default 180) with libFuzzer's
# seed $2 (default 0: a random one), seeded with the machine presets, a
# scaling curve and a traced run. A failing input is written to build/fuzz/
# and fails the script.
# The harness is built by the build with -DTESSERA_BUILD_FUZZERS=ON
# (test/fuzz/CMakeLists.txt says what it instruments); the test suite runs
# it for 30 s with seed 1.
source "$(dirname "$0")/fuzz-common.sh"
corpus="$out/inputs-corpus"
mkdir -p "$corpus"
fuzzer=$(require_fuzzer inputs)
cp machines/*.json "$corpus/"
build/bin/tessera model gpt --layers 2 --hidden 64 --heads 4 --seq 32 \
  --vocab 128 --batch 16 -o "$out/inputs-gpt.mlir" 2> /dev/null
build/bin/tessera plan "$out/inputs-gpt.mlir" --machine dgx-h100 \
  --devices 8,16 --scaling strong --json > "$corpus/scaling.json"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
build/bin/tessera compile examples/mlp.mlir --mesh dp=2,tp=1 --train sgd \
  -o "$out/inputs.plan" > /dev/null
rm -rf "$out/inputs-trace"
build/bin/tessera run "$out/inputs.plan" --ranks 2 --steps 2 \
  --trace "$out/inputs-trace" > /dev/null
cp "$out/inputs-trace/trace.json" "$corpus/trace.json"
# LLVM's allocators poison and unpoison their slabs for ASan in inline
# code, which the instrumented sources run and libMLIR does not.
export ASAN_OPTIONS=allow_user_poisoning=0
"$fuzzer" "$corpus" -max_total_time="$seconds" -seed="$seed" \
  -artifact_prefix="$out/" -max_len=65536 -rss_limit_mb=2048 -timeout=30 \
  -print_final_stats=1
