#!/usr/bin/env bash
# Builds the IR pipeline's libFuzzer harness (clang with -fsanitize=fuzzer,
# AddressSanitizer and UndefinedBehaviorSanitizer on the harness, the nn
# and dist dialects and their interfaces, every pass of lib/Transforms, the
# analyses and the export; the rest of the compiler and MLIR linked as
# built) and fuzzes it for $1 seconds (default 180) with
# libFuzzer's seed $2 (default 0: a random one), seeded with the examples
# and small generated models. A failing input is written to
# build/fuzz/pipeline-findings/ and fails the script. Needs a configured and
# built build/ (scripts/setup.sh) and Debian's clang and libclang-rt-dev.
# The test suite runs it for 30 s with seed 1.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-180}
seed=${2:-0}
out=build/fuzz
mkdir -p "$out/pipeline-objects" "$out/pipeline-corpus" "$out/pipeline-findings"
llvm=/usr/lib/llvm-22
flags=(-std=c++17 -g -O1 -fsanitize=fuzzer-no-link,address,undefined
  -fno-sanitize-recover=undefined -fno-rtti
  -DTESSERA_MACHINES_DIR=\""$PWD/machines"\"
  -I. -Iinclude -Ibuild -Ibuild/include -Iruntime/proto -Ibuild/runtime/proto
  -isystem "$llvm/include")
# What the IR's numbers reach, instrumented, two at a time (an object is
# rebuilt when its source, a header or a generated .inc is newer).
objects=()
for source in dialects/*/IR/*.cpp dialects/Interfaces/*.cpp \
    lib/Transforms/*.cpp lib/Transforms/*/*.cpp lib/Analysis/*.cpp \
    lib/Export/*.cpp; do
  object="$out/pipeline-objects/$(echo "${source%.cpp}" | tr / _).o"
  objects+=("$object")
  if [[ ! "$object" -nt "$source" ]] || [[ -n "$(find include dialects \
      build/dialects build/include -name '*.h' -newer "$object" -o \
      -name '*.inc' -newer "$object" | head -1)" ]]; then
    echo "clang++ -c $source"
    clang++ "${flags[@]}" -c "$source" -o "$object" &
    while (($(jobs -rp | wc -l) >= 2)); do wait -n; done
  fi
done
wait
clang++ "${flags[@]}" -fsanitize=fuzzer test/fuzz/PipelineFuzzer.cpp \
  "${objects[@]}" \
  build/lib/libTesseraPipelines.a build/lib/libTesseraDriver.a \
  build/lib/libTesseraRegistration.a build/lib/libTesseraImportONNX.a \
  build/lib/libTesseraSearch.a build/lib/libTesseraShardingSolver.a \
  build/lib/libTesseraRuntime.a build/lib/libTesseraPlanProto.a \
  -fuse-ld=lld -L"$llvm/lib" -Wl,-rpath,"$llvm/lib" -lMLIR -lLLVM \
  -lonnx -lonnx_proto -lprotobuf -lxxhash -lCbcSolver -lCbc -lCgl -lOsiClp \
  -lClpSolver -lClp -lOsi -lCoinUtils -lopenblas -lsleef \
  -o "$out/pipeline-fuzzer"
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
"$out/pipeline-fuzzer" "$out/pipeline-corpus" -seed="$seed" \
  -artifact_prefix="$out/pipeline-findings/" -max_total_time="$seconds" \
  -max_len=16384 -rss_limit_mb=4096 -timeout=60 -close_fd_mask=2 \
  -print_final_stats=1 || status=$?
if ((status != 0)); then
  for finding in "$out"/pipeline-findings/*; do
    "$out/pipeline-fuzzer" "$finding" 2>&1 | grep -v "^error:\|^note:" | tail -40 || true
  done
fi
exit $status
