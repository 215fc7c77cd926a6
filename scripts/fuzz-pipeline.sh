#!/usr/bin/env bash
# Fuzzes the IR parser and the compile pipeline for $1 seconds (default
# 180) with libFuzzer's seed $2 (default 0: a random one), seeded with the
# examples and small generated models. A failing input is written to
# build/fuzz/pipeline-findings/ and fails the script.
# The harness is built by the build with -DTESSERA_BUILD_FUZZERS=ON
# (test/fuzz/CMakeLists.txt says what it instruments); the test suite runs
# it for 30 s with seed 1.
source "$(dirname "$0")/fuzz-common.sh"
mkdir -p "$out/pipeline-corpus" "$out/pipeline-findings"
fuzzer=$(require_fuzzer pipeline)
# Seeds: the examples, and small generated models.
cp examples/*.mlir "$out/pipeline-corpus/"
build/bin/tessera model gpt --layers 1 --hidden 32 --heads 2 --seq 8 \
  --batch 2 --vocab 16 --sharding megatron -o "$out/pipeline-corpus/gpt.mlir"
build/bin/tessera model llama --layers 1 --hidden 32 --heads 4 --kv-heads 2 \
  --seq 8 --batch 2 --vocab 16 -o "$out/pipeline-corpus/llama.mlir"
# The passes' diagnostics go to stderr, which the fuzzer closes
# (-close_fd_mask=2); a finding is run again to show its report. LLVM's
# allocators poison and unpoison their slabs for ASan in inline code, which
# the instrumented sources run and libMLIR does not: their poisoning is off.
export ASAN_OPTIONS=allow_user_poisoning=0
status=0
"$fuzzer" "$out/pipeline-corpus" -seed="$seed" \
  -artifact_prefix="$out/pipeline-findings/" -max_total_time="$seconds" \
  -max_len=16384 -rss_limit_mb=4096 -timeout=60 -close_fd_mask=2 \
  -print_final_stats=1 || status=$?
if ((status != 0)); then
  for finding in "$out"/pipeline-findings/*; do
    "$fuzzer" "$finding" 2>&1 | grep -v "^error:\|^note:" | tail -40 || true
  done
fi
exit $status
