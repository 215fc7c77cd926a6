#!/usr/bin/env bash
# Fuzzes the checkpoint loader of tessera-run for $1 seconds (default 180)
# with libFuzzer's seed $2 (default 0: a random one). Each input is a
# checkpoint directory's files cut at "\n@@\n", loaded into a two-rank plan
# (by name, or resharded where the layouts differ), a one-device plan
# (resharded) and a ZeRO-3 plan (units' flat buffers); the seeds are
# checkpoints that two-rank runs of the same plans saved (v3), and the same
# as v2 (whose rank files no checksum seals, so that mutations reach their
# parsers as well as through the harness's resealing). A failing input is
# written to build/fuzz/checkpoint-findings/ and fails the script.
# The harness is built by the build with -DTESSERA_BUILD_FUZZERS=ON
# (test/fuzz/CMakeLists.txt says what it instruments); the test suite runs
# it for 30 s with seed 1.
source "$(dirname "$0")/fuzz-common.sh"
plans="$out/checkpoint-plans"
corpus="$out/checkpoint-corpus"
mkdir -p "$plans" "$corpus" "$out/checkpoint-findings"
# No vptr checks: GCC folds identical template instances of the runtime
# built (getLayout<Argument> and <Result>), so an instance compiled here can
# be reached with the other's type.
fuzzer=$(require_fuzzer checkpoint)
model=examples/mlp_megatron.mlir
build/bin/tessera compile "$model" --mesh dp=2,tp=1 --train adamw \
  -o "$plans/dp2.plan" > /dev/null
build/bin/tessera compile "$model" --mesh dp=1,tp=1 --train adamw \
  -o "$plans/one.plan" > /dev/null
build/bin/tessera compile "$model" --mesh dp=2,tp=1 --train adamw --zero 3 \
  -o "$plans/zero3.plan" > /dev/null
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for plan in dp2 zero3; do
  mpirun -np 2 --oversubscribe build/bin/tessera-run "$plans/$plan.plan" \
    --steps 1 --save-checkpoint "$work/$plan" > /dev/null
  cp -r "$work/$plan" "$work/$plan-v2"
  python3 test/e2e/Inputs/checkpoint_as_v2.py "$work/$plan-v2"
  for name in "$plan" "$plan-v2"; do
    ck="$work/$name"
    { cat "$ck/index.txt"; printf '\n@@\n'; cat "$ck/rank-0.txt"
      printf '\n@@\n'; cat "$ck/rank-0.tensors"; printf '\n@@\n'
      cat "$ck/rank-1.txt"; printf '\n@@\n'; cat "$ck/rank-1.tensors"
    } > "$corpus/$name.checkpoint"
  done
done
TESSERA_FUZZ_PLANS="$plans" "$fuzzer" "$corpus" \
  -seed="$seed" -artifact_prefix="$out/checkpoint-findings/" \
  -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=4096 \
  -print_final_stats=1
